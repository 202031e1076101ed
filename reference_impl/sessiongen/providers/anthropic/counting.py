"""The Anthropic Messages wire's token count, position by position: the counter the engine,
the emulator's `count_tokens` and `usage`, and the cache model's prefix sums share.

Each block costs its base count (`tokens.count_content_tokens`) plus the template
framing and, per model, the tokenizer family's multiplier and the tool-use system prompt
(`catalog/tokens.json`, section `anthropic`). Thinking the model strips and blocks before a
compaction block cost nothing."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...catalog import UnknownModel, get_model
from ...tokens import (
    THINKING_KINDS,
    content_blocks,
    count_content_tokens,
    count_json_tokens,
    count_tool_definition_tokens,
    per_chars,
    scale_of,
    scale_tokens,
    token_section,
)

# --- Anthropic Messages: positions and framing ----------------------------------------------


def stripped_thinking(body: Mapping[str, Any]) -> frozenset[tuple[int, int]]:
    """The (message index, block index) of the thinking blocks the model drops from context.

    On a "keep the last turn only" model (`strips_prior_thinking`), "once you send a user
    message that isn't a tool result, all previous thinking blocks are stripped from
    context" (AD:build-with-claude/thinking#thinking-and-prompt-caching): every thinking or
    redacted_thinking block before the last user message with any block that is not a
    `tool_result` (a user message mixing tool results and text counts as such, since the
    cache "remains valid when only tool results are provided as user messages"). The
    thinking of the current tool-use loop, after that message, stays. Whether the request's
    own thinking config matters is UNCONFIRMED; this model strips regardless of it."""

    try:
        strips = get_model(str(body.get("model", ""))).strips_prior_thinking
    except UnknownModel:
        return frozenset()
    if not strips:
        return frozenset()
    messages = list(body.get("messages") or [])
    turn_start = next(
        (
            i
            for i in range(len(messages) - 1, -1, -1)
            if messages[i].get("role") == "user"
            and any(
                b.get("type") != "tool_result" for b in content_blocks(messages[i].get("content"))
            )
        ),
        None,
    )
    if turn_start is None:
        return frozenset()
    return frozenset(
        (i, j)
        for i, message in enumerate(messages[:turn_start])
        if message.get("role") == "assistant"
        for j, block in enumerate(content_blocks(message.get("content")))
        if block.get("type") in THINKING_KINDS
    )


def dropped_blocks(body: Mapping[str, Any]) -> frozenset[tuple[int, int]]:
    """The (message, block) indexes the model does not see: prior-turn thinking on a model
    that strips it (`stripped_thinking`), and every message block before the
    last `compaction` block ("the API automatically drops all message blocks prior to the
    compaction block", AD:build-with-claude/compaction)."""
    dropped = set(stripped_thinking(body))
    last: tuple[int, int] | None = None
    messages = list(body.get("messages") or [])
    for i, message in enumerate(messages):
        for j, block in enumerate(content_blocks(message.get("content"))):
            if block.get("type") == "compaction":
                last = (i, j)
    if last is not None:
        for i, message in enumerate(messages[: last[0] + 1]):
            for j, _ in enumerate(content_blocks(message.get("content"))):
                if (i, j) < last:
                    dropped.add((i, j))
    return frozenset(dropped)


def body_layout(body: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any], bool]]:
    """The positions of a Messages wire body in prefix order, as `(section, block, opens)`:
    each tool definition, system block and message content block the model sees (a dropped
    block stays a position only when it carries a breakpoint, as `cache.prefix` keeps it);
    `opens` marks the first position of its section or message."""
    layout: list[tuple[str, Mapping[str, Any], bool]] = []
    for i, tool in enumerate(body.get("tools") or []):
        layout.append(("tools", tool, i == 0))
    for i, block in enumerate(content_blocks(body.get("system"))):
        layout.append(("system", block, i == 0))
    dropped = dropped_blocks(body)
    for i, message in enumerate(body.get("messages") or []):
        opened = False
        for j, block in enumerate(content_blocks(message.get("content"))):
            if (i, j) in dropped and block.get("cache_control") is None:
                continue
            layout.append(("messages", block, not opened))
            opened = True
    return layout


def body_positions(body: Mapping[str, Any]) -> list[int]:
    """The base count of each position of a Messages wire body, in prefix order (one
    per tool definition, system block and message content block, `body_layout`): the
    positions the cache model flattens, in the order their tokens are counted."""
    return _layout_counts(body_layout(body))


def _layout_counts(layout: list[tuple[str, Mapping[str, Any], bool]]) -> list[int]:
    return [
        count_tool_definition_tokens(block) if section == "tools" else count_content_tokens(block)
        for section, block, _ in layout
    ]


_UNSCALED_KINDS = frozenset({"image", "document"})  # media: their formula, not the tokenizer's


def _framing(section: str, block: Mapping[str, Any], opens: bool) -> int:
    """The template tokens the API puts around one position (calibrated, `catalog/tokens.json`
    `anthropic`): per tool definition, per system prompt, per message, per tool call and
    tool result, whose ids are prompt text too."""
    facts = token_section("anthropic")
    if section == "tools":
        return int(facts["tool"])
    extra = int(facts[section if section == "system" else "message"]) if opens else 0
    kind = block.get("type")
    rate = float(facts["id_chars_per_token"])
    if kind in ("tool_use", "server_tool_use"):
        extra += int(facts["tool_use"]) + per_chars(len(str(block.get("id") or "")), rate)
    elif kind == "tool_result" or str(kind).endswith("_tool_result"):
        extra += int(facts["tool_result"]) + per_chars(
            len(str(block.get("tool_use_id") or "")), rate
        )
    return extra


def _defined_tool_tokens(tool: Mapping[str, Any]) -> int | None:
    """The documented fixed cost of an Anthropic-defined tool's definition (`bash_*`: 245,
    `text_editor_*`: 700, `computer_*`: 735, AD:agents-and-tools/tool-use), None for others."""
    kind = str(tool.get("type") or "")
    for prefix, tokens in token_section("anthropic")["defined_tools"].items():
        if kind.startswith(prefix):
            return int(tokens)
    return None


# --- per-model adjustments (the model catalog's tokenizer family and tool-use prompt) -----


def model_positions(
    counts: list[int], body: Mapping[str, Any], *, tool_prompt: bool = True, framing: bool = True
) -> list[int]:
    """`counts` (one per position of `body`, `body_layout`) as the model named by
    `body["model"]` bills them: each text count scaled by its tokenizer family's multiplier
    (media keep their formula's count), plus the template's framing (`_framing`); with
    `tool_prompt` (the API's behaviour, so the default), the first position also carries the
    tool-use system prompt the API adds when `tools` are present (AD:about-claude/pricing,
    "Tool use system prompt token count"; its place in the prefix is UNCONFIRMED: at the
    start, it counts toward every prefix, so toward the minimum cacheable length). Without
    `framing` the template's tokens and the calibrated scale are left out (the bare base
    count, for experiments and tests that need it). An unknown model is counted
    unscaled and without a tool prompt."""
    return _model_positions(counts, body_layout(body), body, tool_prompt, framing)


def _model_positions(
    counts: list[int],
    layout: list[tuple[str, Mapping[str, Any], bool]],
    body: Mapping[str, Any],
    tool_prompt: bool,
    framing: bool,
) -> list[int]:
    """`model_positions` with the body's layout (`body_layout`) already made."""

    if len(layout) != len(counts):  # not this body's positions: scale only
        layout = [("messages", {}, False)] * len(counts)
    try:
        info = get_model(str(body.get("model", "")))
    except UnknownModel:
        info = None
    multiplier = _multiplier(body, framing)
    deferred = {
        str(t.get("name")): t
        for t in body.get("tools") or []
        if isinstance(t, Mapping) and t.get("defer_loading")
    }
    adjusted = []
    for n, (section, block, opens) in zip(counts, layout, strict=True):
        kind = block.get("type")
        if section == "tools" and block.get("defer_loading"):
            # A deferred tool is not in the prompt until a tool search loads it: "tools
            # marked defer_loading are not loaded into context initially"
            # (AD:agents-and-tools/tool-use/tool-search-tool); its `tool_reference` then is.
            adjusted.append(0)
            continue
        defined = _defined_tool_tokens(block) if section == "tools" and framing else None
        if defined is not None:
            adjusted.append(defined)
            continue
        scaled = n if kind in _UNSCALED_KINDS else scale_tokens(n, multiplier)
        extra = _framing(section, block, opens) if block and framing else 0
        if kind == "tool_result" and deferred:
            for sub in content_blocks(block.get("content")):
                tool = (
                    deferred.get(str(sub.get("tool_name")))
                    if sub.get("type") == "tool_reference"
                    else None
                )
                if tool is not None:
                    extra += scale_tokens(count_tool_definition_tokens(tool), multiplier)
                    extra += _framing("tools", tool, False) if framing else 0
        adjusted.append(scaled + extra)
    if info is not None and tool_prompt and body.get("tools") and adjusted:
        choice = body.get("tool_choice")
        choice_type = choice.get("type") if isinstance(choice, Mapping) else None
        adjusted[0] += info.tool_prompt_tokens(choice_type)
    if framing and adjusted:
        adjusted[0] += request_tokens(body, multiplier)
    return adjusted


def request_tokens(body: Mapping[str, Any], multiplier: float = 1.0) -> int:
    """What a request costs once, whatever its blocks: the template's own tokens around the
    whole request (CALIBRATED: `request`) and the hidden prompts (`hidden_prompt_tokens`).
    Billed on the first position."""
    return int(token_section("anthropic")["request"]) + hidden_prompt_tokens(body, multiplier)


def structured_output_schema(body: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The JSON schema a request asks its answer to follow: `output_config.format` (or the
    beta's top-level `output_format`) of type `json_schema`; None without one."""
    config = body.get("output_config")
    fmt = config.get("format") if isinstance(config, Mapping) else None
    fmt = fmt if isinstance(fmt, Mapping) else body.get("output_format")
    if not isinstance(fmt, Mapping) or fmt.get("type") != "json_schema":
        return None
    schema = fmt.get("schema")
    return schema if isinstance(schema, Mapping) else {}


def thinking_on(body: Mapping[str, Any]) -> bool:
    """Whether the request runs with thinking: its `thinking.type`, else its model's default
    (an unknown model: off)."""
    thinking = body.get("thinking")
    kind = thinking.get("type") if isinstance(thinking, Mapping) else None
    if kind is None:
        try:
            kind = get_model(str(body.get("model", ""))).thinking_default
        except UnknownModel:
            return False
    return kind in ("enabled", "adaptive")


def hidden_prompt_tokens(body: Mapping[str, Any], multiplier: float = 1.0) -> int:
    """The prompt the API adds and bills for what a request asks, beyond its blocks: the
    instructions and schema of structured output (`structured_output` plus the schema's
    JSON), thinking's own instructions (`thinking`) and the citing instructions of cited
    documents (`citations`, in the model's tokens). All CALIBRATED on recorded usage
    (`catalog/tokens.json` `anthropic`); no document gives them. Billed as input on the
    request's first position, as the tool-use system prompt is."""
    facts = token_section("anthropic")
    tokens = 0
    schema = structured_output_schema(body)
    if schema is not None:
        tokens += int(facts["structured_output"]) + scale_tokens(
            count_json_tokens(schema), multiplier
        )
    if thinking_on(body):
        tokens += int(facts["thinking"])
    if cites_documents(body):
        tokens += scale_tokens(int(facts["citations"]), multiplier)
    return tokens


def cites_documents(body: Mapping[str, Any]) -> bool:
    """Whether any document or search result of the request (also inside a tool result) has
    citations enabled: the API then adds its citing instructions once, whatever their
    number."""

    def cites(blocks: Any) -> bool:
        for block in blocks if isinstance(blocks, list) else ():
            if not isinstance(block, Mapping):
                continue
            cited = block.get("citations")
            if block.get("type") in ("document", "search_result") and isinstance(cited, Mapping):
                if cited.get("enabled") is True:
                    return True
            if block.get("type") == "tool_result" and cites(block.get("content")):
                return True
        return False

    return any(
        isinstance(message, Mapping) and cites(message.get("content"))
        for message in body.get("messages") or ()
    )


def count_model_body_tokens(
    body: Mapping[str, Any],
    *,
    tool_prompt: bool = True,
    framing: bool = True,
    once: bool = True,
) -> int:
    """Input tokens of a Messages wire body for its model (`model_positions`): what the
    emulator's `count_tokens` answers and its `usage` adds up to (with the same
    `tool_prompt` and `framing` settings). Without `once`, the tokens a request costs once
    (`request_tokens`) are left out: the share of a part of a request (one message)."""
    layout = body_layout(body)  # made once, for the counts and the model's share
    positions = _model_positions(_layout_counts(layout), layout, body, tool_prompt, framing)
    total = sum(positions)
    if framing and positions and not once:
        total -= request_tokens(body, _multiplier(body, framing))
    elif framing and not positions and once:  # a body of nothing still costs its template
        total += request_tokens(body, _multiplier(body, framing))
    return total


def _multiplier(body: Mapping[str, Any], framing: bool) -> float:
    """The family's multiplier (documented ratios between Claude tokenizers) times the
    calibrated scale from the o200k base to Claude's own count (1 in the bare count)."""
    try:
        return scale_of(get_model(str(body.get("model", ""))), framing)
    except UnknownModel:
        return float(token_section("anthropic", framing)["text_scale"])


# Server tools: run on the provider's side, their results billed as input of the same request.
_SERVER_TOOL_PREFIXES = ("web_search", "web_fetch", "code_execution", "tool_search_tool")
_HOSTED_TOOL_TYPES = frozenset(
    {"web_search", "web_search_preview", "file_search", "code_interpreter", "image_generation"}
)


def forced_server_tool(body: Mapping[str, Any]) -> str | None:
    """The server tool a request forces (Anthropic `tool_choice: {"type": "tool"}` naming a
    server tool, OpenAI Responses `tool_choice` of a hosted tool type, or `required` with
    hosted tools only), or None. The API would run it and bill what it fetched as input of
    the same request, which the emulator does not model."""
    choice = body.get("tool_choice")
    tools = [t for t in body.get("tools") or [] if isinstance(t, Mapping)]
    if isinstance(choice, Mapping) and choice.get("type") == "tool":
        for tool in tools:
            kind = str(tool.get("type") or "")
            if tool.get("name") == choice.get("name") and kind.startswith(_SERVER_TOOL_PREFIXES):
                return kind
    if isinstance(choice, Mapping) and str(choice.get("type")) in _HOSTED_TOOL_TYPES:
        return str(choice["type"])
    hosted = [str(t.get("type")) for t in tools if str(t.get("type")) in _HOSTED_TOOL_TYPES]
    if choice == "required" and hosted and len(hosted) == len(tools):
        return hosted[0]
    return None


def server_tool_refusal(kind: str) -> str:
    """The message of the 400 for a forced server tool (one wording for every wire)."""
    return (
        f"server tool {kind!r} is not modelled by the emulator: this request forces it, and "
        "the API would run it and bill what it fetched as input of this request"
    )


COMPACTION_TRIGGER_DEFAULT = 150_000  # AD:build-with-claude/compaction, the default trigger


def compaction_trigger(body: Mapping[str, Any]) -> int | None:
    """The input-token threshold of a compaction edit in `context_management.edits` (its
    `trigger.value`, 150,000 by default), or None without one."""
    management = body.get("context_management")
    edits = management.get("edits") if isinstance(management, Mapping) else None
    for edit in edits or []:
        if isinstance(edit, Mapping) and str(edit.get("type", "")).startswith("compact"):
            trigger = edit.get("trigger")
            value = trigger.get("value") if isinstance(trigger, Mapping) else None
            return int(value) if isinstance(value, int) else COMPACTION_TRIGGER_DEFAULT
    return None
