"""Facts of the Gemini `generateContent` wire that the adapter and the emulator both read.

Pure: the standard library and the provider-neutral types only, so reading the wire never
loads the `google-genai` SDK. `lower_request` answers in the SDK's keyword shape
(`client.aio.models.generate_content_stream(model=..., contents=..., config=...)`, snake_case
field names, which the SDK turns into the camelCase JSON of the REST API); the tests
validate that shape with the SDK's own pydantic types (`types.Content`,
`types.GenerateContentConfig`, both `extra="forbid"`).

Sources (ai.google.dev/gemini-api/docs/…): `function-calling` (`functionCallingConfig.mode`
AUTO / ANY with `allowedFunctionNames` / NONE), `thought-signatures` (a signature goes back
exactly as received, on the part it came on), `caching` (implicit caching, `usageMetadata.
cachedContentTokenCount`, included in `promptTokenCount`), `troubleshooting` (the HTTP status
and `status` string of each backend error).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from ...llm.types import (
    LLMMessage,
    LLMRequest,
    ReasoningContent,
    TextContent,
    ToolCallContent,
    ToolChoice,
    ToolDefinition,
    ToolResultContent,
    Usage,
)
from ...llm.wire_view import BlockKind, WireBlock, WireView, choice_or_default, split_setting

__all__ = [
    "ERROR_STATUSES",
    "FINISH_REASONS",
    "camel_case_body",
    "decode_signature",
    "encode_signature",
    "lower_request",
    "usage_from_gemini",
    "wire_view",
]

# Values whose keys are the caller's data (function arguments and results, JSON schemas,
# labels), so `camel_case_body` leaves their insides as they are.
_OPAQUE_KEYS = frozenset(
    {
        "args",
        "response",
        "parameters",
        "parametersJsonSchema",
        "responseSchema",
        "responseJsonSchema",
        "labels",
        "metadata",
    }
)


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in rest)


def camel_case_body(value: Any) -> Any:
    """A generateContent body with its snake_case field names (the Vertex AI and
    `google-genai` spelling, `function_call`, `inline_data`, `mime_type`, `system_instruction`,
    `parameters_json_schema`, ...) in the camelCase the Gemini API documents: the API's JSON
    mapping accepts both (proto3 JSON: "parsers accept both the lowerCamelCase name and the
    original proto field name"). Arguments, results and schemas keep their own keys.
    `contents`, a content's `parts` or `tools` given as one value is that value listed: the
    API reads them so (recorded: `"parts": {"text": ...}` served and billed, crmne/ruby_llm cassettes;
    `"contents": {...}` and `"tools": {"functionDeclarations": [...]}`, sublayerapp/sublayer)."""
    if isinstance(value, list):
        return [camel_case_body(item) for item in value]
    if not isinstance(value, Mapping):
        return value
    out: dict[str, Any] = {}
    for key, item in value.items():
        name = _camel(key) if isinstance(key, str) and "_" in key else key
        if name in ("contents", "parts", "tools") and isinstance(item, Mapping):
            item = [item]
        out[name] = item if name in _OPAQUE_KEYS else camel_case_body(item)
    return out


# ai.google.dev/gemini-api/docs/troubleshooting: the HTTP code and the `error.status` string the
# backend sends with it, in `{"error": {"code", "message", "status"}}`. 401 UNAUTHENTICATED is
# the google.rpc mapping (UNCONFIRMED for this API: a bad key answers 400 INVALID_ARGUMENT).
# The emulator answers with this table and the adapter maps the status through the one
# `sessiongen.errors.provider_error_for_status`, so both read the same facts.
ERROR_STATUSES: Mapping[int, str] = MappingProxyType(
    {
        400: "INVALID_ARGUMENT",
        401: "UNAUTHENTICATED",
        403: "PERMISSION_DENIED",
        404: "NOT_FOUND",
        429: "RESOURCE_EXHAUSTED",
        500: "INTERNAL",
        503: "UNAVAILABLE",
        504: "DEADLINE_EXCEEDED",
    }
)

# `Candidate.finishReason` -> sessiongen's finish reason. A candidate that calls a function
# finishes with STOP on this API; the adapter turns STOP with calls into "tool_use".
FINISH_REASONS: Mapping[str, str] = MappingProxyType(
    {
        "STOP": "end_turn",
        "MAX_TOKENS": "max_tokens",
        "SAFETY": "refusal",
        "RECITATION": "refusal",
        "PROHIBITED_CONTENT": "refusal",
        "BLOCKLIST": "refusal",
        "SPII": "refusal",
    }
)


def _get(source: Mapping[str, Any] | object, *names: str) -> Any:
    # REST dicts spell fields in camelCase, SDK objects in snake_case: try each spelling.
    for name in names:
        value = source.get(name) if isinstance(source, Mapping) else getattr(source, name, None)
        if value is not None:
            return value
    return None


def _count(source: Mapping[str, Any] | object, *names: str) -> int:
    value = _get(source, *names)
    return int(value) if isinstance(value, int | float) else 0


def usage_from_gemini(usage: Mapping[str, Any] | object | None) -> Usage:
    """Token counts from a `usageMetadata` (REST dict) or `usage_metadata` (SDK object).

    `promptTokenCount` includes the cached tokens (docs: caching), so the uncached input is
    `promptTokenCount - cachedContentTokenCount`. Gemini has no cache-write charge or count:
    writes are always 0. Output is `candidatesTokenCount + thoughtsTokenCount` (thinking is
    billed as output). A streamed response repeats the cumulative usage on its chunks; the
    last one wins, as with `UsageEvent`.
    """
    if usage is None:
        return Usage()
    prompt = _count(usage, "promptTokenCount", "prompt_token_count")
    cached = _count(usage, "cachedContentTokenCount", "cached_content_token_count")
    output = _count(usage, "candidatesTokenCount", "candidates_token_count") + _count(
        usage, "thoughtsTokenCount", "thoughts_token_count"
    )
    return Usage(
        input_tokens=max(prompt - cached, 0), output_tokens=output, cache_read_tokens=cached
    )


def encode_signature(raw: bytes) -> str:
    """A thought signature as sessiongen keeps it: the base64 text the REST API sends."""
    return base64.b64encode(raw).decode("ascii")


def decode_signature(signature: str) -> bytes:
    """The bytes the SDK's `Part.thought_signature` holds (it base64-encodes them again)."""
    try:
        return base64.b64decode(signature, validate=True)
    except (binascii.Error, ValueError):
        # Not base64 (e.g. another provider's signature): sent as its UTF-8 bytes.
        return signature.encode("utf-8")


# --- lowering ------------------------------------------------------------------------------


def lower_request(request: LLMRequest) -> dict[str, Any]:
    """`{"model", "contents", "config"}`: the keyword arguments of `generate_content[_stream]`.

    * `system` -> `config.system_instruction` (one text part per system part).
    * `tools` -> one `Tool` with `function_declarations` (`parameters_json_schema` carries the
      JSON Schema as is).
    * `tool_choice`: auto -> AUTO, any -> ANY, tool -> ANY + `allowed_function_names=[name]`,
      none -> NONE. NONE keeps the declarations (and the tool history): the docs' NONE means
      "behaves as without declarations" while the prefix stays the same. There is no
      parallel-call switch, so `disable_parallel_tool_use` is dropped.
    * history: roles user/model; a tool call is a `function_call` part (with its id), a tool
      result a `function_response` part named after its call, `{"output": text}` or
      `{"error": text}` (the docs' convention).
    * reasoning: only its signature goes back (thought-signatures: "pass it back exactly as
      received"), on the part it came on: the first function call of that message, else its
      last text part. Reasoning text (a thought summary) is not input and is dropped, as is
      reasoning without a signature.
    * cache marks are dropped: Gemini's implicit caching is automatic and has no markers;
      explicit `cachedContent` is a separate resource (`provider_options` may name one).
    * `max_output_tokens` -> `config.max_output_tokens`; 0 (a pre-warm) is sent as 1, the
      smallest value that asks for output at all (whether 0 is rejected is UNCONFIRMED).
    * `request.provider_options["gemini"]` is merged into `config` last.
    """
    calls = _call_names(request.messages)
    contents = [_lower_message(message, calls) for message in request.messages]
    config: dict[str, Any] = {"max_output_tokens": max(request.max_output_tokens, 1)}
    if request.system:
        config["system_instruction"] = {"parts": [{"text": part.text} for part in request.system]}
    if request.tools:
        config["tools"] = [{"function_declarations": [_lower_tool(t) for t in request.tools]}]
    if request.tool_choice is not None:
        config["tool_config"] = {"function_calling_config": _lower_choice(request.tool_choice)}
    config.update(request.provider_options.get("gemini", {}))
    return {
        "model": request.model,
        "contents": [c for c in contents if c["parts"]],
        "config": config,
    }


_REQUEST_FIELDS = frozenset({"systemInstruction", "tools", "toolConfig", "cachedContent"})
"""The fields of `config` that the SDK sends at the top of the REST body; the rest go in
`generationConfig` (google-genai's `_GenerateContentParameters_to_mldev`)."""


def rest_body(call: Mapping[str, Any]) -> dict[str, Any]:
    """`lower_request`'s keyword arguments as the REST body the SDK sends (what the API
    bills): `contents`, and `config` split between the request's own fields and
    `generationConfig`, every name in camelCase."""
    config = camel_case_body(dict(call.get("config") or {}))
    body: dict[str, Any] = {"contents": camel_case_body(list(call.get("contents") or []))}
    body.update({k: v for k, v in config.items() if k in _REQUEST_FIELDS})
    generation = {k: v for k, v in config.items() if k not in _REQUEST_FIELDS}
    if generation:
        body["generationConfig"] = generation
    return body


def _call_names(messages: tuple[LLMMessage, ...]) -> dict[str, str]:
    return {
        part.id: part.name
        for message in messages
        for part in message.content
        if isinstance(part, ToolCallContent)
    }


def _lower_message(message: LLMMessage, calls: Mapping[str, str]) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    signature: str | None = None
    for part in message.content:
        if isinstance(part, TextContent):
            if part.text:  # the API rejects an empty text part (UNCONFIRMED message)
                parts.append({"text": part.text})
        elif isinstance(part, ReasoningContent):
            if part.signature is not None:
                signature = part.signature
        elif isinstance(part, ToolCallContent):
            parts.append({"function_call": {"id": part.id, "name": part.name, "args": part.input}})
        else:
            parts.append({"function_response": _lower_result(part, calls)})
    if signature is not None and message.role == "assistant" and parts:
        target = next((p for p in parts if "function_call" in p), parts[-1])
        target["thought_signature"] = decode_signature(signature)
    return {"role": "model" if message.role == "assistant" else "user", "parts": parts}


def _lower_result(part: ToolResultContent, calls: Mapping[str, str]) -> dict[str, Any]:
    name = calls.get(part.tool_call_id)
    if name is None:
        raise ValueError(f"tool result {part.tool_call_id!r} has no tool call in the history")
    key = "error" if part.is_error else "output"
    return {"id": part.tool_call_id, "name": name, "response": {key: part.text}}


def _lower_tool(tool: ToolDefinition) -> dict[str, Any]:
    return {
        "name": tool.name,
        "description": tool.description,
        "parameters_json_schema": tool.input_schema,
    }


def _lower_choice(choice: ToolChoice) -> dict[str, Any]:
    if choice.type == "tool":
        if choice.name is None:
            raise ValueError("tool_choice of type 'tool' needs the tool's name")
        return {"mode": "ANY", "allowed_function_names": [choice.name]}
    return {"mode": {"auto": "AUTO", "any": "ANY", "none": "NONE"}[choice.type]}


def wire_view(body: Mapping[str, Any]) -> WireView:
    """A generateContent body (the REST JSON the SDK sends) as the parity diff reads it:
    each part of `contents` a block (role `model` is the assistant), every other field a
    setting, `generationConfig.maxOutputTokens` the output limit. Parts carry no cache
    mark: implicit caching has none, and an explicit `cachedContent` is a setting."""
    settings = split_setting(body, "generationConfig", "maxOutputTokens")
    settings.pop("contents", None)
    blocks: list[WireBlock] = []
    for c, content in enumerate(body.get("contents", [])):
        role = "assistant" if content.get("role") == "model" else "user"
        for p, part in enumerate(content.get("parts", [])):
            kind: BlockKind = "other"
            if "functionCall" in part:
                kind = "tool_call"
            elif "functionResponse" in part:
                kind = "tool_result"
            elif part.get("thought"):
                kind = "reasoning"
            elif "text" in part:
                kind = "text"
            blocks.append(WireBlock(role, f"contents[{c}].parts[{p}]", kind, part))
    return WireView(
        settings=settings,
        blocks=tuple(blocks),
        output_limit="generationConfig.maxOutputTokens",
        tools=sum(len(t.get("functionDeclarations") or []) for t in body.get("tools") or []),
        tool_choice=choice_or_default(
            ((body.get("toolConfig") or {}).get("functionCallingConfig") or {}).get("mode"),
            sum(len(t.get("functionDeclarations") or []) for t in body.get("tools") or []),
        ),
        sections={
            "systemInstruction": "system prompt",
            "tools": "tool definitions",
            "toolConfig": "tool choice",
            "generationConfig": "generation settings",
            "cachedContent": "explicit cache",
        },
    )
