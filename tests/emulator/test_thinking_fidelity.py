"""Conformance: prior-turn thinking, the thinking default, mid-conversation system messages and
the automatic breakpoint after server tools, through the official SDK. Each test quotes the
documentation sentence it checks (mirror llms-txt-archive/anthropic-platform @ 7967a16b) or
says UNCONFIRMED and what the emulator chose."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import anthropic
import pytest
from anthropic.types import ToolResultBlockParam
from sessiongen.cache import get_model, list_models
from sessiongen.providers.anthropic.counting import count_model_body_tokens
from sessiongen.tokens import scale_tokens

from .conftest import Emu, filler, text_block, usage_tuple, user

ANTHROPIC = [m for m in list_models() if m.provider == "anthropic"]
STRIPS = "claude-haiku-4-5"  # keeps the last turn only; minimum 4,096
KEEPS = "claude-sonnet-4-6"  # keeps all prior turns; minimum 1,024
THINKING = {"type": "enabled", "budget_tokens": 1024}
THOUGHT_1, THOUGHT_2 = 800, 600  # tokens of the two thinking blocks
HISTORY = 4200


async def count(emu: Emu, **params: Any) -> int:
    """The emulator's `count_tokens` answer for a request."""
    params.pop("max_tokens", None)
    result = await emu.client.messages.count_tokens(**params)
    return result.input_tokens


def total(usage: Any) -> int:
    return int(
        usage.cache_read_input_tokens + usage.cache_creation_input_tokens + usage.input_tokens
    )


# --- prior-turn thinking ----------------------------------------------------------------------


def thinking(tokens: int, tag: str) -> dict[str, Any]:
    return {"type": "thinking", "thinking": filler(tokens, tag), "signature": f"sig-{tag}"}


def weather_turns(*, with_thinking: bool) -> dict[str, list[Mapping[str, Any]]]:
    """The docs' example (AD:build-with-claude/thinking#thinking-and-prompt-caching): request 2
    (a tool result) and request 3 (a new user text), optionally without the thinking blocks."""
    first = [thinking(THOUGHT_1, "thought-1")] if with_thinking else []
    second = [thinking(THOUGHT_2, "thought-2")] if with_thinking else []
    m0 = user(text_block(HISTORY, "weather in Paris?", "5m"))
    m1 = {
        "role": "assistant",
        "content": [*first, {"type": "tool_use", "id": "toolu_01", "name": "weather", "input": {}}],
    }
    result: ToolResultBlockParam = {
        "type": "tool_result",
        "tool_use_id": "toolu_01",
        "content": filler(50, "18C"),
        "cache_control": {"type": "ephemeral"},
    }
    m2 = user(result)
    m3 = {"role": "assistant", "content": [*second, text_block(20, "It is 18C.")]}
    m4 = user(text_block(10, "thanks", "5m"))
    return {"request_2": [m0, m1, m2], "request_3": [m0, m1, m2, m3, m4]}


async def test_prior_thinking_is_stripped_on_last_turn_only_models(emu: Emu) -> None:
    """ "On last-turn-only models, once you send a user message that isn't a tool result, all
    previous thinking blocks are stripped from context"; the request "is processed as if the
    thinking blocks were never there" (AD:build-with-claude/thinking#thinking-and-prompt-
    caching); "any messages that follow those thinking blocks are removed from the cache (✘)"
    (AD:build-with-claude/prompt-caching#what-invalidates-the-cache); on those models older
    thinking does not "consume window space or input tokens"."""
    turns = weather_turns(with_thinking=True)
    plain = weather_turns(with_thinking=False)
    params = {"model": STRIPS, "max_tokens": 2048, "thinking": THINKING}

    # Request 2 continues the tool-use loop: its thinking is the current turn's, so it stays.
    two = await emu.create(**params, messages=turns["request_2"])
    assert total(two.usage) == await count(emu, **params, messages=plain["request_2"]) + THOUGHT_1

    # Request 3 adds user text: both thinking blocks leave the context, so request 2's entry
    # at the tool result (it held thought 1) misses and only the history before it is read.
    three = await emu.create(**params, messages=turns["request_3"])
    assert three.usage.cache_read_input_tokens == HISTORY
    expected = await count(emu, **params, messages=plain["request_3"])
    assert total(three.usage) == expected
    assert await count(emu, **params, messages=turns["request_3"]) == expected
    body = {**params, "messages": turns["request_3"]}
    # the engine's counter agrees (on the bare count this suite runs the emulator with)
    assert count_model_body_tokens(body, tool_prompt=False, framing=False) == expected

    # The same request written without thinking is the same prefix: it reads all of it.
    again = await emu.create(**params, messages=plain["request_3"])
    assert again.usage.cache_read_input_tokens == expected
    assert again.usage.input_tokens == 0


async def test_prior_thinking_is_kept_on_keep_all_models(emu: Emu) -> None:
    """ "On keep-all models, the same request keeps `thinking_block_1` and `thinking_block_2`
    in context and in the cache" (AD:build-with-claude/thinking#thinking-and-prompt-caching);
    "On Opus 4.5+ and Sonnet 4.6+, thinking blocks are preserved by default, so the cache
    remains valid (✓)" (AD:build-with-claude/prompt-caching#what-invalidates-the-cache)."""
    turns = weather_turns(with_thinking=True)
    plain = weather_turns(with_thinking=False)
    params = {"model": KEEPS, "max_tokens": 2048, "thinking": THINKING}
    two = await emu.create(**params, messages=turns["request_2"])
    three = await emu.create(**params, messages=turns["request_3"])
    assert three.usage.cache_read_input_tokens == total(two.usage)
    kept = await count(emu, **params, messages=plain["request_3"]) + THOUGHT_1 + THOUGHT_2
    assert total(three.usage) == kept == await count(emu, **params, messages=turns["request_3"])
    assert (
        count_model_body_tokens(
            {**params, "messages": turns["request_3"]}, tool_prompt=False, framing=False
        )
        == kept
    )


def test_thinking_preservation_follows_the_docs() -> None:
    """ "Keep all prior turns: Claude Opus 4.5 and later Opus models, Claude Sonnet 4.6 and
    later Sonnet models, Claude Fable 5, Claude Mythos 5, and Claude Mythos Preview. Keep the
    last turn only: earlier Opus and Sonnet models, and all Haiku models through Claude Haiku
    4.5" (AD:build-with-claude/thinking#thinking-block-preservation-by-model)."""
    strips = {m.id for m in ANTHROPIC if m.strips_prior_thinking}
    assert strips == {
        "claude-sonnet-4-5",
        "claude-haiku-4-5",
        "claude-opus-4-1",
        "claude-opus-4-0",
        "claude-sonnet-4-0",
        "claude-3-5-haiku-latest",
        "claude-3-opus-20240229",
        "claude-3-sonnet-20240229",
        "claude-3-haiku-20240307",
    }


# --- the thinking default ---------------------------------------------------------------------


def two_levels(model: str) -> dict[str, Any]:
    """A system entry and a messages entry of 1,100 byte-counted tokens each."""
    return {
        "model": model,
        "system": [text_block(1100, "system", "5m")],
        "messages": [user(text_block(1100, "history", "5m"), text_block(10, "question"))],
    }


@pytest.mark.parametrize(
    ("thinking_config", "survives"),
    [
        pytest.param({"type": "adaptive"}, 2, id="default-spelled-out"),
        pytest.param({"type": "disabled"}, 1, id="turned-off"),
    ],
)
async def test_thinking_set_to_the_model_default_changes_nothing(
    emu: Emu, thinking_config: dict[str, str], survives: int
) -> None:
    """ "setting a parameter explicitly to its default value is equivalent to omitting it"
    (AD:build-with-claude/thinking#thinking-and-prompt-caching). On Claude Opus 5 thinking is
    "On" by default (AD:build-with-claude/thinking-troubleshooting), so `adaptive` spelled out
    reads both entries, while `disabled` is a change: "changing it always invalidates message
    blocks" (this emulator keeps tools and system)."""
    model = "claude-opus-5"
    first = await emu.create(**two_levels(model))
    entry = scale_tokens(1100, get_model(model).token_multiplier)
    assert first.usage.cache_creation_input_tokens == 2 * entry
    second = await emu.create(**two_levels(model), thinking=thinking_config)
    assert second.usage.cache_read_input_tokens == survives * entry


def test_thinking_defaults_follow_the_docs() -> None:
    """ "Models marked `Always on` cannot turn thinking off. Models marked `On` default to
    thinking but accept `thinking: {type: "disabled"}`": Fable 5, Mythos 5 and Mythos Preview
    always on, Opus 5 and Sonnet 5 on, every other model in the table off
    (AD:build-with-claude/thinking-troubleshooting); a default is one of the accepted types."""
    on = {m.id for m in ANTHROPIC if m.thinking_default == "adaptive"}
    assert on == {
        "claude-fable-5",
        "claude-mythos-5",
        "claude-mythos-preview",
        "claude-opus-5",
        "claude-sonnet-5",
        # "Adaptive (always on)" or "Adaptive" on each model's overview page (not in the table).
        *("claude-opus-5-5", "claude-sonnet-5-5", "claude-haiku-5-5"),
        *("claude-fable-5-1", "claude-mythos-5-1", "claude-fable-5-2", "claude-mythos-5-2"),
    }
    for m in ANTHROPIC:
        assert m.thinking_default in m.thinking_types, m.id


# --- mid-conversation system messages ---------------------------------------------------------

SYSTEM_MODEL = "claude-opus-4-8"
NOTE = {"role": "system", "content": "From now on, every suggestion must include type hints."}


async def test_mid_conversation_system_message_keeps_the_cache(emu: Emu) -> None:
    """ "You append a `{"role": "system"}` message at the point in the conversation where the
    new instruction becomes relevant, instead of editing the top-level `system` field. The
    cached prefix stays the same, so the next request still reads it from cache"
    (AD:build-with-claude/mid-conversation-system-messages); the note is new input."""
    params = two_levels(SYSTEM_MODEL)
    first = await emu.create(**params)
    written = first.usage.cache_creation_input_tokens
    appended = {**params, "messages": [*params["messages"], NOTE]}
    second = await emu.create(**appended)
    assert second.usage.cache_read_input_tokens == written
    assert total(second.usage) == await count(emu, **appended) > total(first.usage)


async def test_editing_the_top_level_system_field_instead_misses(emu: Emu) -> None:
    """ "editing the top-level `system` field changes the very beginning of the prompt and
    invalidates the cache for everything that follows" (same page): the contrast."""
    params = two_levels(SYSTEM_MODEL)
    await emu.create(**params)
    block = params["system"][0]
    edited = {**params, "system": [{**block, "text": f"{block['text']} {NOTE['content']}"}]}
    assert (await emu.create(**edited)).usage.cache_read_input_tokens == 0


async def test_mid_conversation_system_message_is_itself_cacheable(emu: Emu) -> None:
    """ "A mid-conversation system message is itself cacheable. Once it is in the conversation,
    it becomes part of the stable history. On the next turn you can move your cache breakpoint
    past it" (same page)."""
    params = two_levels(SYSTEM_MODEL)
    note = {"role": "system", "content": [text_block(200, "note", "5m")]}
    first = await emu.create(**{**params, "messages": [*params["messages"], note]})
    later = [
        *params["messages"],
        note,
        {"role": "assistant", "content": "ok"},
        user(text_block(5, "next")),
    ]
    second = await emu.create(**{**params, "messages": later})
    assert second.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens


@pytest.mark.parametrize("model", ["claude-sonnet-5", "claude-opus-4-7", "claude-sonnet-4-6"])
async def test_models_without_system_messages_reject_them(emu: Emu, model: str) -> None:
    """ "This feature is available on Claude Fable 5, Claude Mythos 5, Claude Opus 4.8, and
    Claude Opus 5 ... This feature is not available on Claude Sonnet 5" (same page); "Claude
    Opus 4.7 rejects `role: "system"` in `messages` with a 400 error" (AD:about-claude/models/
    migration-guide). The message is the one for any other role (UNCONFIRMED)."""
    with pytest.raises(anthropic.BadRequestError) as info:
        await emu.create(model=model, messages=[user(text_block(5, "q")), NOTE])
    message = "messages.1.role: Input should be 'user' or 'assistant'"
    assert info.value.body["error"]["message"] == message  # type: ignore[index]


def test_system_message_models_follow_the_docs() -> None:
    """The same Note: Fable 5, Mythos 5, Opus 4.8 and Opus 5, not Sonnet 5."""
    assert {m.id for m in ANTHROPIC if m.mid_conversation_system} == {
        "claude-fable-5",
        "claude-mythos-5",
        "claude-opus-4-8",
        "claude-opus-5",
        # Not on the page: their predecessors' value, UNCONFIRMED in the catalog.
        *("claude-opus-5-5", "claude-fable-5-1", "claude-mythos-5-1"),
        *("claude-fable-5-2", "claude-mythos-5-2"),
    }


TOOL_USE = {
    "role": "assistant",
    "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}],
}
TOOL_RESULT = user({"type": "tool_result", "tool_use_id": "t1", "content": "done"})
SEARCH = {
    "role": "assistant",
    "content": [
        {
            "type": "server_tool_use",
            "id": "srvtoolu_1",
            "name": "web_search",
            "input": {"query": "x"},
        },
        {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
    ],
}


@pytest.mark.parametrize(
    "messages",
    [
        pytest.param([user(text_block(5, "q")), NOTE], id="after-user-last"),
        pytest.param([user(text_block(5, "q")), NOTE, NOTE], id="consecutive"),
        pytest.param([user(text_block(5, "q")), TOOL_USE, TOOL_RESULT, NOTE], id="after-results"),
        pytest.param([user(text_block(5, "q")), SEARCH, NOTE], id="after-server-tool-result"),
        pytest.param(
            [
                user(text_block(5, "q")),
                NOTE,
                {"role": "assistant", "content": "ok"},
                user(text_block(5, "n")),
            ],
            id="before-assistant",
        ),
    ],
)
async def test_system_message_placements_accepted(emu: Emu, messages: list[Any]) -> None:
    """ "A `system` message must immediately follow a `user` turn (including a `user` turn that
    carries `tool_result` blocks) or an `assistant` turn ending in a server tool result, and
    must precede an `assistant` turn or end the array"; "Consecutive system messages are
    accepted and treated as a single system section" (same page, Limitations)."""
    message = await emu.create(model=SYSTEM_MODEL, messages=messages)
    assert message.stop_reason == "end_turn"


@pytest.mark.parametrize(
    ("messages", "error"),
    [
        pytest.param(
            [NOTE, user(text_block(5, "q"))],
            "messages.0: a system message cannot be the first message",
            id="first",
        ),
        pytest.param(
            [user(text_block(5, "q")), TOOL_USE, NOTE, TOOL_RESULT],
            "messages.2: a system message must immediately follow a user turn or an assistant "
            "turn ending in a server tool result",
            id="between-tool-use-and-result",
        ),
        pytest.param(
            [user(text_block(5, "q")), NOTE, NOTE, user(text_block(5, "n"))],
            "messages.2: a system message must be followed by an assistant turn or be the last "
            "message",
            id="before-user",
        ),
        pytest.param(
            [user(text_block(5, "q")), {"role": "system", "content": [TOOL_USE["content"][0]]}],
            "messages.1.content.0.type: a system message may only contain text blocks",
            id="not-text",
        ),
    ],
)
async def test_system_message_placements_rejected(
    emu: Emu, messages: list[Any], error: str
) -> None:
    """ "A `system` message cannot be the first entry in `messages`"; "It cannot sit between a
    `tool_use` block and its `tool_result`. Placing it elsewhere returns a 400 error" (same
    page, Limitations). The messages are UNCONFIRMED, and so is rejecting non-text blocks (the
    beta `tool_addition` / `tool_removal` blocks are not modelled)."""
    with pytest.raises(anthropic.BadRequestError) as info:
        await emu.create(model=SYSTEM_MODEL, messages=messages)
    assert info.value.body["error"]["message"] == error  # type: ignore[index]


# --- the automatic breakpoint after server tools ----------------------------------------------

WEB_SEARCH = {"type": "web_search_20250305", "name": "web_search"}
ANSWER, THANKS = 20, 10
TTL = Literal["5m", "1h"]


def searched(system_ttl: TTL | None, thanks_ttl: TTL | None = None) -> dict[str, Any]:
    """A conversation with one web search in its history; markers as given."""
    result = {
        "type": "web_search_tool_result",
        "tool_use_id": "srvtoolu_01",
        "content": [
            {
                "type": "web_search_result",
                "url": "https://example.com/paris",
                "title": "Paris weather",
                "encrypted_content": filler(1200, "page"),
            }
        ],
    }
    search = {
        "type": "server_tool_use",
        "id": "srvtoolu_01",
        "name": "web_search",
        "input": {"query": "weather in Paris"},
    }
    return {
        "model": KEEPS,
        "tools": [WEB_SEARCH],
        "system": [text_block(1100, "system", system_ttl)],
        "messages": [
            user(text_block(10, "weather?")),
            {"role": "assistant", "content": [search, result, text_block(ANSWER, "18C")]},
            user(text_block(THANKS, "thanks", thanks_ttl)),
        ],
    }


async def test_server_tool_result_gets_a_5m_breakpoint(emu: Emu) -> None:
    """ "the API automatically places a cache breakpoint on the server tool result"; "This
    automatic breakpoint always uses the default 5-minute TTL, independent of any TTL you set
    on your own `cache_control` markers ... you may see 5-minute cache writes even when every
    `cache_control` you set uses a 1-hour TTL" (AD:agents-and-tools/tool-use/tool-use-with-
    prompt-caching). The entry is read back by the next identical request."""
    params = searched("1h")
    first = await emu.create(**params)
    read, one_hour, five_minutes, uncached = usage_tuple(first.usage)
    assert (read, uncached) == (0, ANSWER + THANKS)  # only what follows the search result
    assert one_hour > 1100  # tools and system, the user's own 1h breakpoint
    assert five_minutes > 1200  # the question and the search result, up to the API's one
    assert total(first.usage) == await count(emu, **params)
    second = await emu.create(**params)
    assert second.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens


async def test_no_server_tool_breakpoint_without_prompt_caching(emu: Emu) -> None:
    """ "This behavior only applies when your request already has at least one `cache_control`
    marker. Requests without prompt caching do not receive the automatic breakpoint" (same
    page)."""
    params = searched(None)
    first = await emu.create(**params)
    second = await emu.create(**params)
    for message in (first, second):
        assert message.usage.cache_creation_input_tokens == 0
        assert message.usage.cache_read_input_tokens == 0


async def test_server_tool_breakpoint_is_skipped_before_a_1h_breakpoint(emu: Emu) -> None:
    """UNCONFIRMED: whether the API's own breakpoint takes one of the 4 slots and obeys "1h
    before 5m". The emulator never refuses a request for it: it skips it where it would break
    those rules, here before the user's 1h breakpoint on the last message."""
    params = searched(None, "1h")
    first = await emu.create(**params)
    read, one_hour, five_minutes, uncached = usage_tuple(first.usage)
    assert (read, one_hour, five_minutes, uncached) == (0, total(first.usage), 0, 0)


async def test_top_level_cache_control_is_prompt_caching_too(emu: Emu) -> None:
    """ "at least one `cache_control` marker" counts the top-level one of automatic caching
    (UNCONFIRMED; the docs say "Prompt caching is opt-in: if a request has no `cache_control`
    field (automatic or an explicit breakpoint), nothing is cached"). Automatic caching alone
    writes only at the last block, so the next request, whose last message differs, reads
    the search result's entry only because the API's breakpoint wrote one."""
    params = {**searched(None), "cache_control": {"type": "ephemeral"}}
    first = await emu.create(**params)
    assert usage_tuple(first.usage) == (0, 0, total(first.usage), 0)
    params["messages"] = [*params["messages"][:-1], user(text_block(THANKS, "merci"))]
    second = await emu.create(**params)
    assert second.usage.cache_read_input_tokens == total(first.usage) - ANSWER - THANKS
