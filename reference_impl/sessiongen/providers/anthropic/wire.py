"""Facts of the Anthropic Messages wire that more than one part of sessiongen reads.

The adapter, the emulator, the parity diff, the token counter and the cost model each speak
this wire; the lowering of a request, the error table and the usage shape are written here
once so that they cannot drift apart. This module imports nothing but the standard library
and the provider-neutral types, so reading the wire never loads the provider SDK.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from ...llm.types import (
    CacheMark,
    LLMMessage,
    LLMRequest,
    ReasoningContent,
    SystemPart,
    TextContent,
    ToolCallContent,
    ToolChoice,
    ToolDefinition,
    ToolResultContent,
    Usage,
)
from ...llm.wire_view import BlockKind, WireBlock, WireView, choice_or_default

__all__ = ["ERROR_TYPES", "lower_request", "usage_from_anthropic", "wire_view"]

# AD:api/errors: the error `type` the API sends with each HTTP status, in the error body and
# in an `error` event inside a 200 stream. Read-only, since every reader shares this one.
ERROR_TYPES: Mapping[int, str] = MappingProxyType(
    {
        400: "invalid_request_error",
        401: "authentication_error",
        402: "billing_error",
        403: "permission_error",
        404: "not_found_error",
        409: "conflict_error",
        413: "request_too_large",
        429: "rate_limit_error",
        500: "api_error",
        504: "timeout_error",
        529: "overloaded_error",
    }
)


def _get(source: Mapping[str, Any] | object, name: str) -> Any:
    # API dicts and SDK objects spell the fields alike; absent and null both read as None.
    return source.get(name) if isinstance(source, Mapping) else getattr(source, name, None)


def _count(source: Mapping[str, Any] | object, name: str) -> int | None:
    value = _get(source, name)
    return int(value) if isinstance(value, int | float) else None


def usage_from_anthropic(usage: Mapping[str, Any] | object, previous: Usage | None = None) -> Usage:
    """Token counts by kind from an Anthropic `usage`: an API dict or an SDK usage object.

    A field the usage omits (absent or null) keeps its value in `previous`, so a stream's
    cumulative usage events fold with `previous` set to the usage so far; a one-off usage
    leaves it out (all zero). Cache writes come from the per-TTL `cache_creation` split. A
    total `cache_creation_input_tokens` without that split counts as 5m writes (the API's
    default TTL, and all it had before 1h caching), keeping any 1h share already in
    `previous`.
    """
    if previous is None:
        previous = Usage()
    split = _get(usage, "cache_creation")
    write_5m, write_1h = previous.cache_write_5m_tokens, previous.cache_write_1h_tokens
    total_writes = _count(usage, "cache_creation_input_tokens")
    if split is not None:
        write_5m = _count(split, "ephemeral_5m_input_tokens") or 0
        write_1h = _count(split, "ephemeral_1h_input_tokens") or 0
    elif total_writes is not None:
        write_1h = min(write_1h, total_writes)
        write_5m = total_writes - write_1h
    return Usage(
        input_tokens=_or(_count(usage, "input_tokens"), previous.input_tokens),
        output_tokens=_or(_count(usage, "output_tokens"), previous.output_tokens),
        cache_read_tokens=_or(_count(usage, "cache_read_input_tokens"), previous.cache_read_tokens),
        cache_write_5m_tokens=write_5m,
        cache_write_1h_tokens=write_1h,
    )


def _or(value: int | None, default: int) -> int:
    return default if value is None else value


# --- lowering ------------------------------------------------------------------------------


def lower_request(request: LLMRequest) -> dict[str, Any]:
    """The exact JSON body of POST /v1/messages for `request`, without `stream`.

    Keys come in a stable order: model, max_tokens, system, messages, tools, tool_choice, then
    `request.provider_options["anthropic"]` merged last (so it may add or override fields).
    `request.prompt_cache_key` is not lowered: the Messages API has no such field, and the
    engine carries session identity in `request.headers`, which the client sends as headers.
    Reasoning without a signature is dropped, since the API rejects unsigned thinking blocks;
    a cache mark on reasoning is dropped too, since thinking blocks cannot carry one.
    `max_output_tokens == 0` (pre-warming) is sent as is, except with manual extended
    thinking, which rejects it and needs max_tokens above the thinking budget: then the
    smallest valid value, budget + 1, is sent.
    """
    body: dict[str, Any] = {"model": request.model, "max_tokens": request.max_output_tokens}
    if request.system:
        body["system"] = [_lower_system_part(part) for part in request.system]
    body["messages"] = [lower_message(message) for message in request.messages]
    if request.tools:
        body["tools"] = [_lower_tool(tool) for tool in request.tools]
    if request.tool_choice is not None:
        body["tool_choice"] = _lower_tool_choice(request.tool_choice)
    body.update(request.provider_options.get("anthropic", {}))
    thinking = body.get("thinking") or {}
    if body["max_tokens"] == 0 and thinking.get("type") == "enabled":
        body["max_tokens"] = int(thinking.get("budget_tokens", 1024)) + 1
    return body


def _cache_control(mark: CacheMark) -> dict[str, str]:
    # 5m is the API default, so it is left implicit to keep the body minimal.
    if mark.ttl == "1h":
        return {"type": "ephemeral", "ttl": "1h"}
    return {"type": "ephemeral"}


def _with_cache(block: dict[str, Any], mark: CacheMark | None) -> dict[str, Any]:
    if mark is not None:
        block["cache_control"] = _cache_control(mark)
    return block


def _lower_system_part(part: SystemPart) -> dict[str, Any]:
    return _with_cache({"type": "text", "text": part.text}, part.cache)


def lower_message(message: LLMMessage) -> dict[str, Any]:
    """One entry of the body's `messages`, as `lower_request` lowers it."""
    content: list[dict[str, Any]] = []
    for part in message.content:
        block = _lower_content(part)
        if block is not None:
            content.append(block)
    return {"role": message.role, "content": content}


def _lower_content(
    part: TextContent | ReasoningContent | ToolCallContent | ToolResultContent,
) -> dict[str, Any] | None:
    if isinstance(part, TextContent):
        return _with_cache({"type": "text", "text": part.text}, part.cache)
    if isinstance(part, ReasoningContent):
        if part.signature is None:
            return None
        return {"type": "thinking", "thinking": part.text, "signature": part.signature}
    if isinstance(part, ToolCallContent):
        block = {"type": "tool_use", "id": part.id, "name": part.name, "input": part.input}
        return _with_cache(block, part.cache)
    result: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": part.tool_call_id,
        "content": part.text,
    }
    if part.is_error:
        result["is_error"] = True
    return _with_cache(result, part.cache)


def _lower_tool(tool: ToolDefinition) -> dict[str, Any]:
    block = {"name": tool.name, "description": tool.description, "input_schema": tool.input_schema}
    return _with_cache(block, tool.cache)


def _lower_tool_choice(choice: ToolChoice) -> dict[str, Any]:
    lowered: dict[str, Any] = {"type": choice.type}
    if choice.type == "tool":
        if choice.name is None:
            raise ValueError("tool_choice of type 'tool' needs the tool's name")
        lowered["name"] = choice.name
    # The API has the flag inside tool_choice, and none has no such field (nothing to disable).
    if choice.disable_parallel_tool_use and choice.type != "none":
        lowered["disable_parallel_tool_use"] = True
    return lowered


_KINDS: Mapping[str, BlockKind] = MappingProxyType(
    {
        "text": "text",
        "tool_use": "tool_call",
        "tool_result": "tool_result",
        "thinking": "reasoning",
        "redacted_thinking": "reasoning",
    }
)


def wire_view(body: Mapping[str, Any]) -> WireView:
    """A Messages body as the parity diff reads it: each content block, its `cache_control`
    set apart; every other top-level field a setting."""
    blocks: list[WireBlock] = []
    for m, message in enumerate(body.get("messages", [])):
        content = message["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        for b, block in enumerate(content):
            path = f"messages[{m}].content[{b}]"
            blocks.append(
                WireBlock(
                    role=message["role"],
                    path=path,
                    kind=_KINDS.get(block.get("type", ""), "other"),
                    content={k: v for k, v in block.items() if k != "cache_control"},
                    mark=block.get("cache_control"),
                    mark_path=f"{path}.cache_control",
                )
            )
    return WireView(
        settings={k: v for k, v in body.items() if k != "messages"},
        blocks=tuple(blocks),
        output_limit="max_tokens",
        tools=len(body.get("tools") or []),
        tool_choice=choice_or_default(
            (body.get("tool_choice") or {}).get("type"), len(body.get("tools") or [])
        ),
        sections={
            "model": "model",
            "system": "system prompt",
            "tools": "tool definitions",
            "tool_choice": "tool choice",
            "thinking": "thinking settings",
            "output_config": "effort settings",
        },
    )
