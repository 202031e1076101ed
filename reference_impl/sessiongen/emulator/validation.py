"""Request validation of the Messages endpoints: the 400/404 answers the real API gives,
checked before the cache is touched."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..cache import CacheControlError, ModelInfo, PreparedRequest, flatten_request
from ..cache.catalog import UnknownModel, get_model
from ..cache.prefix import is_server_tool_result
from ..tokens import (
    compaction_trigger,
    forced_server_tool,
    model_positions,
    server_tool_refusal,
)
from .errors import APIError, invalid_request

PREFILL_MESSAGE = (
    "This model does not support assistant message prefill. "
    "The conversation must end with a user message."
)
_TOOL_CHOICE_TYPES = ("auto", "any", "tool", "none")
_ROLES = ("user", "assistant", "system")  # "system" only on some models, see below
_ROLE_ERROR = "Input should be 'user' or 'assistant'"
_THINKING_TYPES = ("enabled", "disabled", "adaptive")
# The content block types of the Messages API (the `ContentBlockParam` union), in the sorted
# order the API lists them in its answer to an unknown one: "Input tag '<type>' found using
# 'type' does not match any of the expected tags: 'bash_code_execution_tool_result', ..."
# (wording and first tag as quoted in public reports; the rest of the list UNCONFIRMED).
BLOCK_TYPES = (
    "bash_code_execution_tool_result",
    "code_execution_tool_result",
    "container_upload",
    "document",
    "image",
    "redacted_thinking",
    "search_result",
    "server_tool_use",
    "text",
    "text_editor_code_execution_tool_result",
    "thinking",
    "tool_result",
    "tool_search_tool_result",
    "tool_use",
    "web_fetch_tool_result",
    "web_search_tool_result",
)
# Beta block types, accepted without their beta header (not modelled), and not listed.
_BETA_BLOCK_TYPES = frozenset(
    {
        "advisor_tool_result",
        "compaction",
        "fallback",
        "mcp_tool_listing",
        "mcp_tool_result",
        "mcp_tool_use",
        "tool_addition",
        "tool_removal",
    }
)
_EXPECTED_TAGS = ", ".join(f"'{t}'" for t in BLOCK_TYPES)
MIN_THINKING_BUDGET = 1024
# The API's answer to a thinking type the model does not accept, verbatim (AD:api/errors).
THINKING_NOT_SUPPORTED = {
    "enabled": '"thinking.type.enabled" is not supported for this model. Use '
    '"thinking.type.adaptive" and "output_config.effort" to control thinking behavior.',
    "adaptive": "adaptive thinking is not supported on this model",
    "disabled": '"thinking.type.disabled" is not supported for this model. Thinking defaults '
    'to adaptive mode when not specified; use "thinking.type.enabled" with "budget_tokens" '
    "for extended thinking.",
}


def _require(body: Mapping[str, Any], field: str) -> Any:
    if field not in body:
        raise invalid_request(f"{field}: Field required")
    return body[field]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _blocks(content: Any, path: str) -> list[Mapping[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise invalid_request(f"{path}: Input should be a valid list")
    for j, block in enumerate(content):
        if not isinstance(block, Mapping) or not isinstance(block.get("type"), str):
            raise invalid_request(f"{path}.{j}.type: Field required")
    return list(content)


def _is_block_type(kind: str) -> bool:
    """A block type the API knows: a listed or beta one, or any server tool's result
    (`is_server_tool_result`, which the cache model accepts for every `*_tool_result`)."""
    return kind in BLOCK_TYPES or kind in _BETA_BLOCK_TYPES or is_server_tool_result(kind)


def _text_field(block: Mapping[str, Any], path: str) -> None:
    """A text block's `text` must be a string: "<path>: Field required" when it is absent,
    "<path>: Input should be a valid string" otherwise (null included); both quoted from API
    answers in public reports for `messages.N.content.M.text.text`, the second for
    `system.N.text` (its "Field required" UNCONFIRMED)."""
    if "text" not in block:
        raise invalid_request(f"{path}: Field required")
    if not isinstance(block["text"], str):
        raise invalid_request(f"{path}: Input should be a valid string")


def _check_message_blocks(content: Any, path: str) -> None:
    """Each block of a message's content: a known type (the API's discriminated union, so a
    field's path carries the tag, `<path>.<j>.text.text`), and a text block's `text`."""
    for j, block in enumerate(_blocks(content, path)):
        kind: str = block["type"]
        if not _is_block_type(kind):
            raise invalid_request(
                f"{path}.{j}: Input tag '{kind}' found using 'type' does not match any of the "
                f"expected tags: {_EXPECTED_TAGS}"
            )
        if kind == "text":
            _text_field(block, f"{path}.{j}.text.text")


def _check_shape(body: Mapping[str, Any], *, needs_max_tokens: bool) -> None:
    model = _require(body, "model")
    if not isinstance(model, str):
        raise invalid_request("model: Input should be a valid string")
    if needs_max_tokens:
        max_tokens = _require(body, "max_tokens")
        if not _is_int(max_tokens):
            raise invalid_request("max_tokens: Input should be a valid integer")
        if max_tokens < 0:
            raise invalid_request("max_tokens: Input should be greater than or equal to 0")
    messages = _require(body, "messages")
    if not isinstance(messages, list):
        raise invalid_request("messages: Input should be a valid list")
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise invalid_request(f"messages.{i}: Input should be a valid dictionary")
        if message.get("role") not in _ROLES:
            raise invalid_request(f"messages.{i}.role: {_ROLE_ERROR}")
        if "content" not in message:
            raise invalid_request(f"messages.{i}.content: Field required")
        _check_message_blocks(message["content"], f"messages.{i}.content")
    if "stream" in body and not isinstance(body["stream"], bool):
        raise invalid_request("stream: Input should be a valid boolean")
    system = body.get("system")
    if system is not None and not isinstance(system, str):
        for j, block in enumerate(_blocks(system, "system")):
            if block.get("type") != "text":
                raise invalid_request(f"system.{j}.type: Input should be 'text'")
            _text_field(block, f"system.{j}.text")
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list):
            raise invalid_request("tools: Input should be a valid list")
        for k, tool in enumerate(tools):
            if not isinstance(tool, Mapping) or not isinstance(tool.get("name"), str):
                raise invalid_request(f"tools.{k}.name: Field required")
            if tool.get("type") in (None, "custom") and not isinstance(
                tool.get("input_schema"), Mapping
            ):
                raise invalid_request(f"tools.{k}.custom.input_schema: Field required")
    choice = body.get("tool_choice")
    if choice is not None:
        if not isinstance(choice, Mapping) or choice.get("type") not in _TOOL_CHOICE_TYPES:
            raise invalid_request(
                "tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none'"
            )
        if choice["type"] == "tool" and not isinstance(choice.get("name"), str):
            raise invalid_request("tool_choice.tool.name: Field required")
    thinking = body.get("thinking")
    if thinking is not None:
        if not isinstance(thinking, Mapping) or thinking.get("type") not in _THINKING_TYPES:
            raise invalid_request(
                "thinking.type: Input should be 'enabled', 'disabled' or 'adaptive'"
            )
        if thinking["type"] == "enabled":
            budget = thinking.get("budget_tokens")
            if not isinstance(budget, int) or isinstance(budget, bool):
                raise invalid_request("thinking.enabled.budget_tokens: Field required")
            if budget < MIN_THINKING_BUDGET:
                raise invalid_request(
                    "thinking.enabled.budget_tokens: Input should be greater than or equal "
                    f"to {MIN_THINKING_BUDGET}"
                )


def _model(body: Mapping[str, Any]) -> ModelInfo:
    """The catalogued model; 404 for an unknown one and for a retired one: "Requests to
    retired models will fail" (AD:about-claude/model-deprecations), and public issues quote
    the API's answer to them, `404 not_found_error` "model: <id>", as for an unknown id."""
    try:
        info = get_model(str(body["model"]))
    except UnknownModel:
        info = None
    if info is None or info.retired is not None:
        raise APIError(404, f"model: {body['model']}", "not_found_error")
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
            for j, block in enumerate(_blocks(messages[end]["content"], "content")):
                if block.get("type") != "text":
                    raise invalid_request(
                        f"messages.{end}.content.{j}.type: a system message may only contain "
                        "text blocks"
                    )
            end += 1
        if i == 0:
            raise invalid_request("messages.0: a system message cannot be the first message")
        previous = messages[i - 1]
        previous_blocks = _blocks(previous["content"], "content")
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
    return [
        str(b.get("id"))
        for b in _blocks(message["content"], "content")
        if b.get("type") == "tool_use"
    ]


def check_tool_pairing(messages: Sequence[Mapping[str, Any]]) -> None:
    """Every assistant tool_use needs a tool_result in the next (user) message, and every
    tool_result needs a tool_use in the previous message (AD:…/troubleshooting-tool-use;
    messages verbatim from API answers quoted in public issues)."""
    for i, message in enumerate(messages):
        if message["role"] == "user":
            previous = messages[i - 1] if i > 0 else None
            known = set(_tool_use_ids(previous))
            for j, block in enumerate(_blocks(message["content"], "content")):
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
                for b in _blocks(following["content"], "content")
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
    if not isinstance(body, Mapping):
        raise invalid_request("Input should be a valid dictionary")
    _check_shape(body, needs_max_tokens=True)
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
    if not isinstance(body, Mapping):
        raise invalid_request("Input should be a valid dictionary")
    _check_shape(body, needs_max_tokens=False)
    info = _model(body)
    check_system_messages(body["messages"], info)
    check_tool_pairing(body["messages"])
    return info, _prepare(body, info, tool_prompt, framing)
