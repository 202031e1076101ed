"""Server-sent events of a streamed Message, and the ASGI response that sends (or cuts) them."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from .state import FaultKind

DELTA_CHUNKS = 3

"""`reset`: the connection goes before any response byte (the app raises
`ConnectionResetError`; an in-process ASGI transport hands it to the client, a real server
such as uvicorn answers a 500 instead, as ASGI cannot drop a socket unanswered).
`malformed-sse`: a frame whose `data` is not JSON goes out in place of event K
(`cut_after_events`, default 2: after message_start and ping), the others as usual.
`invalid-body`: a 200 `application/json` whose body is cut-off JSON, not an event stream."""
MALFORMED_FRAME = b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0\n\n'
INVALID_BODY = b'{"type":"message","role":"assistant","content":[{"type":"te'
RESET_MESSAGE = "the emulator dropped the connection (fault kind 'reset')"


def _split(text: str, parts: int = DELTA_CHUNKS) -> list[str]:
    """`text` in up to `parts` non-empty consecutive pieces."""
    if not text:
        return []
    size = -(-len(text) // parts)
    return [text[i : i + size] for i in range(0, len(text), size)]


def _block_events(index: int, block: Mapping[str, Any]) -> list[dict[str, Any]]:
    kind = block["type"]
    events: list[dict[str, Any]] = []
    if kind == "text":
        start: dict[str, Any] = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": piece} for piece in _split(block["text"])]
    elif kind == "tool_use":
        start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
        raw = json.dumps(block["input"], separators=(",", ":"), ensure_ascii=False)
        deltas = [{"type": "input_json_delta", "partial_json": piece} for piece in _split(raw)]
    elif kind == "thinking":
        start = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [{"type": "thinking_delta", "thinking": p} for p in _split(block["thinking"])]
        deltas.append({"type": "signature_delta", "signature": block["signature"]})
    else:
        raise ValueError(f"cannot stream a {kind!r} block")
    events.append({"type": "content_block_start", "index": index, "content_block": start})
    events.extend({"type": "content_block_delta", "index": index, "delta": d} for d in deltas)
    events.append({"type": "content_block_stop", "index": index})
    return events


def message_events(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The real event sequence for a complete `message`: message_start (empty content, usage
    with the cache fields), ping, per block start/deltas/stop, message_delta (stop_reason and
    cumulative usage), message_stop."""
    usage: Mapping[str, Any] = message["usage"]
    start_usage = {**usage, "output_tokens": min(1, int(usage["output_tokens"]))}
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                **message,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": start_usage,
            },
        },
        {"type": "ping"},
    ]
    for index, block in enumerate(message["content"]):
        events.extend(_block_events(index, block))
    events.append(
        {
            "type": "message_delta",
            "delta": {
                "stop_reason": message["stop_reason"],
                "stop_sequence": message["stop_sequence"],
            },
            "usage": {
                "input_tokens": usage["input_tokens"],
                "cache_creation_input_tokens": usage["cache_creation_input_tokens"],
                "cache_read_input_tokens": usage["cache_read_input_tokens"],
                "output_tokens": usage["output_tokens"],
            },
        }
    )
    events.append({"type": "message_stop"})
    return events


def encode_event(event: Mapping[str, Any]) -> bytes:
    data = json.dumps(event, separators=(",", ":"), ensure_ascii=False)
    return f"event: {event['type']}\ndata: {data}\n\n".encode()


class SSEResponse(Response):
    """Sends pre-built SSE events; optionally waits first, or stops after `cut_after` events.

    Cutting with `abort=False` ends the HTTP body cleanly (and asks for the connection to be
    closed); `abort=True` returns without finishing the body, so a real server drops the
    connection mid-chunk (an in-process ASGI transport cannot express that and fails).
    A `kind` (`FaultSpec.kind`) breaks the stream in its own way instead.
    """

    media_type = "text/event-stream"

    def __init__(
        self,
        events: list[dict[str, Any]],
        *,
        headers: Mapping[str, str],
        delay: float = 0.0,
        cut_after: int | None = None,
        abort: bool = False,
        error_event: Mapping[str, Any] | None = None,
        kind: FaultKind | None = None,
    ) -> None:
        self.kind = kind
        media_type = "application/json" if kind == "invalid-body" else self.media_type
        super().__init__(status_code=200, headers=headers, media_type=media_type)
        self.malformed_at: int | None = None
        if self.kind == "malformed-sse":
            self.malformed_at = min(2 if cut_after is None else cut_after, len(events) - 1)
            cut_after = None
        self.events = events if cut_after is None else events[:cut_after]
        self.cut = cut_after is not None and cut_after < len(events)
        self.delay = delay
        self.abort = abort
        self.error_event = error_event
        # An empty body made Response add content-length: 0; a stream has none.
        self.raw_headers = [(k, v) for k, v in self.raw_headers if k != b"content-length"]
        self.raw_headers.append((b"cache-control", b"no-cache"))
        if self.cut or error_event is not None:
            self.raw_headers.append((b"connection", b"close"))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.kind == "reset":
            raise ConnectionResetError(RESET_MESSAGE)
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        if self.kind == "invalid-body":
            await send({"type": "http.response.body", "body": INVALID_BODY, "more_body": False})
            return
        for index, event in enumerate(self.events):
            if index == self.malformed_at:
                frame = {"type": "http.response.body", "body": MALFORMED_FRAME, "more_body": True}
                await send(frame)
            await send(
                {"type": "http.response.body", "body": encode_event(event), "more_body": True}
            )
        if self.error_event is not None:
            body = encode_event(self.error_event)
            await send({"type": "http.response.body", "body": body, "more_body": True})
        if self.cut and self.abort:
            return
        await send({"type": "http.response.body", "body": b"", "more_body": False})
