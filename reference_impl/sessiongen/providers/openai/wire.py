"""Facts of the OpenAI Chat Completions wire that the adapter and the emulator both read.

The lowering of an `LLMRequest` to the kwargs of `client.chat.completions.create`, the usage
reading and the one error table live here, so the emulator and the adapter cannot drift
apart. This module imports no SDK: reading the wire never loads `openai`.

Why Chat Completions (and not Responses) for the adapter: an `LLMRequest` maps one to one onto
Chat messages (tool calls inside the assistant message, each result a `tool` message), the
call is stateless (nothing is stored server-side, unlike Responses' default `store`), and the
stream reports the final usage with `stream_options.include_usage`. The emulator serves
Responses too, for SDK users.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from ...catalog import UnknownModel, get_model
from ...llm.types import LLMMessage, LLMRequest, ToolChoice, ToolResultContent, Usage
from ...llm.wire_view import BlockKind, WireBlock, WireView, choice_or_default

__all__ = [
    "ERRORS",
    "CACHE_INCREMENT",
    "CONTEXT_LENGTH_CODE",
    "error_type_for",
    "lower_request",
    "usage_from_openai",
    "wire_view",
]

CACHE_INCREMENT = 128
"""Cached prefixes grow in 128-token steps (OpenAI prompt-caching guide)."""

# The error table: HTTP status -> error `type` in the body (the emulator answers with it).
# Types per the OpenAI error-codes guide: 401/403/404/409/400/422 are `invalid_request_error`
# with a `code` (invalid_api_key, model_not_found, ...); 429 `rate_limit_exceeded` (or
# `insufficient_quota`); 5xx `server_error`. The exact `type` of 403/409/504 is UNCONFIRMED.
# The adapter maps statuses to sessiongen errors with the one mapping of every provider,
# `errors.provider_error_for_status`; a 400 with this code is a `ContextOverflow`.
ERRORS: Mapping[int, str] = MappingProxyType(
    {
        400: "invalid_request_error",
        401: "invalid_request_error",
        403: "invalid_request_error",
        404: "invalid_request_error",
        409: "invalid_request_error",
        413: "invalid_request_error",
        422: "invalid_request_error",
        429: "rate_limit_exceeded",
        500: "server_error",
        502: "server_error",
        503: "server_error",
        504: "server_error",
    }
)

CONTEXT_LENGTH_CODE = "context_length_exceeded"


def error_type_for(status: int) -> str:
    if status in ERRORS:
        return ERRORS[status]
    return "server_error" if status >= 500 else "invalid_request_error"


def _get(source: Mapping[str, Any] | object, name: str) -> Any:
    return source.get(name) if isinstance(source, Mapping) else getattr(source, name, None)


def usage_from_openai(usage: Mapping[str, Any] | object | None) -> Usage:
    """Usage from a Chat `usage` (prompt/completion tokens) or a Responses one (input/output
    tokens): an API dict or an SDK object. The prompt count includes the cached tokens and,
    from GPT-5.6 on, the tokens written (`cache_write_tokens` in `input_tokens_details` /
    `prompt_tokens_details`; the guide's cost example: `ordinary_input_tokens = input_tokens
    - cached_tokens - cache_write_tokens`). Those writes are `cache_write_5m_tokens`, the
    write bucket whose price row holds OpenAI's one write rate (1.25x input; the entry lives
    30 minutes, there is no second rate); earlier models report none, so the uncached rest
    of the prompt is plain input."""
    if usage is None:
        return Usage()
    prompt = _get(usage, "prompt_tokens")
    details = _get(usage, "prompt_tokens_details")
    output = _get(usage, "completion_tokens")
    if prompt is None:  # Responses spelling
        prompt = _get(usage, "input_tokens")
        details = _get(usage, "input_tokens_details")
        output = _get(usage, "output_tokens")
    cached = (_get(details, "cached_tokens") if details is not None else None) or 0
    written = (_get(details, "cache_write_tokens") if details is not None else None) or 0
    return Usage(
        input_tokens=int(prompt or 0) - int(cached) - int(written),
        output_tokens=int(output or 0),
        cache_read_tokens=int(cached),
        cache_write_5m_tokens=int(written),
    )


# --- lowering ------------------------------------------------------------------------------


def lower_request(request: LLMRequest) -> dict[str, Any]:
    """The kwargs of `chat.completions.create` for `request` (without `stream`).

    * system parts: one `system` message each, first;
    * a user message's tool results become `tool` messages (Chat wants them right after the
      assistant message that called), then its text as one `user` message;
    * reasoning is dropped: Chat Completions has no way to send reasoning back;
    * cache marks are dropped: caching is automatic (the whole prompt prefix). A 1h mark asks
      for `prompt_cache_retention: "24h"` on a model with extended retention (the catalog's
      `extended_retention`, or a model the catalog does not know); elsewhere "24h" is a 400
      and the field is left to its default (`in_memory`), as it is without a 1h mark;
    * tool choice: auto -> "auto", any -> "required", tool -> named function, none -> "none"
      (the tools stay: the caching guide says to set "none" instead of removing them);
      `disable_parallel_tool_use` -> `parallel_tool_calls: false` (a prefix-breaking setting);
    * `max_output_tokens` -> `max_completion_tokens`, at least 1 (0, a pre-warm, is not a
      valid value: UNCONFIRMED, so the smallest valid one is sent);
    * `provider_options["openai"]` is merged last.
    """
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": part.text} for part in request.system
    ]
    for message in request.messages:
        messages.extend(_lower_message(message))
    body: dict[str, Any] = {
        "model": request.model,
        "messages": messages,
        "max_completion_tokens": max(1, request.max_output_tokens),
    }
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.input_schema,
                },
            }
            for tool in request.tools
        ]
    if request.tool_choice is not None:
        body["tool_choice"] = _lower_tool_choice(request.tool_choice)
        if request.tool_choice.disable_parallel_tool_use and request.tools:
            body["parallel_tool_calls"] = False
    if request.prompt_cache_key is not None:
        body["prompt_cache_key"] = request.prompt_cache_key
    if any(mark is not None and mark.ttl == "1h" for mark in _marks(request)):
        if _extended_retention(request.model):
            body["prompt_cache_retention"] = "24h"
    body.update(request.provider_options.get("openai", {}))
    return body


def _extended_retention(model: str) -> bool:
    """False for a catalogued OpenAI model without extended retention; True otherwise."""

    try:
        return get_model(model).extended_retention
    except UnknownModel:
        return True


def _marks(request: LLMRequest) -> list[Any]:
    marks: list[Any] = [t.cache for t in request.tools] + [s.cache for s in request.system]
    for message in request.messages:
        marks += [part.cache for part in message.content]
    return marks


def _lower_message(message: LLMMessage) -> list[dict[str, Any]]:
    if message.role == "user":
        out: list[dict[str, Any]] = []
        texts: list[str] = []
        for part in message.content:
            if isinstance(part, ToolResultContent):
                # Chat has no error flag on a tool message; the text says what happened.
                out.append(
                    {"role": "tool", "tool_call_id": part.tool_call_id, "content": part.text}
                )
            elif part.type == "text":
                texts.append(part.text)
        if texts:
            out.append({"role": "user", "content": "\n\n".join(texts)})
        return out
    text = "".join(part.text for part in message.content if part.type == "text")
    calls = [
        {
            "id": part.id,
            "type": "function",
            "function": {"name": part.name, "arguments": json.dumps(part.input)},
        }
        for part in message.content
        if part.type == "tool_call"
    ]
    lowered: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        lowered["tool_calls"] = calls
    return [lowered]


def _lower_tool_choice(choice: ToolChoice) -> str | dict[str, Any]:
    if choice.type == "any":
        return "required"
    if choice.type == "tool":
        if choice.name is None:
            raise ValueError("tool_choice of type 'tool' needs the tool's name")
        return {"type": "function", "function": {"name": choice.name}}
    return choice.type  # "auto" | "none"


def wire_view(body: Mapping[str, Any]) -> WireView:
    """A Chat Completions body as the parity diff reads it. The leading `system`/`developer`
    messages are the system prompt (a setting); a `tool` message is a user-side tool result;
    an assistant's text and each of its `tool_calls` are blocks. No block carries a cache
    mark: caching is automatic, and `prompt_cache_key` is a setting of the body."""
    messages = list(body.get("messages", []))
    leading = 0
    while leading < len(messages) and messages[leading].get("role") in ("system", "developer"):
        leading += 1
    settings = {k: v for k, v in body.items() if k != "messages"}
    if leading:
        settings["messages[system]"] = messages[:leading]
    blocks: list[WireBlock] = []
    for m in range(leading, len(messages)):
        message, path = messages[m], f"messages[{m}]"
        role = message.get("role", "")
        if role == "tool":
            blocks.append(WireBlock("user", path, "tool_result", message))
            continue
        content = message.get("content")
        if isinstance(content, str) and content:
            blocks.append(WireBlock(role, f"{path}.content", "text", {"text": content}))
        elif isinstance(content, list):
            for p, part in enumerate(content):
                kind: BlockKind = "text" if part.get("type") == "text" else "other"
                blocks.append(WireBlock(role, f"{path}.content[{p}]", kind, part))
        for c, call in enumerate(message.get("tool_calls") or []):
            blocks.append(WireBlock(role, f"{path}.tool_calls[{c}]", "tool_call", call))
    return WireView(
        settings=settings,
        blocks=tuple(blocks),
        output_limit="max_completion_tokens",
        tools=len(body.get("tools") or []),
        tool_choice=choice_or_default(
            _choice_name(body.get("tool_choice")), len(body.get("tools") or [])
        ),
        sections={
            "model": "model",
            "messages[system]": "system prompt",
            "tools": "tool definitions",
            "tool_choice": "tool choice",
            "parallel_tool_calls": "tool choice",
            "reasoning_effort": "effort settings",
            "prompt_cache_key": "prompt-cache key",
            "prompt_cache_retention": "cache retention",
        },
    )


def _choice_name(choice: Any) -> str | None:
    if isinstance(choice, str) or choice is None:
        return choice
    return "function" if isinstance(choice, Mapping) else str(choice)
