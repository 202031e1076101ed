"""`sessiongen emulator probe`: run the cache probes behind the emulator's rules through a
provider's official SDK against any endpoint that speaks its API (the real provider with the
user's key, or a `sessiongen emulator`), and put each request's usage beside the emulator's
prediction.

The prediction is the same probe sequence, through the same SDK code, sent to an embedded
emulator (a fresh `EmulatorState` served on a loopback socket in this process) whose virtual
clock is moved by exactly the probe's waits: it comes from the one cache model, never from a
copy of its rules. Each probe is a short named sequence of requests on a timeline (seconds
from the run's start); all probes share one timeline, so the waits of the TTL probes overlap.
Every probe's prefix starts with a run id and its own name, so no probe reads what another
probe, or an earlier run, wrote.

A request agrees when its cache read and its cache write are both present or both absent in
the real and the predicted usage, and each is the same share of the request's input within
`tolerance` (the real tokenizer counts differently from the emulator's calibrated counter, so
token counts are compared as shares of the input, not exactly). A probe agrees when all its
requests do.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import secrets
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any, Literal, Protocol, TypeAlias, TypeVar, cast
from urllib.parse import urljoin, urlsplit

import httpx2
import pydantic

from ._bind import EMULATOR_TOKEN_ENV
from ._choices import Provider
from .cache import get_model, list_models, price
from .llm.types import Usage
from .providers import PROVIDERS
from .tokens import count_text_tokens, text_scale

Lifetime = Literal["default", "short", "long"]
"""How long a request asks its cache entries to live: the provider's default, its short
lifetime (Anthropic and Bedrock 5m, OpenAI `in_memory`) or its long one (1h, OpenAI `24h`).
Gemini's implicit cache has no setting: all three are the same request there."""

INSTALL_HINT = "pip install 'sessiongen[providers]'"
DEFAULT_MAX_COST = 0.05
DEFAULT_TOLERANCE = 0.10
PREFIX_MARGIN = 1.15
"""The prefix aims at this multiple of the model's minimum cacheable length (by the emulator's
counter), so that a real tokenizer that counts a little less still reaches the minimum."""
COST_SAFETY = 1.25
"""The worst-case estimate counts this many real tokens per predicted one."""
TTL_SECONDS = 300.0
"""The short lifetime the TTL probe waits around (Anthropic's documented 5 minutes)."""
TTL_MARGIN = 15.0
RETENTION_GAP = 600.0
"""The retention probe's idle gap: past the short lifetime, well inside the long one."""
BEARER_ENV = "AWS_BEARER_TOKEN_BEDROCK"
DEFAULT_TIMEOUT = 30.0
"""Seconds each request may take in all, connecting and reading included (`--timeout`)."""
REDIRECTS = frozenset({301, 302, 303, 307, 308})
MIN_COUNT_RATIO = 0.5
"""An endpoint's token count of the first request below this share of the emulator's is not
a real tokenizer's (they differ by far less): growing the prefix by it would build a prompt
of millions of tokens."""
ADMIN_CLOCK = "/_emulator/clock"
_WORDS = (
    "the and for are but not you all any can had her was one our out day get has him his how "
    "man new now old see two way who boy did its let put say she too use"
).split()

"""Filler: three-letter words, so a word and its space are one token of the emulator's
counter (four bytes) and, in the common tokenizers, one real token too."""


class ProbeError(Exception):
    """A failure the command reports as one line (`sessiongen: error: ...`, exit 1)."""


# --- the probes ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """One request of a probe: at `at` seconds from the run's start, the probe's prefix
    number `prefix` as the system prompt, then `turns` (user, assistant, user, ...).

    `anchor`: the turn (index into `turns`) whose end carries the tail breakpoint on the
    providers with explicit breakpoints (default: the last); a warm ping anchors it on the
    history, not on its own prompt, as `session.generate(warming=True)` does. `ping`: ask
    for no output (Anthropic `max_tokens` 0; 1 elsewhere, their minimum)."""

    label: str
    at: float
    prefix: int
    turns: tuple[str, ...]
    lifetime: Lifetime = "default"
    ping: bool = False
    anchor: int | None = None


@dataclass(frozen=True)
class Probe:
    name: str
    checks: str
    steps: tuple[Step, ...]
    needs_ttl: bool = False


_Q1 = "Question one: answer with a single word."
_Q2 = "Question two: answer with a single word."
_A1 = "Word."
_PING = "Cache keep-alive ping: no answer needed."


def probes(*, with_ttl: bool) -> list[Probe]:
    """The probes, in order: `shared-prefix` and `warm-ping` always, `ttl-boundary` and
    `retention` only `with_ttl` (they wait minutes of real time against a real endpoint)."""
    under, over = TTL_SECONDS - TTL_MARGIN, TTL_SECONDS + TTL_MARGIN
    every = [
        Probe(
            "shared-prefix",
            "B, same prefix as A and another last message, reads the prefix A wrote",
            (Step("A", 0, 0, (_Q1,)), Step("B", 0, 0, (_Q2,))),
        ),
        Probe(
            "warm-ping",
            "a keep-alive ping after turn 1 (the history plus a prompt, no output) writes the "
            "history, and turn 2 reads what the ping wrote",
            (
                Step("turn 1", 0, 0, (_Q1,)),
                Step("ping", 0, 0, (_Q1, _A1, _PING), ping=True, anchor=1),
                Step("turn 2", 0, 0, (_Q1, _A1, _Q2)),
            ),
        ),
        Probe(
            "ttl-boundary",
            f"the same request again {under:.0f} s after the write reads it, {over:.0f} s "
            f"after it does not (the short lifetime, {TTL_SECONDS:.0f} s)",
            (
                Step("write 1", 0, 0, (_Q1,), "short"),
                Step("write 2", 0, 1, (_Q1,), "short"),
                Step(f"read 1 @{under:.0f}s", under, 0, (_Q1,), "short"),
                Step(f"read 2 @{over:.0f}s", over, 1, (_Q1,), "short"),
            ),
            needs_ttl=True,
        ),
        Probe(
            "retention",
            f"with the long lifetime, the same request again after a {RETENTION_GAP:.0f} s "
            "idle gap: what it reads",
            (
                Step("write", 0, 0, (_Q1,), "long"),
                Step(f"read @{RETENTION_GAP:.0f}s", RETENTION_GAP, 0, (_Q1,), "long"),
            ),
            needs_ttl=True,
        ),
    ]
    return [p for p in every if with_ttl or not p.needs_ttl]


def prefix_text(run_id: str, probe: str, number: int, tokens: int) -> str:
    """A system prompt of at least `tokens` tokens by the emulator's counter, starting with
    the run id and the probe's name, so it shares no prefix with any other probe or run."""
    words = [f"[sessiongen probe {run_id} {probe} prefix {number}]"]
    i = 0
    while count_text_tokens(" ".join(words)) < tokens:
        words.append(_WORDS[i % len(_WORDS)])
        i += 1
    return " ".join(words)


def prefix_tokens(model: str, target: float | None = None) -> int:
    """The prefix length, in the byte counter's tokens, whose billed count on `model` (the
    one counter's `text_scale`) is `target`: by default just over the model's minimum."""
    info = get_model(model)
    if target is None:
        target = info.min_cacheable_tokens * PREFIX_MARGIN
    return int(target / text_scale(model)) + 1


# --- models and cost -----------------------------------------------------------------------


def _worst_price(model: str, lifetime: Lifetime = "default") -> float:
    """The dearest rate an input token of a request with this lifetime can be billed at."""
    p = price(model)
    return max(p.input, p.cache_write_1h if lifetime == "long" else p.cache_write_5m)


def available_models(provider: Provider) -> list[str]:
    """The catalogued, priced, unretired models of `provider` (a model with a retirement
    date is out, as the emulator answers it 404 whatever the date)."""
    found = []
    for info in list_models():
        if info.provider != provider or info.retired is not None:
            continue
        try:
            price(info.id)
        except KeyError:
            continue
        found.append(info.id)
    return found


def cheapest_model(provider: Provider) -> str:
    """The model the probes cost least on: the smallest minimum prefix times its worst
    per-token price (ties: catalog order)."""
    models = available_models(provider)
    if not models:
        raise ProbeError(f"no catalogued model for {provider}")
    best = min(models, key=lambda m: get_model(m).min_cacheable_tokens * _worst_price(m))
    model_id: str = PROVIDERS[provider].part("probe").model_id(best)
    return model_id


def worst_case_cost(
    the_plan: Plan, predicted: dict[tuple[int, int], Usage], ratio: float = 1.0
) -> float:
    """USD if every input token of every request (the prediction's counts times `ratio`, the
    endpoint's count over the emulator's, times `COST_SAFETY`) were billed at the dearest
    rate its lifetime allows (a cache write), plus one output token each."""
    output = price(the_plan.model).output
    total = 0.0
    for key, prompt in the_plan.prompts.items():
        tokens = Counts.of(predicted[key]).total * ratio * COST_SAFETY
        total += tokens * _worst_price(the_plan.model, prompt.lifetime) + output
    return total / 1_000_000


# --- results -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Counts:
    """A request's input as the probe compares it: uncached input, cache read, cache write
    (5m and 1h together), and their total."""

    input: int
    cache_read: int
    cache_write: int

    @property
    def total(self) -> int:
        return self.input + self.cache_read + self.cache_write

    @staticmethod
    def of(usage: Usage) -> Counts:
        return Counts(
            usage.input_tokens,
            usage.cache_read_tokens,
            usage.cache_write_5m_tokens + usage.cache_write_1h_tokens,
        )


def _share(part: int, whole: int) -> float:
    return part / whole if whole else 0.0


def counts_agree(real: Counts, predicted: Counts, tolerance: float) -> bool:
    """Read and write each present in both or in neither, and the same share of the input
    within `tolerance`."""
    for r, p in (
        (real.cache_read, predicted.cache_read),
        (real.cache_write, predicted.cache_write),
    ):
        if (r > 0) != (p > 0):
            return False
        if abs(_share(r, real.total) - _share(p, predicted.total)) > tolerance:
            return False
    return True


@dataclass(frozen=True)
class RequestResult:
    label: str
    at: float
    predicted: Counts
    real: Counts | None = None
    agree: bool | None = None
    error: str | None = None
    """The endpoint's error for this request, which then has no `real` usage."""


@dataclass
class ProbeResult:
    name: str
    checks: str
    requests: list[RequestResult] = field(default_factory=list)

    @property
    def agree(self) -> bool:
        return all(r.agree for r in self.requests)


# --- endpoints -----------------------------------------------------------------------------


class Pacer(Protocol):
    def until(self, at: float) -> None:
        """Return at `at` seconds from the run's start (by this endpoint's time)."""


class VirtualPacer:
    """Moves an emulator's virtual clock by each wait: `advance(seconds)`."""

    def __init__(self, advance: Callable[[float], object]) -> None:
        self._advance = advance
        self._now = 0.0

    def until(self, at: float) -> None:
        if at > self._now:
            self._advance(at - self._now)
            self._now = at


class WallPacer:
    """Sleeps until `at` seconds after the first request (so the requests' own latency does
    not add up), saying so through `say`."""

    def __init__(
        self,
        say: Callable[[str], None],
        *,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._start: float | None = None
        self._say = say
        self._sleep = sleep
        self._monotonic = monotonic

    def until(self, at: float) -> None:
        if self._start is None:
            self._start = self._monotonic()
        remaining = self._start + at - self._monotonic()
        if remaining > 0:
            self._say(f"waiting {remaining:.0f} s (until {at:.0f} s into the run)")
            self._sleep(remaining)


def _origin(url: str) -> str:
    """`url`'s origin, `scheme://host:port` with the default port written out, so that two
    spellings of one origin compare equal. ValueError for a URL without one (or a bad port)."""
    parts = urlsplit(url)
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    if scheme not in ("http", "https") or not host:
        raise ValueError(f"no http(s) origin in {url[:80]!r}")
    port = parts.port or (443 if scheme == "https" else 80)
    return f"{scheme}://{f'[{host}]' if ':' in host else host}:{port}"


def check_base_url(url: str) -> str:
    """`url` without a trailing slash, or ValueError: it must be http(s)://host[:port][/path]."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"must be an http:// or https:// URL with a host, got {url!r}")
    try:
        parts.port  # noqa: B018  (a bad port raises here)
    except ValueError:
        raise ValueError(f"has a bad port: {url!r}") from None
    return url.rstrip("/")


def check_timeout(text: str) -> float:
    """`--timeout`: a number of seconds above 0 (at most a day), or ValueError."""
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds <= 86_400:  # NaN fails too
        raise ValueError(f"must be a number of seconds above 0, got {text!r}")
    return seconds


def detect_emulator(base_url: str, token: str | None, guard: Guard) -> httpx2.Client | None:
    """An admin client for `base_url`'s `/_emulator` API when the endpoint is a sessiongen
    emulator (its `GET /_emulator/clock` answers a time), else None. A refused connection is
    a `ProbeError`; so is an emulator whose admin API wants a token that is missing or wrong,
    and, through `guard`, a redirect to another origin or no answer within the timeout."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    client = guard.http_client(base_url=_origin(base_url), headers=headers)
    try:
        response = guard.call(lambda: client.get(ADMIN_CLOCK))
    except httpx2.ConnectError as exc:
        raise ProbeError(f"cannot connect to {base_url}: {reason(exc)}") from None
    except httpx2.HTTPError as exc:
        raise ProbeError(f"cannot reach {base_url}: {reason(exc)}") from None
    except ProbeError as exc:
        raise ProbeError(f"the emulator check (GET {ADMIN_CLOCK}): {exc}") from None
    if response.status_code == 401 and "sessiongen-emulator" in response.headers.get(
        "www-authenticate", ""
    ):
        raise ProbeError(
            f"{base_url} is a sessiongen emulator whose admin API wants a token "
            f"({'a wrong one was given' if token else 'none given'}): pass --emulator-token "
            f"or set ${EMULATOR_TOKEN_ENV}, so the probe can move its clock"
        )
    try:
        is_emulator = response.status_code == 200 and isinstance(response.json()["now"], float)
    except (ValueError, KeyError, TypeError):
        is_emulator = False
    return client if is_emulator else None


def reason(exc: BaseException) -> str:
    text = str(exc)
    if "refused" in text.lower():
        return "connection refused"
    return printable(text) or type(exc).__name__


def printable(text: str, limit: int = 200) -> str:
    """`text` (from the endpoint, perhaps hostile) as one short line of printable ASCII."""
    line = "".join(c if " " <= c <= "~" else "?" for c in text.strip())
    return line if len(line) <= limit else line[: limit - 3] + "..."


# --- transport safety ----------------------------------------------------------------------


class Refused(ProbeError):
    """A redirect (or a request) off the endpoint's origin: refused, nothing sent there."""


class TimedOut(ProbeError):
    """No complete answer within the timeout."""


class Malformed(ProbeError):
    """An answer the probe cannot read: not JSON, the wrong shape or types, cut off."""


_T = TypeVar("_T")


class Guard:
    """The transport safety of every request the probe sends: its own admin requests and the
    four SDKs' (`sdk_client` builds those, the one place that configures them).

    - One origin only: the base URL's scheme, host and port (without a base URL, the SDK's own
      endpoint, pinned at its first request). No SDK follows a redirect; one to another origin
      ends the run with a `Refused` naming the target, and nothing, no key and no prompt, is
      ever sent there.
    - Time: every SDK connects and reads with a `timeout`-second limit, and every request runs
      under a total deadline of `timeout` seconds (`call`), so an endpoint that drips its
      answer a byte at a time cannot keep the probe alive past it either.
    - Answers: `call` turns what an unreadable answer makes an SDK raise (a JSON error, a
      validation error, a body cut off) into one `Malformed` line.
    """

    def __init__(self, base_url: str | None, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.origin = _origin(base_url) if base_url is not None else None
        self.timeout = timeout
        self.answers = 0
        """How many answers (any status) have come back so far."""
        self._owned: list[httpx2.Client] = []

    # --- the origin --------------------------------------------------------------------

    def check_request(self, url: str) -> None:
        """`Refused` unless `url` is on the origin (the first request pins it if unset)."""
        try:
            origin = _origin(url)
        except ValueError:
            origin = "an unparsable URL"
        if self.origin is None:
            self.origin = origin
        elif origin != self.origin:
            raise Refused(
                f"refused a request to {printable(origin)}: the probe sends only to {self.origin}"
            )

    def check_answer(self, url: str, status: int, location: str | None) -> None:
        """`Refused` when an answer to a request for `url` redirects to another origin."""
        self.answers += 1
        if status not in REDIRECTS or not location:
            return
        try:
            target = _origin(urljoin(url, location.strip()))
        except ValueError:
            target = "an unparsable location"
        if target != (self.origin or _origin(url)):
            raise Refused(
                f"the endpoint redirected (HTTP {status}) to {printable(target)}, another "
                f"origin than {self.origin}: refused, not followed"
            )

    # --- the clients -------------------------------------------------------------------

    def http_client(self, **options: Any) -> httpx2.Client:
        """An httpx2 client that follows no redirect, checks every request and answer
        against the origin, and connects and reads within the timeout."""
        client = httpx2.Client(
            timeout=httpx2.Timeout(self.timeout),
            follow_redirects=False,
            event_hooks={"request": [self._on_request], "response": [self._on_response]},
            **options,
        )
        self._owned.append(client)
        return client

    def _on_request(self, request: httpx2.Request) -> None:
        self.check_request(str(request.url))

    def _on_response(self, response: httpx2.Response) -> None:
        location = response.headers.get("location")
        self.check_answer(str(response.request.url), response.status_code, location)

    def sdk_client(self, provider: str, base_url: str | None, **credentials: Any) -> Any:
        """`provider`'s official SDK client at `base_url` (None: its own endpoint), on this
        guard, built by the provider's probe part (`sdk_client(guard, base_url, ...)`): every
        redirect and answer passes the guard's origin checks, and retries are off everywhere
        (one request each)."""
        import_sdk(provider)
        return PROVIDERS[provider].part("probe").sdk_client(self, base_url, **credentials)

    def before_send(self, request: Any, **_: Any) -> None:
        self.check_request(str(request.url))

    def before_parse(self, response_dict: Mapping[str, Any], **_: Any) -> None:
        headers = response_dict.get("headers") or {}
        status = int(response_dict.get("status_code") or 0)
        self.check_answer(f"{self.origin}/", status, headers.get("location"))

    def close(self) -> None:
        for client in self._owned:
            client.close()

    # --- the deadline ------------------------------------------------------------------

    def call(self, send: Callable[[], _T]) -> _T:
        """`send()`, one request through an SDK or the admin client, within the total
        deadline. It runs on a daemon thread, abandoned when the deadline passes (its socket
        timeouts end it soon after, and the command exits without waiting for it): no
        socket-level timeout bounds an endpoint that sends a byte a second. A refusal, a
        timeout or an unreadable answer comes out as a one-line `ProbeError`; anything else
        the SDK raised, as it is (for the driver's own error mapping)."""
        outcome: list[tuple[bool, Any]] = []

        def work() -> None:
            try:
                outcome.append((True, send()))
            except BaseException as exc:  # handed over to the caller's thread
                outcome.append((False, exc))

        worker = threading.Thread(target=work, name="sessiongen-probe-request", daemon=True)
        worker.start()
        worker.join(self.timeout)
        if not outcome:
            raise self._timed_out()
        done, value = outcome[0]
        if done:
            return cast(_T, value)
        explained = self._explain(value)
        if explained is None:
            raise value
        raise explained from None

    def _timed_out(self) -> TimedOut:
        return TimedOut(f"no complete answer within {self.timeout:g} s (--timeout)")

    def _explain(self, exc: BaseException) -> ProbeError | None:
        """The one-line error for `exc` (or what it was raised from), or None."""
        chain: list[BaseException] = []
        cause: BaseException | None = exc
        while cause is not None and all(cause is not seen for seen in chain):
            chain.append(cause)
            cause = cause.__cause__ or cause.__context__
        for error in chain:
            if isinstance(error, ProbeError):  # a refusal from a hook, wrapped by the SDK
                return error
        refused, timeouts, broken, unparsable = _sdk_error_types()
        if any(isinstance(error, refused) for error in chain):
            # Before the timeouts: urllib3's NewConnectionError subclasses its
            # ConnectTimeoutError. The driver's own mapping says it cannot connect.
            return None
        for error in chain:
            if isinstance(error, timeouts):
                return self._timed_out()
            if isinstance(error, json.JSONDecodeError):
                return Malformed(f"malformed answer: not JSON ({error.msg} at byte {error.pos})")
            if isinstance(error, pydantic.ValidationError):
                first = error.errors()[0] if error.error_count() else None
                where = ".".join(str(part) for part in first["loc"]) if first else ""
                what = f"{where or 'the answer'}: {first['msg'] if first else error.title}"
                return Malformed(f"malformed answer: {printable(what)}")
            if isinstance(error, broken):
                return Malformed(f"malformed answer: it broke off ({reason(error)})")
            if isinstance(error, unparsable):
                lines = str(error).strip().splitlines() or [type(error).__name__]
                return Malformed(f"malformed answer: {printable(lines[0])}")
        return None


def _sdk_error_types() -> tuple[
    tuple[type[BaseException], ...],
    tuple[type[BaseException], ...],
    tuple[type[BaseException], ...],
    tuple[type[BaseException], ...],
]:
    """What the HTTP stacks raise for (a connection that could not be made, a timeout, a
    body cut off, a body botocore cannot parse): httpx2's, and urllib3's and botocore's where
    boto3 is installed. A connection error is checked first: urllib3's `NewConnectionError`
    (a refused connection) is a subclass of its `ConnectTimeoutError`."""
    refused: list[type[BaseException]] = [httpx2.ConnectError]
    timeouts: list[type[BaseException]] = [TimeoutError, httpx2.TimeoutException]
    broken: list[type[BaseException]] = [httpx2.RemoteProtocolError, httpx2.DecodingError]
    unparsable: list[type[BaseException]] = []
    try:
        # optional extra: botocore is imported only when it is used
        from botocore import exceptions, parsers  # type: ignore[import-untyped]
        from urllib3 import exceptions as urllib3_exceptions
    except ImportError:
        pass
    else:
        refused += [urllib3_exceptions.NewConnectionError, exceptions.EndpointConnectionError]
        timeouts += [exceptions.ConnectTimeoutError, exceptions.ReadTimeoutError]
        timeouts += [urllib3_exceptions.TimeoutError]
        broken += [urllib3_exceptions.ProtocolError, exceptions.ConnectionClosedError]
        unparsable += [parsers.ResponseParserError]
    return tuple(refused), tuple(timeouts), tuple(broken), tuple(unparsable)


Shape: TypeAlias = type | dict[str, "Shape"] | list["Shape"]
"""What `_read` accepts: `int` a token count, `str` a string, a dict an object with those
fields (a name ending in `?` may be absent or null), a one-element list a list of it."""


def read_answer(value: object, shape: Shape, where: str = "") -> Any:
    """`value` (an SDK object or parsed JSON) as plain data of `shape`, or `Malformed` naming
    the first field that is missing or of the wrong type."""
    name = where or "the answer"
    if isinstance(shape, dict):
        if not isinstance(value, Mapping | pydantic.BaseModel):
            raise Malformed(f"malformed answer: {name} is {_shown(value)}, not an object")
        plain: dict[str, Any] = {}
        for key, inner in shape.items():
            field_name = key.rstrip("?")
            path = f"{where}.{field_name}" if where else field_name
            if isinstance(value, Mapping):
                got = value.get(field_name)
            else:  # an SDK's model: the Stainless SDKs keep a field of the wrong type as it is
                got = getattr(value, field_name, None)
            if got is None:
                if key.endswith("?"):
                    continue
                raise Malformed(f"malformed answer: no {path}")
            plain[field_name] = read_answer(got, inner, path)
        return plain
    if isinstance(shape, list):
        if not isinstance(value, list | tuple):
            raise Malformed(f"malformed answer: {name} is {_shown(value)}, not a list")
        return [read_answer(item, shape[0], f"{name}[{i}]") for i, item in enumerate(value)]
    if shape is int:
        if type(value) is not int or value < 0:
            raise Malformed(f"malformed answer: {name} is {_shown(value)}, not a token count")
        return value
    if not isinstance(value, shape):
        raise Malformed(f"malformed answer: {name} is {_shown(value)}, not a {shape.__name__}")
    return value


def _shown(value: object) -> str:
    if isinstance(value, Mapping | pydantic.BaseModel):
        return "an object"
    if isinstance(value, list | tuple):
        return "a list"
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    return printable(repr(value), 40)


# --- one provider, through its official SDK ------------------------------------------------


@dataclass(frozen=True)
class Prompt:
    """One request as the driver sends it."""

    model: str
    system: str
    turns: tuple[str, ...]
    lifetime: Lifetime
    ping: bool
    anchor: int


class Driver(Protocol):
    def send(self, prompt: Prompt) -> Usage: ...

    def count(self, prompt: Prompt) -> int | None:
        """The endpoint's own (free) count of the prompt's input tokens, or None when it has
        no count endpoint."""

    def close(self) -> None: ...


def import_sdk(provider: str) -> Any:
    """`provider`'s official SDK module; not installed, a `ProbeError` with the install hint."""
    name = PROVIDERS[provider].sdk
    try:
        return importlib.import_module(name)
    except ImportError:
        raise ProbeError(
            f"the {provider} probe needs the {name} SDK, which is not installed: {INSTALL_HINT}"
        ) from None


def roles(turns: Sequence[str]) -> Iterator[tuple[str, str]]:
    for i, text in enumerate(turns):
        yield ("user" if i % 2 == 0 else "assistant"), text


class SDKDriver:
    """What every driver shares: an SDK client built by its `Guard`, each request sent
    through `_call` (the guard's deadline, then the driver's own error mapping)."""

    _client: Any
    _guard: Guard

    @contextmanager
    def _errors(self) -> Iterator[None]:
        yield

    def _call(self, send: Callable[[], _T]) -> _T:
        """`send()` through the guard and the driver's error mapping. Whatever else the SDK
        raised once an answer had come back is the SDK failing on that answer (botocore's
        parser, for one, raises a TypeError on JSON of the wrong shape): `Malformed`."""
        answers = self._guard.answers
        try:
            with self._errors():
                return self._guard.call(send)
        except ProbeError:
            raise
        except Exception as exc:
            if self._guard.answers == answers:
                raise  # nothing came back: not the answer's fault
            what = f"{type(exc).__name__}: {exc}"
            raise Malformed(f"malformed answer: the SDK failed on it ({printable(what)})") from None

    def close(self) -> None:
        self._client.close()


class StainlessDriver(SDKDriver):
    """What the Anthropic and OpenAI SDKs (both generated by Stainless) share: one
    connection error and one status error class."""

    _api = ""
    _sdk: Any

    @contextmanager
    def _errors(self) -> Iterator[None]:
        sdk = self._sdk
        try:
            yield
        except sdk.APIConnectionError as exc:
            raise ProbeError(f"cannot connect to the {self._api} API: {reason(exc)}") from None
        except sdk.APIStatusError as exc:
            raise status_error(exc.status_code, exc.message) from None


class RequestFailed(ProbeError):
    """One request answered with an HTTP error other than refused credentials: the probe
    records it against that request and goes on (a count that fails is taken as absent)."""


def status_error(status: int, message: str) -> ProbeError:
    first = message.strip().splitlines()[0] if message.strip() else "no message"
    first = re.sub(r"^Error code: \d+ - ", "", first)  # the openai and anthropic SDKs' prefix
    first = printable(first)
    if status not in (401, 403):
        return RequestFailed(f"the endpoint answered HTTP {status}: {first}")
    return ProbeError(f"the endpoint refused the credentials (HTTP {status}): {first}")


def api_key_from_env(provider: str) -> str | None:
    for name in PROVIDERS[provider].key_env:
        if os.environ.get(name):
            return os.environ[name]
    return None


def make_driver(
    provider: str,
    base_url: str | None,
    api_key: str | None,
    *,
    emulator: bool,
    guard: Guard | None = None,
) -> Driver:
    """`provider`'s driver (its folder's probe part) at `base_url` (None: the SDK's own
    default endpoint), its SDK client on `guard` (default: a fresh one with the default
    timeout). Without `api_key`, an emulator gets a placeholder (it takes any; the user's own
    key from the environment is not sent to it) and a real endpoint the SDK's usual
    variables."""
    import_sdk(provider)  # the install hint before any credential question
    guard = guard if guard is not None else Guard(base_url)
    driver: Driver = (
        PROVIDERS[provider].part("probe").driver(base_url, api_key, emulator=emulator, guard=guard)
    )
    return driver


def required_key(provider: str, api_key: str | None, *, emulator: bool) -> str:
    """The key a driver sends: never the user's own to an emulator (it takes any), else
    `api_key` or the provider's environment variables; none is a `ProbeError`."""
    if emulator:
        return api_key or "emulator"
    key = api_key or api_key_from_env(provider)
    if key is None:
        names = " or ".join(PROVIDERS[provider].key_env)
        raise ProbeError(f"no API key for {provider}: set {names}, or pass --api-key")
    return key


# --- running ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """The probes with their prompts laid out on one timeline."""

    model: str
    probes: list[Probe]
    order: list[tuple[int, int]]  # (probe, step) in the order they are sent
    prompts: dict[tuple[int, int], Prompt]
    tokens: int  # each prefix's length by the emulator's byte counter (before the multiplier)


def plan(model: str, run_id: str, *, with_ttl: bool, tokens: int | None = None) -> Plan:
    """The probes' prompts, each prefix `tokens` long by the emulator's byte counter (default
    `prefix_tokens(model)`), in the order they are sent."""
    chosen = probes(with_ttl=with_ttl)
    tokens = tokens if tokens is not None else prefix_tokens(model)
    prompts = {}
    for p, probe in enumerate(chosen):
        for s, step in enumerate(probe.steps):
            anchor = step.anchor if step.anchor is not None else len(step.turns) - 1
            prompts[p, s] = Prompt(
                model,
                prefix_text(run_id, probe.name, step.prefix, tokens),
                step.turns,
                available_lifetime(model, step.lifetime),
                step.ping,
                anchor,
            )
    order = sorted(prompts, key=lambda key: (chosen[key[0]].steps[key[1]].at, key))
    return Plan(model, chosen, order, prompts, tokens)


def available_lifetime(model: str, lifetime: Lifetime) -> Lifetime:
    """`lifetime`, or the model's default where it has no long one (its provider's probe
    part says, `has_long_lifetime`: the 1-hour TTL is per model on Bedrock, OpenAI's `24h`
    retention per model and none on GPT-5.6+, whose one lifetime is 30 minutes), where
    asking for one it lacks is a 400. The retention probe then asks what the model's own
    lifetime keeps over the idle gap."""
    if lifetime != "long":
        return lifetime
    info = get_model(model)
    has_long: bool = PROVIDERS[info.provider].part("probe").has_long_lifetime(info)
    return lifetime if has_long else "default"


def run_plan(
    the_plan: Plan, driver: Driver, clock: Pacer, *, keep_going: bool = False
) -> dict[tuple[int, int], Usage | str]:
    """Send every request in timeline order, waiting on `clock` before each. With
    `keep_going`, a request that fails (`RequestFailed`) is recorded as its error message and
    the rest are still sent; refused credentials and connection errors stop the run."""
    usages: dict[tuple[int, int], Usage | str] = {}
    for key in the_plan.order:
        p, s = key
        clock.until(the_plan.probes[p].steps[s].at)
        try:
            usages[key] = _named(the_plan, key, "", partial(driver.send, the_plan.prompts[key]))
        except RequestFailed as exc:
            if not keep_going:
                raise
            usages[key] = str(exc)
    return usages


def _named(the_plan: Plan, key: tuple[int, int], what: str, send: Callable[[], _T]) -> _T:
    """`send()`, a request for the plan's step `key`, a refusal, a timeout or a malformed
    answer's line starting with the probe and the request (`shared-prefix A: ...`)."""
    p, s = key
    try:
        return send()
    except (Refused, TimedOut, Malformed) as exc:
        name = f"{the_plan.probes[p].name} {the_plan.probes[p].steps[s].label}{what}"
        raise type(exc)(f"{name}: {exc}") from None


def predict(provider: Provider, the_plan: Plan) -> dict[tuple[int, int], Usage]:
    """The plan on an embedded emulator: a fresh `EmulatorState` behind a loopback server in
    this process, driven through the same SDK, its virtual clock moved by the plan's waits."""
    # startup: the emulator's server stack loads after the provider answered, so the probe's
    # own requests (timed) never compete with it (many probes run at once in the tests)
    from .emulator import BackgroundServer, EmulatorState

    state = EmulatorState()
    with ExitStack() as stack:
        server = stack.enter_context(BackgroundServer(state))
        guard = Guard(server.url)
        stack.callback(guard.close)
        driver = make_driver(provider, server.url, None, emulator=True, guard=guard)
        stack.callback(driver.close)
        usages = run_plan(the_plan, driver, VirtualPacer(state.clock.advance))
    return {key: usage for key, usage in usages.items() if isinstance(usage, Usage)}


@dataclass
class Report:
    provider: Provider
    model: str
    base_url: str | None
    emulator: bool
    with_ttl: bool
    run_id: str
    tolerance: float
    estimated_cost: float
    max_cost: float
    probes: list[ProbeResult]

    @property
    def agreeing(self) -> int:
        return sum(p.agree for p in self.probes)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        for probe, raw in zip(self.probes, data["probes"], strict=True):
            raw["agree"] = probe.agree
        data["agree"] = self.agreeing
        data["total"] = len(self.probes)
        return data


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def run(
    provider: Provider,
    *,
    base_url: str | None,
    model: str | None = None,
    api_key: str | None = None,
    with_ttl: bool = False,
    max_cost: float = DEFAULT_MAX_COST,
    tolerance: float = DEFAULT_TOLERANCE,
    emulator_token: str | None = None,
    out: Callable[[str], None] = print,
    run_id: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> Report:
    """The whole probe: plan, predict, estimate the cost (refusing above `max_cost`), run
    against the endpoint, compare. Prints as it goes through `out`; raises `ProbeError`.
    Every request to the endpoint goes through one `Guard`: its origin only, `timeout`
    seconds in all."""
    import_sdk(provider)  # a missing SDK before anything else
    if model is None:
        model = cheapest_model(provider)
    else:
        check_model(provider, model)
    run_id = run_id or secrets.token_hex(4)
    guard = Guard(base_url, timeout)
    with ExitStack() as stack:
        stack.callback(guard.close)
        admin = detect_emulator(base_url, emulator_token, guard) if base_url is not None else None
        if admin is not None:
            clock: Pacer = VirtualPacer(lambda seconds: _advance(guard, admin, seconds))
        else:
            clock = WallPacer(_say)
        driver = make_driver(provider, base_url, api_key, emulator=admin is not None, guard=guard)
        stack.callback(driver.close)
        where = base_url or "the SDK's default endpoint"
        kind = "a sessiongen emulator: waits move its clock" if admin else "waits are real sleeps"
        out(f"probing {provider} {model} at {where} ({kind})")
        the_plan, predicted, counted = size(provider, model, run_id, with_ttl, driver)
        minimum = get_model(model).min_cacheable_tokens
        first = Counts.of(predicted[the_plan.order[0]]).total
        theirs = "no count endpoint" if counted is None else f"{counted:,} by the endpoint's count"
        out(
            f"first request: {first:,} input tokens by the emulator's count, {theirs} (the "
            f"model's minimum cacheable prefix: {minimum:,})"
        )
        ratio = 1.0 if counted is None else max(counted / max(first, 1), 1.0)
        estimate = worst_case_cost(the_plan, predicted, ratio)
        out(f"estimated worst-case cost: ${estimate:.4f} (cap ${max_cost:.2f})")
        if estimate > max_cost:
            raise ProbeError(
                f"the probes could cost up to ${estimate:.4f}, above --max-cost "
                f"${max_cost:.2f}: raise --max-cost, leave out --with-ttl or pick a cheaper "
                "--model"
            )
        real = run_plan(the_plan, driver, clock, keep_going=True)
    results = [ProbeResult(probe.name, probe.checks) for probe in the_plan.probes]
    for p, probe in enumerate(the_plan.probes):
        for s, step in enumerate(probe.steps):
            want, answer = Counts.of(predicted[p, s]), real[p, s]
            if isinstance(answer, str):
                request = RequestResult(step.label, step.at, want, None, False, answer)
            else:
                got = Counts.of(answer)
                request = RequestResult(
                    step.label, step.at, want, got, counts_agree(got, want, tolerance)
                )
            results[p].requests.append(request)
    report = Report(
        provider,
        model,
        base_url,
        admin is not None,
        with_ttl,
        run_id,
        tolerance,
        estimate,
        max_cost,
        results,
    )
    for line in render(report):
        out(line)
    return report


def _advance(guard: Guard, admin: httpx2.Client, seconds: float) -> None:
    try:
        guard.call(lambda: admin.post(ADMIN_CLOCK, json={"advance": seconds}).raise_for_status())
    except (httpx2.HTTPError, ProbeError) as exc:
        raise ProbeError(f"cannot move the emulator's clock: {reason(exc)}") from None


def size(
    provider: Provider, model: str, run_id: str, with_ttl: bool, driver: Driver
) -> tuple[Plan, dict[tuple[int, int], Usage], int | None]:
    """The plan and its prediction, with the prefix long enough by both counts: the
    emulator's, and the endpoint's own where it has a free count endpoint. When the endpoint
    counts fewer tokens than the emulator for the first request, every prefix grows by that
    ratio (once), so the real prompt too is just over the minimum; a count under
    `MIN_COUNT_RATIO` of the emulator's is `Malformed`. Returns the endpoint's count of the
    first request too (None: it has no count endpoint)."""
    the_plan = plan(model, run_id, with_ttl=with_ttl)
    first = the_plan.order[0]
    # the endpoint first: one that fails does so before the prediction is worked out
    counted = _named(
        the_plan, first, " (its token count)", lambda: driver.count(the_plan.prompts[first])
    )
    predicted = predict(provider, the_plan)
    if counted is None:
        return the_plan, predicted, None
    emulated = Counts.of(predicted[the_plan.order[0]]).total
    if counted < emulated * MIN_COUNT_RATIO:  # a prefix grown by that would never end
        probe = the_plan.probes[first[0]]
        label = f"{probe.name} {probe.steps[first[1]].label}"
        raise Malformed(
            f"{label} (its token count): malformed answer: {counted:,} input tokens for a "
            f"prompt of {emulated:,} by the emulator's count, not a plausible count"
        )
    if counted < emulated:
        grow = emulated / max(counted, 1) * 1.02
        the_plan = plan(model, run_id, with_ttl=with_ttl, tokens=int(the_plan.tokens * grow) + 1)
        predicted = predict(provider, the_plan)
        first = the_plan.order[0]
        recount = _named(
            the_plan, first, " (its token count)", lambda: driver.count(the_plan.prompts[first])
        )
        counted = recount or counted
    return the_plan, predicted, counted


def check_model(provider: Provider, model: str) -> None:
    """`ProbeError` unless `model` (an id or alias) is one of `available_models(provider)`."""
    available = available_models(provider)
    try:
        info = get_model(model)
    except KeyError:
        info = None
    if info is not None and info.provider == provider and info.id not in available:
        why = f"was retired on {info.retired}" if info.retired else "has no price in the catalog"
        raise ProbeError(f"model {model!r} {why}")
    if info is None or info.id not in available:
        raise ProbeError(
            f"unknown model {model!r} for {provider} (catalogued: {', '.join(available)})"
        )


def render(report: Report) -> list[str]:
    """The table (one row per request, a blank line between probes) and the final line."""
    head = (
        "probe",
        "request",
        "at (s)",
        "real input",
        "read",
        "write",
        "predicted input",
        "read",
        "write",
        "agree",
    )
    rows: list[tuple[str, ...]] = []
    for probe in report.probes:
        for i, r in enumerate(probe.requests):
            real = (
                ("error", "-", "-")
                if r.real is None
                else (f"{r.real.input:,}", f"{r.real.cache_read:,}", f"{r.real.cache_write:,}")
            )
            rows.append(
                (
                    probe.name if i == 0 else "",
                    r.label,
                    f"{r.at:.0f}",
                    *real,
                    f"{r.predicted.input:,}",
                    f"{r.predicted.cache_read:,}",
                    f"{r.predicted.cache_write:,}",
                    "yes" if r.agree else "NO",
                )
            )
        rows.append(())
    widths = [max(len(head[c]), *(len(row[c]) for row in rows if row)) for c in range(len(head))]
    numeric = range(2, 9)

    def line(cells: Sequence[str]) -> str:
        parts = [
            cell.rjust(widths[c]) if c in numeric else cell.ljust(widths[c])
            for c, cell in enumerate(cells)
        ]
        return "  ".join(parts).rstrip()

    lines = ["", line(head)]
    lines += [line(row) if row else "" for row in rows]
    lines += [
        f"{probe.name} {r.label}: {r.error}"
        for probe in report.probes
        for r in probe.requests
        if r.error is not None
    ]
    if lines[-1]:
        lines.append("")
    total = len(report.probes)
    last = f"{report.agreeing} of {total} probes agree with the emulator's prediction"
    if report.agreeing < total:
        last += f" ({total - report.agreeing} disagree)"
    lines.append(last)
    return lines


def write_json(report: Report, path: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(report.to_json(), f, indent=2)
        f.write("\n")
