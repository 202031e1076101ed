"""Model facts from the catalog (context window, output limit, retirement, tokenizer family,
tool-use system prompt) and the emulator settings the docs give no number for. Each test
quotes the documentation sentence it checks (mirror llms-txt-archive/anthropic-platform)."""

from __future__ import annotations

import anthropic
import pytest
from anthropic import Omit, omit
from anthropic.types import ToolChoiceParam, ToolParam
from sessiongen.cache import get_model, list_models
from sessiongen.emulator.state import LIFETIME_DEFAULTS
from sessiongen.llm.types import LLMMessage, LLMRequest, SystemPart, TextContent
from sessiongen.providers import count_request_tokens
from sessiongen.providers.anthropic.counting import request_tokens
from sessiongen.tokens import text_scale

from .conftest import MODEL, Emu, filler, text_block, usage_tuple, user

ONE_MILLION = {
    "claude-opus-5",
    "claude-opus-4-8",
    "claude-opus-4-7",
    "claude-opus-4-6",
    "claude-sonnet-5",
    "claude-sonnet-4-6",
    "claude-mythos-preview",
    "claude-fable-5",
    "claude-mythos-5",
    # Each model's overview page: "Context window 1M tokens", "Max output 128K tokens".
    *("claude-opus-5-5", "claude-sonnet-5-5", "claude-haiku-5-5"),
    *("claude-fable-5-1", "claude-mythos-5-1", "claude-fable-5-2", "claude-mythos-5-2"),
}
RETIRED = {
    "claude-opus-4-1": "2026-08-05",
    "claude-opus-4-0": "2026-06-15",
    "claude-sonnet-4-0": "2026-06-15",
    "claude-3-5-haiku-latest": "2026-02-19",
}
NEW_TOKENIZER = {
    "claude-opus-5",
    "claude-opus-4-8",
    "claude-opus-4-7",
    "claude-sonnet-5",
    "claude-mythos-preview",
    "claude-fable-5",
    "claude-mythos-5",
    # Later than 4.7; Haiku 5.5 "uses the same newer tokenizer as Claude 4.7 and later models".
    *("claude-opus-5-5", "claude-sonnet-5-5", "claude-haiku-5-5"),
    *("claude-fable-5-1", "claude-mythos-5-1", "claude-fable-5-2", "claude-mythos-5-2"),
}
ANTHROPIC = [m for m in list_models() if m.provider == "anthropic"]


def test_context_windows_follow_the_docs() -> None:
    """ "Claude Opus 5, Claude Opus 4.8, Claude Opus 4.7, Claude Opus 4.6, Claude Sonnet 5, and
    Claude Sonnet 4.6 have a 1M-token context window ... Claude Mythos Preview also has a
    1M-token context window"; "Claude Fable 5 and Claude Mythos 5 ... also have a 1M-token
    context window. A single request to any model with a 1M-token context window can
    generate up to 128k output tokens" ... "Other Claude models, including Claude Sonnet 4.5,
    have a 200k-token context window" (AD:build-with-claude/context-windows)."""
    for model in ANTHROPIC:
        if model.id in ONE_MILLION:
            assert (model.context_window, model.max_output_tokens) == (1_000_000, 128_000)
        else:
            assert model.context_window == 200_000, model.id
    assert get_model("claude-sonnet-4-6").max_output_tokens == 128_000


async def test_long_prompt_needs_no_beta_header(emu: Emu) -> None:
    """ "For every model with a 1M-token context window, 1M is the default: you don't need a
    beta header" (AD:build-with-claude/context-windows): a 250k-token prompt to Sonnet 4.6 is
    answered, and max_tokens up to 128k is accepted."""
    message = await emu.create(
        max_tokens=128_000, messages=[user(text_block(250_000, "long"))], timeout=60
    )
    assert message.usage.input_tokens == 250_000


async def test_prompt_over_one_million_is_too_long(emu: Emu) -> None:
    """ "prompt is too long" (AD:build-with-claude/context-windows) past the 1M window."""
    with pytest.raises(anthropic.BadRequestError) as info:
        await emu.create(messages=[user(text_block(1_000_001, "huge"))])
    assert info.value.body["error"]["message"] == (  # type: ignore[index]
        "prompt is too long: 1000001 tokens > 1000000 maximum"
    )


@pytest.mark.parametrize("model", [*RETIRED, "claude-opus-4-1-20250805"])
async def test_retired_model_is_not_found(emu: Emu, model: str) -> None:
    """ "Retired: The model is no longer available for use. Requests to retired models will
    fail." (AD:about-claude/model-deprecations); the API answers them 404 not_found_error
    "model: <id>" (quoted in public issues, e.g. anomalyco/models.dev#2727)."""
    assert get_model(model).retired == RETIRED[get_model(model).id]
    with pytest.raises(anthropic.NotFoundError) as info:
        await emu.create(model=model, messages=[user(text_block(5, "q"))])
    assert info.value.body["error"] == {  # type: ignore[index]
        "type": "not_found_error",
        "message": f"model: {model}",
    }


@pytest.mark.parametrize("path", ["/v1/messages", "/v1/messages/count_tokens"])
async def test_request_over_32_mb_is_413(emu: Emu, path: str) -> None:
    """ "Messages API | 32 MB", "Token Counting API | 32 MB"; "If you exceed these limits,
    you'll receive a 413 `request_too_large` error." (AD:api/errors)."""
    oversized = b'{"x": "' + b"y" * (32 * 1024 * 1024) + b'"}'
    response = await emu.admin.post(path, content=oversized)
    assert response.status_code == 413
    body = response.json()
    assert body["type"] == "error" and body["error"]["type"] == "request_too_large"
    assert body["request_id"] == response.headers["request-id"] == "req_000001"
    (logged,) = await emu.requests()
    assert (logged["status"], logged["body"]) == (413, None)


async def test_admin_errors_are_in_the_api_error_shape(emu: Emu) -> None:
    """ "The API always returns errors as JSON, with a top-level `error` object that always
    includes a `type` and `message` value" (AD:api/errors): the
    admin API answers a bad body 400 invalid_request_error in that shape, taking no request
    id (the next Messages request is still req_000001)."""
    response = await emu.admin.post("/_emulator/config", json={"ttft": -1})
    assert response.status_code == 400
    body = response.json()
    assert body["type"] == "error" and body["request_id"] is None
    assert body["error"]["type"] == "invalid_request_error"
    assert body["error"]["message"].startswith("ttft: ")
    message = await emu.create(messages=[user(text_block(5, "q"))])
    assert message._request_id == "req_000001"


async def test_ttft_setting_lets_concurrent_requests_miss(emu: Emu) -> None:
    """ "a cache entry only becomes available after the first response begins"
    (AD:build-with-claude/prompt-caching): with `ttft` set through `/_emulator/config`, two
    identical requests at the same virtual time both write; reset restores the default 0."""
    response = await emu.admin.post("/_emulator/config", json={"ttft": 1.5})
    assert response.json() == {
        "ttft": 1.5,
        "linger": 0.0,
        "tool_prompt": False,
        "framing": False,
        **LIFETIME_DEFAULTS,  # the implicit caches' lifetimes (OpenAI, Gemini)
    }
    system = [text_block(1100, "same-time", "5m")]
    first = await emu.create(system=system, messages=[user(text_block(5, "q"))])
    second = await emu.create(system=system, messages=[user(text_block(5, "q"))])
    assert usage_tuple(first.usage) == usage_tuple(second.usage) == (0, 0, 1100, 5)
    await emu.admin.post("/_emulator/reset")
    assert emu.state.config()["ttft"] == 0.0


async def test_linger_setting_extends_the_minimum_lifetime(emu: Emu) -> None:
    """The docs promise only a "minimum lifetime of 5 minutes" (AD:build-with-claude/
    prompt-caching): `linger` adds extra seconds; an entry written at 0 is then still read
    at 330 s (gone at 301 s without it), and reset restores linger 0."""
    response = await emu.admin.post("/_emulator/config", json={"linger": 60})
    assert response.json()["linger"] == 60.0
    system = [text_block(1100, "linger", "5m")]
    await emu.create(system=system, messages=[user(text_block(5, "q"))])
    await emu.set_time(330)
    later = await emu.create(system=system, messages=[user(text_block(5, "q"))])
    assert usage_tuple(later.usage) == (1100, 0, 0, 5)
    await emu.admin.post("/_emulator/reset")
    assert emu.state.config()["linger"] == 0.0


def test_tokenizer_families() -> None:
    """ "Claude 4.7 and later models and Claude Mythos Preview use a newer tokenizer ... This
    tokenizer produces approximately 30% more tokens for the same text."
    (AD:about-claude/pricing)."""
    for model in ANTHROPIC:
        expected = ("claude-4.7", 1.3) if model.id in NEW_TOKENIZER else ("claude", 1.0)
        assert (model.tokenizer, model.token_multiplier) == expected, model.id


async def test_new_tokenizer_counts_more_and_the_engine_agrees(emu: Emu) -> None:
    """The same text counts 30% more on Opus 4.7 than on Sonnet 4.6, in `count_tokens`, in
    `usage` and in the engine's own counter (one counter for both; the template's framing,
    2 for the system prompt and 3 for the message, is no text and is not scaled)."""
    await emu.billed()
    text = filler(1000, "tokenizer")
    counts = {}
    for model in (MODEL, "claude-opus-4-7"):
        counted = await emu.client.messages.count_tokens(
            model=model, system="Be brief.", messages=[user({"type": "text", "text": text})]
        )
        request = LLMRequest(
            model=model,
            system=(SystemPart(text="Be brief."),),
            messages=(LLMMessage(role="user", content=(TextContent(text=text),)),),
        )
        assert count_request_tokens(request) == counted.input_tokens, model
        counts[model] = counted.input_tokens
    texts = {}
    for model, count in counts.items():
        body = {"model": model, "messages": [{"role": "user", "content": text}]}
        texts[model] = count - 5 - request_tokens(body, text_scale(model))  # the text alone
    assert abs(texts["claude-opus-4-7"] / texts[MODEL] - 1.3) < 0.01
    message = await emu.create(
        model="claude-opus-4-7", messages=[user({"type": "text", "text": text})]
    )
    alone = await emu.client.messages.count_tokens(
        model="claude-opus-4-7", messages=[user({"type": "text", "text": text})]
    )
    assert message.usage.input_tokens == alone.input_tokens


TOOL: ToolParam = {"name": "t", "description": "", "input_schema": {"type": "object"}}
TOOL_CHOICES: dict[str, ToolChoiceParam] = {"none": {"type": "none"}, "any": {"type": "any"}}


@pytest.mark.parametrize(("choice", "overhead"), [(None, 497), ("none", 497), ("any", 589)])
async def test_tool_use_system_prompt_setting(emu: Emu, choice: str | None, overhead: int) -> None:
    """ "When you use `tools`, the API also automatically includes a special system prompt
    for the model that enables tool use" (AD:about-claude/pricing; Sonnet 4.6: 497 tokens
    for `auto`, `none`, 589 for `any`, `tool`). With `tool_prompt` on, it is input."""
    await emu.admin.post("/_emulator/config", json={"tool_prompt": True})
    tool_choice: ToolChoiceParam | Omit = omit if choice is None else TOOL_CHOICES[choice]
    counted = await emu.client.messages.count_tokens(
        model=MODEL, tools=[TOOL], messages=[user(text_block(10, "q"))], tool_choice=tool_choice
    )
    assert counted.input_tokens == overhead + 1 + 5 + 10
    plain = await emu.client.messages.count_tokens(
        model=MODEL, messages=[user(text_block(10, "q"))]
    )
    assert plain.input_tokens == 10  # no tools, no tool-use prompt


async def test_tool_use_system_prompt_counts_toward_the_minimum(emu: Emu) -> None:
    """With `tool_prompt` on, a 600-token prefix plus Sonnet 4.6's 497-token tool-use prompt
    reaches the 1,024-token minimum ("Shorter prompts cannot be cached, even if marked with
    cache_control"). Whether the API counts it there is UNCONFIRMED."""
    messages = [user(text_block(600, "min", "5m"))]
    below = await emu.create(tools=[TOOL], messages=messages)
    assert usage_tuple(below.usage) == (0, 0, 0, 606)
    await emu.admin.post("/_emulator/config", json={"tool_prompt": True})
    await emu.set_time(1000)
    reached = await emu.create(tools=[TOOL], messages=messages)
    assert usage_tuple(reached.usage) == (0, 0, 497 + 606, 0)


@pytest.mark.parametrize(
    ("model", "thinking", "message"),
    [
        pytest.param(
            "claude-opus-4-7",
            {"type": "enabled", "budget_tokens": 2048},
            '"thinking.type.enabled" is not supported for this model. Use '
            '"thinking.type.adaptive" and "output_config.effort" to control thinking behavior.',
            id="enabled-on-4.7",
        ),
        pytest.param(
            "claude-haiku-4-5",
            {"type": "adaptive"},
            "adaptive thinking is not supported on this model",
            id="adaptive-on-4.5",
        ),
        pytest.param(
            "claude-fable-5",
            {"type": "disabled"},
            '"thinking.type.disabled" is not supported for this model. Thinking defaults to '
            'adaptive mode when not specified; use "thinking.type.enabled" with '
            '"budget_tokens" for extended thinking.',
            id="disabled-on-fable",
        ),
    ],
)
async def test_thinking_types_a_model_rejects(
    emu: Emu, model: str, thinking: dict[str, object], message: str
) -> None:
    """ "Claude 4.7 and later models have removed extended thinking"; "Models that support only
    extended thinking (Claude 4.5 and earlier models) reject `thinking: {"type": "adaptive"}`";
    "On Claude Fable 5, Claude Mythos 5, and Claude Mythos Preview, thinking is always on.
    Sending `thinking: {"type": "disabled"}` to any of these models returns a 400
    `invalid_request_error`" (AD:api/errors, messages verbatim)."""
    with pytest.raises(anthropic.BadRequestError) as info:
        await emu.create(
            model=model,
            max_tokens=4096,
            thinking=thinking,
            messages=[user(text_block(5, "q"))],
        )
    assert info.value.body["error"]["message"] == message  # type: ignore[index]


def test_thinking_types_follow_the_docs() -> None:
    """ "On Claude Fable 5 and Claude Mythos 5, the error message's own suggestion of
    "thinking.type.enabled" is also rejected" (AD:api/errors); Opus 4.6 and Sonnet 4.6 keep
    extended thinking, "Yes (deprecated)" (AD:about-claude/models/overview)."""
    assert get_model("claude-fable-5").thinking_types == ("adaptive",)
    assert get_model("claude-mythos-preview").thinking_types == ("enabled", "adaptive")
    assert set(get_model("claude-sonnet-4-6").thinking_types) == {
        "enabled",
        "adaptive",
        "disabled",
    }
    assert get_model("claude-opus-5").thinking_types == ("adaptive", "disabled")


def test_a_million_tokens_cost_the_listed_price_exactly() -> None:
    """pricing.json states its unit ("USD/MTok", as the providers' price pages do: Anthropic
    lists e.g. "$3 / MTok" for input), so a million tokens of each kind cost the listed
    figure, to the cent and below."""
    from sessiongen.cache.pricing import cost_breakdown, price
    from sessiongen.catalog import UnknownModel

    usage = {
        "input_tokens": 1_000_000,
        "output_tokens": 1_000_000,
        "cache_read_input_tokens": 1_000_000,
        "cache_creation": {
            "ephemeral_5m_input_tokens": 1_000_000,
            "ephemeral_1h_input_tokens": 1_000_000,
        },
    }
    priced = 0
    for info in list_models():
        try:
            listed = price(info.id)
        except UnknownModel:  # a preview without a published price
            continue
        priced += 1
        billed = cost_breakdown(usage, info.id)
        assert (billed.input, billed.output, billed.cache_read) == (
            listed.input,
            listed.output,
            listed.cache_read,
        ), info.id
        assert (billed.cache_write_5m, billed.cache_write_1h) == (
            listed.cache_write_5m,
            listed.cache_write_1h,
        ), info.id
    assert priced > 20
