"""Facts of the AWS Bedrock Converse wire: the lowering of a request, the usage shape and the
one error table, shared by the adapter (`llm/bedrock.py`) and the emulator
(`emulator/providers/bedrock.py`).

Pure: it imports nothing but the standard library and the provider-neutral types, so reading
the wire never loads boto3. Shapes follow botocore's service model for `bedrock-runtime`
(`Converse` input `ConverseRequest`, `TokenUsage`, the operation's error shapes).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from ...catalog import UnknownModel, get_model
from ...errors import ContextOverflow, ProviderError, provider_error_for_status
from ...llm.types import (
    CacheMark,
    FinishReason,
    LLMMessage,
    LLMRequest,
    ReasoningContent,
    TextContent,
    ToolCallContent,
    ToolChoice,
    ToolResultContent,
    Usage,
)
from ...llm.wire_view import BlockKind, WireBlock, WireView, choice_or_default, split_setting

__all__ = [
    "ERROR_STATUS",
    "FINISH_REASONS",
    "cache_point",
    "error_for",
    "error_status",
    "lower_request",
    "usage_from_bedrock",
    "wire_view",
]

# botocore service model bedrock-runtime 2023-09-30: the error shapes of Converse and
# ConverseStream with their `httpStatusCode`. In-stream exceptions (modelStreamErrorException
# and the exception events) arrive inside a 200 stream; their status is the shape's own.
ERROR_STATUS: Mapping[str, int] = MappingProxyType(
    {
        "ValidationException": 400,
        "AccessDeniedException": 403,
        "ResourceNotFoundException": 404,
        "ModelTimeoutException": 408,
        "ModelErrorException": 424,
        "ThrottlingException": 429,
        "ModelNotReadyException": 429,
        "ServiceQuotaExceededException": 429,
        "InternalServerException": 500,
        "ServiceUnavailableException": 503,
        "ModelStreamErrorException": 424,
        "UnrecognizedClientException": 403,
    }
)

# The error code the emulator answers for each status (the inverse, one code per status).
CODE_FOR_STATUS: Mapping[int, str] = MappingProxyType(
    {
        400: "ValidationException",
        401: "AccessDeniedException",
        403: "AccessDeniedException",
        404: "ResourceNotFoundException",
        408: "ModelTimeoutException",
        424: "ModelErrorException",
        429: "ThrottlingException",
        500: "InternalServerException",
        503: "ServiceUnavailableException",
    }
)

# StopReason enum of the service model -> sessiongen's finish reasons.
FINISH_REASONS: Mapping[str, FinishReason] = MappingProxyType(
    {
        "end_turn": "end_turn",
        "tool_use": "tool_use",
        "max_tokens": "max_tokens",
        "stop_sequence": "stop_sequence",
        "content_filtered": "refusal",
        "guardrail_intervened": "refusal",
        "model_context_window_exceeded": "context_window",
    }
)

# UNCONFIRMED: the wording of Bedrock's "input too long" ValidationException for Claude.
_TOO_LONG = ("too long", "prompt is too long", "input length")


def error_status(code: str | None, status: int | None, message: str) -> tuple[int, bool]:
    """The HTTP status a Bedrock error stands for (its own when it has one of 400 or more,
    else its code's: an error event inside a 200 stream), and whether it is the provider's
    "input too long" (a `ContextOverflow`). `provider_error_for_status` then maps it, as for
    every provider."""
    mapped = ERROR_STATUS.get(code or "")
    effective = status if status is not None and status >= 400 else mapped or 500
    overflow = effective == 400 and any(words in message.lower() for words in _TOO_LONG)
    return effective, overflow


def error_for(
    code: str | None, status: int | None, message: str, *, request_id: str | None = None
) -> ProviderError | ContextOverflow:
    """The sessiongen error for a Bedrock error (code and/or HTTP status): `error_status`,
    then the one mapping."""
    effective, overflow = error_status(code, status, message)
    return provider_error_for_status(
        effective, message, request_id=request_id, error_type=code, context_overflow=overflow
    )


def _count(source: Mapping[str, Any], name: str) -> int:
    value = source.get(name)
    return int(value) if isinstance(value, int | float) else 0


def usage_from_bedrock(usage: Mapping[str, Any]) -> Usage:
    """Token counts from a Converse `TokenUsage` (a dict, as boto3 parses it).

    `inputTokens` counts the tokens neither read from nor written to the cache, as Anthropic's
    `input_tokens` (UNCONFIRMED in AWS text for Converse). Writes are split by
    `cacheDetails[].ttl`; without that list every write counts as a 5m write.
    """
    writes = _count(usage, "cacheWriteInputTokens")
    details = usage.get("cacheDetails")
    write_1h = 0
    if isinstance(details, list) and details:
        write_1h = sum(_count(d, "inputTokens") for d in details if d.get("ttl") == "1h")
        writes = sum(_count(d, "inputTokens") for d in details)
    return Usage(
        input_tokens=_count(usage, "inputTokens"),
        output_tokens=_count(usage, "outputTokens"),
        cache_read_tokens=_count(usage, "cacheReadInputTokens"),
        cache_write_5m_tokens=writes - write_1h,
        cache_write_1h_tokens=write_1h,
    )


# --- lowering ------------------------------------------------------------------------------


def cache_point(mark: CacheMark) -> dict[str, Any]:
    """A `cachePoint` block for `mark`; 5m is the default TTL, so it is left implicit."""
    point: dict[str, Any] = {"type": "default"}
    if mark.ttl == "1h":
        point["ttl"] = "1h"
    return {"cachePoint": point}


def lower_request(request: LLMRequest) -> dict[str, Any]:
    """The keyword arguments of `bedrock_runtime.converse(**kwargs)` for `request`.

    Keys: modelId, messages, system, inferenceConfig, toolConfig, then
    `request.provider_options["bedrock"]` merged last. A cache mark becomes a `cachePoint`
    block right after the marked block, in its own list (tools, system or message content).

    Not lowered, with the reason:
    * `prompt_cache_key` and `headers`: Converse has no such fields (caching is per account).
    * `tool_choice` none: Converse's ToolChoice has only auto / any / tool. Removing the tools
      would change the cached prefix and, with tool history, be rejected ("The toolConfig
      field must be defined when using toolUse and toolResult content blocks"), so the tools
      stay and `toolChoice` is omitted (auto): the model MAY still call a tool.
    * `disable_parallel_tool_use`: Converse has no field for it.
    * reasoning without a signature (Claude rejects unsigned thinking) and cache marks on
      reasoning (thinking blocks cannot carry a breakpoint).
    * `max_output_tokens == 0` (pre-warming): `maxTokens` has a minimum of 1 in the service
      model and Converse has no pre-warm, so 1 is sent (one output token may be billed).
    * a 1h mark on a catalogued model without the 1h TTL (`one_hour_ttl`: AWS lists it for
      Opus 4.5, Sonnet 4.5 and Haiku 4.5 only, and Bedrock rejects `ttl: "1h"` elsewhere) is
      sent as the default 5m `cachePoint`.
    """
    kwargs: dict[str, Any] = {
        "modelId": request.model,
        "messages": [_lower_message(message) for message in request.messages],
    }
    system: list[dict[str, Any]] = []
    for part in request.system:
        system.append({"text": part.text})
        if part.cache is not None:
            system.append(cache_point(part.cache))
    if system:
        kwargs["system"] = system
    kwargs["inferenceConfig"] = {"maxTokens": max(request.max_output_tokens, 1)}
    if request.tools:
        tools: list[dict[str, Any]] = []
        for tool in request.tools:
            spec = {
                "name": tool.name,
                "description": tool.description,
                "inputSchema": {"json": tool.input_schema},
            }
            tools.append({"toolSpec": spec})
            if tool.cache is not None:
                tools.append(cache_point(tool.cache))
        config: dict[str, Any] = {"tools": tools}
        choice = _lower_tool_choice(request.tool_choice)
        if choice is not None:
            config["toolChoice"] = choice
        kwargs["toolConfig"] = config
    if not _one_hour_allowed(request.model):
        for block in [*system, *kwargs.get("toolConfig", {}).get("tools", [])] + [
            b for m in kwargs["messages"] for b in m["content"]
        ]:
            if "cachePoint" in block:
                block["cachePoint"].pop("ttl", None)
    kwargs.update(request.provider_options.get("bedrock", {}))
    return kwargs


def _one_hour_allowed(model: str) -> bool:
    """False for a catalogued Bedrock model without the 1h TTL; True otherwise."""

    try:
        return get_model(model).one_hour_ttl
    except UnknownModel:
        return True


def _lower_message(message: LLMMessage) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    for part in message.content:
        block = _lower_content(part)
        if block is None:
            continue
        content.append(block)
        if part.cache is not None and not isinstance(part, ReasoningContent):
            content.append(cache_point(part.cache))
    return {"role": message.role, "content": content}


def _lower_content(
    part: TextContent | ReasoningContent | ToolCallContent | ToolResultContent,
) -> dict[str, Any] | None:
    if isinstance(part, TextContent):
        return {"text": part.text}
    if isinstance(part, ReasoningContent):
        if part.signature is None:
            return None
        return {
            "reasoningContent": {"reasoningText": {"text": part.text, "signature": part.signature}}
        }
    if isinstance(part, ToolCallContent):
        return {"toolUse": {"toolUseId": part.id, "name": part.name, "input": part.input}}
    result: dict[str, Any] = {"toolUseId": part.tool_call_id, "content": [{"text": part.text}]}
    if part.is_error:
        result["status"] = "error"
    return {"toolResult": result}


def _lower_tool_choice(choice: ToolChoice | None) -> dict[str, Any] | None:
    if choice is None or choice.type in ("auto", "none"):
        # auto is the default; none has no Converse spelling (see lower_request).
        return None
    if choice.type == "any":
        return {"any": {}}
    if choice.name is None:
        raise ValueError("tool_choice of type 'tool' needs the tool's name")
    return {"tool": {"name": choice.name}}


_KINDS: Mapping[str, BlockKind] = MappingProxyType(
    {
        "text": "text",
        "toolUse": "tool_call",
        "toolResult": "tool_result",
        "reasoningContent": "reasoning",
    }
)


def wire_view(body: Mapping[str, Any]) -> WireView:
    """A Converse body (the wire JSON, or `lower_request`'s kwargs) as the parity diff reads
    it. A `cachePoint` block is the mark of the block before it; `toolConfig` is two
    settings (its tools and its choice) and `inferenceConfig.maxTokens` is the output limit."""
    settings = split_setting(body, "inferenceConfig", "maxTokens")
    settings.pop("messages", None)
    tool_config = settings.pop("toolConfig", None)
    if isinstance(tool_config, Mapping):
        for key, value in tool_config.items():
            settings[f"toolConfig.{key}"] = value
    blocks: list[WireBlock] = []
    for m, message in enumerate(body.get("messages", [])):
        for b, block in enumerate(message.get("content", [])):
            path = f"messages[{m}].content[{b}]"
            if "cachePoint" in block and blocks and blocks[-1].path.startswith(f"messages[{m}]"):
                last = blocks.pop()
                blocks.append(WireBlock(last.role, last.path, last.kind, last.content, block, path))
                continue
            kind: BlockKind = next((_KINDS[key] for key in block if key in _KINDS), "other")
            blocks.append(WireBlock(message["role"], path, kind, block, None, path))
    return WireView(
        settings=settings,
        blocks=tuple(blocks),
        output_limit="inferenceConfig.maxTokens",
        tools=sum("toolSpec" in t for t in (tool_config or {}).get("tools", [])),
        tool_choice=choice_or_default(
            next(iter((tool_config or {}).get("toolChoice", {})), None),
            sum("toolSpec" in t for t in (tool_config or {}).get("tools", [])),
        ),
        sections={
            "modelId": "model",
            "system": "system prompt",
            "toolConfig.tools": "tool definitions",
            "toolConfig.toolChoice": "tool choice",
            "inferenceConfig": "inference settings",
            "additionalModelRequestFields": "thinking or effort settings",
        },
    )
