"""The Gemini API (`generativelanguage` v1beta) on the shared emulator state.

Endpoints: `POST /v1beta/models/{model}:generateContent` (JSON) and
`POST /v1beta/models/{model}:streamGenerateContent` (`?alt=sse`: server-sent `data:` chunks,
which the `google-genai` SDK always asks for; without it, a JSON array of the chunks), and the
same under `/v1/`, the version google-genai 3.x sends by default.
Explicit caching: `cachedContents` create (`POST`), list (`GET`), get (`GET .../{id}`),
update (`PATCH .../{id}`, its expiration only) and delete, under `/v1beta/` and `/v1/`, and
`cachedContent` on a generate request. A resource lives until its `expireTime` (`ttl` or
`expireTime` on create or update), whatever uses it: a pinned entry of the one
`CacheStore`.

Implicit caching (ai.google.dev/gemini-api/docs/caching) is `CacheStore.apply_implicit`: a
request that shares a prefix with an earlier one reads the whole shared prefix (to the end
of the last shared position, `implicit_breakpoint_interval` 1) once it reaches the model's
documented minimum, whatever the earlier request ended with; entries live
`EmulatorState.lifetimes["gemini_implicit_ttl"]` after their latest use. The usage is
Gemini's: the cached tokens are `cachedContentTokenCount`, and `promptTokenCount` counts them
too; there is no cache-write count. Every route under `/v1beta/` answers errors in Gemini's
shape. Everything the docs do not state is marked UNCONFIRMED here and in docs/emulator.md
("Gemini").
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import TypeAdapter
from starlette.types import ASGIApp, Receive, Scope, Send

from ...cache import FlatBlock, ImplicitRule
from ...catalog import ModelInfo, UnknownModel, get_model, unknown_model_hint
from ...emulator.boundary import CACHED_CONTENT, GENERATE, first_error
from ...emulator.intake import Arrival
from ...emulator.logged import text_of
from ...emulator.responder import THINKING_SIGNATURE, build_reply, schema_instance
from ...emulator.state import EmulatorState, FaultSpec, ScriptedResponse
from ...llm._adapter import ProviderAdapter
from ...tokens import canonical_json
from .counting import declarations_of, gemini_positions
from .wire import ERROR_STATUSES, camel_case_body

PATH_PREFIXES = ("/v1beta/",)
PROVIDER = "gemini"
METHODS = ("generateContent", "streamGenerateContent")
GENESIS = hashlib.sha256(b"sessiongen.cache/gemini/v1").hexdigest()
# The documented rejection of cachedContent with these fields (python-genai#348).
CACHED_CONTENT_CONFLICT = (
    "CachedContent can not be used with GenerateContent request setting system_instruction, "
    "tools or tool_config."
)
_FINISH = {
    "end_turn": "STOP",
    "tool_use": "STOP",
    "stop_sequence": "STOP",
    "max_tokens": "MAX_TOKENS",
    "refusal": "SAFETY",
}


class GeminiError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def error_body(code: int, message: str, status: str | None = None) -> dict[str, Any]:
    """`{"error": {"code", "message", "status"}}`, the API's error shape."""
    if status is None:
        status = ERROR_STATUSES.get(code, "INTERNAL" if code >= 500 else "INVALID_ARGUMENT")
    return {"error": {"code": code, "message": message, "status": status}}


def _error(code: int, message: str, status: str | None = None) -> JSONResponse:
    return JSONResponse(error_body(code, message, status), status_code=code)


def _invalid(message: str) -> GeminiError:
    return GeminiError(400, message)


def _too_large(state: EmulatorState, arrival: Arrival) -> Response:
    """A body over `max_body_bytes`, unread and unparsed: logged, and answered before faults
    and holds as the API words it, `400 INVALID_ARGUMENT` "Request payload size exceeds the
    limit: N bytes." (as public reports quote it, e.g. MaKTaiL/gemini-srt-translator#63; the
    API's own limit for generateContent is UNCONFIRMED, so the emulator's applies)."""
    message = f"Request payload size exceeds the limit: {state.max_body_bytes} bytes."
    answer = _error(400, message)
    answer.headers["x-request-id"] = arrival.request_id
    return arrival.refuse(answer)


# --- validation ----------------------------------------------------------------------------


def _model(name: str) -> ModelInfo:
    try:
        info = get_model(name)
    except UnknownModel:
        info = None
    if info is None or info.provider != PROVIDER:
        raise GeminiError(
            404,
            f"models/{name} is not found for API version v1beta, or is not supported for "
            "generateContent." + unknown_model_hint(name, PROVIDER),  # wording UNCONFIRMED
        )
    return info


def _checked(adapter: TypeAdapter[Any], body: Any) -> None:
    """`body` against its pydantic model (`boundary.GENERATE`, `CACHED_CONTENT`): the first
    violation is the 400, "Invalid value at '<field>': <what>" (wording UNCONFIRMED)."""
    violation = first_error(adapter, body)
    if violation is not None:
        field = violation.param()
        raise _invalid(
            f"Invalid value at '{field}': {violation.msg}"
            if field
            else "Invalid JSON payload received."
        )


def _check_contents(contents: Any) -> None:
    if not contents:
        raise _invalid("* GenerateContentRequest.contents: contents is not specified")


def _calling_config(body: Mapping[str, Any], names: set[str]) -> dict[str, Any]:
    config = ((body.get("toolConfig") or {}).get("functionCallingConfig")) or {}
    mode = str(config.get("mode", "AUTO")).upper()  # enum names are read in any case
    allowed = config.get("allowedFunctionNames")
    if allowed is not None:
        # The SDK's doc: "should only be set when the Mode is ANY" (rejection UNCONFIRMED).
        if mode != "ANY":
            raise _invalid("allowed_function_names may only be set when the mode is ANY.")
        unknown = [n for n in allowed if n not in names]
        if unknown:
            raise _invalid(f"allowed_function_names {unknown} are not declared functions.")
    if mode == "ANY" and not names:
        raise _invalid("function_calling_config.mode ANY requires function declarations.")
    return {"mode": "AUTO" if mode == "MODE_UNSPECIFIED" else mode, "allowed": allowed}


def _validate(body: Any, info: ModelInfo) -> tuple[list[Mapping[str, Any]], dict[str, Any], int]:
    """(declarations, calling config, max output tokens), or GeminiError."""
    _check_contents(body.get("contents"))
    declarations = declarations_of(body)
    calling = _calling_config(body, {str(d["name"]) for d in declarations})
    generation = body.get("generationConfig") or {}
    max_tokens = generation.get("maxOutputTokens", info.max_output_tokens)
    if max_tokens > info.max_output_tokens:
        raise _invalid(
            f"The max_output_tokens ({max_tokens}) exceeds the maximum allowed "
            f"({info.max_output_tokens})."  # wording UNCONFIRMED
        )
    return declarations, calling, max_tokens


# --- the prefix: positions, tokens, hashes -------------------------------------------------


def _hashed(part: Mapping[str, Any]) -> dict[str, Any]:
    # A thought signature is opaque state, not prompt text: it is left out of the prefix
    # (UNCONFIRMED), so a replayed turn hashes the same with or without it.
    return {k: v for k, v in part.items() if k not in ("thoughtSignature",)}


def flatten(
    body: Mapping[str, Any],
    declarations: list[Mapping[str, Any]],
    model: str = "",
    framing: bool = True,
) -> list[FlatBlock]:
    """`(prefix_hash, tokens, breakpoint)` per position, for `CacheStore.apply`.

    Positions (UNCONFIRMED, the docs say only "prefix"): one per function declaration, one
    per `systemInstruction` part, one per part of each content, in that order. The chain
    hashes each position's canonical JSON, with role and message start for content parts.
    Settings (toolConfig, generationConfig, thinking) are not mixed in (UNCONFIRMED), so a
    NONE tool choice keeps the cache. No position carries a breakpoint: implicit caching
    places its own (`CacheStore.apply_implicit`).
    """
    rows: list[FlatBlock] = []
    h = GENESIS
    # Counted by the one counter, one count per position (`framing`: the emulator's setting).
    counts = iter(gemini_positions(body, declarations, model, framing=framing))

    def add(payload: Mapping[str, Any]) -> None:
        nonlocal h
        tokens = next(counts)
        h = hashlib.sha256(f"{h}\x1f{canonical_json(payload)}".encode()).hexdigest()
        rows.append(FlatBlock(h, tokens, None))

    for decl in declarations:
        add({"section": "tools", "block": decl})
    system = (body.get("systemInstruction") or {}).get("parts") or []
    for part in system:
        add({"section": "system", "block": _hashed(part)})
    for content in body["contents"]:
        for j, part in enumerate(content["parts"]):
            payload = {
                "section": "contents",
                "role": content.get("role", "user"),
                "opens": j == 0,
                "block": _hashed(part),
            }
            add(payload)
    return rows


# --- replies -------------------------------------------------------------------------------


def _responder_body(
    body: Mapping[str, Any],
    declarations: list[Mapping[str, Any]],
    calling: Mapping[str, Any],
    max_tokens: int,
) -> dict[str, Any]:
    """The request as the shared responder reads it (Anthropic-shaped): last user text,
    forced tool choice, max tokens and stop sequences."""
    messages = []
    for content in body["contents"]:
        blocks: list[dict[str, Any]] = []
        for part in content["parts"]:
            if "text" in part and not part.get("thought"):
                blocks.append({"type": "text", "text": str(part["text"])})
            elif "functionResponse" in part:
                response = part["functionResponse"].get("response") or {}
                blocks.append({"type": "tool_result", "content": canonical_json(response)})
        role = "assistant" if content.get("role") == "model" else "user"
        messages.append({"role": role, "content": blocks})
    names = [str(d["name"]) for d in declarations]
    allowed = calling["allowed"] or names
    choice: dict[str, Any] = {"type": "auto"}
    if calling["mode"] == "ANY" and len(allowed) == 1:
        choice = {"type": "tool", "name": allowed[0]}
    elif calling["mode"] == "ANY":
        choice = {"type": "any"}
    elif calling["mode"] == "NONE":
        choice = {"type": "none"}
    return {
        "max_tokens": max_tokens,
        "messages": messages,
        "tools": [{"name": n} for n in allowed],
        "tool_choice": choice,
        "stop_sequences": (body.get("generationConfig") or {}).get("stopSequences") or [],
    }


def _parts(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    signed = False
    for block in content:
        if block["type"] == "thinking":
            parts.append({"text": block["thinking"], "thought": True})
            signed = True
        elif block["type"] == "text":
            parts.append({"text": block["text"]})
        elif block["type"] == "tool_use":
            call = {"id": block["id"], "name": block["name"], "args": block["input"]}
            parts.append({"functionCall": call})
    if signed:
        # Gemini 3 signs the first function call, else the last part (thought-signatures).
        target = next((p for p in parts if "functionCall" in p), parts[-1])
        target["thoughtSignature"] = base64.b64encode(THINKING_SIGNATURE.encode()).decode()
    return parts


def _usage(prompt: int, cached: int, output: int) -> dict[str, Any]:
    usage: dict[str, Any] = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": output,
        "totalTokenCount": prompt + output,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": prompt}],
    }
    if cached:
        # Sent only on a hit (UNCONFIRMED: the API omits zero counts in its JSON).
        usage["cachedContentTokenCount"] = cached
        usage["cacheTokensDetails"] = [{"modality": "TEXT", "tokenCount": cached}]
    return usage


def _chunks(response: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The response as stream chunks: one per part, the last with finishReason; every chunk
    carries usageMetadata, cumulative (the prompt counts from the first)."""
    candidate = response["candidates"][0]
    parts = candidate["content"]["parts"] or [{"text": ""}]
    usage = response["usageMetadata"]
    early = {k: v for k, v in usage.items() if k != "candidatesTokenCount"}
    early["totalTokenCount"] = usage["promptTokenCount"]
    chunks = []
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        piece: dict[str, Any] = {"content": {"role": "model", "parts": [part]}, "index": 0}
        if last:
            piece["finishReason"] = candidate["finishReason"]
        chunks.append(
            {
                "candidates": [piece],
                "usageMetadata": usage if last else early,
                "modelVersion": response["modelVersion"],
                "responseId": response["responseId"],
            }
        )
    return chunks


class _SSE(Response):
    """`data: <chunk>` events; a fault may delay, cut (cleanly or by dropping the
    connection) or end them with an `{"error": ...}` chunk, which the SDK raises."""

    media_type = "text/event-stream"

    def __init__(
        self,
        chunks: list[dict[str, Any]],
        *,
        headers: Mapping[str, str],
        fault: FaultSpec | None,
    ) -> None:
        super().__init__(status_code=200, headers=dict(headers), media_type=self.media_type)
        cut = fault.cut_after_events if fault else None
        self.chunks = chunks if cut is None else chunks[:cut]
        self.cut = cut is not None and cut < len(chunks)
        self.abort = fault is not None and fault.cut_mode == "abort"
        self.delay = fault.delay if fault else 0.0
        self.error: dict[str, Any] | None = None
        if fault is not None and fault.error_event is not None:
            codes = {status: code for code, status in ERROR_STATUSES.items()}
            code = codes.get(fault.error_event, 500)
            self.error = error_body(code, fault.message or "Internal error", fault.error_event)
            if fault.error_event not in codes:
                self.error["error"]["status"] = ERROR_STATUSES[500]
        self.raw_headers = [(k, v) for k, v in self.raw_headers if k != b"content-length"]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.delay:
            await asyncio.sleep(self.delay)
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        events = [*self.chunks, *([self.error] if self.error is not None else [])]
        for event in events:
            data = json.dumps(event, separators=(",", ":"), ensure_ascii=False)
            body = f"data: {data}\r\n\r\n".encode()
            await send({"type": "http.response.body", "body": body, "more_body": True})
        if self.cut and self.abort:
            return
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def implicit_rule(state: EmulatorState, info: ModelInfo) -> ImplicitRule:
    """The model's implicit cache: breakpoint interval from the catalog (1: the whole shared
    prefix), lifetime from the emulator's settings."""
    return ImplicitRule(
        max(info.implicit_breakpoint_interval, 1),
        state.lifetimes["gemini_implicit_ttl"],
        label="implicit",
    )


# --- the endpoint --------------------------------------------------------------------------


async def _handle(state: EmulatorState, request: Request, model: str, method: str) -> Response:
    arrival = await Arrival.read(state, request, provider=PROVIDER)
    if arrival.too_large:
        return _too_large(state, arrival)
    request_id, started_at, body = arrival.request_id, arrival.started_at, arrival.body
    stream = arrival.stream = method == "streamGenerateContent"
    sse = stream and request.query_params.get("alt") == "sse"
    record = arrival.record

    if not await arrival.admit():
        return _error(500, "The emulator was reset while this request was held.")
    fault = arrival.fault
    extra = {**(fault.headers if fault else {}), "x-request-id": request_id}
    if fault is not None and fault.effective_status != 200:
        status = fault.effective_status
        record(status, None)
        if fault.delay:
            await asyncio.sleep(fault.delay)
        message = fault.message or ("Internal error" if status >= 500 else "Request failed")
        failed = _error(status, message, fault.error_type)
        failed.headers.update(extra)
        return failed
    try:
        if method not in METHODS:
            raise GeminiError(404, f"Method {method!r} is not served by this emulator.")
        if not arrival.parsed:
            raise _invalid("Invalid JSON payload received.")
        body = camel_case_body(body)  # Vertex-style snake_case field names are accepted too
        _checked(GENERATE, body)
        info = _model(model)
        cached = _cached_for(state, body, info, started_at)
        effective: Any = body
        if cached is not None:
            # The request is the cached content followed by its own contents.
            _check_contents(body.get("contents"))
            effective = {k: v for k, v in body.items() if k != "cachedContent"}
            effective.update(cached.fields, contents=[*cached.contents, *body["contents"]])
        declarations, calling, max_tokens = _validate(effective, info)
        blocks = flatten(effective, declarations, info.id, state.framing)
        total = sum(tokens for _, tokens, _ in blocks)
        if total > info.context_window:
            raise _invalid(
                f"The input token count ({total}) exceeds the maximum number of tokens "
                f"allowed ({info.context_window})."
            )
    except GeminiError as exc:
        record(exc.code, None)
        return _error(exc.code, exc.message)

    result = state.cache.apply_implicit(
        blocks,
        model=info.id,
        now=started_at,
        min_tokens=info.min_cacheable_tokens,
        rule=implicit_rule(state, info),
        ttft=state.ttft,
    )
    read = result.read_tokens
    if cached is not None:
        # The named content is read whole; the implicit cache may reach further (UNCONFIRMED).
        read = max(read, cached.tokens)
    names = [str(d.get("name")) for d in declarations]
    scripted = state.pop_response(info.id, names, arrival.headers)
    generation = effective.get("generationConfig") or {}
    schema = generation.get("responseJsonSchema") or generation.get("responseSchema")
    if scripted is None and generation.get("responseMimeType") == "application/json" and schema:
        # "responseJsonSchema: Output schema of the generated response" (GenerationConfig
        # reference): the unscripted reply is the smallest JSON that conforms.
        scripted = ScriptedResponse(text=json.dumps(schema_instance(schema)))
    reply = build_reply(
        _responder_body(effective, declarations, calling, max_tokens),
        scripted,
        state.next_tool_use_id,
    )
    usage = _usage(total, read, reply.output_tokens)
    response: dict[str, Any] = {
        "candidates": [
            {
                "content": {"role": "model", "parts": _parts(reply.content)},
                "finishReason": _FINISH.get(reply.stop_reason, "STOP"),
                "index": 0,
            }
        ],
        "usageMetadata": usage,
        "modelVersion": info.id,
        "responseId": state.next_message_id(),
    }
    record(200, usage)
    if sse:
        return _SSE(_chunks(response), headers=extra, fault=fault)
    if fault is not None and fault.delay:
        await asyncio.sleep(fault.delay)
    if stream:
        return JSONResponse(_chunks(response), headers=extra)
    return JSONResponse(response, headers=extra)


# --- explicit caching: cachedContents ------------------------------------------------------


@dataclass
class CachedContent:
    """One `cachedContents/{id}` resource. Its tokens are a pinned entry of the one
    CacheStore (namespace `explicit_namespace(model)`, keyed by the name) that lives until
    `expire_time`, whatever reads it: "expire_time: Timestamp in UTC of when this resource
    is considered expired" (CachedContent reference)."""

    name: str
    model: str
    fields: dict[str, Any]  # systemInstruction / tools / toolConfig
    contents: list[Any]
    tokens: int
    create_time: float
    update_time: float
    expire_time: float
    display_name: str | None = None

    def resource(self) -> dict[str, Any]:
        resource: dict[str, Any] = {
            "name": self.name,
            "model": f"models/{self.model}",
            "createTime": _timestamp(self.create_time),
            "updateTime": _timestamp(self.update_time),
            "expireTime": _timestamp(self.expire_time),
            "usageMetadata": {"totalTokenCount": self.tokens},
        }
        if self.display_name is not None:
            resource["displayName"] = self.display_name
        return resource


DEFAULT_TTL_SECONDS = 3600.0  # "1 hour" (Vertex docs; Gemini API: third-party quote)
EXPLICIT_LABEL = "cachedContent"
_EXPIRATION = ("ttl", "expireTime")
LATEST_EXPIRY = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC).timestamp()
_FRACTION = re.compile(r"(\.\d{6})\d+")


def explicit_namespace(model: str) -> str:
    """The store namespace of a model's explicit caches (never read by implicit caching)."""
    return f"gemini-explicit:{model}"


def _timestamp(virtual: float) -> str:
    # Virtual seconds since reset, shown as seconds after the Unix epoch (RFC 3339).
    moment = datetime.fromtimestamp(virtual, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _seconds(value: str) -> float:
    if not value.endswith("s"):
        raise _invalid(f"Invalid value at 'cached_content.ttl' ({value!r}): expected e.g. '300s'")
    try:
        seconds = float(value[:-1])
    except ValueError:
        raise _invalid(f"Invalid value at 'cached_content.ttl' ({value!r})") from None
    if seconds <= 0:
        raise _invalid("cached_content.ttl must be positive.")
    return seconds


def _instant(value: str) -> float:
    """An RFC 3339 timestamp as virtual seconds (seconds after the Unix epoch)."""
    text = _FRACTION.sub(r"\1", value.strip()).replace("Z", "+00:00")
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise _invalid(f"Invalid value at 'cached_content.expire_time' ({value!r})") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _expiration(body: Mapping[str, Any], now: float, *, required: bool) -> float | None:
    """`expireTime` from `ttl` ("now + TTL") or `expireTime`, which are a oneof: both is a
    400 (wording UNCONFIRMED); neither is the default hour on create, a 400 on update. An
    expiry not after `now` is a 400 (UNCONFIRMED)."""
    given = [k for k in _EXPIRATION if body.get(k) is not None]
    if len(given) == 2:
        raise _invalid("Only one of cached_content.ttl and cached_content.expire_time may be set.")
    if not given:
        if required:
            raise _invalid("cached_content.ttl or cached_content.expire_time is required.")
        return None
    expires = now + _seconds(body["ttl"]) if given[0] == "ttl" else _instant(body["expireTime"])
    if not expires < LATEST_EXPIRY:
        # An RFC 3339 timestamp ends with year 9999 (a longer TTL cannot be shown either).
        raise _invalid("cached_content.expire_time must be before year 10000.")
    if expires <= now:
        raise _invalid("cached_content.expire_time must be in the future.")
    return expires


def _live(state: EmulatorState, item: CachedContent, now: float) -> bool:
    # The store entry is gone after its expiry, a delete or a reset of the state.
    return state.cache.lookup(explicit_namespace(item.model), item.name, now) is not None


def _resource(state: EmulatorState, name: str, now: float) -> CachedContent:
    item: CachedContent | None = state.cached_contents.get(name)
    if item is None or not _live(state, item, now):
        raise GeminiError(403, f"CachedContent not found (or permission denied): {name}")
    return item


def _cached_for(
    state: EmulatorState, body: Mapping[str, Any], info: ModelInfo, now: float
) -> CachedContent | None:
    if not isinstance(body, Mapping) or "cachedContent" not in body:
        return None
    if any(body.get(k) for k in ("systemInstruction", "tools", "toolConfig")):
        raise _invalid(CACHED_CONTENT_CONFLICT)
    item = _resource(state, str(body["cachedContent"]), now)
    if item.model != info.id:
        raise _invalid(f"Model {info.id} does not match the cached content's {item.model}.")
    return item


def create_cached_content(state: EmulatorState, body: Any, now: float) -> CachedContent:
    body = camel_case_body(body)
    _checked(CACHED_CONTENT, body)
    model = str(body.get("model", "")).removeprefix("models/")
    info = _model(model)
    fields = {k: body[k] for k in ("systemInstruction", "tools", "toolConfig") if k in body}
    contents = body.get("contents") or []
    declarations = declarations_of(body)
    rows = flatten({**fields, "contents": contents}, declarations, info.id, state.framing)
    tokens = sum(row.tokens for row in rows)
    if tokens < info.min_cacheable_tokens:
        raise _invalid(
            f"Cached content is too small. total_token_count={tokens}, "
            f"min_total_token_count={info.min_cacheable_tokens}"
        )
    expires = _expiration(body, now, required=False)
    item = CachedContent(
        name=f"cachedContents/emulated-{state.next_message_id().rsplit('_', 1)[1]}",
        model=info.id,
        fields=fields,
        contents=list(contents),
        tokens=tokens,
        create_time=now,
        update_time=now,
        expire_time=now + DEFAULT_TTL_SECONDS if expires is None else expires,
        display_name=body.get("displayName"),
    )
    state.cache.pin(
        model=explicit_namespace(info.id),
        prefix_hash=item.name,
        tokens=tokens,
        now=now,
        expires_at=item.expire_time,
        label=EXPLICIT_LABEL,
        stored_for=info.id,  # "storage costs based on how long caches are stored"
    )
    state.cached_contents[item.name] = item
    return item


def update_cached_content(state: EmulatorState, name: str, body: Any, now: float) -> CachedContent:
    """PATCH: "Updates CachedContent resource (only expiration is updatable)"."""
    _checked(CACHED_CONTENT, body)
    item = _resource(state, name, now)
    other = sorted(k for k in body if k not in _EXPIRATION and k != "name")
    if other:
        # UNCONFIRMED wording; the reference says only the expiration is updatable.
        raise _invalid(f"Only the expiration (ttl or expire_time) is updatable, not {other}.")
    expires = _expiration(body, now, required=True)
    assert expires is not None
    state.cache.set_expiry(explicit_namespace(item.model), item.name, expires)
    item.expire_time = expires
    item.update_time = now
    return item


def list_cached_contents(
    state: EmulatorState, now: float, page_size: str | None, page_token: str | None
) -> dict[str, Any]:
    """`{"cachedContents": [...], "nextPageToken"}` of the live resources, oldest first
    (metadata only, as `get` answers them). `pageSize` default and maximum 1000, the token an
    offset (UNCONFIRMED)."""
    try:
        size = min(int(page_size), 1000) if page_size else 1000
        offset = int(page_token) if page_token else 0
    except ValueError:
        raise _invalid("Invalid pageSize or pageToken.") from None
    if size < 1 or offset < 0:
        raise _invalid("Invalid pageSize or pageToken.")
    live = [i for i in state.cached_contents.values() if _live(state, i, now)]
    page = live[offset : offset + size]
    answer: dict[str, Any] = {}
    if page:
        answer["cachedContents"] = [i.resource() for i in page]
    if offset + size < len(live):
        answer["nextPageToken"] = str(offset + size)
    return answer


async def _admin_call(
    state: EmulatorState, request: Request, action: str, name: str | None
) -> Response:
    """create / list / get / update / delete of cachedContents, logged like a generate call."""
    arrival = await Arrival.read(state, request, provider=PROVIDER)
    if arrival.too_large:
        return _too_large(state, arrival)
    request_id, now = arrival.request_id, arrival.started_at
    status, answer = 200, {}
    has_body = action in ("create", "update")
    try:
        if has_body and not arrival.parsed:
            raise _invalid("Invalid JSON payload received.")
        if action == "create":
            answer = create_cached_content(state, arrival.body, now).resource()
        elif action == "list":
            query = request.query_params
            answer = list_cached_contents(state, now, query.get("pageSize"), query.get("pageToken"))
        else:
            assert name is not None
            if action == "update":
                answer = update_cached_content(state, name, arrival.body, now).resource()
            else:
                item = _resource(state, name, now)
                if action == "delete":
                    state.cache.remove(explicit_namespace(item.model), item.name)
                    del state.cached_contents[name]
                else:
                    answer = item.resource()
    except GeminiError as exc:
        status, answer = exc.code, error_body(exc.code, exc.message)
    # The body is logged when it was JSON for a create or update (the others send none).
    arrival.record(status, None, has_body=has_body and arrival.parsed)
    return JSONResponse(answer, status_code=status, headers={"x-request-id": request_id})


async def _not_found(state: EmulatorState, request: Request) -> Response:
    """Any other method or path under a Gemini prefix: 404 in Gemini's shape (the API's
    answer for an unknown method is UNCONFIRMED), logged."""
    arrival = await Arrival.read(state, request, provider=PROVIDER)
    if arrival.too_large:
        return _too_large(state, arrival)
    arrival.record(404, None, has_body=False)
    message = f"Method not found: {request.method} {request.url.path}"
    return JSONResponse(
        error_body(404, message), status_code=404, headers={"x-request-id": arrival.request_id}
    )


def router(state: EmulatorState) -> APIRouter:
    """The Gemini endpoints over `state`, under `/v1beta/` and `/v1/` (google-genai 3.x
    defaults to API version v1, `GOOGLE_AI_API_DEFAULT_VERSION`; `/v1/` is already open to
    SDK credentials). Anything else under `/v1beta/` is a Gemini-shaped 404."""
    api = APIRouter()

    for version in ("v1beta", "v1"):

        @api.post(f"/{version}/models/{{target}}")
        async def models(target: str, request: Request) -> Response:
            model, _, method = target.partition(":")
            return await _handle(state, request, model, method)

        @api.post(f"/{version}/cachedContents")
        async def create_cache(request: Request) -> Response:
            return await _admin_call(state, request, "create", None)

        @api.get(f"/{version}/cachedContents")
        async def list_caches(request: Request) -> Response:
            return await _admin_call(state, request, "list", None)

        @api.get(f"/{version}/cachedContents/{{cache_id}}")
        async def get_cache(cache_id: str, request: Request) -> Response:
            return await _admin_call(state, request, "get", f"cachedContents/{cache_id}")

        @api.patch(f"/{version}/cachedContents/{{cache_id}}")
        async def update_cache(cache_id: str, request: Request) -> Response:
            return await _admin_call(state, request, "update", f"cachedContents/{cache_id}")

        @api.delete(f"/{version}/cachedContents/{{cache_id}}")
        async def delete_cache(cache_id: str, request: Request) -> Response:
            return await _admin_call(state, request, "delete", f"cachedContents/{cache_id}")

    methods = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]

    @api.api_route("/v1beta/{rest:path}", methods=methods)
    async def anything_else(rest: str, request: Request) -> Response:
        return await _not_found(state, request)

    for version_path in ("/v1/cachedContents", "/v1/cachedContents/{rest:path}"):

        @api.api_route(version_path, methods=methods)
        async def other_cache_methods(request: Request) -> Response:
            return await _not_found(state, request)

    return api


def logged_blocks(body: Any, path: str | None, model: str) -> list[FlatBlock]:
    """A logged generateContent body's cache positions."""
    return flatten(body, declarations_of(body), model)


async def connect(
    app: ASGIApp,
    state: EmulatorState,
    stack: contextlib.AsyncExitStack,
    *,
    base_url: str,
    api_key: str,
    max_retries: int,
) -> ProviderAdapter:
    """The Gemini adapter over the official SDK, sending to `app` in-process."""
    # optional extra: google-genai is imported only when it is used
    from .adapter import GeminiLLMClient

    # google-genai sends through httpx (not httpx2); the adapter does not close it.
    http = await stack.enter_async_context(
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=base_url)
    )
    return GeminiLLMClient(
        api_key=api_key, base_url=base_url, http_client=http, max_retries=max_retries
    )


_MODEL_IN_PATH = re.compile(r"/models/(?P<model>[^/:]+):")


def logged_model(path: str, body: Mapping[str, Any]) -> str:
    """The model a logged generateContent request named (in its path)."""
    found = _MODEL_IN_PATH.search(path)
    return found["model"] if found else ""


def logged_tool_names(body: Mapping[str, Any]) -> list[str]:
    """The function declarations a logged request offered."""
    return [str(d.get("name")) for d in declarations_of(body)]


def logged_texts(body: Mapping[str, Any]) -> tuple[str, str]:
    """A logged request's system instruction and last user text."""
    system = text_of((body.get("systemInstruction") or {}).get("parts"))
    users = [c for c in body.get("contents") or [] if c.get("role", "user") == "user"]
    return system, text_of(users[-1].get("parts")) if users else ""
