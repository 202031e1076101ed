"""All mutable emulator state in one object: clock, cache, request log, script queue, faults,
holds and the deterministic id counters."""

from __future__ import annotations

import base64
import json
import sys
import threading
from bisect import bisect_right
from collections import deque
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from itertools import islice
from typing import Any, Literal, NamedTuple

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from ..cache import CacheResult, CacheStore, PreparedRequest
from .body import parse_body
from .clock import VirtualClock

StopReason = Literal[
    "end_turn",
    "max_tokens",
    "stop_sequence",
    "tool_use",
    "pause_turn",
    "refusal",
    "model_context_window_exceeded",
]


class ScriptedToolCall(BaseModel):
    """One scripted tool call: `name`, `input`, and an optional `id` (drawn when absent).

    `input` is a JSON object, or a string: the freeform input of an OpenAI `custom` tool
    ("the tool call input is given as plain text", OpenAI function-calling guide, custom
    tools). The string is kept as `freeform`, and the OpenAI routes send it as is: a
    `custom_tool_call`'s `input`, or a function call's `arguments` string. Every other route
    (Anthropic `tool_use`, Bedrock `toolUse`, Gemini `functionCall`) needs an object there,
    so for them `input` reads `{"input": <string>}` (the shape of a function tool that takes
    one freeform argument, as Codex's function-form `apply_patch` does); a dump gives the
    string back."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    id: str | None = None
    name: str
    input: dict[str, Any] = Field(default_factory=dict)
    _freeform: str | None = PrivateAttr(default=None)

    @model_validator(mode="wrap")
    @classmethod
    def _string_input(
        cls, data: Any, handler: ModelWrapValidatorHandler[ScriptedToolCall]
    ) -> ScriptedToolCall:
        text = data.get("input") if isinstance(data, Mapping) else None
        if not isinstance(text, str):
            return handler(data)
        call = handler({**data, "input": {"input": text}})
        call._freeform = text
        return call

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if self._freeform is not None and isinstance(data, dict):
            data["input"] = self._freeform
        return data

    @property
    def freeform(self) -> str | None:
        """The string `input` was given as, or None when it was an object."""
        return self._freeform


class ScriptMatch(BaseModel):
    """Which requests a scripted reply is for. A real agent interleaves its own side calls
    (a title, a routing classifier, a summary) with its turn's tool loop, so a script meant
    for the loop must not be spent on them: an entry with a `match` is served to the first
    request that fits it, and requests that do not fit pass it by (they take the next entry
    that fits them, or the unscripted reply)."""

    model_config = ConfigDict(extra="forbid")

    model: str | None = None
    """The request's model, exactly or as a shell pattern (`claude-haiku-*`)."""
    tools: list[str] = Field(default_factory=list)
    """Tool names the request must offer, every one of them."""
    without: list[str] = Field(default_factory=list)
    """Tool names the request must not offer, none of them (a subagent is told from its
    parent by the spawn tool it lacks)."""
    headers: list[str] = Field(default_factory=list)
    """Header names the request must carry, whatever their values (case-insensitive): a
    client marks its subagents' requests so (Codex `x-openai-subagent`, Claude Code
    `x-claude-code-agent-id`, opencode `x-parent-session-id`)."""
    without_headers: list[str] = Field(default_factory=list)
    """Header names the request must not carry."""

    def fits(self, model: str, tools: Collection[str], headers: Collection[str] = ()) -> bool:
        if self.model is not None and not fnmatchcase(model, self.model):
            return False
        names = {name.lower() for name in headers}
        return (
            all(name in tools for name in self.tools)
            and not any(name in tools for name in self.without)
            and all(name.lower() in names for name in self.headers)
            and not any(name.lower() in names for name in self.without_headers)
        )


class ScriptedResponse(BaseModel):
    """The next reply, decided by the caller: content is thinking, then text, then tool_use
    blocks; `stop_reason` defaults to `tool_use` when there are tool calls, else `end_turn`.
    Without `match` an entry goes to the next request, whatever it is (first in, first out)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    match: ScriptMatch | None = None
    text: str | None = None
    thinking: str | None = None
    tool_calls: list[ScriptedToolCall] = Field(default_factory=list)
    stop_reason: StopReason | None = None
    output_tokens: int | None = Field(default=None, ge=0)


FaultKind = Literal["reset", "malformed-sse", "invalid-body"]


class FaultSpec(BaseModel):
    """Make the next `count` requests fail with `status` (the real error body and type for
    it), or, with status 200, delay them, add headers or cut their SSE stream.

    `cut_after_events`: a streaming 200 sends only its first K events. `cut_mode` "end"
    finishes the HTTP body cleanly after them (the connection is closed, no message_stop);
    "abort" leaves the chunked body unfinished so the server drops the connection, which only
    a real socket can express (over an in-process ASGI transport it fails the transport).
    `error_event`: after the K events, send an SSE `error` event of that type first.
    `kind` names a 200 that breaks the client's reading: "reset" drops the connection before
    any byte (over an in-process transport the client sees a connection error; uvicorn
    answers a plain 500 instead, since ASGI cannot drop a socket unanswered), "malformed-sse"
    replaces stream event K (`cut_after_events`, default 2) with a frame that is no JSON,
    "invalid-body" sends a 200 whose JSON body is cut off (streamed or not).
    Without `status`, a fault that cuts, sends an error event or has a `kind` is a 200, any
    other a 500.
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    status: int | None = Field(default=None, ge=200, le=599)
    count: int = Field(default=1, ge=1)
    headers: dict[str, str] = Field(default_factory=dict)
    delay: float = Field(default=0.0, ge=0.0)
    cut_after_events: int | None = Field(default=None, ge=0)
    cut_mode: Literal["end", "abort"] = "end"
    error_event: str | None = None
    error_type: str | None = None
    message: str | None = None
    kind: FaultKind | None = None

    @property
    def effective_status(self) -> int:
        if self.status is not None:
            return self.status
        broken = self.cut_after_events is not None or self.error_event or self.kind
        return 200 if broken else 500


# Credentials never reach the log (it is served over HTTP and pasted into bug reports).
REDACTED_HEADERS = frozenset({"x-api-key", "authorization", "x-goog-api-key"})
"""Every provider SDK's credential header (Anthropic, OpenAI and Bedrock's SigV4 use
`authorization` or `x-api-key`; Gemini `x-goog-api-key`): never logged or served."""
REDACTED = "[redacted]"


def redact_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """`headers` with lower-case names and the credential headers' values replaced."""
    lowered = {name.lower(): value for name, value in headers.items()}
    return {name: REDACTED if name in REDACTED_HEADERS else v for name, v in lowered.items()}


LIFETIME_DEFAULTS: Mapping[str, float] = {
    "openai_in_memory_ttl": 300.0,
    "openai_in_memory_max": 3600.0,
    "openai_extended_ttl": 1800.0,
    "openai_extended_max": 86400.0,
    "gemini_implicit_ttl": 300.0,
}
"""Seconds, for the implicit caches whose providers give ranges or no number (settings of
`/_emulator/config`; docs/emulator.md says which doc each comes from):

* `openai_in_memory_ttl` / `openai_in_memory_max`: `prompt_cache_retention: "in_memory"`,
  "typically remain active for around 5 to 10 minutes of inactivity, up to one hour": an
  entry lives this long after its latest write or read, and never longer than the max after
  its first write (the low end of the range, UNCONFIRMED);
* `openai_extended_ttl` / `openai_extended_max`: `"24h"`, "typically keeps entries available
  for around 30 minutes and can retain them for up to 24 hours";
* `gemini_implicit_ttl`: Gemini's implicit cache (the docs give no lifetime; UNCONFIRMED).
"""

DEFAULT_LOG_CAPACITY = 10_000
"""Requests the log keeps by default (the newest; about 15 KB each for a 50-message prompt)."""

DEFAULT_LOG_BYTES = 256 * 1024 * 1024
"""Bytes the log keeps by default (the newest entries; see `_Logged.retained`): the entry cap
alone let 10,000 requests of a few MB each hold tens of GB."""

DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024
"""The largest request body any emulated API takes by default. AD:api/errors, "Request size
limits": "Messages API | 32 MB", "Token Counting API | 32 MB"; "If you exceed these limits,
you'll receive a 413 `request_too_large` error." Whether MB is 10^6 or 2^20 bytes is
UNCONFIRMED; the emulator takes the larger. The other providers' limits for these endpoints
are not documented where found (UNCONFIRMED), so the same bound applies to them."""

DEFAULT_CACHE_ENTRIES = 500_000
"""Prompt-cache entries kept at once by default: about 480 bytes each, so about 230 MiB.
Real traffic stays far below (a session's entries number its breakpoints); a stopped
virtual clock and large Gemini or OpenAI bodies (an implicit entry per interval of tokens)
would otherwise keep every prefix alive for ever."""

# A deque keeps one pointer per entry (in blocks of 64), on top of what the entry owns.
_LOG_SLOT = 8

_COMPACT = (",", ":")


class _Logged(NamedTuple):
    """One logged request as stored: bytes and scalars only, so an entry costs little more
    than its body. `requests` rebuilds the served fields from it."""

    arrival: int  # the request id's number: ids count arrivals
    id: str
    path: str
    started_at: float
    status: int
    usage: bytes | None  # compact JSON
    stream: bool
    headers: bytes  # compact JSON, credentials already redacted
    raw_body: bytes  # exactly as received
    has_body: bool  # False: `body` is served as null (a 413's body is not kept)
    provider: str

    def retained(self) -> int:
        """The bytes this entry keeps alive: the tuple itself, the objects it alone holds (id,
        arrival, time, status, usage and headers JSON, the raw body) and its slot in the log.
        The interned path and provider and the shared booleans are not its own."""
        owned = (
            self.arrival,
            self.id,
            self.started_at,
            self.status,
            self.usage,
            self.headers,
            self.raw_body,
        )
        held = sum(sys.getsizeof(part) for part in owned if part is not None)
        return sys.getsizeof(self) + held + _LOG_SLOT

    def served(self) -> dict[str, Any]:
        """The entry as `/_emulator/requests` serves it (a fresh object each time)."""
        return {
            "id": self.id,
            "path": self.path,
            "started_at": self.started_at,
            "body": parse_body(self.raw_body)[0] if self.has_body else None,
            "status": self.status,
            "usage": None if self.usage is None else json.loads(self.usage),
            "stream": self.stream,
            "headers": json.loads(self.headers),
            "raw_body": base64.b64encode(self.raw_body).decode("ascii"),
            "provider": self.provider,
        }


def _arrival_key(entry: _Logged) -> int:
    return entry.arrival


@dataclass(eq=False)  # identity: each hold is one request
class Hold:
    """One held request: it waits until `released` is set; `by_reset` says a reset, not a
    release, let it go (it then answers an error and touches nothing)."""

    released: threading.Event = field(default_factory=threading.Event)
    by_reset: bool = False


class EmulatorState:
    """The one state object behind an emulator app (`app.state.emulator`).

    Every method takes one `threading.RLock`, so tests may poke it directly while uvicorn
    serves the app from another thread; nothing here is asyncio-bound.
    """

    def __init__(
        self,
        *,
        ttft: float = 0.0,
        linger: float = 0.0,
        tool_prompt: bool = True,
        framing: bool = True,
        clock: VirtualClock | None = None,
        log_capacity: int | None = DEFAULT_LOG_CAPACITY,
        lifetimes: Mapping[str, float] | None = None,
        log_bytes: int | None = DEFAULT_LOG_BYTES,
        max_body_bytes: int | None = DEFAULT_MAX_BODY_BYTES,
        cache_entries: int | None = DEFAULT_CACHE_ENTRIES,
    ) -> None:
        """`log_capacity`: how many requests the log keeps (the newest by arrival; the
        oldest are dropped and counted, see `log_status`); None keeps every one.
        `log_bytes`: how many bytes the kept entries may hold (`_Logged.retained`), the
        oldest dropped and counted alike; None: no byte bound.
        `max_body_bytes`: the largest request body a provider endpoint takes; a larger one
        is answered the provider's "too large" error unread (`intake.read_body`); None: no
        limit.
        `cache_entries`: the most prompt-cache entries kept at once (`CacheStore`'s
        `max_entries`; the soonest to expire are evicted past it); None: no bound.
        `lifetimes`: overrides of `LIFETIME_DEFAULTS` (the implicit caches' lifetimes)."""
        for name, bound in (
            ("log_capacity", log_capacity),
            ("log_bytes", log_bytes),
            ("max_body_bytes", max_body_bytes),
        ):
            if bound is not None and bound < 0:
                raise ValueError(f"{name} must be >= 0 or None, got {bound!r}")
        self.log_capacity = log_capacity
        self.log_bytes = log_bytes
        self.max_body_bytes = max_body_bytes
        self.clock = clock or VirtualClock()
        # `linger`: virtual seconds an entry outlives its TTL. The docs promise a *minimum*
        # lifetime only ("minimum lifetime of 5 minutes"), and give no number for the rest.
        self.cache_entries = cache_entries
        self.cache = CacheStore(linger=linger, max_entries=cache_entries)
        self.linger = linger
        self._default_linger = linger
        self.ttft = ttft  # virtual seconds from a request's start to its response start
        self._default_ttft = ttft
        # Count the tool-use system prompt (the catalog's per-model figure) into the input of
        # a request with tools, as the API bills it. On by default, like the engine's counter
        # (`tokens.count_request_tokens`); the admin config can turn it off.
        self.tool_prompt = tool_prompt
        self._default_tool_prompt = tool_prompt
        self._default_lifetimes = self._checked_lifetimes(dict(LIFETIME_DEFAULTS), lifetimes or {})
        self.lifetimes: dict[str, float] = dict(self._default_lifetimes)
        # Count each provider's template framing (per message, tool, tool call, format) into
        # the input, as the APIs bill it (`tokens.model_positions`). On by default; off, a
        # prompt costs its bare base count (`tokens.count_text_tokens`, unscaled).
        self.framing = framing
        self._default_framing = framing
        self._lock = threading.RLock()
        self._log: deque[_Logged] = deque()  # by arrival
        self._log_size = 0  # the sum of the entries' `retained` bytes
        self._dropped = 0  # entries dropped for capacity (count or bytes) since the last reset
        self._script: deque[ScriptedResponse] = deque()
        self._faults: deque[list[Any]] = deque()  # [FaultSpec, remaining]
        self._pending_holds = 0
        self._held: list[Hold] = []
        self._counters = {"req": 0, "msg": 0, "toolu": 0}
        self.cached_contents: dict[str, Any] = {}
        # OpenAI Responses' prompt-cache records by response id, for
        # `prompt_cache_options.comparison_response_id` (oldest first).
        self.prompt_cache_records: dict[str, Any] = {}
        """Gemini's explicit caches (`cachedContents` resources) by name; each one's tokens
        live in `cache` like any entry, so it is gone when its entry is."""

    # --- ids -----------------------------------------------------------------------------

    def _next(self, prefix: str) -> str:
        with self._lock:
            self._counters[prefix] += 1
            return f"{prefix}_{self._counters[prefix]:06d}"

    def next_request_id(self) -> str:
        return self._next("req")

    def next_message_id(self) -> str:
        return self._next("msg")

    def next_tool_use_id(self) -> str:
        return self._next("toolu")

    # --- log -----------------------------------------------------------------------------

    def record(
        self,
        *,
        request_id: str,
        path: str,
        started_at: float,
        status: int,
        usage: dict[str, Any] | None,
        stream: bool,
        headers: Mapping[str, str],
        raw_body: bytes,
        has_body: bool = True,
        provider: str = "anthropic",
    ) -> None:
        """Log one request when it completes, at its place in arrival order (a held request
        completes after later arrivals). Credential headers are redacted here, so no caller
        can log them. The body is kept as the bytes received and parsed only when read
        (`has_body=False`: served as null). `provider` names the API the request came in on
        (`emulator.providers`). Beyond `log_capacity` entries, or `log_bytes` bytes, the
        oldest are dropped (the new entry too, if it alone is over `log_bytes`)."""
        entry = _Logged(
            int(request_id.rsplit("_", 1)[1]),  # ids count arrivals (`_next`)
            request_id,
            sys.intern(path),
            started_at,
            status,
            None if usage is None else json.dumps(usage, separators=_COMPACT).encode(),
            stream,
            json.dumps(redact_headers(headers), separators=_COMPACT).encode(),
            raw_body,
            has_body,
            sys.intern(provider),
        )
        with self._lock:
            log = self._log
            at = len(log)
            while at and log[at - 1].arrival > entry.arrival:
                at -= 1  # a held request: the later arrivals are near the end
            log.insert(at, entry)
            self._log_size += entry.retained()
            capacity, byte_bound = self.log_capacity, self.log_bytes
            while log and (
                (capacity is not None and len(log) > capacity)
                or (byte_bound is not None and self._log_size > byte_bound)
            ):
                self._log_size -= log.popleft().retained()
                self._dropped += 1

    def requests(self, *, since: int = 0, limit: int | None = None) -> list[dict[str, Any]]:
        """The completed requests still in the log, in arrival order, as fresh objects
        (bodies parsed now): only those whose arrival number (the number in the id,
        `req_000012` is 12) is above `since`, and at most the first `limit` of them."""
        with self._lock:
            log = self._log
            start = bisect_right(log, since, key=_arrival_key) if since > 0 else 0
            stop = len(log) if limit is None else min(len(log), start + limit)
            picked = list(islice(log, start, stop))
        return [entry.served() for entry in picked]

    def log_status(self) -> dict[str, int | None]:
        """`logged`: entries in the log; `dropped`: entries dropped for capacity since the
        last reset; `capacity`: the bound (None: unbounded)."""
        with self._lock:
            return {
                "logged": len(self._log),
                "dropped": self._dropped,
                "capacity": self.log_capacity,
            }

    def log_size(self) -> dict[str, int | None]:
        """`bytes`: what the kept entries hold (`_Logged.retained`, summed); `byte_capacity`:
        the byte bound (None: unbounded)."""
        with self._lock:
            return {"bytes": self._log_size, "byte_capacity": self.log_bytes}

    # --- script --------------------------------------------------------------------------

    def queue_responses(self, responses: list[ScriptedResponse]) -> int:
        with self._lock:
            self._script.extend(responses)
            return len(self._script)

    def clear_script(self) -> int:
        """Drop every queued reply; how many there were."""
        with self._lock:
            left = len(self._script)
            self._script.clear()
            return left

    def pop_response(
        self, model: str = "", tools: Collection[str] = (), headers: Collection[str] = ()
    ) -> ScriptedResponse | None:
        """The first queued reply for a request for `model` offering `tools` and carrying the
        header names `headers` (`ScriptMatch`), taken off the queue; None when no queued
        reply is for it."""
        with self._lock:
            for index, entry in enumerate(self._script):
                if entry.match is None or entry.match.fits(model, tools, headers):
                    del self._script[index]
                    return entry
            return None

    # --- faults --------------------------------------------------------------------------

    def add_fault(self, fault: FaultSpec) -> int:
        with self._lock:
            self._faults.append([fault, fault.count])
            return self.pending_faults()

    def pending_faults(self) -> int:
        with self._lock:
            return sum(int(remaining) for _, remaining in self._faults)

    def take_fault(self) -> FaultSpec | None:
        """The fault for the request arriving now, if one is pending."""
        with self._lock:
            if not self._faults:
                return None
            head = self._faults[0]
            head[1] -= 1
            if head[1] <= 0:
                self._faults.popleft()
            fault: FaultSpec = head[0]
            return fault

    # --- holds ---------------------------------------------------------------------------

    def add_holds(self, count: int) -> None:
        with self._lock:
            self._pending_holds += count

    def hold_status(self) -> dict[str, int]:
        """`pending`: holds not yet taken by a request; `waiting`: requests held right now."""
        with self._lock:
            return {"pending": self._pending_holds, "waiting": len(self._held)}

    def take_hold(self) -> Hold | None:
        """A hold for the request arriving now, if one is pending. It counts as waiting from
        this moment (under the lock), so a caller that sees `waiting` rise knows it is held."""
        with self._lock:
            if self._pending_holds == 0:
                return None
            self._pending_holds -= 1
            hold = Hold()
            self._held.append(hold)
            return hold

    def release_holds(self, *, by_reset: bool = False) -> int:
        """Let every held request go; returns how many there were."""
        with self._lock:
            held, self._held = self._held, []
            for hold in held:
                hold.by_reset = by_reset
                hold.released.set()
            return len(held)

    def drop_hold(self, hold: Hold) -> None:
        """Forget a hold whose request stopped waiting without a release (cancelled)."""
        with self._lock:
            if hold in self._held:
                self._held.remove(hold)

    # --- cache ---------------------------------------------------------------------------

    def config(self) -> dict[str, Any]:
        """The settings `/_emulator/config` changes, as it answers them."""
        with self._lock:
            return {
                "ttft": self.ttft,
                "linger": self.linger,
                "tool_prompt": self.tool_prompt,
                "framing": self.framing,
                **self.lifetimes,
            }

    @staticmethod
    def _checked_lifetimes(
        base: dict[str, float], changes: Mapping[str, float]
    ) -> dict[str, float]:
        for name, seconds in changes.items():
            if name not in LIFETIME_DEFAULTS:
                raise ValueError(f"unknown lifetime setting {name!r}")
            if not seconds > 0:
                raise ValueError(f"{name} must be > 0 seconds, got {seconds!r}")
            base[name] = float(seconds)
        return base

    def set_lifetimes(self, **seconds: float) -> None:
        """Change implicit-cache lifetimes (`LIFETIME_DEFAULTS` names). They apply to every
        entry written or read from now on; stored entries keep their expiry until then."""
        with self._lock:
            self.lifetimes = self._checked_lifetimes(dict(self.lifetimes), seconds)

    def set_linger(self, linger: float) -> None:
        """Change the extra lifetime. The store fixes lifetimes when it is made, so a change
        starts an empty cache (like a reset of the cache alone); the same value is a no-op."""
        with self._lock:
            if linger != self.linger:
                self.cache = CacheStore(linger=linger, max_entries=self.cache_entries)
                self.linger = linger

    def apply_cache(self, request: PreparedRequest, started_at: float) -> CacheResult:
        return self.cache.process(request, now=started_at, ttft=self.ttft)

    def reset(self) -> None:
        """Clear cache (and Gemini's cachedContents), log (and its dropped count), script,
        faults, holds and counters; the
        clock goes back to 0 and the time-to-first-token, the linger and the lifetimes to
        their initial values. Held requests are let go as reset."""
        with self._lock:
            self.release_holds(by_reset=True)
            self._pending_holds = 0
            self.ttft = self._default_ttft
            self.set_linger(self._default_linger)
            self.tool_prompt = self._default_tool_prompt
            self.lifetimes = dict(self._default_lifetimes)
            self.framing = self._default_framing
            self.cache.clear()
            self.cached_contents.clear()
            self.prompt_cache_records.clear()
            self._log.clear()
            self._log_size = 0
            self._dropped = 0
            self._script.clear()
            self._faults.clear()
            self._counters = dict.fromkeys(self._counters, 0)
            self.clock.set(0.0)
