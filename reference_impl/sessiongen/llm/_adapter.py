"""`ProviderAdapter`: what the four provider adapters (Anthropic, Bedrock, OpenAI, Gemini)
share, so they cannot drift apart.

- **One retry rule.** Every SDK is built (or used) with its own retries off; the adapter
  retries instead, the same way for all four. `generate()` makes exactly one HTTP attempt
  (SG-INV-3). `stream()` retries a transient failure (`RETRYABLE`: rate-limited,
  overloaded, a provider server error, a timeout, a connection that failed) up to
  `max_retries` times (`DEFAULT_MAX_RETRIES` unless told), and only while nothing has been
  yielded: once the first event is out, a failure is the caller's, never retried under it.
  Between attempts it waits what the provider asked (`retry_after`, up to a minute), else
  an exponential backoff with jitter.
- **One error translation.** `translate` turns any SDK or transport failure into a
  sessiongen error; an adapter only says how to read its SDK's exception (`_read_failure`):
  the HTTP status, headers, body and message of a status error (`ProviderAnswer`, mapped by
  `errors.provider_error_for_status`, headers and body kept on the error), or the kind of a
  failure without one (a timeout, a connection, a broken stream, missing credentials).
- **One install hint.** `require` imports an optional SDK, or raises the ImportError that
  names the package and the `providers` extra.
"""

from __future__ import annotations

import asyncio
import email.utils
import importlib
import random
import time
from collections.abc import AsyncGenerator, AsyncIterator, Iterator, Mapping
from contextlib import aclosing, contextmanager
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, ClassVar, Literal

from .._resource import AsyncResource
from ..errors import (
    MissingExtra,
    ProviderAuthenticationError,
    ProviderConnectionError,
    ProviderError,
    ProviderOverloaded,
    ProviderRateLimited,
    ProviderServerError,
    ProviderStreamInterrupted,
    ProviderTimeout,
    SessiongenError,
    provider_error_for_status,
)
from .client import collect
from .types import LLMRequest, LLMResponse, StreamEvent

__all__ = [
    "DEFAULT_MAX_RETRIES",
    "Call",
    "INSTALL_HINT",
    "RETRYABLE",
    "FailureKind",
    "ProviderAdapter",
    "ProviderAnswer",
    "require",
    "retry_after_seconds",
    "retry_delay",
]

DEFAULT_MAX_RETRIES = 2
"""How many times `stream()` retries a transient failure unless told (the Anthropic and
OpenAI SDKs' own default)."""

MAX_RETRY_AFTER = 60.0
"""A provider's `retry-after` longer than this is not waited for; the backoff applies."""

RETRYABLE: tuple[type[ProviderError], ...] = (
    ProviderRateLimited,
    ProviderOverloaded,
    ProviderServerError,
    ProviderTimeout,
    ProviderConnectionError,
)
"""The failures `stream()` retries (before its first event). Not retried: a refused request
(invalid, unauthorized, not found), a context overflow, a stream broken after it began."""

INSTALL_HINT = 'pip install "sessiongen[providers]"  (or: uv add "sessiongen[providers]")'


def require(module: str, package: str, adapter: str) -> ModuleType:
    """`module` imported, or `MissingExtra` (an ImportError) naming the missing `package` and
    the extra that installs it (the Bedrock, OpenAI and Gemini SDKs are the optional
    `providers` extra)."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        missing = MissingExtra(
            f"{adapter} needs the {package!r} package, which is not installed; install "
            f"sessiongen's providers extra: {INSTALL_HINT}"
        )
        missing.name = err.name
        raise missing from err


FailureKind = Literal["timeout", "connection", "stream", "credentials", "other"]
"""A failure without an HTTP answer: the SDK's own timeout, a connection that could not be
made, a stream that broke after it began, no usable credentials, anything else."""


@dataclass(frozen=True)
class ProviderAnswer:
    """What a provider's error answer said, read from an SDK's status error.

    `status` below 400 is an error reported inside a 200 stream whose type names no status:
    the stream is interrupted. `context_overflow` marks the provider's "prompt too long" when
    only the adapter can tell it (an error code, the provider's wording)."""

    status: int
    message: str
    headers: Mapping[str, str] = field(default_factory=dict)
    body: Any = None
    request_id: str | None = None
    error_type: str | None = None
    context_overflow: bool = False


@dataclass
class Call:
    """What is known about the call in flight, for errors raised after its response began."""

    request_id: str | None = None


def retry_after_seconds(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """The wait a provider asked for: `retry-after-ms` (milliseconds), else `retry-after`
    (seconds, or an HTTP date); None when neither is there or readable."""
    lowered = {name.lower(): value for name, value in headers.items()}
    millis = lowered.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def retry_delay(attempt: int, retry_after: float | None) -> float:
    """The wait before retry number `attempt` (1 for the first): the provider's
    `retry_after` when it gave one up to `MAX_RETRY_AFTER`, else 0.5 s doubling per attempt,
    capped at 8 s, less up to a quarter of jitter (the Anthropic SDK's schedule)."""
    if retry_after is not None and 0 <= retry_after <= MAX_RETRY_AFTER:
        return retry_after
    backoff = min(0.5 * 2.0 ** (attempt - 1), 8.0)
    return backoff * (1 - 0.25 * random.random())


class ProviderAdapter(AsyncResource):
    """The base of the four provider adapters: an `LLMClient` over one official SDK.

    A subclass implements `_attempt` (one HTTP attempt as a stream of events, its SDK's
    retries off, failures translated) and `_read_failure` (how to read its SDK's
    exceptions), and `aclose`. `stream`, `generate`, the retry rule and the translation are
    here.
    """

    provider: ClassVar[str] = "the provider"
    request_id_headers: ClassVar[tuple[str, ...]] = ("request-id", "x-request-id")
    """Response headers that carry the provider's request id, first match wins."""

    def __init__(self, *, max_retries: int | None = None) -> None:
        retries = DEFAULT_MAX_RETRIES if max_retries is None else max_retries
        if retries < 0:
            raise ValueError(f"max_retries must be 0 or more, got {retries}")
        self._max_retries = retries

    @property
    def max_retries(self) -> int:
        """How many times `stream()` retries a transient failure before its first event."""
        return self._max_retries

    # --- the LLMClient protocol -----------------------------------------------------------

    def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        return self._retrying(request)

    async def generate(self, request: LLMRequest) -> LLMResponse:
        # One attempt only: session.generate promises a single provider call (SG-INV-3).
        async with aclosing(self._attempt(request)) as events:
            return await collect(events)

    async def _retrying(self, request: LLMRequest) -> AsyncGenerator[StreamEvent, None]:
        attempt = 0
        while True:
            started = False
            try:
                async with aclosing(self._attempt(request)) as events:
                    async for event in events:
                        started = True
                        yield event
                return
            except RETRYABLE as err:
                if started or attempt >= self._max_retries:
                    raise
                attempt += 1
                delay = retry_delay(attempt, err.retry_after)
            await asyncio.sleep(delay)

    def _attempt(self, request: LLMRequest) -> AsyncGenerator[StreamEvent, None]:
        """One HTTP attempt as a stream of events, ending with a FinishEvent; every failure a
        sessiongen error (`_provider_errors`)."""
        raise NotImplementedError

    # --- error translation ----------------------------------------------------------------

    def _read_failure(self, err: Exception) -> ProviderAnswer | tuple[FailureKind, str] | None:
        """What `err` says: a `ProviderAnswer` for an SDK status error, a `(kind, detail)` for
        a failure without an answer, None for an exception that is not the SDK's (it then
        propagates as it is)."""
        raise NotImplementedError

    def translate(self, err: Exception, request_id: str | None = None) -> SessiongenError | None:
        """The sessiongen error for an SDK or transport failure, or None when `err` is not
        one. `request_id` is the call's, when its response had begun."""
        if isinstance(err, SessiongenError):
            return err
        read = self._read_failure(err)
        if read is None:
            return None
        if isinstance(read, ProviderAnswer):
            return self._answer_error(read, request_id)
        kind, detail = read
        if kind == "timeout":
            return ProviderTimeout(
                f"the provider call timed out: {detail}", provider_request_id=request_id
            )
        if kind == "connection":
            return ProviderConnectionError(
                f"could not reach the provider: {detail}", provider_request_id=request_id
            )
        if kind == "stream":
            return ProviderStreamInterrupted(
                f"the provider stream broke: {detail}", provider_request_id=request_id
            )
        if kind == "credentials":
            return ProviderAuthenticationError(detail)
        return ProviderError(detail, provider_request_id=request_id)

    def _answer_error(self, answer: ProviderAnswer, request_id: str | None) -> SessiongenError:
        headers = {name.lower(): value for name, value in answer.headers.items()}
        request_id = (
            answer.request_id
            or next((headers[h] for h in self.request_id_headers if headers.get(h)), None)
            or request_id
        )
        if answer.status < 400:
            return ProviderStreamInterrupted(
                f"the provider stream reported an error: {answer.message}",
                provider_request_id=request_id,
                provider_error_type=answer.error_type,
                headers=headers,
                body=answer.body,
            )
        return provider_error_for_status(
            answer.status,
            answer.message,
            request_id=request_id,
            error_type=answer.error_type,
            retry_after=retry_after_seconds(headers),
            headers=headers,
            body=answer.body,
            context_overflow=answer.context_overflow,
        )

    @contextmanager
    def _provider_errors(self, call: Call | None = None) -> Iterator[None]:
        """Translate every SDK and transport failure inside the block (`translate`), with the
        request id `call` knows by then."""
        try:
            yield
        except SessiongenError:
            raise
        except Exception as err:
            error = self.translate(err, call.request_id if call is not None else None)
            if error is None:
                raise
            raise error from err
