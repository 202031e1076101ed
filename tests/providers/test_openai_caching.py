"""OpenAI prompt caching on the emulator, rule by rule through the official `openai` SDK.

Each test quotes the documentation it checks. Sources:

* GUIDE: the prompt-caching guide, https://developers.openai.com/api/docs/guides/prompt-caching
  (mirror llms-txt-archive/openai-platform `api/docs/guides/prompt-caching.md` @25f7cbb);
* COOKBOOK: OpenAI's cookbook "Prompt Caching 201" (its note: "This guide applies only to
  models before GPT-5.6"),
  https://github.com/openai/openai-cookbook/blob/main/examples/Prompt_Caching_201.ipynb,
  for the interval the guide leaves "model-dependent".
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest
from openai import AsyncOpenAI, BadRequestError
from sessiongen.cache import get_model, override_model
from sessiongen.emulator import EmulatorState, create_app
from sessiongen.llm.types import CacheMark, LLMMessage, LLMRequest, SystemPart, TextContent
from sessiongen.providers.openai.emulator import CHAT_PATH, RESPONSES_PATH, flatten
from sessiongen.providers.openai.wire import lower_request

BASE = "http://emulator/v1"
SYSTEM = "You are a careful coding agent. " * 200  # ~1,600 tokens
EXTENDED = ("gpt-4.1", "gpt-5")
IN_MEMORY_ONLY = ("gpt-4o", "gpt-4.1-mini", "gpt-5-mini")


@pytest.fixture
async def emulator() -> AsyncIterator[tuple[EmulatorState, AsyncOpenAI]]:
    state = EmulatorState(framing=False)  # the bare byte-based count these tests size by
    transport = httpx2.ASGITransport(app=create_app(state))
    http = httpx2.AsyncClient(transport=transport)
    client = AsyncOpenAI(api_key="test", base_url=BASE, http_client=http, max_retries=0)
    async with client:
        yield state, client


def chat(model: str, question: str, **extra: Any) -> dict[str, Any]:
    return {
        "model": model,
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": question},
        ],
        **extra,
    }


def shared_tokens(body: dict[str, Any], path: str = CHAT_PATH, positions: int = 1) -> int:
    """Tokens of the request's first `positions` positions (what two requests share)."""
    blocks, _ = flatten(body, path, framing=False)  # as the fixture's emulator counts
    return sum(b.tokens for b in blocks[:positions])


async def cached(client: AsyncOpenAI, body: dict[str, Any]) -> int:
    response = await client.chat.completions.create(**body)
    assert response.usage is not None and response.usage.prompt_tokens_details is not None
    return response.usage.prompt_tokens_details.cached_tokens or 0


@pytest.mark.clause("SG-REPLAY-3")
async def test_a_different_last_message_still_reads_the_shared_system_prompt(
    emulator: tuple[EmulatorState, AsyncOpenAI],
) -> None:
    """GUIDE, "How caching works / Earlier models": "OpenAI places implicit breakpoints at
    model-dependent intervals, counted from the beginning of the hidden OpenAI system
    message." and "Reported `cached_tokens` is calculated by subtracting the hidden system
    tokens from the last matched breakpoint, then rounding down to the nearest multiple of
    128." COOKBOOK: "works automatically for prompts containing 1024 tokens or more, with
    cache hits occurring in increments of 128 tokens."

    A request that ends with another user message reads the system prompt an earlier request
    shared, up to the last 128-token breakpoint inside it (the emulator adds no hidden
    tokens).

    Source: https://developers.openai.com/api/docs/guides/prompt-caching
    Source: https://github.com/openai/openai-cookbook/blob/main/examples/Prompt_Caching_201.ipynb
    """
    state, client = emulator
    first = chat("gpt-4.1", "What does app.py do?")
    assert await cached(client, first) == 0
    state.clock.advance(60)
    # A last message long enough to hold breakpoints of its own, none of them shared.
    second = chat("gpt-4.1", "Write a title for this session. " * 40)
    shared = shared_tokens(second)
    assert shared >= 1024
    assert await cached(client, second) == shared // 128 * 128


@pytest.mark.clause("SG-REPLAY-3")
async def test_responses_with_the_same_instructions_read_them(
    emulator: tuple[EmulatorState, AsyncOpenAI],
) -> None:
    """GUIDE: "Cache reuse requires the entire rendered prefix to match" and "subsequent
    requests look for the longest matching cached prefix available, working backward through
    eligible breakpoints until they find a match." Responses with the same `instructions` and
    another input share that prefix, so the second reads it (rounded down to 128).

    Source: https://developers.openai.com/api/docs/guides/prompt-caching
    """
    _, client = emulator
    first = await client.responses.create(
        model="gpt-4.1", instructions=SYSTEM, input="Summarise app.py.", store=False
    )
    question = "Now a title, please. " * 60
    second = await client.responses.create(
        model="gpt-4.1", instructions=SYSTEM, input=question, store=False
    )
    assert first.usage is not None and second.usage is not None
    assert first.usage.input_tokens_details.cached_tokens == 0
    body = {"model": "gpt-4.1", "instructions": SYSTEM, "input": question}
    shared = shared_tokens(body, RESPONSES_PATH)
    assert second.usage.input_tokens_details.cached_tokens == shared // 128 * 128 >= 1024


async def test_a_warming_ping_keeps_the_history_for_the_next_turn(
    emulator: tuple[EmulatorState, AsyncOpenAI],
) -> None:
    """GUIDE: "reusing the prefix refreshes its lifetime without another cache-write charge"
    and "Preserve earlier messages and tool results so later turns can reuse the full shared
    prefix." A ping that ends with its own short message reads (and so refreshes) the turn's
    history; the next turn, which ends with a different message, reads the history too.

    Source: https://developers.openai.com/api/docs/guides/prompt-caching
    """
    state, client = emulator
    history = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Read app.py."},
        {"role": "assistant", "content": "It defines add(a, b). " * 40},
    ]
    turn = {"model": "gpt-4o", "messages": [*history, {"role": "user", "content": "Tests?"}]}
    await cached(client, turn)
    state.clock.advance(240)
    ping = {"model": "gpt-4o", "messages": [*history, {"role": "user", "content": "ping"}]}
    shared = shared_tokens(ping, positions=3)
    assert await cached(client, ping) == shared // 128 * 128
    state.clock.advance(180)  # 7 minutes after the turn, 3 after the ping
    docs = "Now write the docs for it. " * 30  # long enough for breakpoints of its own
    later = {"model": "gpt-4o", "messages": [*history, {"role": "user", "content": docs}]}
    assert await cached(client, later) == shared // 128 * 128
    # Without the ping, 7 idle minutes are past the in-memory lifetime (5 minutes).
    state.reset()
    await cached(client, turn)
    state.clock.advance(420)
    assert await cached(client, later) == 0


async def test_a_shared_prefix_below_the_minimum_reads_nothing(
    emulator: tuple[EmulatorState, AsyncOpenAI],
) -> None:
    """GUIDE: "Only breakpoints at or beyond the minimum cacheable length (counted from the
    end of the hidden context) are eligible." COOKBOOK: "works automatically for prompts
    containing 1024 tokens or more". A 900-token shared system prompt is no hit, however
    long the rest of the prompt.

    Source: https://developers.openai.com/api/docs/guides/prompt-caching
    Source: https://github.com/openai/openai-cookbook/blob/main/examples/Prompt_Caching_201.ipynb
    """
    _, client = emulator
    short = "Be brief. " * 300
    tail = "context " * 1200
    system = {"role": "system", "content": short}
    first = {"model": "gpt-4.1", "messages": [system, {"role": "user", "content": "A " + tail}]}
    body = {"model": "gpt-4.1", "messages": [system, {"role": "user", "content": "B " + tail}]}
    assert 128 < shared_tokens(body) < 1024
    await cached(client, first)
    assert await cached(client, body) == 0


async def test_the_breakpoint_interval_is_catalog_data(
    emulator: tuple[EmulatorState, AsyncOpenAI],
) -> None:
    """GUIDE, "Summary of model differences": implicit breakpoints are "Spaced at regular,
    model-dependent intervals" (GPT-5.5: "Spaced at regular 2,048-token intervals."). The
    interval is the catalog's `implicit_breakpoint_interval` (128 for the catalogued models,
    COOKBOOK): with 2,048 the same shared system prompt (~1,600 tokens) reaches no
    breakpoint, with 1,024 it reaches one. With 200 the last breakpoint it shares is a
    multiple of 200, reported "rounding down to the nearest multiple of 128".

    Source: https://developers.openai.com/api/docs/guides/prompt-caching
    Source: https://github.com/openai/openai-cookbook/blob/main/examples/Prompt_Caching_201.ipynb
    """
    state, client = emulator
    assert {get_model(m).implicit_breakpoint_interval for m in EXTENDED + IN_MEMORY_ONLY} == {128}
    second = chat("gpt-4.1", "Second question.")
    at_200 = shared_tokens(second) // 200 * 200
    assert at_200 % 128 != 0
    for interval, expected in ((2048, 0), (1024, 1024), (200, at_200 // 128 * 128)):
        state.reset()
        with override_model("gpt-4.1", implicit_breakpoint_interval=interval):
            await cached(client, chat("gpt-4.1", "First question."))
            assert await cached(client, second) == expected


@pytest.mark.clause("SG-REPLAY-3")
@pytest.mark.parametrize("model", IN_MEMORY_ONLY)
async def test_models_without_extended_retention_keep_entries_in_memory(
    emulator: tuple[EmulatorState, AsyncOpenAI], model: str
) -> None:
    """GUIDE, footnote "extended-retention-models": "Extended retention is supported by
    `gpt-5.5`, `gpt-5.5-pro`, `gpt-5.4`, `gpt-5.2`, `gpt-5.1-codex-max`, `gpt-5.1`,
    `gpt-5.1-codex`, `gpt-5.1-codex-mini`, `gpt-5.1-chat-latest`, `gpt-5`, `gpt-5-codex`, and
    `gpt-4.1`." For the others the cache is "in_memory": "Entries typically remain active for
    around 5 to 10 minutes of inactivity, up to one hour." The emulator's in-memory lifetime
    is a setting (`openai_in_memory_ttl`, default 300 s): 4 idle minutes read, 6 do not.

    Source: https://developers.openai.com/api/docs/guides/prompt-caching
    """
    state, client = emulator
    assert not get_model(model).extended_retention
    await cached(client, chat(model, "One."))
    state.clock.advance(240)
    assert await cached(client, chat(model, "Two.")) > 0
    state.clock.advance(360)
    assert await cached(client, chat(model, "Three.")) == 0
    state.clock.advance(1800)
    assert await cached(client, chat(model, "Four.")) == 0


@pytest.mark.parametrize("model", EXTENDED)
async def test_extended_retention_is_the_default_where_the_guide_lists_it(
    emulator: tuple[EmulatorState, AsyncOpenAI], model: str
) -> None:
    """GUIDE, "Retention defaults": "For models that support both `in_memory` and `24h`, ...
    Organizations _without_ Zero Data Retention enabled default to `24h`." and "`24h`:
    Extended retention typically keeps entries available for around 30 minutes and can
    retain them for up to 24 hours." (`openai_extended_ttl`, default 1,800 s): 25 idle
    minutes read; `in_memory` spelled out is the 5-minute lifetime.

    Source: https://developers.openai.com/api/docs/guides/prompt-caching
    """
    state, client = emulator
    assert get_model(model).extended_retention
    await cached(client, chat(model, "One."))
    state.clock.advance(25 * 60)
    assert await cached(client, chat(model, "Two.")) > 0
    state.clock.advance(31 * 60)
    assert await cached(client, chat(model, "Three.")) == 0
    state.reset()
    memory = {"prompt_cache_retention": "in_memory"}
    await cached(client, chat(model, "One.", **memory))
    state.clock.advance(6 * 60)
    assert await cached(client, chat(model, "Two.", **memory)) == 0


async def test_extended_retention_ends_24_hours_after_the_write(
    emulator: tuple[EmulatorState, AsyncOpenAI],
) -> None:
    """GUIDE: "`24h`: Extended retention ... can retain them for up to 24 hours." SDK
    docstring (`prompt_cache_retention`): "keeps cached prefixes active for longer, up to a
    maximum of 24 hours." Reads every 25 minutes keep the entry until 24 h after its first
    write (`openai_extended_max`), not longer.

    Source: https://developers.openai.com/api/docs/guides/prompt-caching
    """
    state, client = emulator
    await cached(client, chat("gpt-4.1", "Start."))
    step = 25 * 60
    while state.clock.now() + step <= 24 * 3600:
        state.clock.advance(step)
        assert await cached(client, chat("gpt-4.1", f"At {state.clock.now()}.")) > 0
    state.clock.set(24 * 3600 + 60)
    assert await cached(client, chat("gpt-4.1", "A day later.")) == 0


@pytest.mark.clause("SG-REPLAY-3")
@pytest.mark.parametrize("model", IN_MEMORY_ONLY)
async def test_24h_retention_on_a_model_without_it_is_a_400(
    emulator: tuple[EmulatorState, AsyncOpenAI], model: str
) -> None:
    """GUIDE: "Use `prompt_cache_retention`, with supported values that depend on the model"
    and "Verify the available retention policies for your model and organization before
    selecting a value."; the table's "Supported retention values" for earlier models:
    `"in_memory"` or `"24h"`, the latter only on the extended-retention models. The API's
    answer to an unsupported value, as public issues quote it (OpenHands/software-agent-sdk
    #2295, home-assistant/core#161256): 400 `invalid_request_error`, code
    `invalid_parameter`, param `prompt_cache_retention`, "prompt_cache_retention is not
    supported on this model". `in_memory` is accepted.

    Source: https://developers.openai.com/api/docs/guides/prompt-caching
    Source: https://github.com/OpenHands/software-agent-sdk/issues/2295, https://github.com/home-assistant/core/issues/161256
    """
    state, client = emulator
    with pytest.raises(BadRequestError) as caught:
        await client.chat.completions.create(**chat(model, "Hi.", prompt_cache_retention="24h"))
    error = caught.value.body
    assert isinstance(error, dict)
    assert error["message"] == "prompt_cache_retention is not supported on this model"
    assert (error["type"], error["code"], error["param"]) == (
        "invalid_request_error",
        "invalid_parameter",
        "prompt_cache_retention",
    )
    assert state.cache.entries() == []  # a refused request writes nothing
    await cached(client, chat(model, "Hi.", prompt_cache_retention="in_memory"))


def _hour_marked(model: str) -> LLMRequest:
    return LLMRequest(
        model=model,
        system=(SystemPart(text=SYSTEM, cache=CacheMark(ttl="1h")),),
        messages=(LLMMessage(role="user", content=(TextContent(text="Hi."),)),),
    )


def test_the_adapter_asks_for_24h_only_where_the_model_has_it() -> None:
    """The adapter's lowering of a 1h mark follows the same footnote: `"24h"` on gpt-4.1 and
    gpt-5, nothing (the model's `in_memory` default) on the others, which would answer 400.

    Source: https://developers.openai.com/api/docs/guides/prompt-caching (footnote
    "extended-retention-models")
    """
    for model in EXTENDED:
        assert lower_request(_hour_marked(model))["prompt_cache_retention"] == "24h"
    for model in IN_MEMORY_ONLY:
        assert "prompt_cache_retention" not in lower_request(_hour_marked(model))


async def test_the_in_memory_lifetime_is_a_setting(
    emulator: tuple[EmulatorState, AsyncOpenAI],
) -> None:
    """GUIDE: in-memory entries "typically remain active for around 5 to 10 minutes of
    inactivity". Where in that range is the emulator's `openai_in_memory_ttl`, set through
    `/_emulator/config` (like `linger`): at 600 s an 8-minute gap still reads; a reset
    restores 300 s.

    Source: https://developers.openai.com/api/docs/guides/prompt-caching
    """
    state, client = emulator
    admin = httpx2.AsyncClient(
        transport=httpx2.ASGITransport(app=create_app(state)), base_url="http://emulator"
    )
    async with admin:
        answer = await admin.post("/_emulator/config", json={"openai_in_memory_ttl": 600})
        assert answer.status_code == 200 and answer.json()["openai_in_memory_ttl"] == 600
        bad = await admin.post("/_emulator/config", json={"openai_in_memory_ttl": 0})
        assert bad.status_code == 400
    await cached(client, chat("gpt-4o", "One."))
    state.clock.advance(480)
    assert await cached(client, chat("gpt-4o", "Two.")) > 0
    state.reset()
    assert state.lifetimes["openai_in_memory_ttl"] == 300
    await cached(client, chat("gpt-4o", "One."))
    state.clock.advance(480)
    assert await cached(client, chat("gpt-4o", "Two.")) == 0


async def test_an_entry_is_not_read_before_its_writers_response_begins(
    emulator: tuple[EmulatorState, AsyncOpenAI],
) -> None:
    """The implicit cache keeps the emulator's one rule for entries in flight
    (`CacheStore.apply_implicit`: "A new entry is available at `now + ttft`"), the rule the
    Anthropic docs state as "a cache entry only becomes available after the first response
    begins": with a 2 s time to first token, a request 1 s after the writer reads nothing,
    and one 2 s after it reads the shared system prompt. The guide says nothing on requests
    in flight (UNCONFIRMED for OpenAI).

    Source: https://developers.openai.com/api/docs/guides/prompt-caching
    """
    state, client = emulator
    state.ttft = 2.0
    state.clock.advance(10)
    assert await cached(client, chat("gpt-4.1", "What does app.py do?")) == 0
    state.clock.advance(1)
    assert await cached(client, chat("gpt-4.1", "And utils.py?")) == 0
    state.clock.advance(1)
    shared = shared_tokens(chat("gpt-4.1", "And main.py?"))
    assert await cached(client, chat("gpt-4.1", "And main.py?")) == shared // 128 * 128 > 0
