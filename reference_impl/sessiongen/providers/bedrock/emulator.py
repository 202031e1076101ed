"""AWS Bedrock Converse on the emulator: `POST /model/{modelId}/converse` and
`POST /model/{modelId}/converse-stream` (AWS event-stream framing), as boto3's
`bedrock-runtime` client sends them.

Claude on Bedrock shares Anthropic's cache rules, so a Converse body is translated into the
equivalent Messages body (a `cachePoint` becomes `cache_control` on the block before it),
checked by the Messages validation and flattened by `cache/prefix.py`, and the one
`CacheStore` on the shared `EmulatorState` decides reads and writes. The reply comes from the
same responder and script queue; usage is spelled as Converse's `TokenUsage`.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import re
import struct
import zlib
from collections.abc import Iterator, Mapping
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.types import ASGIApp

from ...cache import CacheUsage, FlatBlock, flatten_request
from ...catalog import UnknownModel, get_model, unknown_model_hint
from ...emulator.boundary import CONVERSE, first_error
from ...emulator.errors import APIError
from ...emulator.intake import Arrival
from ...emulator.logged import messages_texts
from ...emulator.responder import build_reply, offered_tools
from ...emulator.server import BackgroundServer
from ...emulator.state import EmulatorState
from ...emulator.validation import for_model, validate_messages
from ...llm._adapter import ProviderAdapter
from .wire import CODE_FOR_STATUS

PATH_PREFIXES = ("/model/",)
PROVIDER = "bedrock"
TOOL_CONFIG_MESSAGE = (
    "The toolConfig field must be defined when using toolUse and toolResult content blocks."
)
INVALID_MODEL = "The provided model identifier is invalid."
# Messages stop reasons the Converse StopReason enum lacks (mapping UNCONFIRMED).
_STOP_REASONS = {"pause_turn": "end_turn", "refusal": "content_filtered"}


class ConverseError(Exception):
    """A request answered with a Bedrock error: status, `x-amzn-ErrorType` code, message."""

    def __init__(self, status: int, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code or CODE_FOR_STATUS.get(status, "InternalServerException")


def _invalid(message: str) -> ConverseError:
    return ConverseError(400, message, "ValidationException")


# --- Converse -> Messages ------------------------------------------------------------------


def one_hour_refused(target: str) -> str:
    """The 400 for `ttl: "1h"` on a model without the 1h TTL: Bedrock passes the model's
    own validation error on (public issues quote "Extra inputs are not permitted" for these
    models, earendil-works/pi#1570, and the "The model returned the following errors:"
    prefix for Claude's cache_control errors, Portkey-AI/gateway#1762; the exact text for
    this case is UNCONFIRMED). `target` is the Messages path of the marked block."""
    return (
        f"The model returned the following errors: {target}.cache_control.ttl: "
        "Extra inputs are not permitted"
    )


def _marked(
    blocks: list[dict[str, Any]], point: Mapping[str, Any], path: str, target: str, one_hour: bool
) -> None:
    """Put the (checked) cachePoint at `path` on the last block before it (at Messages path
    `target` + its index), as `cache_control`; `one_hour`: the model accepts the 1h TTL."""
    ttl = point.get("ttl", "5m")
    if not blocks:
        # UNCONFIRMED: the docs do not say what a leading cachePoint does; rejected here.
        raise _invalid(f"{path}: a cachePoint must follow the content it caches")
    if ttl == "1h" and not one_hour:
        raise _invalid(one_hour_refused(f"{target}.{len(blocks) - 1}"))
    blocks[-1]["cache_control"] = {"type": "ephemeral", "ttl": ttl}


def _member(block: Mapping[str, Any]) -> tuple[str, Any]:
    """The one member a (checked) union structure sets."""
    return next(iter(block.items()))


_IMAGE_TYPES = {"png": "image/png", "jpeg": "image/jpeg", "gif": "image/gif", "webp": "image/webp"}


def _media_block(key: str, value: Mapping[str, Any], path: str) -> dict[str, Any]:
    """The Messages block of a Converse `image` or `document` (bytes sources; the JSON wire
    carries the bytes base64-encoded): what the token counter reads their size from. A
    document given as text (`source.text`, or `source.content` text blocks) is that text;
    its `context` and `citations` go along as the Messages document's."""
    source = value["source"]
    if key == "document" and "bytes" not in source:
        listed = source.get("content") or []
        text = source.get("text") or "".join(str(c.get("text", "")) for c in listed)
        block: dict[str, Any] = {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": text},
        }
        for extra in ("context", "citations"):
            if extra in value:
                block[extra] = value[extra]
        return block
    fmt, data = value["format"], source["bytes"]
    if key == "image":
        media = {"type": "base64", "media_type": _IMAGE_TYPES[fmt], "data": data}
        return {"type": "image", "source": media}
    if fmt == "pdf":
        media = {"type": "base64", "media_type": "application/pdf", "data": data}
        cited = {"citations": value["citations"]} if "citations" in value else {}
        return {"type": "document", "source": media, **cited}
    try:
        text = base64.b64decode(data + "=" * (-len(data) % 4)).decode("utf-8", "replace")
    except binascii.Error:
        raise _invalid(f"{path}.document.source.bytes: Invalid base64-encoded bytes") from None
    return {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": text},
    }


def _tool_result_content(result: Mapping[str, Any], path: str) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for k, item in enumerate(result.get("content") or []):
        key, value = _member(item)
        if key in ("image", "document"):
            parts.append(_media_block(key, value, f"{path}.content.{k}"))
            continue
        text = value if key == "text" else json.dumps(value, separators=(",", ":"))
        parts.append({"type": "text", "text": str(text)})
    return parts


def _content(
    block: Mapping[str, Any], path: str, out: list[dict[str, Any]], target: str, one_hour: bool
) -> bool:
    """Append the Messages form of one Converse content block; True for toolUse/toolResult."""
    key, value = _member(block)
    if key == "cachePoint":
        _marked(out, value, path, target, one_hour)
    elif key == "text":
        out.append({"type": "text", "text": value})
    elif key == "toolUse":
        use = {"id": value["toolUseId"], "name": value["name"], "input": value.get("input") or {}}
        out.append({"type": "tool_use", **use})
    elif key == "toolResult":
        result: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": value["toolUseId"],
            "content": _tool_result_content(value, path),
        }
        if value.get("status") == "error":
            result["is_error"] = True
        out.append(result)
    elif key in ("image", "document"):
        out.append(_media_block(key, value, path))
    elif key == "citationsContent":  # the cited answer's text (its citations: UNCONFIRMED)
        cited = "".join(str(c.get("text", "")) for c in value.get("content") or [])
        out.append({"type": "text", "text": cited})
    else:  # reasoningContent
        text = value.get("reasoningText") or {}
        out.append(
            {
                "type": "thinking",
                "thinking": text.get("text", ""),
                "signature": text.get("signature", ""),
            }
        )
    return key in ("toolUse", "toolResult")


def _tools(
    config: Mapping[str, Any], one_hour: bool
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    tools: list[dict[str, Any]] = []
    for i, entry in enumerate(config["tools"]):
        key, value = _member(entry)
        if key == "cachePoint":
            _marked(tools, value, f"toolConfig.tools.{i}", "tools", one_hour)
            continue
        tool = {"name": value["name"], "input_schema": value["inputSchema"]["json"]}
        if value.get("description") is not None:
            tool["description"] = value["description"]
        tools.append(tool)
    choice: dict[str, Any] | None = None
    if config.get("toolChoice") is not None:
        key, value = _member(config["toolChoice"])
        choice = {"type": key}
        if key == "tool":
            choice["name"] = value["name"]
            if choice["name"] not in {t["name"] for t in tools}:
                # UNCONFIRMED message: the named tool must be one of toolConfig.tools.
                raise _invalid(f"toolConfig.toolChoice.tool.name: unknown tool {choice['name']}")
    return tools, choice


def to_messages_body(model: str, body: Any) -> dict[str, Any]:
    """The Messages body equivalent to a Converse body, for validation and the cache model.

    Raises `ConverseError` for a shape Converse rejects: first its model
    (`boundary.CONVERSE`, `<field>: <what>`), then the translation's own rules (messages
    UNCONFIRMED unless quoted).
    """
    violation = first_error(CONVERSE, body)
    if violation is not None:
        field = violation.param(brackets=False)
        raise _invalid(
            f"{field}: {violation.msg}" if field else "The request body must be a JSON object"
        )
    inference = body.get("inferenceConfig") or {}
    # UNCONFIRMED: the default maxTokens for Claude on Converse; the model's maximum here.
    max_tokens = inference.get("maxTokens", get_model(model).max_output_tokens)
    out: dict[str, Any] = {"model": model, "max_tokens": max_tokens}
    one_hour = get_model(model).one_hour_ttl
    system: list[dict[str, Any]] = []
    for i, block in enumerate(body.get("system") or []):
        key, value = _member(block)
        if key == "cachePoint":
            _marked(system, value, f"system.{i}", "system", one_hour)
        else:
            system.append({"type": "text", "text": value})
    if system:
        out["system"] = system
    messages: list[dict[str, Any]] = []
    tool_content = False
    for i, message in enumerate(body.get("messages") or []):
        content: list[dict[str, Any]] = []
        for j, block in enumerate(message["content"]):
            tool_content |= _content(
                block, f"messages.{i}.content.{j}", content, f"messages.{i}.content", one_hour
            )
        messages.append({"role": message["role"], "content": content})
    out["messages"] = messages
    if body.get("toolConfig") is not None:
        tools, choice = _tools(body["toolConfig"], one_hour)
        out["tools"] = tools
        if choice is not None:
            out["tool_choice"] = choice
    elif tool_content:
        # langgenius/dify#17545, aws-samples/bedrock-access-gateway#239 (verbatim).
        raise _invalid(TOOL_CONFIG_MESSAGE)
    if inference.get("stopSequences"):
        out["stop_sequences"] = list(inference["stopSequences"])
    extra = body.get("additionalModelRequestFields") or {}
    # Claude's own settings pass through here ("Additional inference parameters that the
    # model supports", ConverseRequest): thinking, also under Bedrock's older name
    # `reasoning_config` (crmne/ruby_llm's recordings), runs and is billed as on Messages.
    thinking = extra.get("thinking", extra.get("reasoning_config"))
    if isinstance(thinking, dict):
        out["thinking"] = dict(thinking)
    schema = _output_schema(body.get("outputConfig"))
    if schema is not None:
        out["output_config"] = {"format": {"type": "json_schema", "schema": schema}}
    return out


def _output_schema(config: Any) -> dict[str, Any] | None:
    """The JSON schema of Converse's structured output (`outputConfig.textFormat` of type
    `json_schema`, the schema as a JSON string), billed as Messages' `output_config.format`;
    an unreadable schema counts as an empty one."""
    fmt = config.get("textFormat") if isinstance(config, dict) else None
    if not isinstance(fmt, dict) or fmt.get("type") != "json_schema":
        return None
    raw = ((fmt.get("structure") or {}).get("jsonSchema") or {}).get("schema")
    try:
        schema = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        schema = None
    return schema if isinstance(schema, dict) else {}


# --- Messages -> Converse ------------------------------------------------------------------


def converse_usage(usage: CacheUsage, output_tokens: int) -> dict[str, Any]:
    """A Converse `TokenUsage`: reads, writes (split by TTL in `cacheDetails`, 1h first)."""
    writes = usage.cache_creation_input_tokens
    total = usage.total_input_tokens + output_tokens
    result: dict[str, Any] = {
        "inputTokens": usage.input_tokens,
        "outputTokens": output_tokens,
        "totalTokens": total,
        "cacheReadInputTokens": usage.cache_read_input_tokens,
        "cacheWriteInputTokens": writes,
    }
    details = [
        {"ttl": ttl, "inputTokens": tokens}
        for ttl, tokens in (
            ("1h", usage.ephemeral_1h_input_tokens),
            ("5m", usage.ephemeral_5m_input_tokens),
        )
        if tokens
    ]
    if details:
        result["cacheDetails"] = details
    return result


def converse_content(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = []
    for block in blocks:
        if block["type"] == "text":
            content.append({"text": block["text"]})
        elif block["type"] == "thinking":
            text = {"text": block["thinking"], "signature": block["signature"]}
            content.append({"reasoningContent": {"reasoningText": text}})
        elif block["type"] == "tool_use":
            use = {"toolUseId": block["id"], "name": block["name"], "input": block["input"]}
            content.append({"toolUse": use})
    return content


# --- AWS event-stream framing --------------------------------------------------------------


def _header(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode(), value.encode()
    # type 7 = string, with a 2-byte length.
    return (
        struct.pack("!B", len(raw_name))
        + raw_name
        + b"\x07"
        + struct.pack("!H", len(raw_value))
        + raw_value
    )


def frame(headers: Mapping[str, str], payload: bytes) -> bytes:
    """One event-stream message: prelude (total length, headers length, CRC), headers,
    payload, message CRC (all CRC32, big-endian)."""
    head = b"".join(_header(k, v) for k, v in headers.items())
    total = 12 + len(head) + len(payload) + 4
    prelude = struct.pack("!II", total, len(head))
    prelude += struct.pack("!I", zlib.crc32(prelude) & 0xFFFFFFFF)
    message = prelude + head + payload
    return message + struct.pack("!I", zlib.crc32(message) & 0xFFFFFFFF)


def event(kind: str, payload: Mapping[str, Any]) -> bytes:
    headers = {
        ":event-type": kind,
        ":content-type": "application/json",
        ":message-type": "event",
    }
    return frame(headers, json.dumps(payload, separators=(",", ":")).encode())


def stream_events(
    content: list[dict[str, Any]], stop_reason: str, usage: dict[str, Any]
) -> Iterator[bytes]:
    """ConverseStream's events for one reply: messageStart, per block start/delta/stop,
    messageStop, metadata (usage last, as the API sends it)."""
    yield event("messageStart", {"role": "assistant"})
    for index, block in enumerate(content):
        if "toolUse" in block:
            use = block["toolUse"]
            start = {"toolUse": {"toolUseId": use["toolUseId"], "name": use["name"]}}
            yield event("contentBlockStart", {"contentBlockIndex": index, "start": start})
            delta: dict[str, Any] = {"toolUse": {"input": json.dumps(use["input"])}}
            yield event("contentBlockDelta", {"contentBlockIndex": index, "delta": delta})
        elif "reasoningContent" in block:
            text = block["reasoningContent"]["reasoningText"]
            for part in ({"text": text["text"]}, {"signature": text["signature"]}):
                delta = {"reasoningContent": part}
                yield event("contentBlockDelta", {"contentBlockIndex": index, "delta": delta})
        else:
            delta = {"text": block["text"]}
            yield event("contentBlockDelta", {"contentBlockIndex": index, "delta": delta})
        yield event("contentBlockStop", {"contentBlockIndex": index})
    yield event("messageStop", {"stopReason": stop_reason})
    yield event("metadata", {"usage": usage, "metrics": {"latencyMs": 0}})


# --- the router ----------------------------------------------------------------------------


def _error(status: int, request_id: str, message: str, code: str | None = None) -> JSONResponse:
    code = code or CODE_FOR_STATUS.get(status, "InternalServerException")
    return JSONResponse(
        {"message": message},
        status_code=status,
        headers={"x-amzn-ErrorType": f"{code}:", "x-amzn-RequestId": request_id},
    )


async def handle(state: EmulatorState, request: Request, model_id: str, stream: bool) -> Response:
    arrival = await Arrival.read(state, request, provider=PROVIDER)
    arrival.stream = stream
    if arrival.too_large:
        # Before faults and parsing, as on /v1/messages. The status, code and message of
        # Bedrock's own answer are UNCONFIRMED: 413 with the ValidationException code ("The
        # input fails to satisfy the constraints specified by Amazon Bedrock").
        message = f"The request body is over the maximum of {state.max_body_bytes} bytes."
        return arrival.refuse(_error(413, arrival.request_id, message, "ValidationException"))
    request_id, started_at, body, log = (
        arrival.request_id,
        arrival.started_at,
        arrival.body,
        arrival.record,
    )

    # Bedrock requests take faults but no holds (the hold gate is not modelled here).
    await arrival.admit(hold=False)
    fault = arrival.fault
    if fault is not None and fault.effective_status != 200:
        log(fault.effective_status, None)
        if fault.delay:
            await asyncio.sleep(fault.delay)
        code = fault.error_type if (fault.error_type or "").endswith("Exception") else None
        message = fault.message or f"Emulated fault {fault.effective_status}"
        failed = _error(fault.effective_status, request_id, message, code)
        failed.headers.update(fault.headers)  # a fault's headers, as on the other providers
        return failed
    try:
        if not arrival.parsed:
            raise _invalid("The request body is not valid JSON")
        try:
            info = get_model(model_id)
        except UnknownModel:
            info = None
        if info is None or info.provider != PROVIDER:
            raise _invalid(INVALID_MODEL + unknown_model_hint(model_id, PROVIDER))
        messages_body = to_messages_body(model_id, body)
        try:
            # Claude on Bedrock is the same model: the tool-use system prompt counts alike
            # when the emulator is set to count it (UNCONFIRMED for Bedrock).
            _, prepared = validate_messages(
                messages_body, tool_prompt=state.tool_prompt, framing=state.framing
            )
        except APIError as exc:
            raise ConverseError(exc.status, exc.message) from None
    except ConverseError as exc:
        log(exc.status, None)
        return _error(exc.status, request_id, exc.message, exc.code)

    result = state.apply_cache(prepared, started_at)
    scripted = state.pop_response(model_id, offered_tools(messages_body), arrival.headers)
    reply = build_reply(messages_body, scripted, state.next_tool_use_id)
    usage = converse_usage(result.usage, reply.output_tokens)
    content = converse_content(reply.content)
    stop_reason = _STOP_REASONS.get(reply.stop_reason, reply.stop_reason)
    log(200, usage)
    extra = {"x-amzn-RequestId": request_id, **(fault.headers if fault else {})}
    delay = fault.delay if fault else 0.0
    if delay:
        await asyncio.sleep(delay)
    if stream:
        frames = list(stream_events(content, stop_reason, usage))
        if fault is not None and fault.cut_after_events is not None:
            frames = frames[: fault.cut_after_events]
        return StreamingResponse(
            iter(frames), headers=extra, media_type="application/vnd.amazon.eventstream"
        )
    answer = {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": stop_reason,
        "usage": usage,
        "metrics": {"latencyMs": 0},
    }
    return JSONResponse(answer, headers=extra)


def router(state: EmulatorState) -> APIRouter:
    api = APIRouter()

    @api.post("/model/{model_id:path}/converse")
    async def converse(model_id: str, request: Request) -> Response:
        return await handle(state, request, model_id, stream=False)

    @api.post("/model/{model_id:path}/converse-stream")
    async def converse_stream(model_id: str, request: Request) -> Response:
        return await handle(state, request, model_id, stream=True)

    return api


def logged_blocks(body: Any, path: str | None, model: str) -> list[FlatBlock]:
    """A logged Converse body's cache positions: Claude's, as the Messages body it maps to."""
    messages = to_messages_body(model, body)
    return for_model(flatten_request(messages), messages).flat()


async def connect(
    app: ASGIApp,
    state: EmulatorState,
    stack: contextlib.AsyncExitStack,
    *,
    base_url: str,
    api_key: str,
    max_retries: int,
) -> ProviderAdapter:
    """The Bedrock adapter over boto3. boto3 is synchronous and sends only over a socket, so
    it talks to a loopback `BackgroundServer` over the same state, stopped with `stack`."""
    # optional extra: boto3 is imported only when it is used
    from .adapter import BedrockLLMClient

    server = stack.enter_context(BackgroundServer(state))
    return BedrockLLMClient(
        endpoint_url=server.url,
        aws_access_key_id=api_key,
        aws_secret_access_key=api_key,
        max_retries=max_retries,
    )


_MODEL_IN_PATH = re.compile(r"/model/(?P<model>[^/]+)/converse")


def logged_model(path: str, body: Mapping[str, Any]) -> str:
    """The model a logged Converse request named (in its path)."""
    found = _MODEL_IN_PATH.search(path)
    return found["model"] if found else ""


def logged_tool_names(body: Mapping[str, Any]) -> list[str]:
    """The tools a logged Converse request offered (`toolConfig.tools[].toolSpec`)."""
    tools = (body.get("toolConfig") or {}).get("tools") or []
    return [str((t.get("toolSpec") or {}).get("name")) for t in tools if "toolSpec" in t]


def logged_texts(body: Mapping[str, Any]) -> tuple[str, str]:
    """A logged Converse request's system prompt and last user text."""
    return messages_texts(body)
