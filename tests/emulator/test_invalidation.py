"""Conformance: the "What invalidates the cache" table, row by row, through the official SDK.

Every test writes three 1,100-token entries (tools, system, messages breakpoints, at 1,100,
2,200 and 3,300 tokens), changes one thing, and reads how much of the prefix survived:
3,300 = nothing invalidated, 2,200 = messages, 1,100 = system and messages, 0 = everything.
Quotes are the table's "Impact" column (AD:build-with-claude/prompt-caching).
"""

from __future__ import annotations

from typing import Any

from sessiongen.tokens import count_tool_tokens

from .conftest import MODEL, Emu, filler, text_block, user

SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}}
NAME = "lookup"
EVERYTHING, SYSTEM_AND_MESSAGES, MESSAGES, NOTHING = 0, 1100, 2200, 3300


def tool(description_tag: str = "tool", schema: dict[str, Any] | None = None) -> dict[str, Any]:
    schema = schema or SCHEMA
    overhead = count_tool_tokens(NAME, "", schema)
    description = filler(1100 - overhead, description_tag)
    assert count_tool_tokens(NAME, description, schema) == 1100
    return {
        "name": NAME,
        "description": description,
        "input_schema": schema,
        "cache_control": {"type": "ephemeral"},
    }


def base() -> dict[str, Any]:
    return {
        "model": MODEL,
        "max_tokens": 32,
        "tools": [tool()],
        "system": [text_block(1100, "system", "5m")],
        "messages": [user(text_block(1100, "history", "5m"), text_block(10, "question"))],
    }


async def read_after(emu: Emu, changed: dict[str, Any]) -> int:
    """Write the baseline's three entries, send `changed`, return its cache read."""
    first = await emu.create(**base())
    assert first.usage.cache_creation_input_tokens == 3300
    message = await emu.create(**changed)
    read = message.usage.cache_read_input_tokens
    assert read is not None
    return read


def with_last_user_block(params: dict[str, Any], block: dict[str, Any]) -> dict[str, Any]:
    """`params` with `block` appended to the last user message (after its breakpoint)."""
    last = params["messages"][-1]
    params["messages"] = [*params["messages"][:-1], {**last, "content": [*last["content"], block]}]
    return params


async def test_unchanged_request_reads_everything(emu: Emu) -> None:
    """Baseline: "Cache hits require 100% identical prompt segments"; an identical request
    reads all three entries."""
    assert await read_after(emu, base()) == NOTHING


async def test_tool_definition_change_invalidates_everything(emu: Emu) -> None:
    """Tool definitions ✘✘✘: "Modifying tool definitions (names, descriptions, parameters)
    invalidates the entire cache"."""
    changed = {**base(), "tools": [tool("Tool")]}
    assert await read_after(emu, changed) == EVERYTHING


async def test_tool_parameter_change_invalidates_everything(emu: Emu) -> None:
    """Tool definitions ✘✘✘, parameters: a changed input_schema misses every entry."""
    schema = {"type": "object", "properties": {"q": {"type": "integer"}}}
    changed = {**base(), "tools": [tool(schema=schema)]}
    assert await read_after(emu, changed) == EVERYTHING


async def test_web_search_toggle_invalidates_system_and_messages(emu: Emu) -> None:
    """Web search toggle ✓✘✘: "Enabling/disabling web search modifies the system prompt"
    (the server tool is appended after the cached tools breakpoint)."""
    params = base()
    params["tools"] = [*params["tools"], {"type": "web_search_20250305", "name": "web_search"}]
    assert await read_after(emu, params) == SYSTEM_AND_MESSAGES


async def test_citations_toggle_invalidates_system_and_messages(emu: Emu) -> None:
    """Citations toggle ✓✘✘: "Enabling/disabling citations modifies the system prompt"."""
    document = {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": "A cited fact."},
        "citations": {"enabled": True},
    }
    assert await read_after(emu, with_last_user_block(base(), document)) == SYSTEM_AND_MESSAGES


async def test_speed_setting_invalidates_system_and_messages(emu: Emu) -> None:
    """Speed setting ✓✘✘: "Switching between speed: "fast" and standard speed invalidates
    system and message caches"."""
    assert await read_after(emu, {**base(), "speed": "fast"}) == SYSTEM_AND_MESSAGES


async def test_tool_choice_change_invalidates_messages_only(emu: Emu) -> None:
    """Tool choice ✓✓✘: "Changes to tool_choice parameter only affect message blocks"."""
    changed = {**base(), "tool_choice": {"type": "any"}}
    assert await read_after(emu, changed) == MESSAGES


async def test_disable_parallel_tool_use_invalidates_messages_only(emu: Emu) -> None:
    """disable_parallel_tool_use lives inside tool_choice (AD:…/parallel-tool-use), so it is
    the tool-choice row: only message blocks are invalidated."""
    changed = {**base(), "tool_choice": {"type": "auto", "disable_parallel_tool_use": True}}
    assert await read_after(emu, changed) == MESSAGES


async def test_spelling_out_the_default_tool_choice_changes_nothing(emu: Emu) -> None:
    """auto is "the default when tools are present" (AD:…/define-tools), so sending it
    explicitly renders the same prompt as omitting it."""
    assert await read_after(emu, {**base(), "tool_choice": {"type": "auto"}}) == NOTHING


async def test_images_invalidate_messages_only(emu: Emu) -> None:
    """Images ✓✓✘: "Adding/removing images anywhere in the prompt affects message blocks"."""
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
    }
    assert await read_after(emu, with_last_user_block(base(), image)) == MESSAGES


async def test_thinking_config_invalidates_messages(emu: Emu) -> None:
    """Thinking parameters (model-specific, model-specific, ✘): "changing it always
    invalidates message blocks"; this emulator models tools and system as kept."""
    changed = {
        **base(),
        "max_tokens": 2048,
        "thinking": {"type": "enabled", "budget_tokens": 1024},
    }
    assert await read_after(emu, changed) == MESSAGES


async def test_thinking_set_to_its_default_changes_nothing(emu: Emu) -> None:
    """ "setting a parameter explicitly to its default value is equivalent to omitting it"
    (AD:build-with-claude/thinking#thinking-and-prompt-caching): thinking is "Off" by default
    on Sonnet 4.6 (AD:build-with-claude/thinking-troubleshooting), so `disabled` is no change."""
    assert await read_after(emu, {**base(), "thinking": {"type": "disabled"}}) == NOTHING


async def test_adaptive_thinking_on_a_default_off_model_invalidates_messages(emu: Emu) -> None:
    """Thinking parameters, "Switching between `adaptive`, `enabled`, and `disabled`"
    invalidates message blocks: `adaptive` on Sonnet 4.6, whose default is off, is a change."""
    assert await read_after(emu, {**base(), "thinking": {"type": "adaptive"}}) == MESSAGES


async def test_effort_change_invalidates_messages(emu: Emu) -> None:
    """Effort setting (model-specific, model-specific, ✘): "Changing the output_config.effort
    value always invalidates message blocks"."""
    assert await read_after(emu, {**base(), "output_config": {"effort": "low"}}) == MESSAGES


async def test_effort_set_to_default_changes_nothing(emu: Emu) -> None:
    """ "Setting effort explicitly to the model's default is equivalent to omitting it and does
    not invalidate" (default taken as "high")."""
    assert await read_after(emu, {**base(), "output_config": {"effort": "high"}}) == NOTHING


async def test_model_change_invalidates_everything(emu: Emu) -> None:
    """Caches are per model: the same prompt on another model (same 1,024 minimum) reads
    nothing."""
    assert await read_after(emu, {**base(), "model": "claude-opus-4-8"}) == EVERYTHING


async def test_message_after_the_breakpoint_changes_nothing_cached(emu: Emu) -> None:
    """ "Changes at each level invalidate that level and all subsequent levels": a change
    after the last breakpoint leaves all three entries readable."""
    params = base()
    params["messages"] = [user(text_block(1100, "history", "5m"), text_block(10, "other"))]
    assert await read_after(emu, params) == NOTHING


async def test_thinking_budget_change_invalidates_messages(emu: Emu) -> None:
    """The table's thinking row, as `../shared/reference/providers.md` §A6 records it from
    AD:…/prompt-caching#what-invalidates-the-cache: "| Thinking config (mode, `budget_tokens`)
    | model-specific | model-specific | ✘ |". A budget is part of the thinking config, so two
    requests that both enable thinking but with different budgets share the tools and system
    entries and miss the messages entry; the same budget again reads all three."""
    thinking = {**base(), "max_tokens": 4096}
    first = await emu.create(**thinking, thinking={"type": "enabled", "budget_tokens": 1024})
    assert first.usage.cache_creation_input_tokens == 3300
    same = await emu.create(**thinking, thinking={"type": "enabled", "budget_tokens": 1024})
    assert same.usage.cache_read_input_tokens == NOTHING
    more = await emu.create(**thinking, thinking={"type": "enabled", "budget_tokens": 2048})
    assert more.usage.cache_read_input_tokens == MESSAGES
    assert more.usage.cache_creation_input_tokens == 1100  # the messages entry, written anew


def _attributed(line: str) -> dict[str, Any]:
    params = base()
    params["system"] = [{"type": "text", "text": line}, *params["system"]]
    return params


async def test_claude_codes_attribution_line_does_not_split_the_cache(emu: Emu) -> None:
    """Claude Code's first system block is an attribution line whose `cch` changes with every
    request and which names a subagent (`cc_is_subagent=true`); on Anthropic's own API it does
    not split the cache: "Anthropic's official server knows how to handle this header"
    (NanmiCoder/cc-haha#503), while prefix caches that hash it see "0% prompt-cache hit"
    (anthropics/claude-code#68900). Any other change to a system block still does."""
    head = "x-anthropic-billing-header: cc_version=2.1.328.842; cc_entrypoint=sdk-cli;"
    first = await emu.create(**_attributed(head + " cch=36ee5;"))
    assert first.usage.cache_creation_input_tokens is not None
    fork = await emu.create(**_attributed(head + " cch=0aaa9; cc_is_subagent=true;"))
    # Its whole prefix is read (counted at its own length: the line is still tokens) and
    # nothing is written again.
    assert fork.usage.cache_creation_input_tokens == 0
    assert fork.usage.cache_read_input_tokens is not None
    assert fork.usage.cache_read_input_tokens > NOTHING
    other = await emu.create(**_attributed("x-other-header: cch=36ee5;"))
    assert other.usage.cache_read_input_tokens == 1100
    # Only the line itself: a system block that merely mentions billing still splits.
    await emu.create(**_attributed("Our billing rules: invoices monthly."))
    changed = await emu.create(**_attributed("Our billing rules: invoices weekly."))
    assert changed.usage.cache_read_input_tokens == 1100
