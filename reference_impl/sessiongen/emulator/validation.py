"""Request validation of the Messages endpoints: the 400/404 answers the real API gives,
checked before the cache is touched."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..cache import CacheControlError, ModelInfo, PreparedRequest, flatten_request
from ..cache.prefix import is_server_tool_result
from ..catalog import UnknownModel, get_model, unknown_model_hint
from ..providers.anthropic.counting import (
    compaction_trigger,
    forced_server_tool,
    model_positions,
    server_tool_refusal,
)
from .boundary import BLOCK_TYPES as BLOCK_TYPES
from .boundary import MESSAGES, first_error
from .errors import APIError, invalid_request

PREFILL_MESSAGE = (
    "This model does not support assistant message prefill. "
    "The conversation must end with a user message."
)
# The API's answer to a thinking type the model does not accept, verbatim (AD:api/errors).
THINKING_NOT_SUPPORTED = {
    "enabled": '"thinking.type.enabled" is not supported for this model. Use '
    '"thinking.type.adaptive" and "output_config.effort" to control thinking behavior.',
    "adaptive": "adaptive thinking is not supported on this model",
    "disabled": '"thinking.type.disabled" is not supported for this model. Thinking defaults '
    'to adaptive mode when not specified; use "thinking.type.enabled" with "budget_tokens" '
    "for extended thinking.",
}
_ROLE_ERROR = "Input should be 'user' or 'assistant'"


def _check_shape(body: Any, *, count: bool) -> None:
    """The body against its pydantic model (`boundary.MessagesBody`; count_tokens has no
    `max_tokens`): the first violation is the 400, worded as the API (itself pydantic)
    words it, `<loc>: <msg>`."""
    violation = first_error(MESSAGES, body, skip="max_tokens" if count else None)
    if violation is not None:
        raise invalid_request(violation.pydantic_text())


def _blocks(content: str | list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """A (checked) message content as its blocks: a string is one text block."""
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def _model(body: Mapping[str, Any]) -> ModelInfo:
    """The catalogued model; 404 for an unknown one and for a retired one: "Requests to
    retired models will fail" (AD:about-claude/model-deprecations), and public issues quote
    the API's answer to them, `404 not_found_error` "model: <id>", as for an unknown id."""
    try:
        info = get_model(str(body["model"]))
    except UnknownModel:
        info = None
    if info is None or info.retired is not None:
        name = str(body["model"])
        hint = unknown_model_hint(name, "anthropic") if info is None else ""
        raise APIError(404, f"model: {name}{hint}", "not_found_error")
    return info


def check_system_messages(messages: Sequence[Mapping[str, Any]], info: ModelInfo) -> None:
    """Mid-conversation `{"role": "system"}` messages (AD:build-with-claude/mid-conversation-
    system-messages): only on models with `mid_conversation_system`; "A `system` message
    cannot be the first entry in `messages`"; it "must immediately follow a `user` turn
    (including a `user` turn that carries `tool_result` blocks) or an `assistant` turn ending
    in a server tool result, and must precede an `assistant` turn or end the array ... Placing
    it elsewhere returns a 400 error"; "Consecutive system messages are accepted and treated as
    a single system section, which follows the same placement rule as a whole". Content is
    "a plain string or content blocks", here text blocks only (the beta `tool_addition` /
    `tool_removal` blocks are not modelled). Every message text is UNCONFIRMED; a model
    without the feature answers as for any unknown role ("Claude Opus 4.7 rejects `role:
    "system"` in `messages` with a 400 error", AD:about-claude/models/migration-guide)."""
    i = 0
    while i < len(messages):
        if messages[i]["role"] != "system":
            i += 1
            continue
        if not info.mid_conversation_system:
            raise invalid_request(f"messages.{i}.role: {_ROLE_ERROR}")
        end = i
        while end < len(messages) and messages[end]["role"] == "system":
            for j, block in enumerate(_blocks(messages[end]["content"])):
                if block.get("type") != "text":
                    raise invalid_request(
                        f"messages.{end}.content.{j}.type: a system message may only contain "
                        "text blocks"
                    )
            end += 1
        if i == 0:
            raise invalid_request("messages.0: a system message cannot be the first message")
        previous = messages[i - 1]
        previous_blocks = _blocks(previous["content"])
        after_server_tool = (
            previous["role"] == "assistant"
            and bool(previous_blocks)
            and is_server_tool_result(str(previous_blocks[-1].get("type")))
        )
        if previous["role"] != "user" and not after_server_tool:
            raise invalid_request(
                f"messages.{i}: a system message must immediately follow a user turn or an "
                "assistant turn ending in a server tool result"
            )
        if end < len(messages) and messages[end]["role"] != "assistant":
            raise invalid_request(
                f"messages.{end - 1}: a system message must be followed by an assistant turn "
                "or be the last message"
            )
        i = end


def _tool_use_ids(message: Mapping[str, Any] | None) -> list[str]:
    if message is None or message.get("role") != "assistant":
        return []
    return [str(b.get("id")) for b in _blocks(message["content"]) if b.get("type") == "tool_use"]


def check_tool_pairing(messages: Sequence[Mapping[str, Any]]) -> None:
    """Every assistant tool_use needs a tool_result in the next (user) message, and every
    tool_result needs a tool_use in the previous message (AD:…/troubleshooting-tool-use;
    messages verbatim from API answers quoted in public issues)."""
    for i, message in enumerate(messages):
        if message["role"] == "user":
            previous = messages[i - 1] if i > 0 else None
            known = set(_tool_use_ids(previous))
            for j, block in enumerate(_blocks(message["content"])):
                if block.get("type") == "tool_result" and block.get("tool_use_id") not in known:
                    raise invalid_request(
                        f"messages.{i}.content.{j}: unexpected `tool_use_id` found in "
                        f"`tool_result` blocks: {block.get('tool_use_id')}. Each `tool_result` "
                        "block must have a corresponding `tool_use` block in the previous "
                        "message."
                    )
            continue
        ids = _tool_use_ids(message)
        if not ids:
            continue
        following = messages[i + 1] if i + 1 < len(messages) else None
        answered: set[str] = set()
        if following is not None and following["role"] == "user":
            answered = {
                str(b.get("tool_use_id"))
                for b in _blocks(following["content"])
                if b.get("type") == "tool_result"
            }
        missing = [x for x in ids if x not in answered]
        if missing:
            raise invalid_request(
                f"messages.{i}: `tool_use` ids were found without `tool_result` blocks "
                f"immediately after: {', '.join(missing)}. Each `tool_use` block must have a "
                "corresponding `tool_result` block in the next message."
            )


def for_model(
    prepared: PreparedRequest,
    body: Mapping[str, Any],
    *,
    tool_prompt: bool = True,
    framing: bool = True,
) -> PreparedRequest:
    """`prepared` with each position counted as its model counts it (`model_positions`: the
    tokenizer family's multiplier; with `tool_prompt`, the tool-use system prompt), prefix
    sums redone."""
    raw = [b.tokens for b in prepared.blocks]
    counts = model_positions(raw, body, tool_prompt=tool_prompt, framing=framing)
    blocks = []
    total = 0
    for block, tokens in zip(prepared.blocks, counts, strict=True):
        total += tokens
        blocks.append(replace(block, tokens=tokens, prefix_tokens=total))
    return replace(prepared, blocks=tuple(blocks))


def _prepare(
    body: Mapping[str, Any], info: ModelInfo, tool_prompt: bool, framing: bool = True
) -> PreparedRequest:
    try:
        prepared = for_model(flatten_request(body), body, tool_prompt=tool_prompt, framing=framing)
    except CacheControlError as exc:
        raise invalid_request(str(exc)) from None
    if prepared.total_tokens > info.context_window:
        raise invalid_request(
            f"prompt is too long: {prepared.total_tokens} tokens > {info.context_window} maximum"
        )
    forced = forced_server_tool(body)
    if forced is not None:
        raise invalid_request(server_tool_refusal(forced))
    trigger = compaction_trigger(body)
    if trigger is not None and prepared.total_tokens >= trigger:
        # The API would summarise the conversation in an extra sampling step and bill that;
        # the emulator does not: a typed refusal instead of a silently different bill.
        raise invalid_request(
            f"compaction is not modelled by the emulator: this request's {prepared.total_tokens} "
            f"input tokens reach its compaction trigger ({trigger}), where the API would "
            "summarise the conversation; a compaction block already in `messages` is modelled "
            "(the blocks before it are dropped)"
        )
    return prepared


def validate_messages(
    body: Any, *, tool_prompt: bool = True, framing: bool = True
) -> tuple[ModelInfo, PreparedRequest]:
    """Check a `/v1/messages` body; returns the model facts and the flattened request, or
    raises `APIError` (400 invalid_request_error, 404 not_found_error for an unknown model)."""
    _check_shape(body, count=False)
    info = _model(body)
    max_tokens: int = body["max_tokens"]
    if max_tokens > info.max_output_tokens:
        raise invalid_request(
            f"max_tokens: {max_tokens} > {info.max_output_tokens}, which is the maximum allowed "
            f"number of output tokens for {info.id}"
        )
    choice_type = (body.get("tool_choice") or {}).get("type")
    thinking_type = (body.get("thinking") or {}).get("type")
    if thinking_type is not None and thinking_type not in info.thinking_types:
        raise invalid_request(THINKING_NOT_SUPPORTED[thinking_type])
    if max_tokens == 0:
        # AD:…/prompt-caching#pre-warming-the-cache, "Limitations" (messages UNCONFIRMED).
        if body.get("stream") is True:
            raise invalid_request("max_tokens: 0 cannot be combined with `stream: true`")
        if thinking_type == "enabled":
            raise invalid_request("max_tokens: 0 cannot be combined with extended thinking")
        if choice_type in ("any", "tool"):
            raise invalid_request(
                f"max_tokens: 0 cannot be combined with tool_choice type '{choice_type}'"
            )
        if (body.get("output_config") or {}).get("format") is not None:
            raise invalid_request("max_tokens: 0 cannot be combined with `output_config.format`")
    if thinking_type == "enabled":
        if choice_type in ("any", "tool"):
            raise invalid_request("Thinking may not be enabled when tool_choice forces tool use.")
        if max_tokens and body["thinking"]["budget_tokens"] >= max_tokens:
            raise invalid_request("`max_tokens` must be greater than `thinking.budget_tokens`.")
    if choice_type in ("any", "tool") and not body.get("tools"):
        raise invalid_request(
            f"tool_choice.{choice_type} may only be specified while providing tools"
        )
    messages: list[Mapping[str, Any]] = body["messages"]
    if not messages:
        raise invalid_request("messages: at least one message is required")
    if messages[-1]["role"] == "assistant" and not info.prefill_allowed:
        raise invalid_request(PREFILL_MESSAGE)
    check_system_messages(messages, info)
    check_tool_pairing(messages)
    return info, _prepare(body, info, tool_prompt, framing)


def validate_count_tokens(
    body: Any, *, tool_prompt: bool = True, framing: bool = True
) -> tuple[ModelInfo, PreparedRequest]:
    """Check a `/v1/messages/count_tokens` body (no max_tokens, no pairing of a trailing
    assistant turn beyond the message rules)."""
    _check_shape(body, count=True)
    info = _model(body)
    check_system_messages(body["messages"], info)
    check_tool_pairing(body["messages"])
    return info, _prepare(body, info, tool_prompt, framing)
