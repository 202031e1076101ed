"""The default models of real agent clients are in the catalog: each is served through its
provider's official SDK (no 404), and the prices and cache facts it carries are the ones its
provider documents. Each test quotes the provider's page it checks; facts the catalog marks
UNCONFIRMED are left out of the assertions that claim a source (see each entry's `unconfirmed`
list and the `_about` of `catalog/models*.json` and `catalog/pricing*.json`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import Any, Literal

import httpx
import httpx2
import pytest
from google.genai import types
from openai import AsyncOpenAI
from sessiongen.cache import get_model, list_models
from sessiongen.cache.pricing import Price, cost_breakdown, price
from sessiongen.emulator import EmulatorState, create_app
from sessiongen.providers.gemini.wire import usage_from_gemini
from sessiongen.providers.openai.emulator import CHAT_PATH, flatten
from sessiongen.providers.openai.wire import usage_from_openai
from sessiongen.tokens import scale_tokens

from tests._filler import filler
from tests.providers._sdk import gemini_client

from .conftest import Emu, text_block, user

CLIENT_DEFAULT_MODELS: dict[str, tuple[str, ...]] = {
    # The main model, `--model sonnet` and the fast/background (Haiku) model.
    "Claude Code 2.1.332": ("claude-opus-5-5", "claude-sonnet-5-5", "claude-haiku-5-5"),
    # The default of `codex` (config `model`).
    "Codex 0.169.0": ("gpt-6.1-sol",),
    # Router/classifier/summaries, the main Flash model and the compression model.
    "Gemini CLI 0.61.0": (
        "gemini-3.5-flash-lite",
        "gemini-3.8-flash",
        "gemini-3.1-pro-preview-customtools",
    ),
}
"""Every model id the clients send without being told a model (brief of this change)."""

DEFAULTS = [model for models in CLIENT_DEFAULT_MODELS.values() for model in models]
OTHERS = [
    *("claude-fable-5-1", "claude-mythos-5-1", "claude-fable-5-2", "claude-mythos-5-2"),
    *("gpt-6-sol", "gpt-6-astra", "gpt-6-luna", "gpt-5.5", "gpt-5.6"),
    *("gpt-5.6-sol", "gpt-5.6-terra", "gpt-5.6-luna", "gemini-3.1-flash-lite"),
]
"""Other ids added with them: Codex's bundled list, the Fable/Mythos 5.x the Claude docs list,
Gemini 3.1 Flash-Lite. (gpt-6.1-terra is in Codex's list but has no price found: not served.)"""

GEMINI_URL = "http://gemini.emulator"
OPENAI_URL = "http://emulator/v1"


@dataclass
class Clients:
    """The three official SDKs on one in-process emulator, counting bare (no framing)."""

    state: EmulatorState
    openai: AsyncOpenAI
    gemini: Any


@pytest.fixture
async def clients() -> AsyncIterator[Clients]:
    state = EmulatorState(framing=False, tool_prompt=False)
    app = create_app(state)
    openai_http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app))
    openai = AsyncOpenAI(api_key="k", base_url=OPENAI_URL, http_client=openai_http, max_retries=0)
    transport = httpx.ASGITransport(app=app)
    async with openai, httpx.AsyncClient(transport=transport, base_url=GEMINI_URL) as http:
        yield Clients(state, openai, gemini_client(http, GEMINI_URL))


async def served(model: str, emu: Emu, clients: Clients) -> str:
    """One request for `model` through its provider's SDK; the model the answer names (an
    error status raises the SDK's exception)."""
    provider = get_model(model).provider
    if provider == "anthropic":
        message = await emu.create(model=model, messages=[user(text_block(5, "hi"))])
        return message.model
    if provider == "openai":
        chat = await clients.openai.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "hi"}]
        )
        return chat.model
    answer = await clients.gemini.aio.models.generate_content(model=model, contents="hi")
    assert answer.model_version is not None
    return str(answer.model_version)


@pytest.mark.parametrize("model", DEFAULTS)
async def test_every_client_default_model_is_served(model: str, emu: Emu, clients: Clients) -> None:
    """Each default model id of Claude Code, Codex and Gemini CLI answers 200 through the
    provider's official SDK (before these entries: 404 `not_found_error` / `model_not_found`
    / NOT_FOUND), and it has a price row."""
    assert await served(model, emu, clients) == model
    assert price(model).input > 0


@pytest.mark.parametrize("model", OTHERS)
async def test_the_other_added_models_are_served(model: str, emu: Emu, clients: Clients) -> None:
    """The other models added with them answer 200 and are priced too (`gpt-5.6` is the alias
    the changelog names: "The `gpt-5.6` alias routes requests to `gpt-5.6-sol`", Jul 9 2026,
    https://developers.openai.com/api/docs/changelog)."""
    assert await served(model, emu, clients) in (model, "gpt-5.6-sol")
    assert price(model) == price(get_model(model).id)


# --- Anthropic ------------------------------------------------------------------------------

CLAUDE_PRICES = [
    pytest.param(
        "claude-opus-5-5",
        Price(input=4.0, cache_write_5m=5.0, cache_write_1h=8.0, cache_read=0.20, output=20.0),
        id="opus-5-5",
    ),
    pytest.param(
        "claude-sonnet-5-5",
        Price(input=2.0, cache_write_5m=2.5, cache_write_1h=4.0, cache_read=0.10, output=10.0),
        id="sonnet-5-5",
    ),
    pytest.param(
        "claude-haiku-5-5",
        Price(input=0.10, cache_write_5m=0.125, cache_write_1h=0.20, cache_read=0.01, output=0.50),
        id="haiku-5-5",
    ),
    pytest.param(
        "claude-fable-5-1",
        Price(input=10.0, cache_write_5m=12.5, cache_write_1h=20.0, cache_read=0.25, output=50.0),
        id="fable-5-1",
    ),
    pytest.param(
        "claude-mythos-5-1",
        Price(input=10.0, cache_write_5m=12.5, cache_write_1h=20.0, cache_read=0.25, output=50.0),
        id="mythos-5-1",
    ),
]


@pytest.mark.parametrize(("model", "documented"), CLAUDE_PRICES)
async def test_claude_writes_and_reads_bill_at_the_documented_prices(
    emu: Emu, model: str, documented: Price
) -> None:
    """The models' overview pages, "Pricing": Opus 5.5 "Input $4 / MTok", "Output $20 / MTok",
    "5m cache write $5 / MTok", "1h cache write $8 / MTok", "Cache read $0.20 / MTok"
    (https://platform.claude.com/docs/en/models/opus-5-5/overview); Sonnet 5.5 "$2 / MTok",
    "$10 / MTok", "$2.50 / MTok", "$4 / MTok" (.../models/sonnet-5-5/overview; its cache read,
    $0.10 after the 2026-10-07 cut as price trackers quote the pricing page, is UNCONFIRMED: the
    stored page predates the cut and shows $0.20); Haiku 5.5 "$0.10 / MTok for prompts up to
    100,000 tokens", output "$0.50", "5m cache write $0.125", "1h cache write $0.20"
    (.../models/haiku-5-5/overview; read $0.01); the model pricing table: "Claude Fable 5.1 |
    $10 / MTok | $12.50 / MTok | $20 / MTok | $0.25 / MTok | $50 / MTok", the same for "Claude
    Mythos 5.1" (https://platform.claude.com/docs/en/about-claude/pricing).

    A 5m write, a 1h write and a read through the SDK cost those rates per token; the tokens
    are the byte count scaled by the newer tokenizer ("the same text counts as approximately
    30% more tokens than on Claude Haiku 4.5", .../models/haiku-5-5/overview)."""
    assert price(model) == documented
    info = get_model(model)
    assert (info.context_window, info.max_output_tokens) == (1_000_000, 128_000)
    size = info.min_cacheable_tokens + 100
    tokens = scale_tokens(size, 1.3)
    ttls: tuple[tuple[Literal["5m", "1h"], float], ...] = (
        ("5m", documented.cache_write_5m),
        ("1h", documented.cache_write_1h),
    )
    for ttl, rate in ttls:
        system = [text_block(size, f"system-{ttl}", ttl)]
        written = await emu.create(model=model, system=system, messages=[user(text_block(5, "q"))])
        creation = written.usage.cache_creation
        assert creation is not None
        assert getattr(creation, f"ephemeral_{ttl}_input_tokens") == tokens
        billed = getattr(cost_breakdown(written.usage, model), f"cache_write_{ttl}")
        assert billed == pytest.approx(tokens * rate / 1e6)
        read = await emu.create(model=model, system=system, messages=[user(text_block(5, "q"))])
        assert read.usage.cache_read_input_tokens == tokens
        assert cost_breakdown(read.usage, model).cache_read == pytest.approx(
            tokens * documented.cache_read / 1e6
        )


def test_claude_thinking_and_prefill_follow_the_model_pages() -> None:
    """ "Claude Opus 5.5 | 1M | 128K | $4 / $20 | Adaptive (always on)", "Claude Sonnet 5.5 |
    1M | 128K | $2 / $10 | Adaptive", "Claude Haiku 5.5 | 1M | 128K | From $0.10 / $0.50 |
    Adaptive" (https://platform.claude.com/docs/en/models/opus-5/overview, comparison table);
    Haiku 5.5's migration guide: change `thinking: {"type": "enabled", "budget_tokens": N}` to
    `{"type": "adaptive"}`, and end `messages` with a user turn instead of an assistant prefill
    (https://platform.claude.com/docs/en/models/haiku-5-5/migration-guide)."""
    assert get_model("claude-opus-5-5").thinking_types == ("adaptive",)
    for model in ("claude-sonnet-5-5", "claude-haiku-5-5"):
        assert "enabled" not in get_model(model).thinking_types
    for model in ("claude-opus-5-5", "claude-sonnet-5-5", "claude-haiku-5-5"):
        info = get_model(model)
        assert (info.thinking_default, info.prefill_allowed, info.tokenizer) == (
            "adaptive",
            False,
            "claude-4.7",
        )


# --- OpenAI ---------------------------------------------------------------------------------

SYSTEM = "You are a careful coding agent. " * 400  # ~3,200 tokens


def chat(model: str, question: str) -> dict[str, Any]:
    return {
        "model": model,
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": question},
        ],
    }


OPENAI_PRICES = [
    pytest.param("gpt-6.1-sol", 2.0, 0.10, 10.0, 2.5, 1, id="gpt-6.1-sol"),
    pytest.param("gpt-6-sol", 2.0, 0.20, 10.0, 2.5, 1, id="gpt-6-sol"),
    pytest.param("gpt-6-luna", 0.10, 0.01, 0.50, 0.125, 1, id="gpt-6-luna"),
    pytest.param("gpt-6-astra", 10.0, 1.0, 50.0, 12.5, 1, id="gpt-6-astra"),
    pytest.param("gpt-5.6-sol", 4.0, 0.40, 20.0, 5.0, 1, id="gpt-5.6-sol"),
    pytest.param("gpt-5.6-terra", 2.0, 0.20, 12.0, 2.5, 1, id="gpt-5.6-terra"),
    pytest.param("gpt-5.6-luna", 0.20, 0.02, 1.20, 0.25, 1, id="gpt-5.6-luna"),
    pytest.param("gpt-5.5", 5.0, 0.50, 30.0, 5.0, 2048, id="gpt-5.5"),
]


@pytest.mark.parametrize(
    ("model", "input_price", "cached_price", "output_price", "write_price", "interval"),
    OPENAI_PRICES,
)
async def test_openai_cached_input_bills_at_the_catalogued_rate(
    clients: Clients,
    model: str,
    input_price: float,
    cached_price: float,
    output_price: float,
    write_price: float,
    interval: int,
) -> None:
    """The prompt-caching guide, "Summary of model differences": "Minimum cacheable prefix |
    1,024 visible input tokens" and "Cache write charge | 1.25x the uncached input-token rate"
    for GPT-5.6 and later; for GPT-5.5 "Spaced at regular 2,048-token intervals" and "No
    additional cache-write charge" (https://developers.openai.com/api/docs/guides/prompt-caching).
    GPT-5.6 Sol: "GPT-5.6 Sol now costs $4 per million input tokens and $20 per million output
    tokens" (https://developers.openai.com/api/docs/changelog, Aug 21 2026). The other prices
    (GPT-6.1 Sol "$2 input, $0.10 cached input, and $10 output per million tokens", ...) are
    third-party quotes of https://developers.openai.com/api/docs/pricing: UNCONFIRMED.

    GPT-5.5: a second request sharing the system prompt reads it, rounded down to the
    breakpoint interval and to 128, with no write billed. GPT-5.6 and later: "caching the
    first complete request implicitly-only does not make the shorter shared prefix reusable"
    (the guide's "A shared prefix is not always a cached prefix"): the second request reads
    nothing and writes its whole prompt at the write price; the same request again reads it
    all ("Exact eligible boundary") at the cached-input price."""
    assert price(model) == Price(input_price, write_price, write_price, cached_price, output_price)
    info = get_model(model)
    assert (info.min_cacheable_tokens, info.implicit_breakpoint_interval) == (1024, interval)
    await clients.openai.chat.completions.create(**chat(model, "What does app.py do?"))
    clients.state.clock.advance(60)
    second = await clients.openai.chat.completions.create(**chat(model, "Now a title."))
    assert second.usage is not None and second.usage.prompt_tokens_details is not None
    cached = second.usage.prompt_tokens_details.cached_tokens or 0
    billed = cost_breakdown(usage_from_openai(second.usage), model)
    if info.prompt_cache is None:
        shared = sum(b.tokens for b in flatten(chat(model, "x"), CHAT_PATH, framing=False)[0][:1])
        assert cached == shared // interval * interval // 128 * 128 > 0
        assert billed.cache_read == pytest.approx(cached * cached_price / 1e6)
        assert billed.cache_write_5m == 0  # "No additional cache-write charge"
        return
    written = second.usage.prompt_tokens_details.cache_write_tokens
    assert cached == 0 and written == second.usage.prompt_tokens
    assert billed.cache_write_5m == pytest.approx(written * write_price / 1e6)
    again = await clients.openai.chat.completions.create(**chat(model, "Now a title."))
    assert again.usage is not None and again.usage.prompt_tokens_details is not None
    assert again.usage.prompt_tokens_details.cached_tokens == again.usage.prompt_tokens
    read = cost_breakdown(usage_from_openai(again.usage), model)
    assert read.cache_read == pytest.approx(again.usage.prompt_tokens * cached_price / 1e6)
    assert read.cache_write_5m == 0


async def test_gpt_5_5_keeps_24h_retention(clients: Clients) -> None:
    """ "Supported retention values | ... | `"24h"` only" for GPT-5.5, and "Extended retention
    is supported by `gpt-5.5`, ..." (https://developers.openai.com/api/docs/guides/
    prompt-caching): a `"24h"` request is accepted (the default on the extended models)."""
    assert get_model("gpt-5.5").extended_retention
    answer = await clients.openai.chat.completions.create(
        **chat("gpt-5.5", "hi"), prompt_cache_retention="24h"
    )
    assert answer.model == "gpt-5.5"


# --- Gemini ---------------------------------------------------------------------------------

GEMINI_PRICES = [
    pytest.param("gemini-3.8-flash", 0.75, 0.075, 3.75, 4096, id="gemini-3.8-flash"),
    pytest.param("gemini-3.5-flash-lite", 0.30, 0.03, 2.50, 2048, id="gemini-3.5-flash-lite"),
    pytest.param(
        "gemini-3.1-pro-preview-customtools", 2.0, 0.20, 12.0, 4096, id="3.1-pro-customtools"
    ),
    pytest.param("gemini-3.1-flash-lite", 0.25, 0.025, 1.50, 2048, id="gemini-3.1-flash-lite"),
]


@pytest.mark.parametrize(
    ("model", "input_price", "cached_price", "output_price", "minimum"), GEMINI_PRICES
)
async def test_gemini_implicit_reads_bill_at_the_catalogued_rate(
    clients: Clients,
    model: str,
    input_price: float,
    cached_price: float,
    output_price: float,
    minimum: int,
) -> None:
    """The pricing page: "Gemini 3.8 Flash input $0.75 through December 31, 2026.", output
    "$3.75 through December 31, 2026.", "Gemini 3.5 Flash-Lite input $0.30", output "$2.50"
    (https://ai.google.dev/gemini-api/docs/pricing, as transcribed 2026-10-07); cached input at
    10%: "Implicit caching provides a 90% discount on cached tokens compared to standard input
    tokens" (https://docs.cloud.google.com/gemini-enterprise-agent-platform/models/context-cache/
    context-cache-overview). The caching page: "Gemini 3.8 Flash | 4,096", "Gemini 3.1 Pro
    Preview | 4,096" (https://ai.google.dev/gemini-api/docs/caching); the Flash-Lite minimums,
    3.1 Flash-Lite's price and the customtools endpoint's price are UNCONFIRMED.

    A shared system instruction just above the minimum is read by the next request and billed
    at the cached-input price; one just below it is not read."""
    row = Price(input_price, input_price, input_price, cached_price, output_price)
    assert replace(price(model), cache_storage_per_mtok_hour=0.0) == row
    assert get_model(model).min_cacheable_tokens == minimum

    async def ask(system: str, question: str) -> types.GenerateContentResponse:
        config = types.GenerateContentConfig(system_instruction=system)
        response: types.GenerateContentResponse = await clients.gemini.aio.models.generate_content(
            model=model, contents=question, config=config
        )
        return response

    above, below = filler(minimum + 50, "above"), filler(minimum - 50, "below")
    await ask(above, "What does app.py do?")
    await ask(below, "What does app.py do?")
    clients.state.clock.advance(30)
    read = await ask(above, "Now a title.")
    assert read.usage_metadata is not None
    assert read.usage_metadata.cached_content_token_count == minimum + 50
    billed = cost_breakdown(usage_from_gemini(read.usage_metadata), model)
    assert billed.cache_read == pytest.approx((minimum + 50) * cached_price / 1e6)
    missed = await ask(below, "Now a title.")
    assert missed.usage_metadata is not None
    assert not missed.usage_metadata.cached_content_token_count


def test_customtools_is_3_1_pro_preview_behind_another_endpoint() -> None:
    """ "Preview: gemini-3.1-pro-preview-customtools", "Gemini 3.1 Pro Preview provides a separate
    endpoint available via the API called gemini-3.1-pro-preview-customtools. This endpoint is
    better at prioritizing your custom tools"
    (https://ai.google.dev/gemini-api/docs/models/gemini-3.1-pro-preview): the same facts and
    price as gemini-3.1-pro-preview, under its own id (its own cache namespace)."""
    base, variant = (
        get_model("gemini-3.1-pro-preview"),
        get_model("gemini-3.1-pro-preview-customtools"),
    )
    same = ("min_cacheable_tokens", "context_window", "max_output_tokens", "tokenizer")
    assert all(getattr(base, f) == getattr(variant, f) for f in same)
    assert price(base.id) == price(variant.id)
    assert variant.id != base.id


def test_every_added_model_is_catalogued_once() -> None:
    """Each added id resolves to one catalog entry with a price; no id is catalogued twice."""
    ids = [m.id for m in list_models()]
    assert len(ids) == len(set(ids))
    for model in (*DEFAULTS, *OTHERS):
        assert price(get_model(model).id)
