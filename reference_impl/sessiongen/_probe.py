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
`tolerance` (the real tokenizer counts differently from the emulator's byte-based counter, so
token counts are compared as shares of the input, not exactly). A probe agrees when all its
requests do.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol
from urllib.parse import urlsplit

import httpx

from ._bind import EMULATOR_TOKEN_ENV
from ._choices import Provider
from .cache import get_model, list_models, price
from .llm.types import Usage
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
DETECT_TIMEOUT = 10.0
ADMIN_CLOCK = "/_emulator/clock"
KEY_ENV: dict[Provider, tuple[str, ...]] = {
    "anthropic": ("ANTHROPIC_API_KEY",),
    "openai": ("OPENAI_API_KEY",),
    "gemini": ("GOOGLE_API_KEY", "GEMINI_API_KEY"),
    "bedrock": ("AWS_BEARER_TOKEN_BEDROCK", "AWS_ACCESS_KEY_ID"),
}
SDK_MODULES: dict[Provider, str] = {
    "anthropic": "anthropic",
    "openai": "openai",
    "gemini": "google.genai",
    "bedrock": "boto3",
}
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
    if provider == "bedrock":  # Converse wants an inference profile for these models
        info = get_model(best)
        profile = next((a for a in info.aliases if a.startswith("us.")), None)
        return profile or best
    return best


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


class Clock(Protocol):
    def until(self, at: float) -> None:
        """Return at `at` seconds from the run's start (by this endpoint's time)."""


class VirtualClock:
    """Moves an emulator's virtual clock by each wait: `advance(seconds)`."""

    def __init__(self, advance: Callable[[float], object]) -> None:
        self._advance = advance
        self._now = 0.0

    def until(self, at: float) -> None:
        if at > self._now:
            self._advance(at - self._now)
            self._now = at


class WallClock:
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
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


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


def detect_emulator(base_url: str, token: str | None) -> httpx.Client | None:
    """An admin client for `base_url`'s `/_emulator` API when the endpoint is a sessiongen
    emulator (its `GET /_emulator/clock` answers a time), else None. A refused connection is
    a `ProbeError`; so is an emulator whose admin API wants a token that is missing or wrong."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    client = httpx.Client(base_url=_origin(base_url), headers=headers, timeout=DETECT_TIMEOUT)
    try:
        response = client.get(ADMIN_CLOCK)
    except httpx.ConnectError as exc:
        client.close()
        raise ProbeError(f"cannot connect to {base_url}: {_reason(exc)}") from None
    except httpx.HTTPError as exc:
        client.close()
        raise ProbeError(f"cannot reach {base_url}: {_reason(exc)}") from None
    if response.status_code == 401 and "sessiongen-emulator" in response.headers.get(
        "www-authenticate", ""
    ):
        client.close()
        raise ProbeError(
            f"{base_url} is a sessiongen emulator whose admin API wants a token "
            f"({'a wrong one was given' if token else 'none given'}): pass --emulator-token "
            f"or set ${EMULATOR_TOKEN_ENV}, so the probe can move its clock"
        )
    try:
        is_emulator = response.status_code == 200 and isinstance(response.json()["now"], float)
    except (ValueError, KeyError, TypeError):
        is_emulator = False
    if not is_emulator:
        client.close()
        return None
    return client


def _reason(exc: BaseException) -> str:
    text = str(exc)
    if "refused" in text.lower():
        return "connection refused"
    return text or type(exc).__name__


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


def _import_sdk(provider: Provider) -> Any:
    import importlib

    name = SDK_MODULES[provider]
    try:
        return importlib.import_module(name)
    except ImportError:
        raise ProbeError(
            f"the {provider} probe needs the {name} SDK, which is not installed: {INSTALL_HINT}"
        ) from None


def _roles(turns: Sequence[str]) -> Iterator[tuple[str, str]]:
    for i, text in enumerate(turns):
        yield ("user" if i % 2 == 0 else "assistant"), text


class _StainlessDriver:
    """What the Anthropic and OpenAI SDKs (both generated by Stainless) share: one
    connection error and one status error class, and a client to close."""

    _api = ""
    _sdk: Any
    _client: Any

    @contextmanager
    def _errors(self) -> Iterator[None]:
        sdk = self._sdk
        try:
            yield
        except sdk.APIConnectionError as exc:
            raise ProbeError(f"cannot connect to the {self._api} API: {_reason(exc)}") from None
        except sdk.APIStatusError as exc:
            raise _status_error(exc.status_code, exc.message) from None

    def close(self) -> None:
        self._client.close()


class AnthropicDriver(_StainlessDriver):
    _api = "Anthropic"

    def __init__(self, base_url: str | None, api_key: str) -> None:
        anthropic = _import_sdk("anthropic")
        self._sdk = anthropic
        self._client = anthropic.Anthropic(api_key=api_key, base_url=base_url, max_retries=0)

    def _body(self, prompt: Prompt) -> dict[str, Any]:
        mark: dict[str, Any] = {"type": "ephemeral"}
        if prompt.lifetime == "long":
            mark["ttl"] = "1h"
        messages: list[dict[str, Any]] = []
        for i, (role, text) in enumerate(_roles(prompt.turns)):
            block: dict[str, Any] = {"type": "text", "text": text}
            if i == prompt.anchor:
                block["cache_control"] = mark
            messages.append({"role": role, "content": [block]})
        body: dict[str, Any] = {
            "model": prompt.model,
            "system": [{"type": "text", "text": prompt.system, "cache_control": mark}],
            "messages": messages,
        }
        if "disabled" in get_model(prompt.model).thinking_types:
            body["thinking"] = {"type": "disabled"}
        return body

    def send(self, prompt: Prompt) -> Usage:
        from .llm.anthropic_wire import usage_from_anthropic

        with self._errors():
            message = self._client.messages.create(
                max_tokens=0 if prompt.ping else 1, **self._body(prompt)
            )
        return usage_from_anthropic(message.usage)

    def count(self, prompt: Prompt) -> int | None:
        try:
            with self._errors():
                counted = self._client.messages.count_tokens(**self._body(prompt))
        except RequestFailed:
            return None
        return int(counted.input_tokens)


class OpenAIDriver(_StainlessDriver):
    _api = "OpenAI"

    def __init__(self, base_url: str | None, api_key: str) -> None:
        openai = _import_sdk("openai")
        self._sdk = openai
        if base_url is not None and not urlsplit(base_url).path.rstrip("/").endswith("/v1"):
            base_url = f"{base_url}/v1"
        self._client = openai.OpenAI(api_key=api_key, base_url=base_url, max_retries=0)

    def send(self, prompt: Prompt) -> Usage:
        from .llm.openai_wire import usage_from_openai

        messages: list[dict[str, Any]] = [{"role": "system", "content": prompt.system}]
        messages += [{"role": role, "content": text} for role, text in _roles(prompt.turns)]
        extra: dict[str, Any] = {}
        if prompt.lifetime != "default":
            extra["prompt_cache_retention"] = "24h" if prompt.lifetime == "long" else "in_memory"
        with self._errors():
            completion = self._client.chat.completions.create(
                model=prompt.model, messages=messages, max_completion_tokens=1, **extra
            )
        return usage_from_openai(completion.usage)

    def count(self, prompt: Prompt) -> int | None:
        items = [{"role": role, "content": text} for role, text in _roles(prompt.turns)]
        try:
            with self._errors():
                counted = self._client.responses.input_tokens.count(
                    model=prompt.model, instructions=prompt.system, input=items
                )
        except RequestFailed:
            return None
        return int(counted.input_tokens)


class GeminiDriver:
    def __init__(self, base_url: str | None, api_key: str) -> None:
        genai = _import_sdk("gemini")
        from google.genai import errors, types

        self._errors_module = errors
        self._types = types
        options = types.HttpOptions(
            base_url=base_url,
            api_version="v1beta",
            retry_options=types.HttpRetryOptions(attempts=1),
        )
        self._client = genai.Client(api_key=api_key, http_options=options)

    def send(self, prompt: Prompt) -> Usage:
        from .llm.gemini_wire import usage_from_gemini

        types = self._types
        contents = [
            types.Content(role="user" if role == "user" else "model", parts=[types.Part(text=t)])
            for role, t in _roles(prompt.turns)
        ]
        config = types.GenerateContentConfig(system_instruction=prompt.system, max_output_tokens=1)
        with self._errors():
            response = self._client.models.generate_content(
                model=prompt.model, contents=contents, config=config
            )
        return usage_from_gemini(response.usage_metadata)

    def count(self, prompt: Prompt) -> int | None:
        # The Gemini API's countTokens takes no system instruction: it goes as a first turn.
        types = self._types
        texts = [(("user", prompt.system)), *_roles(prompt.turns)]
        contents = [
            types.Content(role="user" if role == "user" else "model", parts=[types.Part(text=t)])
            for role, t in texts
        ]
        try:
            with self._errors():
                counted = self._client.models.count_tokens(model=prompt.model, contents=contents)
        except RequestFailed:
            return None
        return int(counted.total_tokens or 0) or None

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except self._errors_module.APIError as exc:
            raise _status_error(int(exc.code or 0), str(exc.message or exc)) from None
        except httpx.HTTPError as exc:
            raise ProbeError(f"cannot connect to the Gemini API: {_reason(exc)}") from None

    def close(self) -> None:
        self._client.close()


class BedrockDriver:
    def __init__(self, base_url: str | None, api_key: str | None, dummy: bool) -> None:
        boto3 = _import_sdk("bedrock")
        from botocore.config import Config  # type: ignore[import-untyped]

        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        credentials: dict[str, str] = {}
        if dummy:  # an emulator takes any credentials; boto3 wants some to sign with
            credentials = {"aws_access_key_id": "probe", "aws_secret_access_key": "probe"}
        saved = os.environ.get(BEARER_ENV)
        if api_key is not None:  # boto3 reads a Bedrock API key only from the environment
            os.environ[BEARER_ENV] = api_key
        elif dummy:
            os.environ.pop(BEARER_ENV, None)
        try:
            self._client = boto3.client(
                "bedrock-runtime",
                endpoint_url=base_url,
                region_name=region or "us-east-1",
                config=Config(retries={"total_max_attempts": 1, "mode": "standard"}),
                **credentials,
            )
        finally:
            if saved is None:
                os.environ.pop(BEARER_ENV, None)
            else:
                os.environ[BEARER_ENV] = saved

    def _body(self, prompt: Prompt) -> dict[str, Any]:
        point: dict[str, Any] = {"type": "default"}
        if prompt.lifetime == "long":
            point["ttl"] = "1h"
        messages = []
        for i, (role, text) in enumerate(_roles(prompt.turns)):
            content: list[dict[str, Any]] = [{"text": text}]
            if i == prompt.anchor:
                content.append({"cachePoint": point})
            messages.append({"role": role, "content": content})
        return {"system": [{"text": prompt.system}, {"cachePoint": point}], "messages": messages}

    def send(self, prompt: Prompt) -> Usage:
        from .llm.bedrock_wire import usage_from_bedrock

        with self._errors():
            response = self._client.converse(
                modelId=prompt.model, inferenceConfig={"maxTokens": 1}, **self._body(prompt)
            )
        usage: dict[str, Any] = response["usage"]
        return usage_from_bedrock(usage)

    def count(self, prompt: Prompt) -> int | None:
        try:
            with self._errors():
                counted = self._client.count_tokens(
                    modelId=prompt.model, input={"converse": self._body(prompt)}
                )
        except RequestFailed:
            return None
        return int(counted["inputTokens"])

    @contextmanager
    def _errors(self) -> Iterator[None]:
        from botocore import exceptions  # type: ignore[import-untyped]

        try:
            yield
        except exceptions.NoCredentialsError:
            raise ProbeError(
                "no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or a "
                "profile), or AWS_BEARER_TOKEN_BEDROCK / --api-key for a Bedrock API key"
            ) from None
        except exceptions.EndpointConnectionError as exc:
            raise ProbeError(f"cannot connect to Bedrock: {_reason(exc)}") from None
        except exceptions.ClientError as exc:
            status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
            message = str(exc.response.get("Error", {}).get("Message") or exc)
            raise _status_error(status, message) from None

    def close(self) -> None:
        self._client.close()


class RequestFailed(ProbeError):
    """One request answered with an HTTP error other than refused credentials: the probe
    records it against that request and goes on (a count that fails is taken as absent)."""


def _status_error(status: int, message: str) -> ProbeError:
    first = message.strip().splitlines()[0] if message.strip() else "no message"
    first = re.sub(r"^Error code: \d+ - ", "", first)  # the openai and anthropic SDKs' prefix
    if status not in (401, 403):
        return RequestFailed(f"the endpoint answered HTTP {status}: {first}")
    return ProbeError(f"the endpoint refused the credentials (HTTP {status}): {first}")


def api_key_from_env(provider: Provider) -> str | None:
    for name in KEY_ENV[provider]:
        if os.environ.get(name):
            return os.environ[name]
    return None


def make_driver(
    provider: Provider, base_url: str | None, api_key: str | None, *, emulator: bool
) -> Driver:
    """`provider`'s driver at `base_url` (None: the SDK's own default endpoint). Without
    `api_key`, an emulator gets a placeholder (it takes any; the user's own key from the
    environment is not sent to it) and a real endpoint the SDK's usual variables."""
    _import_sdk(provider)  # the install hint before any credential question
    if provider == "bedrock":
        return BedrockDriver(base_url, api_key, emulator and api_key is None)
    if emulator:  # never the user's own key: an emulator takes any
        key: str | None = api_key or "emulator"
    else:
        key = api_key or api_key_from_env(provider)
    if key is None:
        raise ProbeError(
            f"no API key for {provider}: set {' or '.join(KEY_ENV[provider])}, or pass --api-key"
        )
    if provider == "anthropic":
        return AnthropicDriver(base_url, key)
    if provider == "openai":
        return OpenAIDriver(base_url, key)
    return GeminiDriver(base_url, key)


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
    """`lifetime`, or the model's default where it has no long one: the 1-hour TTL is per
    model on Bedrock (AWS's table), OpenAI's extended `24h` retention per model (the
    guide's list), and asking a model for one it lacks is a 400 there. The retention probe
    then asks what the model's own lifetime keeps over the idle gap."""
    if lifetime != "long":
        return lifetime
    info = get_model(model)
    has_long = info.extended_retention if info.provider == "openai" else info.one_hour_ttl
    return lifetime if has_long else "default"


def run_plan(
    the_plan: Plan, driver: Driver, clock: Clock, *, keep_going: bool = False
) -> dict[tuple[int, int], Usage | str]:
    """Send every request in timeline order, waiting on `clock` before each. With
    `keep_going`, a request that fails (`RequestFailed`) is recorded as its error message and
    the rest are still sent; refused credentials and connection errors stop the run."""
    usages: dict[tuple[int, int], Usage | str] = {}
    for key in the_plan.order:
        p, s = key
        clock.until(the_plan.probes[p].steps[s].at)
        try:
            usages[key] = driver.send(the_plan.prompts[key])
        except RequestFailed as exc:
            if not keep_going:
                raise
            usages[key] = str(exc)
    return usages


def predict(provider: Provider, the_plan: Plan) -> dict[tuple[int, int], Usage]:
    """The plan on an embedded emulator: a fresh `EmulatorState` behind a loopback server in
    this process, driven through the same SDK, its virtual clock moved by the plan's waits."""
    from .emulator import BackgroundServer, EmulatorState

    state = EmulatorState()
    with ExitStack() as stack:
        server = stack.enter_context(BackgroundServer(state))
        driver = make_driver(provider, server.url, None, emulator=True)
        stack.callback(driver.close)
        usages = run_plan(the_plan, driver, VirtualClock(state.clock.advance))
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
) -> Report:
    """The whole probe: plan, predict, estimate the cost (refusing above `max_cost`), run
    against the endpoint, compare. Prints as it goes through `out`; raises `ProbeError`."""
    _import_sdk(provider)  # a missing SDK before anything else
    if model is None:
        model = cheapest_model(provider)
    else:
        check_model(provider, model)
    run_id = run_id or secrets.token_hex(4)
    admin = detect_emulator(base_url, emulator_token) if base_url is not None else None
    with ExitStack() as stack:
        if admin is not None:
            stack.callback(admin.close)
            clock: Clock = VirtualClock(lambda seconds: _advance(admin, seconds))
        else:
            clock = WallClock(_say)
        driver = make_driver(provider, base_url, api_key, emulator=admin is not None)
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


def _advance(admin: httpx.Client, seconds: float) -> None:
    try:
        admin.post(ADMIN_CLOCK, json={"advance": seconds}).raise_for_status()
    except httpx.HTTPError as exc:
        raise ProbeError(f"cannot move the emulator's clock: {_reason(exc)}") from None


def size(
    provider: Provider, model: str, run_id: str, with_ttl: bool, driver: Driver
) -> tuple[Plan, dict[tuple[int, int], Usage], int | None]:
    """The plan and its prediction, with the prefix long enough by both counts: the
    emulator's, and the endpoint's own where it has a free count endpoint. When the endpoint
    counts fewer tokens than the emulator for the first request, every prefix grows by that
    ratio (once), so the real prompt too is just over the minimum. Returns the endpoint's
    count of the first request too (None: it has no count endpoint)."""
    the_plan = plan(model, run_id, with_ttl=with_ttl)
    predicted = predict(provider, the_plan)
    counted = driver.count(the_plan.prompts[the_plan.order[0]])
    if counted is None:
        return the_plan, predicted, None
    emulated = Counts.of(predicted[the_plan.order[0]]).total
    if counted < emulated:
        grow = emulated / max(counted, 1) * 1.02
        the_plan = plan(model, run_id, with_ttl=with_ttl, tokens=int(the_plan.tokens * grow) + 1)
        predicted = predict(provider, the_plan)
        counted = driver.count(the_plan.prompts[the_plan.order[0]]) or counted
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
