"""Gemini context caching on the emulator, rule by rule through the official `google-genai`
SDK.

Each test quotes the documentation it checks. Sources:

* CACHING: https://ai.google.dev/gemini-api/docs/caching ("Last updated 2026-07-07");
* RESOURCE: the CachedContent reference,
  https://ai.google.dev/api/python/google/generativeai/protos/CachedContent (the same fields
  as https://ai.google.dev/api/caching#CachedContent);
* PATCH: https://ai.google.dev/api/rest/v1beta/cachedContents/patch.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from google import genai
from google.genai import types
from sessiongen.emulator import EmulatorState, create_app

from tests._filler import filler
from tests.providers._sdk import gemini_client

BASE_URL = "http://gemini.emulator"
MODEL = "gemini-2.5-flash"  # implicit-caching minimum 2,048 tokens


@dataclass
class Emulated:
    state: EmulatorState
    http: httpx.AsyncClient
    sdk: genai.Client


@pytest.fixture
async def emulated() -> AsyncIterator[Emulated]:
    state = EmulatorState(framing=False)  # the bare byte-based count these tests size by
    transport = httpx.ASGITransport(app=create_app(state))
    async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as http:
        yield Emulated(state, http, gemini_client(http, BASE_URL))


SYSTEM = filler(2600, "system")


async def ask(emulated: Emulated, question: str, **config: Any) -> types.GenerateContentResponse:
    return await emulated.sdk.aio.models.generate_content(
        model=MODEL,
        contents=question,
        config=types.GenerateContentConfig(**({"system_instruction": SYSTEM} | config)),
    )


def read(response: types.GenerateContentResponse) -> int:
    assert response.usage_metadata is not None
    return response.usage_metadata.cached_content_token_count or 0


async def make_cache(emulated: Emulated, tag: str, **config: Any) -> types.CachedContent:
    cache = await emulated.sdk.aio.caches.create(
        model=MODEL,
        config=types.CreateCachedContentConfig(system_instruction=filler(3000, tag), **config),
    )
    assert cache.name is not None
    return cache


def instant(seconds: float) -> datetime:
    """The emulator's virtual time `seconds` as the SDK's datetime (after the Unix epoch)."""
    return datetime.fromtimestamp(seconds, tz=UTC)


@pytest.mark.clause("SG-REPLAY-3")
async def test_a_shared_prefix_is_read_whatever_the_last_message(emulated: Emulated) -> None:
    """CACHING, "Implicit caching": "Implicit caching is enabled by default for all Gemini 2.5
    and newer models." and "Try to send requests with similar prefix in a short amount of
    time". A request with the same system instruction and another question reads the shared
    system instruction (2,600 tokens, above the 2,048 minimum of 2.5 Flash).

    Source: https://ai.google.dev/gemini-api/docs/caching
    """
    first = await ask(emulated, "What does app.py do?")
    emulated.state.clock.advance(30)
    second = await ask(emulated, "Write a title for this session.")
    assert read(first) == 0
    assert read(second) == 2600


async def test_a_shared_prefix_below_the_minimum_is_not_read(emulated: Emulated) -> None:
    """CACHING: "The minimum input token count for context caching is listed in the
    following table for each model: ... Gemini 2.5 Flash | 2,048". A 2,000-token shared
    system instruction is no hit, however long the rest of the prompt.

    Source: https://ai.google.dev/gemini-api/docs/caching
    """
    short = filler(2000, "short")
    await ask(emulated, filler(1000, "question-a"), system_instruction=short)
    again = await ask(emulated, filler(1000, "question-b"), system_instruction=short)
    assert read(again) == 0


async def test_the_implicit_lifetime_is_a_setting(emulated: Emulated) -> None:
    """CACHING gives implicit caching no lifetime ("Try to send requests with similar prefix
    in a short amount of time"), so it is the emulator's `gemini_implicit_ttl` (UNCONFIRMED,
    default 300 s), changed through `/_emulator/config`: 6 idle minutes miss at the default
    and read at 900 s (the setting applies to entries written or read after it).

    Source: https://ai.google.dev/gemini-api/docs/caching
    """
    await ask(emulated, "One.")
    emulated.state.clock.advance(360)
    assert read(await ask(emulated, "Two.")) == 0  # and writes with 300 s
    answer = await emulated.http.post("/_emulator/config", json={"gemini_implicit_ttl": 900})
    assert answer.json()["gemini_implicit_ttl"] == 900
    emulated.state.clock.advance(240)
    assert read(await ask(emulated, "Three.")) == 2600  # read: now kept 900 s
    emulated.state.clock.advance(600)
    assert read(await ask(emulated, "Four.")) == 2600


@pytest.mark.clause("SG-REPLAY-3")
async def test_an_explicit_cache_lives_until_its_expire_time(emulated: Emulated) -> None:
    """RESOURCE: "expire_time: Timestamp in UTC of when this resource is considered expired.
    This is always provided on output, regardless of what was sent on input." and "ttl ...
    Input only. New TTL for this resource". A cache created with `ttl: "7200s"` and left
    idle for 90 minutes is still read (no sliding store TTL cuts it short); after its
    `expireTime` it is gone (403).

    Source: https://ai.google.dev/api/python/google/generativeai/protos/CachedContent
    """
    cache = await make_cache(emulated, "two-hours", ttl="7200s")
    assert cache.expire_time == instant(7200)
    emulated.state.clock.advance(90 * 60)
    config = {"cached_content": cache.name, "system_instruction": None}
    assert read(await ask(emulated, "Still there?", **config)) == 3000
    emulated.state.clock.set(7199)
    assert read(await ask(emulated, "Just before?", **config)) == 3000
    emulated.state.clock.set(7201)
    with pytest.raises(genai.errors.ClientError) as gone:
        await ask(emulated, "After?", **config)
    assert gone.value.code == 403 and gone.value.status == "PERMISSION_DENIED"


async def test_expire_time_on_create(emulated: Emulated) -> None:
    """RESOURCE: `expire_time` and `ttl` are the two members of the oneof `expiration` ("This
    field is a member of oneof _ expiration"), so a create may give either; both is a 400.
    The SDK's `CreateCachedContentConfig.expire_time` sends `expireTime`.

    Source: https://ai.google.dev/api/python/google/generativeai/protos/CachedContent
    """
    cache = await make_cache(emulated, "at", expire_time=instant(5400))
    assert cache.expire_time == instant(5400)
    emulated.state.clock.set(5000)
    assert cache.name is not None
    assert (await emulated.sdk.aio.caches.get(name=cache.name)).expire_time == instant(5400)
    emulated.state.clock.set(5401)
    with pytest.raises(genai.errors.ClientError):
        await emulated.sdk.aio.caches.get(name=cache.name)
    with pytest.raises(genai.errors.ClientError) as both:
        await make_cache(emulated, "both", ttl="60s", expire_time=instant(9000))
    assert both.value.code == 400 and both.value.status == "INVALID_ARGUMENT"


@pytest.mark.clause("SG-REPLAY-3")
async def test_update_moves_the_expiration_only(emulated: Emulated) -> None:
    """PATCH: "Updates CachedContent resource (only expiration is updatable)." The SDK's
    `caches.update(config={"ttl": ...})` / `{"expire_time": ...}` sends a PATCH with `ttl` or
    `expireTime`; the new `expireTime` is now + ttl, and the cache lives (or dies) by it.

    Source: https://ai.google.dev/api/rest/v1beta/cachedContents/patch
    """
    sdk = emulated.sdk.aio
    cache = await make_cache(emulated, "update", ttl="600s")
    assert cache.name is not None
    emulated.state.clock.set(500)
    longer = await sdk.caches.update(name=cache.name, config={"ttl": "3600s"})
    assert longer.expire_time == instant(4100)
    assert longer.update_time == instant(500) and longer.create_time == instant(0)
    emulated.state.clock.set(4000)
    assert (await sdk.caches.get(name=cache.name)).expire_time == instant(4100)
    shorter = await sdk.caches.update(name=cache.name, config={"expire_time": instant(4050)})
    assert shorter.expire_time == instant(4050)
    emulated.state.clock.set(4060)
    with pytest.raises(genai.errors.ClientError) as gone:
        await sdk.caches.get(name=cache.name)
    assert gone.value.code == 403
    other = await make_cache(emulated, "other", ttl="600s")
    reply = await emulated.http.patch(
        f"/v1beta/{other.name}", json={"ttl": "60s", "displayName": "renamed"}
    )
    assert reply.status_code == 400 and reply.json()["error"]["status"] == "INVALID_ARGUMENT"


async def test_list_names_the_live_caches(emulated: Emulated) -> None:
    """The SDK's `caches.list` (`GET cachedContents`, "Lists CachedContents",
    https://ai.google.dev/api/caching#method:-cachedcontents.list) pages through the live
    resources; an expired or deleted one is not listed."""
    sdk = emulated.sdk.aio
    short = await make_cache(emulated, "short", ttl="60s")
    kept = await make_cache(emulated, "kept", ttl="3600s")
    dropped = await make_cache(emulated, "dropped", ttl="3600s")
    assert dropped.name is not None
    await sdk.caches.delete(name=dropped.name)
    listed = [c.name async for c in await sdk.caches.list()]
    assert listed == [short.name, kept.name]
    emulated.state.clock.advance(61)
    assert [c.name async for c in await sdk.caches.list()] == [kept.name]
    paged = await emulated.http.get("/v1beta/cachedContents", params={"pageSize": 1})
    assert paged.json()["cachedContents"][0]["name"] == kept.name


async def test_a_reset_forgets_the_caches_and_a_second_state_never_saw_them(
    emulated: Emulated,
) -> None:
    """The resources are the emulator state's own (issue 30: they lived in a module table
    that `reset()` could not see): a reset empties them, and another state's app lists
    nothing of this one's."""
    made = await make_cache(emulated, "reset")
    other = EmulatorState(framing=False)
    transport = httpx.ASGITransport(app=create_app(other))
    async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as http:
        assert (await http.get("/v1beta/cachedContents")).json() == {}
    assert list(emulated.state.cached_contents) == [made.name]
    emulated.state.reset()
    assert emulated.state.cached_contents == {}
    assert [c.name async for c in await emulated.sdk.aio.caches.list()] == []


@pytest.mark.parametrize(
    ("method", "path", "code", "status"),
    [
        ("GET", "/v1beta/cachedContents/missing", 403, "PERMISSION_DENIED"),
        ("PATCH", "/v1beta/cachedContents/missing", 403, "PERMISSION_DENIED"),
        ("DELETE", "/v1beta/cachedContents/missing", 403, "PERMISSION_DENIED"),
        ("PUT", "/v1beta/cachedContents/missing", 404, "NOT_FOUND"),
        ("POST", "/v1beta/cachedContents/missing", 404, "NOT_FOUND"),
        ("PUT", "/v1/cachedContents", 404, "NOT_FOUND"),
        ("GET", "/v1beta/models", 404, "NOT_FOUND"),
        ("GET", "/v1beta/cachedContents?pageSize=abc", 400, "INVALID_ARGUMENT"),
    ],
)
async def test_every_gemini_route_answers_in_gemini_error_shape(
    emulated: Emulated, method: str, path: str, code: int, status: str
) -> None:
    """The Gemini API's errors are `{"error": {"code", "message", "status"}}` with the
    troubleshooting page's status strings (https://ai.google.dev/gemini-api/docs/
    troubleshooting): 400 INVALID_ARGUMENT, 403 PERMISSION_DENIED, 404 NOT_FOUND. Every route
    under `/v1beta/` (and the cachedContents routes under `/v1/`) answers so, unknown methods
    included (404: UNCONFIRMED, the API's answer to those is not documented)."""
    reply = await emulated.http.request(method, path, json={"ttl": "60s"})
    assert reply.status_code == code
    error = reply.json()["error"]
    assert set(error) == {"code", "message", "status"}
    assert (error["code"], error["status"]) == (code, status)


async def test_the_v1_api_version_serves_caches_too(emulated: Emulated) -> None:
    """google-genai 3.x defaults to API version v1 (`GOOGLE_AI_API_DEFAULT_VERSION`), so the
    cachedContents methods answer under `/v1/` as under `/v1beta/`.

    Source: google-genai 3.6.1 `_api_client.py` (`GOOGLE_AI_API_DEFAULT_VERSION`), `caches.py`
    """
    options = types.HttpOptions(
        base_url=BASE_URL,
        api_version="v1",
        httpx_async_client=emulated.http,
        retry_options=types.HttpRetryOptions(attempts=1),
    )
    sdk = genai.Client(api_key="test-key", http_options=options).aio
    cache = await sdk.caches.create(
        model=MODEL, config=types.CreateCachedContentConfig(system_instruction=SYSTEM, ttl="90s")
    )
    assert cache.name is not None
    assert (await sdk.caches.update(name=cache.name, config={"ttl": "120s"})).expire_time == (
        instant(120)
    )
    assert [c.name async for c in await sdk.caches.list()] == [cache.name]
    await sdk.caches.delete(name=cache.name)


async def test_an_explicit_cache_bills_storage_by_the_hour_and_implicit_ones_none(
    emulated: Emulated,
) -> None:
    """Google's context-cache overview: "For explicit caching, there are also storage costs
    based on how long caches are stored. There are no storage costs for implicit caching."
    (docs.cloud.google.com/gemini-enterprise-agent-platform/models/context-cache/
    context-cache-overview). The price per million tokens per hour is the catalog's
    `cache_storage_per_mtok_hour` (Gemini 2.5 Flash "$1.00/1M tokens/hour (storage)", a
    third-party transcription of ai.google.dev/gemini-api/docs/pricing: UNCONFIRMED).

    A 3,000-token cache of gemini-2.5-flash stored 90 minutes has cost 3,000 x $1.00 x 1.5 /
    1,000,000; it stops accruing at its `expireTime`; the implicit entries beside it cost
    nothing to store."""
    from sessiongen.cache import price

    assert price(MODEL).cache_storage_per_mtok_hour == 1.00
    await ask(emulated, "An implicit entry too.")
    cache = await make_cache(emulated, "stored", ttl="7200s")

    async def storage() -> dict[str, float]:
        answer = (await emulated.http.get("/_emulator/cache")).json()
        return {e["ttl"]: e["storage_usd"] for e in answer["entries"]}

    emulated.state.clock.advance(90 * 60)
    costs = await storage()
    assert costs["cachedContent"] == pytest.approx(3000 * 1.00 * 1.5 / 1e6)
    assert costs["implicit"] == 0.0
    emulated.state.clock.set(7300)  # past its expireTime: storage stopped at 7,200 s
    assert (await storage())["cachedContent"] == pytest.approx(3000 * 1.00 * 2 / 1e6)
    assert cache.expire_time == instant(7200)
