"""OpenAI GPT-5.6 and later: `prompt_cache_options`, explicit `prompt_cache_breakpoint`
markers, cache writes, the 30-minute lifetime, `prewarm` and `prompt_cache_diagnostics`, rule
by rule through the official `openai` SDK (3.57.0, which takes these parameters natively) on
the emulator's HTTP routes, read back from the SDK's parsed answer and the request log.

Each test quotes the text it checks. Sources:

* GUIDE: https://developers.openai.com/api/docs/guides/prompt-caching (mirror
  llms-txt-archive/openai-platform `api/docs/guides/prompt-caching.md` @25f7cbb);
* DIAG: https://developers.openai.com/api/docs/guides/prompt-caching/diagnostics (same
  mirror, `api/docs/guides/prompt-caching/diagnostics.md` @2dff954);
* SDK: openai-python 3.57.0 `types/responses/response_create_params.py` (`PromptCacheOptions`)
  and `types/completion_usage.py`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest
from openai import AsyncOpenAI, BadRequestError
from sessiongen.cache import cost_breakdown, get_model, price
from sessiongen.emulator import EmulatorState, create_app
from sessiongen.providers.openai.wire import usage_from_openai

BASE = "http://emulator/v1"
NEW = "gpt-5.6-sol"
STABLE = "Stable instructions and shared reference material. " * 300  # ~2,400 tokens
MARK = {"mode": "explicit"}


@pytest.fixture
async def emulator() -> AsyncIterator[tuple[EmulatorState, AsyncOpenAI]]:
    state = EmulatorState(framing=False)
    transport = httpx2.ASGITransport(app=create_app(state))
    http = httpx2.AsyncClient(transport=transport)
    client = AsyncOpenAI(api_key="test", base_url=BASE, http_client=http, max_retries=0)
    async with client:
        yield state, client


def developer(marked: bool) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "input_text", "text": STABLE}
    if marked:
        block["prompt_cache_breakpoint"] = MARK
    return {"role": "developer", "content": [block]}


def turn(question: str, *, marked: bool = True) -> list[dict[str, Any]]:
    return [developer(marked), {"role": "user", "content": question}]


async def respond(client: AsyncOpenAI, **body: Any) -> Any:
    return await client.responses.create(model=body.pop("model", NEW), **body)


def details(response: Any) -> tuple[int, int, int]:
    """(input tokens, cached, written) from the SDK's parsed usage."""
    usage = response.usage
    d = usage.input_tokens_details
    return usage.input_tokens, d.cached_tokens, d.cache_write_tokens


def test_the_catalog_carries_the_rules_of_gpt_5_6_and_later_only() -> None:
    """GUIDE, "Summary of model differences": "Explicit breakpoints | Supported" for "GPT-5.6
    and later", "Not supported" for GPT-5.5; "Supported retention values | "30m""; "Each
    request can create up to four cache writes"; "The first 2 and latest 50 explicit
    breakpoints, the implicit breakpoint, up to 20 earlier eligible message endings"."""
    rules = get_model(NEW).prompt_cache
    assert rules is not None
    assert rules.ttls == ("30m",) and rules.max_writes == 4
    assert (rules.first_explicit, rules.latest_explicit, rules.earlier_message_ends) == (2, 50, 20)
    assert rules.cached_tokens_increment == 1  # "Exact eligible boundary"
    assert get_model("gpt-5.5").prompt_cache is None and get_model("gpt-4o").prompt_cache is None


async def test_writes_are_reported_and_billed_at_one_and_a_quarter_input(
    emulator: tuple[EmulatorState, AsyncOpenAI],
) -> None:
    """GUIDE: "For GPT-5.6 and later, cache writes cost 1.25x the standard, uncached
    input-token rate. ... subsequent reads cost only 0.1x that rate." and "Track
    `usage.input_tokens_details.cached_tokens`, `usage.input_tokens_details.cache_write_tokens`";
    its cost example: `ordinary_input_tokens = input_tokens - cached_tokens -
    cache_write_tokens`."""
    state, client = emulator
    explicit = {"mode": "explicit"}
    first = await respond(client, input=turn("Question one"), prompt_cache_options=explicit)
    total, cached, written = details(first)
    assert cached == 0 and 1024 <= written < total  # the marked prefix, not the question
    second = await respond(client, input=turn("Question two"), prompt_cache_options=explicit)
    _, cached2, written2 = details(second)
    assert (cached2, written2) == (written, 0)
    logged = state.requests()[0]["usage"]["input_tokens_details"]
    assert logged == {"cached_tokens": 0, "cache_write_tokens": written}
    usage = usage_from_openai(first.usage)
    assert usage.cache_write_5m_tokens == written and usage.input_tokens == total - written
    p = price(NEW)
    assert p.cache_write_5m == pytest.approx(1.25 * p.input) and p.cache_read == 0.1 * p.input
    cost = cost_breakdown(usage, NEW)
    assert cost.cache_write_5m == pytest.approx(written * 1.25 * p.input / 1e6)


async def test_content_after_the_last_breakpoint_is_input_without_a_write(
    emulator: tuple[EmulatorState, AsyncOpenAI],
) -> None:
    """GUIDE: "Content after the last selected breakpoint is processed at the uncached
    input-token rate without a cache-write charge, so you can avoid writing changing content
    that is unlikely to be reused." A question long enough to be cached on its own is still
    not written after the developer message's breakpoint."""
    _, client = emulator
    long_question = "A long question that changes every time. " * 60
    first = await respond(client, input=turn(long_question), prompt_cache_options=MARK)
    total, _, written = details(first)
    assert total - written > 400  # the question: plain input
    again = await respond(client, input=turn(long_question), prompt_cache_options=MARK)
    assert details(again)[1:] == (written, 0)  # only the marked prefix was ever stored


async def test_explicit_mode_without_breakpoints_does_not_cache(
    emulator: tuple[EmulatorState, AsyncOpenAI],
) -> None:
    """GUIDE: "When no explicit breakpoints are placed, the request does not use prompt
    caching or create cache writes." Implicit mode (the default) caches the same prompt."""
    _, client = emulator
    body = {"input": turn("Question one", marked=False)}
    explicit = {"prompt_cache_options": {"mode": "explicit"}}
    assert details(await respond(client, **body, **explicit))[1:] == (0, 0)
    assert details(await respond(client, **body, **explicit))[1:] == (0, 0)
    implicit = await respond(client, **body)
    total, cached, written = details(implicit)
    assert (cached, written) == (0, total)  # "a breakpoint at the end of the latest ... message"


async def test_switching_to_explicit_mode_misses_the_implicit_write(
    emulator: tuple[EmulatorState, AsyncOpenAI],
) -> None:
    """GUIDE, "Switching to explicit-only mode can miss an implicit cache write": "request 2
    checks only the explicit breakpoints in its own input, so it will not reuse that saved
    implicit prefix from request 1"; implicit mode keeps "the earlier eligible message
    ending" as "a lookup candidate"."""
    _, client = emulator
    first = [*turn("Question one", marked=False)]
    follow_up = [
        *first,
        {"role": "assistant", "content": "Word."},
        {"role": "user", "content": "Q2"},
    ]
    written = details(await respond(client, input=first))[2]
    explicit = await respond(client, input=follow_up, prompt_cache_options={"mode": "explicit"})
    assert details(explicit)[1] == 0
    implicit = await respond(client, input=follow_up)
    assert details(implicit)[1] == written


async def test_a_request_writes_at_most_four_breakpoints_the_latest(
    emulator: tuple[EmulatorState, AsyncOpenAI],
) -> None:
    """GUIDE: "Each request can create up to four cache writes." SDK `mode`: "With `explicit`,
    OpenAI does not create an implicit breakpoint and writes up to the latest four explicit
    breakpoints." Of five marked blocks the first is not written: a request that ends there
    reads nothing."""
    _, client = emulator
    blocks = [
        {
            "type": "input_text",
            "text": f"Part {i}. " + "word " * 1100,
            "prompt_cache_breakpoint": MARK,
        }
        for i in range(5)
    ]
    options = {"mode": "explicit"}
    await respond(
        client, input=[{"role": "developer", "content": blocks}], prompt_cache_options=options
    )
    first_only = [{"role": "developer", "content": blocks[:1]}]
    assert details(await respond(client, input=first_only, prompt_cache_options=options))[1] == 0
    two = [{"role": "developer", "content": blocks[:2]}]
    assert details(await respond(client, input=two, prompt_cache_options=options))[1] > 0


async def test_an_entry_lives_thirty_minutes_from_its_latest_write_or_reuse(
    emulator: tuple[EmulatorState, AsyncOpenAI],
) -> None:
    """GUIDE: "A cached prefix remains eligible for reuse for 30 minutes after its most
    recent write or reuse" ("Use `prompt_cache_options.ttl` ... The only supported value,
    `30m`, is also the default"). Implicit mode: the first request writes through its user
    message; each follow-up reads it there (one of "up to 20 earlier eligible message
    endings") without writing it again, so only the reuse keeps it alive."""
    state, client = emulator
    first = turn("Q1", marked=False)
    written = details(await respond(client, input=first))[2]

    def follow_up(question: str) -> list[dict[str, Any]]:
        return [
            *first,
            {"role": "assistant", "content": "Word."},
            {"role": "user", "content": question},
        ]

    state.clock.advance(1700)
    assert details(await respond(client, input=follow_up("Q2")))[1] == written  # a reuse
    state.clock.advance(1790)  # 3,490 s after the write, 1,790 after the reuse
    assert details(await respond(client, input=follow_up("Q3")))[1] == written
    state.clock.advance(1801)
    assert details(await respond(client, input=follow_up("Q4")))[1] == 0
    assert {e.ttl for e in state.cache.entries()} == {"30m"}


async def test_a_lifetime_other_than_30m_is_a_400(
    emulator: tuple[EmulatorState, AsyncOpenAI],
) -> None:
    """GUIDE: "The only supported value, `30m`, is also the default." (The SDK's Responses
    types also list "12h", which the guide does not: refused, as the guide says.)"""
    _, client = emulator
    with pytest.raises(BadRequestError) as caught:
        await respond(client, input=turn("Q"), prompt_cache_options={"ttl": "12h"})
    assert "prompt_cache_options.ttl" in caught.value.message
    ok = await respond(client, input=turn("Q"), prompt_cache_options={"ttl": "30m"})
    assert ok.prompt_cache_options is not None and ok.prompt_cache_options.ttl == "30m"


async def test_chat_completions_reports_writes_and_reads_breakpoints(
    emulator: tuple[EmulatorState, AsyncOpenAI],
) -> None:
    """SDK `completion_usage.py`: "cache_write_tokens: The unadjusted number of prompt tokens
    written to cache"; Chat takes `prompt_cache_options` ("`30m`, which is currently the only
    supported value") and `prompt_cache_breakpoint` on text content parts."""
    _, client = emulator
    system: Any = {
        "role": "system",
        "content": [{"type": "text", "text": STABLE, "prompt_cache_breakpoint": MARK}],
    }
    options: Any = {"mode": "explicit", "ttl": "30m"}
    first = await client.chat.completions.create(
        model=NEW,
        messages=[system, {"role": "user", "content": "Q1"}],
        prompt_cache_options=options,
    )
    assert first.usage is not None and first.usage.prompt_tokens_details is not None
    written = first.usage.prompt_tokens_details.cache_write_tokens or 0
    assert 1024 <= written < first.usage.prompt_tokens
    second = await client.chat.completions.create(
        model=NEW,
        messages=[system, {"role": "user", "content": "Q2"}],
        prompt_cache_options=options,
    )
    assert second.usage is not None and second.usage.prompt_tokens_details is not None
    assert second.usage.prompt_tokens_details.cached_tokens == written


async def test_prewarm_fills_the_cache_without_output(
    emulator: tuple[EmulatorState, AsyncOpenAI],
) -> None:
    """SDK `PromptCacheOptions.prewarm`: "Prepares the prompt cache without generating
    output." Billed as any request: the write at the write rate, and (the emulator's choice,
    UNCONFIRMED) a prefix already cached is read at the read rate and refreshed."""
    state, client = emulator
    warm = await respond(client, input=turn("Q1"), prompt_cache_options={"prewarm": True})
    assert warm.output == [] and warm.usage is not None and warm.usage.output_tokens == 0
    written = details(warm)[2]
    assert written > 0
    state.clock.advance(1700)
    again = await respond(client, input=turn("Q1"), prompt_cache_options={"prewarm": True})
    assert details(again)[1:] == (written, 0)  # read and refreshed, nothing written
    state.clock.advance(1700)  # 3,400 s after the write, 1,700 after the refresh
    follow_up = [*turn("Q1"), {"role": "assistant", "content": "Word."}]
    real = await respond(client, input=[*follow_up, {"role": "user", "content": "Q2"}])
    assert details(real)[1] == written and real.output
    assert [r["usage"]["output_tokens"] for r in state.requests()] == [
        0,
        0,
        real.usage.output_tokens,
    ]


async def test_prewarm_is_not_a_chat_completions_option(
    emulator: tuple[EmulatorState, AsyncOpenAI],
) -> None:
    """SDK: Chat's `PromptCacheOptions` has `mode` and `ttl` only."""
    _, client = emulator
    with pytest.raises(BadRequestError) as caught:
        await client.chat.completions.create(
            model=NEW,
            messages=[{"role": "user", "content": "hi"}],
            extra_body={"prompt_cache_options": {"prewarm": True}},
        )
    assert caught.value.body is not None
    assert caught.value.body["param"] == "prompt_cache_options.prewarm"  # type: ignore[index]


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"model": "gpt-6-sol"}, "model_changed"),
        ({"prompt_cache_key": "other"}, "prompt_cache_key_changed"),
        ({"service_tier": "flex"}, "service_tier_changed"),
        ({"tools": [{"type": "function", "name": "get_date"}]}, "tools_changed"),
        ({"text": {"format": {"type": "json_object"}}}, "text_format_changed"),
        ({"reasoning": {"effort": "high"}}, "reasoning_effort_changed"),
        ({"text": {"verbosity": "high"}}, "verbosity_changed"),
        (
            {
                "input": [
                    developer(True) | {"content": [{"type": "input_text", "text": "x" + STABLE}]}
                ]
            },
            "input_changed",
        ),
    ],
)
async def test_diagnostics_name_the_first_changed_setting(
    emulator: tuple[EmulatorState, AsyncOpenAI], change: dict[str, Any], reason: str
) -> None:
    """DIAG: "Set `prompt_cache_options.comparison_response_id` to the baseline response's
    `id`"; a miss's reasons `model_changed`, `prompt_cache_key_changed`,
    `service_tier_changed`, `tools_changed`, `text_format_changed`, `reasoning_effort_changed`,
    `verbosity_changed`, `context_compacted`, `input_changed`; "`comparison_reusable_tokens`,
    when present, is the raw token count of the comparison response's reusable prefix";
    "`cache_missed_tokens` estimates how many of those tokens were not reused"."""
    _, client = emulator
    base: dict[str, Any] = {
        "input": turn("Reply with exactly OK."),
        "tools": [{"type": "function", "name": "get_time"}],
    }
    first = await respond(client, **base)
    written = details(first)[2]
    second = await respond(
        client, **(base | change), prompt_cache_options={"comparison_response_id": first.id}
    )
    diagnostics = second.prompt_cache_diagnostics
    assert diagnostics is not None and diagnostics.type == "cache_miss"
    assert diagnostics.reason == reason
    assert diagnostics.comparison_reusable_tokens == written
    # A changed setting loses the whole prefix; changed input keeps what comes before it
    # (here the tool definition).
    tool = details(first)[0] - details(await respond(client, input=base["input"]))[0]
    missed = written - tool if reason == "input_changed" else written
    assert diagnostics.cache_missed_tokens == missed


async def test_diagnostics_hit_not_found_and_unavailable(
    emulator: tuple[EmulatorState, AsyncOpenAI],
) -> None:
    """DIAG: "`cache_hit` | No cache miss was detected for the comparison" ("a request with
    2,500 input tokens can report `cache_hit` when it reuses the comparison response's
    2,000-token prefix and processes 500 new tokens"); "`comparison_response_not_found` | No
    usable diagnostic record is available"; "`unavailable` | ... or the model does not support
    diagnostics" ("Diagnostics are available in the Responses API for GPT-5.6 and later")."""
    _, client = emulator
    first = await respond(client, input=turn("Q1"))
    longer = [
        *turn("Q1"),
        {"role": "assistant", "content": "Word."},
        {"role": "user", "content": "Q2"},
    ]
    hit = await respond(
        client, input=longer, prompt_cache_options={"comparison_response_id": first.id}
    )
    assert (
        hit.prompt_cache_diagnostics is not None
        and hit.prompt_cache_diagnostics.type == "cache_hit"
    )
    lost = await respond(
        client, input=turn("Q1"), prompt_cache_options={"comparison_response_id": "resp_nope"}
    )
    assert lost.prompt_cache_diagnostics is not None
    assert lost.prompt_cache_diagnostics.type == "comparison_response_not_found"
    old = await client.responses.create(
        model="gpt-5",
        input="hi",
        extra_body={"prompt_cache_options": {"comparison_response_id": first.id}},
    )
    assert (
        old.prompt_cache_diagnostics is not None
        and old.prompt_cache_diagnostics.type == "unavailable"
    )


async def test_earlier_models_keep_their_rules(emulator: tuple[EmulatorState, AsyncOpenAI]) -> None:
    """GUIDE, "Summary of model differences", GPT-5.5: "No additional cache-write charge",
    "rounds down to a multiple of 128": no writes reported, reads in 128-token steps."""
    _, client = emulator
    body: Any = {"model": "gpt-5.5", "input": turn("Q1", marked=False)}
    first = await client.responses.create(**body)
    assert details(first)[2] == 0 and first.prompt_cache_options is None
    second = await client.responses.create(**body)
    assert details(second)[1] % 128 == 0 and details(second)[1] > 0
