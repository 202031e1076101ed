"""The four provider adapters on one base (`ProviderAdapter`), observed at the wire: each
official SDK against the emulator's fault injection, built by the one factory for in-process
emulator clients (`inprocess_llm`).

- a provider's error keeps what the provider sent: its status, request id, `retry-after`,
  headers and body;
- one retry rule: `stream()` retries a transient failure before its first event, up to
  `max_retries`, waiting the provider's retry-after; `generate()` never retries;
- a missing optional SDK is an ImportError naming it and the `providers` extra.
"""

from __future__ import annotations

import importlib
import sys
import time
from collections.abc import AsyncIterator

import pytest
from sessiongen.emulator import EmulatorState, FaultSpec
from sessiongen.emulator.client import inprocess_llm
from sessiongen.errors import (
    ProviderInvalidRequest,
    ProviderOverloaded,
    ProviderRateLimited,
    ProviderServerError,
    ProviderStreamInterrupted,
)
from sessiongen.lab import PROVIDER_MODELS, PROVIDERS, Provider
from sessiongen.llm import LLMMessage, LLMRequest, TextContent, _adapter
from sessiongen.llm._adapter import (
    DEFAULT_MAX_RETRIES,
    INSTALL_HINT,
    ProviderAdapter,
    retry_after_seconds,
    retry_delay,
)
from sessiongen.llm.client import collect
from sessiongen.llm.types import StreamEvent


def _request(provider: Provider) -> LLMRequest:
    hello = LLMMessage(role="user", content=(TextContent(text="hello"),))
    return LLMRequest(model=PROVIDER_MODELS[provider], max_output_tokens=64, messages=(hello,))


@pytest.fixture
def state() -> EmulatorState:
    return EmulatorState()


@pytest.fixture(params=PROVIDERS)
async def adapter(
    request: pytest.FixtureRequest, state: EmulatorState
) -> AsyncIterator[tuple[Provider, ProviderAdapter]]:
    provider: Provider = request.param
    async with inprocess_llm(provider, state, max_retries=2) as llm:
        yield provider, llm


def _statuses(state: EmulatorState) -> list[int]:
    return [r["status"] for r in state.requests()]


async def test_a_rate_limit_keeps_the_providers_retry_after_headers_and_body(
    adapter: tuple[Provider, ProviderAdapter], state: EmulatorState
) -> None:
    """429 with `retry-after` and a header of its own: the typed error carries the provider's
    status, request id, retry-after (seconds), every response header (lower-cased) and the
    body parsed from JSON; generate made one request."""
    provider, llm = adapter
    state.add_fault(
        FaultSpec(status=429, message="slow down", headers={"retry-after": "7", "X-Trace": "t1"})
    )
    with pytest.raises(ProviderRateLimited) as raised:
        await llm.generate(_request(provider))
    error = raised.value
    logged = state.requests()
    assert [r["status"] for r in logged] == [429]
    assert error.provider_status == 429
    assert error.provider_request_id == logged[0]["id"]
    assert error.retry_after == 7.0
    assert error.headers["x-trace"] == "t1" and error.headers["retry-after"] == "7"
    assert isinstance(error.body, dict) and "slow down" in str(error.body)
    details = error.problem_details()
    assert details["retry_after"] == 7.0 and details["provider_status"] == 429


async def test_an_error_without_retry_after_has_none(
    adapter: tuple[Provider, ProviderAdapter], state: EmulatorState
) -> None:
    provider, llm = adapter
    state.add_fault(FaultSpec(status=400, message="bad"))
    with pytest.raises(ProviderInvalidRequest) as raised:
        await llm.generate(_request(provider))
    assert raised.value.retry_after is None and raised.value.provider_status == 400
    assert raised.value.headers  # the answer's headers, whatever the provider sends


async def test_stream_retries_a_transient_failure_and_waits_its_retry_after(
    adapter: tuple[Provider, ProviderAdapter],
    state: EmulatorState,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One rule for the four: two transient failures (529, 500), then success, on a stream
    with max_retries=2; the first retry waits the provider's `retry-after-ms`."""
    provider, llm = adapter
    waits: list[tuple[int, float | None]] = []

    def recorded(attempt: int, retry_after: float | None) -> float:
        waits.append((attempt, retry_after))
        return retry_delay(attempt, retry_after)

    monkeypatch.setattr(_adapter, "retry_delay", recorded)
    state.add_fault(FaultSpec(status=529, headers={"retry-after-ms": "300"}))
    state.add_fault(FaultSpec(status=500, headers={"retry-after-ms": "0"}))
    started = time.monotonic()
    response = await collect(llm.stream(_request(provider)))
    assert time.monotonic() - started >= 0.3
    assert waits == [(1, 0.3), (2, 0.0)]
    assert response.finish_reason == "end_turn"
    assert _statuses(state) == [529, 500, 200]


async def test_stream_gives_up_after_max_retries(
    adapter: tuple[Provider, ProviderAdapter], state: EmulatorState
) -> None:
    provider, llm = adapter
    state.add_fault(FaultSpec(status=529, count=3, headers={"retry-after": "0"}))
    with pytest.raises(ProviderOverloaded):
        await collect(llm.stream(_request(provider)))
    assert _statuses(state) == [529, 529, 529]


async def test_generate_never_retries(
    adapter: tuple[Provider, ProviderAdapter], state: EmulatorState
) -> None:
    provider, llm = adapter
    state.add_fault(FaultSpec(status=500, headers={"retry-after": "0"}))
    with pytest.raises(ProviderServerError):
        await llm.generate(_request(provider))
    assert _statuses(state) == [500]


async def test_stream_does_not_retry_a_refused_request(
    adapter: tuple[Provider, ProviderAdapter], state: EmulatorState
) -> None:
    provider, llm = adapter
    state.add_fault(FaultSpec(status=400))
    with pytest.raises(ProviderInvalidRequest):
        await collect(llm.stream(_request(provider)))
    assert _statuses(state) == [400]


async def test_stream_never_retries_once_an_event_is_out(state: EmulatorState) -> None:
    """A failure after the first event is raised, not retried: the caller has seen part of
    the answer. (A base-class rule: a fake attempt fails after one event.)"""

    class Flaky(ProviderAdapter):
        attempts = 0

        async def _attempt(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:  # type: ignore[override]
            from sessiongen.llm.types import TextDelta

            Flaky.attempts += 1
            yield TextDelta(text="partial")
            raise ProviderOverloaded("cut", provider_status=529, retry_after=0)

        async def aclose(self) -> None:
            pass

    events = []
    with pytest.raises(ProviderOverloaded):
        async for event in Flaky(max_retries=3).stream(_request("anthropic")):
            events.append(event)
    assert Flaky.attempts == 1 and len(events) == 1


async def test_a_cut_stream_is_not_retried(
    adapter: tuple[Provider, ProviderAdapter], state: EmulatorState
) -> None:
    """A stream that ends before its finish (here: before any event) is interrupted, and
    not retried: the provider had answered 200."""
    provider, llm = adapter
    state.add_fault(FaultSpec(cut_after_events=0))
    with pytest.raises(ProviderStreamInterrupted):
        await collect(llm.stream(_request(provider)))
    assert _statuses(state) == [200]


def test_every_adapter_has_the_one_default() -> None:
    assert DEFAULT_MAX_RETRIES == 2
    assert ProviderAdapter().max_retries == DEFAULT_MAX_RETRIES
    with pytest.raises(ValueError):
        ProviderAdapter(max_retries=-1)


def test_retry_after_reads_milliseconds_seconds_and_dates() -> None:
    assert retry_after_seconds({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert retry_after_seconds({"Retry-After": "2"}) == 2.0
    assert (
        retry_after_seconds({"retry-after": "Wed, 21 Oct 2015 07:28:10 GMT"}, now=1445412480) == 10
    )
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({}) is None
    assert retry_delay(1, 3.0) == 3.0
    assert 0.375 <= retry_delay(1, None) <= 0.5 and 0.375 <= retry_delay(1, 600.0) <= 0.5
    assert 6 <= retry_delay(10, None) <= 8


@pytest.mark.parametrize(
    ("module", "missing", "package"),
    [
        ("sessiongen.providers.openai.adapter", "openai", "openai"),
        ("sessiongen.providers.bedrock.adapter", "boto3", "boto3"),
        ("sessiongen.providers.gemini.adapter", "google.genai", "google-genai"),
    ],
)
def test_a_missing_sdk_names_the_package_and_the_extra(
    monkeypatch: pytest.MonkeyPatch, module: str, missing: str, package: str
) -> None:
    monkeypatch.setitem(sys.modules, missing, None)  # an import of it now fails
    monkeypatch.delitem(sys.modules, module, raising=False)
    with pytest.raises(ImportError) as raised:
        importlib.import_module(module)
    message = str(raised.value)
    assert repr(package) in message and INSTALL_HINT in message
    assert 'pip install "sessiongen[providers]"' in message
    assert 'uv add "sessiongen[providers]"' in message
