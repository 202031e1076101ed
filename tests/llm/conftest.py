"""The HTTP harness of the Anthropic adapter tests: canned SSE and error replies served
through mock transports of either httpx flavour, and the emulator in process."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import httpx
import httpx2
import pytest
from sessiongen.emulator import create_app
from sessiongen.llm import CacheMark, LLMMessage, LLMRequest, TextContent, ToolDefinition
from sessiongen.llm.types import StreamEvent
from sessiongen.providers.anthropic.adapter import AnthropicLLMClient

# --- requests ------------------------------------------------------------------------------

MODEL = "claude-test-1"
USER_HI = LLMMessage(role="user", content=(TextContent(text="hi"),))
READ_TOOL = ToolDefinition(
    name="read_file",
    description="Read a file",
    input_schema={"type": "object", "properties": {"path": {"type": "string"}}},
)
GREP_TOOL = ToolDefinition(
    name="grep",
    description="Search",
    input_schema={"type": "object"},
    cache=CacheMark(),
)


def req(**fields: Any) -> LLMRequest:
    fields.setdefault("messages", (USER_HI,))
    return LLMRequest(model=MODEL, max_output_tokens=256, **fields)


# --- canned HTTP, served through either httpx flavour --------------------------------------

Flavor = Literal["httpx2", "httpx"]
FLAVORS: tuple[Flavor, ...] = ("httpx2", "httpx")


@dataclass(frozen=True)
class Seen:
    """One HTTP attempt as the server saw it."""

    url: str
    headers: dict[str, str]
    body: dict[str, Any]
    timeout: Any


@dataclass(frozen=True)
class Canned:
    """One HTTP answer: a status and body, or an exception (by httpx class name) instead."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    raise_error: str | None = None
    cut_with: str | None = None  # raised after the body is sent: a broken stream


Handler = Callable[[Seen], Canned]


def sse(*events: dict[str, Any]) -> bytes:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


def streamed(*events: dict[str, Any], cut_with: str | None = None) -> Canned:
    return Canned(
        body=sse(*events),
        headers={"content-type": "text/event-stream", "request-id": "req_stream_1"},
        cut_with=cut_with,
    )


def api_error(status: int, error_type: str, message: str, **headers: str) -> Canned:
    body = {"type": "error", "error": {"type": error_type, "message": message}}
    return Canned(
        status=status,
        body=json.dumps({**body, "request_id": f"req_body_{status}"}).encode(),
        headers={"content-type": "application/json", "request-id": f"req_{status}", **headers},
    )


def message_start(usage: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "type": "message_start",
        "message": {
            "id": "msg_01",
            "type": "message",
            "role": "assistant",
            "model": MODEL,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage or {"input_tokens": 12, "output_tokens": 1},
        },
    }


def block_start(index: int, block: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def delta(index: int, payload: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": payload}


def block_stop(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


def message_delta(stop_reason: str, usage: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "message_delta",
        "delta": {"stop_reason": stop_reason, "stop_sequence": None},
        "usage": usage,
    }


MESSAGE_STOP = {"type": "message_stop"}
TEXT_EVENTS = (
    message_start(),
    {"type": "ping"},
    block_start(0, {"type": "text", "text": ""}),
    delta(0, {"type": "text_delta", "text": "Hel"}),
    delta(0, {"type": "text_delta", "text": "lo."}),
    block_stop(0),
    message_delta("end_turn", {"output_tokens": 5}),
)


def text_reply(_: Seen) -> Canned:
    return streamed(*TEXT_EVENTS, MESSAGE_STOP)


def tool_reply(_: Seen) -> Canned:
    return streamed(
        message_start(),
        block_start(0, {"type": "text", "text": ""}),
        delta(0, {"type": "text_delta", "text": "Let me look."}),
        block_stop(0),
        block_start(1, {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {}}),
        delta(1, {"type": "input_json_delta", "partial_json": ""}),
        delta(1, {"type": "input_json_delta", "partial_json": '{"pa'}),
        delta(1, {"type": "input_json_delta", "partial_json": 'th": "src/a'}),
        delta(1, {"type": "input_json_delta", "partial_json": 'pp.py"}'}),
        block_stop(1),
        block_start(2, {"type": "tool_use", "id": "toolu_2", "name": "list_files", "input": {}}),
        block_stop(2),
        message_delta("tool_use", {"output_tokens": 40}),
        MESSAGE_STOP,
    )


def thinking_reply(_: Seen) -> Canned:
    return streamed(
        message_start(),
        block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
        delta(0, {"type": "thinking_delta", "thinking": "Consider "}),
        delta(0, {"type": "thinking_delta", "thinking": "it."}),
        delta(0, {"type": "signature_delta", "signature": "sig_xyz"}),
        block_stop(0),
        block_start(1, {"type": "text", "text": ""}),
        delta(1, {"type": "text_delta", "text": "Answer."}),
        block_stop(1),
        {"type": "brand_new_event", "payload": {"x": 1}},
        message_delta("end_turn", {"output_tokens": 9}),
        MESSAGE_STOP,
    )


def cached_usage_reply(_: Seen) -> Canned:
    start_usage = {
        "input_tokens": 7,
        "output_tokens": 1,
        "cache_read_input_tokens": 900,
        "cache_creation_input_tokens": 300,
        "cache_creation": {"ephemeral_5m_input_tokens": 100, "ephemeral_1h_input_tokens": 200},
    }
    return streamed(
        message_start(start_usage),
        block_start(0, {"type": "text", "text": ""}),
        delta(0, {"type": "text_delta", "text": "ok"}),
        block_stop(0),
        # Cumulative; input fields left out keep message_start's values.
        message_delta("end_turn", {"output_tokens": 20}),
        message_delta("end_turn", {"output_tokens": 25, "cache_creation_input_tokens": 300}),
        MESSAGE_STOP,
    )


def legacy_usage_reply(_: Seen) -> Canned:
    # An older/compatible server: a cache-write total without its TTL split.
    usage = {"input_tokens": 3, "output_tokens": 1, "cache_creation_input_tokens": 50}
    return streamed(
        message_start(usage), message_delta("end_turn", {"output_tokens": 2}), MESSAGE_STOP
    )


def context_window_reply(_: Seen) -> Canned:
    return streamed(
        message_start(),
        message_delta("model_context_window_exceeded", {"output_tokens": 3}),
        MESSAGE_STOP,
    )


def pause_turn_reply(_: Seen) -> Canned:
    return streamed(
        message_start(), message_delta("pause_turn", {"output_tokens": 3}), MESSAGE_STOP
    )


def truncated_tool_reply(_: Seen) -> Canned:
    return streamed(
        message_start(),
        block_start(0, {"type": "tool_use", "id": "toolu_9", "name": "grep", "input": {}}),
        delta(0, {"type": "input_json_delta", "partial_json": '{"pattern": "TO'}),
        block_stop(0),
        message_delta("max_tokens", {"output_tokens": 256}),
        MESSAGE_STOP,
    )


def garbled_tool_reply(_: Seen) -> Canned:
    return streamed(
        message_start(),
        block_start(0, {"type": "tool_use", "id": "toolu_9", "name": "grep", "input": {}}),
        delta(0, {"type": "input_json_delta", "partial_json": '{"pattern": '}),
        block_stop(0),
        message_delta("tool_use", {"output_tokens": 9}),
        MESSAGE_STOP,
    )


def overloaded_mid_stream(_: Seen) -> Canned:
    return streamed(
        message_start(),
        block_start(0, {"type": "text", "text": ""}),
        delta(0, {"type": "text_delta", "text": "Par"}),
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    )


def error_event_mid_stream(error_type: str) -> Handler:
    """A 200 stream that breaks off with an `error` event of `error_type`."""

    def reply(_: Seen) -> Canned:
        error = {"type": "error", "error": {"type": error_type, "message": "Stream error"}}
        return streamed(message_start(), error)

    return reply


def unknown_error_mid_stream(_: Seen) -> Canned:
    return streamed(message_start(), {"type": "error", "error": {"type": "mystery_error"}})


def cut_mid_stream(_: Seen) -> Canned:
    return streamed(*TEXT_EVENTS[:4], cut_with="RemoteProtocolError")


def read_error_mid_stream(_: Seen) -> Canned:
    return streamed(*TEXT_EVENTS[:4], cut_with="ReadError")


def timeout_mid_stream(_: Seen) -> Canned:
    return streamed(*TEXT_EVENTS[:4], cut_with="ReadTimeout")


def ends_without_message_stop(_: Seen) -> Canned:
    return streamed(*TEXT_EVENTS)


def rate_limited(_: Seen) -> Canned:
    return api_error(429, "rate_limit_error", "Number of requests has exceeded your rate limit")


def overloaded(_: Seen) -> Canned:
    # retry-after-ms keeps the SDK's backoff short where retries are expected.
    return api_error(529, "overloaded_error", "Overloaded", **{"retry-after-ms": "1"})


def server_error(_: Seen) -> Canned:
    return api_error(500, "api_error", "Internal server error")


def prompt_too_long(_: Seen) -> Canned:
    return api_error(
        400, "invalid_request_error", "prompt is too long: 200082 tokens > 200000 maximum"
    )


def bad_request(_: Seen) -> Canned:
    return api_error(
        400, "invalid_request_error", "messages.1: tool_use ids were found without tool_result"
    )


def unauthorized(_: Seen) -> Canned:
    return api_error(401, "authentication_error", "invalid x-api-key")


def html_bad_gateway(_: Seen) -> Canned:
    return Canned(
        status=502, body=b"<html>Bad Gateway</html>", headers={"content-type": "text/html"}
    )


def read_timeout(_: Seen) -> Canned:
    return Canned(raise_error="ReadTimeout")


def connect_error(_: Seen) -> Canned:
    return Canned(raise_error="ConnectError")


class _CutStream2(httpx2.AsyncByteStream):
    def __init__(self, body: bytes, error: str) -> None:
        self._body, self._error = body, error

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self._body
        raise getattr(httpx2, self._error)("peer closed connection: incomplete chunked read")


class _CutStream1(httpx.AsyncByteStream):
    def __init__(self, body: bytes, error: str) -> None:
        self._body, self._error = body, error

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self._body
        raise getattr(httpx, self._error)("peer closed connection: incomplete chunked read")


def _seen(request: httpx.Request | httpx2.Request) -> Seen:
    timeout = request.extensions.get("timeout")
    return Seen(str(request.url), dict(request.headers), json.loads(request.content), timeout)


def mock_http(
    flavor: Flavor, handler: Handler, seen: list[Seen]
) -> httpx2.AsyncClient | httpx.AsyncClient:
    """A client of the given flavour whose transport answers with `handler`, aimed at /mock."""

    def answer2(request: httpx2.Request) -> httpx2.Response:
        seen.append(_seen(request))
        canned = handler(seen[-1])
        if canned.raise_error:
            raise getattr(httpx2, canned.raise_error)("canned failure", request=request)
        if canned.cut_with:
            stream = _CutStream2(canned.body, canned.cut_with)
            return httpx2.Response(canned.status, headers=canned.headers, stream=stream)
        return httpx2.Response(canned.status, headers=canned.headers, content=canned.body)

    def answer1(request: httpx.Request) -> httpx.Response:
        seen.append(_seen(request))
        canned = handler(seen[-1])
        if canned.raise_error:
            raise getattr(httpx, canned.raise_error)("canned failure", request=request)
        if canned.cut_with:
            stream = _CutStream1(canned.body, canned.cut_with)
            return httpx.Response(canned.status, headers=canned.headers, stream=stream)
        return httpx.Response(canned.status, headers=canned.headers, content=canned.body)

    if flavor == "httpx2":
        return httpx2.AsyncClient(transport=httpx2.MockTransport(answer2), base_url="http://mock")
    return httpx.AsyncClient(transport=httpx.MockTransport(answer1), base_url="http://mock")


@asynccontextmanager
async def mocked(
    handler: Handler, flavor: Flavor = "httpx2", *, max_retries: int = 0
) -> AsyncIterator[tuple[AnthropicLLMClient, list[Seen]]]:
    seen: list[Seen] = []
    async with AnthropicLLMClient(
        http_client=mock_http(flavor, handler, seen), api_key="sk-test", max_retries=max_retries
    ) as llm:
        yield llm, seen


async def events_of(llm: AnthropicLLMClient, request: LLMRequest) -> list[StreamEvent]:
    return [event async for event in llm.stream(request)]


def without_credentials(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    """No credential the SDK could find: no key or profile in the environment, HOME at `home`."""
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("ANTHROPIC_CONFIG_DIR", raising=False)
    monkeypatch.setenv("HOME", str(home))


# --- the in-process emulator ---------------------------------------------------------------

EMULATOR_MODEL = "claude-sonnet-5"  # in the emulator's catalog, and not deprecated in the SDK
Admin = Callable[[str, str, Any], Awaitable[Any]]


def emu_req(**fields: Any) -> LLMRequest:
    return req(**fields).model_copy(update={"model": EMULATOR_MODEL})


@asynccontextmanager
async def emulated(
    flavor: Flavor = "httpx2", *, max_retries: int = 0
) -> AsyncIterator[tuple[AnthropicLLMClient, Admin]]:
    """An AnthropicLLMClient on the emulator in-process, and a function calling its admin API."""
    app = create_app()
    http: httpx2.AsyncClient | httpx.AsyncClient
    if flavor == "httpx2":
        transport2 = httpx2.ASGITransport(app=app)
        http = httpx2.AsyncClient(transport=transport2, base_url="http://emulator")
    else:
        http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://emulator")

    async def admin(method: str, path: str, payload: Any = None) -> Any:
        response = await http.request(method, path, json=payload)
        assert response.status_code < 300, response.text
        return response.json()

    async with AnthropicLLMClient(
        http_client=http, api_key="sk-emulator", max_retries=max_retries
    ) as llm:
        yield llm, admin


async def recorded_requests(admin: Admin) -> list[dict[str, Any]]:
    return list((await admin("GET", "/_emulator/requests", None))["requests"])
