"""All mutable emulator state in one object: clock, cache, request log, script queue, faults,
holds and the deterministic id counters."""

from __future__ import annotations

import base64
import bisect
import copy
import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..cache import CacheResult, CacheStore, PreparedRequest
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
    model_config = ConfigDict(extra="forbid")

    id: str | None = None
    name: str
    input: dict[str, Any] = Field(default_factory=dict)


class ScriptedResponse(BaseModel):
    """The next reply, decided by the caller: content is thinking, then text, then tool_use
    blocks; `stop_reason` defaults to `tool_use` when there are tool calls, else `end_turn`."""

    model_config = ConfigDict(extra="forbid")

    text: str | None = None
    thinking: str | None = None
    tool_calls: list[ScriptedToolCall] = Field(default_factory=list)
    stop_reason: StopReason | None = None
    output_tokens: int | None = Field(default=None, ge=0)


class FaultSpec(BaseModel):
    """Make the next `count` requests fail with `status` (the real error body and type for
    it), or, with status 200, delay them, add headers or cut their SSE stream.

    `cut_after_events`: a streaming 200 sends only its first K events. `cut_mode` "end"
    finishes the HTTP body cleanly after them (the connection is closed, no message_stop);
    "abort" leaves the chunked body unfinished so the server drops the connection, which only
    a real socket can express (over an in-process ASGI transport it fails the transport).
    `error_event`: after the K events, send an SSE `error` event of that type first.
    Without `status`, a fault that cuts or sends an error event is a 200, any other a 500.
    """

    model_config = ConfigDict(extra="forbid")

    status: int | None = Field(default=None, ge=200, le=599)
    count: int = Field(default=1, ge=1)
    headers: dict[str, str] = Field(default_factory=dict)
    delay: float = Field(default=0.0, ge=0.0)
    cut_after_events: int | None = Field(default=None, ge=0)
    cut_mode: Literal["end", "abort"] = "end"
    error_event: str | None = None
    error_type: str | None = None
    message: str | None = None

    @property
    def effective_status(self) -> int:
        if self.status is not None:
            return self.status
        return 200 if self.cut_after_events is not None or self.error_event else 500


# Credentials never reach the log (it is served over HTTP and pasted into bug reports).
REDACTED_HEADERS = frozenset({"x-api-key", "authorization", "x-goog-api-key"})
"""Every provider SDK's credential header (Anthropic, OpenAI and Bedrock's SigV4 use
`authorization` or `x-api-key`; Gemini `x-goog-api-key`): never logged or served."""
REDACTED = "[redacted]"


def redact_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """`headers` with lower-case names and the credential headers' values replaced."""
    lowered = {name.lower(): value for name, value in headers.items()}
    return {name: REDACTED if name in REDACTED_HEADERS else v for name, v in lowered.items()}


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
        tool_prompt: bool = False,
        clock: VirtualClock | None = None,
    ) -> None:
        self.clock = clock or VirtualClock()
        # `linger`: virtual seconds an entry outlives its TTL. The docs promise a *minimum*
        # lifetime only ("minimum lifetime of 5 minutes"), and give no number for the rest.
        self.cache = CacheStore(linger=linger)
        self.linger = linger
        self._default_linger = linger
        self.ttft = ttft  # virtual seconds from a request's start to its response start
        self._default_ttft = ttft
        # Count the tool-use system prompt (the catalog's per-model figure) into the input of
        # a request with tools. Off by default: the engine's own counter leaves it out.
        self.tool_prompt = tool_prompt
        self._default_tool_prompt = tool_prompt
        self._lock = threading.RLock()
        self._log: list[dict[str, Any]] = []
        self._log_order: list[int] = []  # the arrival number of each `_log` entry
        self._script: deque[ScriptedResponse] = deque()
        self._faults: deque[list[Any]] = deque()  # [FaultSpec, remaining]
        self._pending_holds = 0
        self._held: list[Hold] = []
        self._counters = {"req": 0, "msg": 0, "toolu": 0}

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
        body: Any,
        status: int,
        usage: dict[str, Any] | None,
        stream: bool,
        headers: Mapping[str, str],
        raw_body: bytes,
        provider: str = "anthropic",
    ) -> None:
        """Log one request when it completes, at its place in arrival order (a held request
        completes after later arrivals). Credential headers are redacted here, so no caller
        can log them; the body bytes are kept base64-encoded, exactly as received. `provider`
        names the API the request came in on (`emulator.providers`)."""
        with self._lock:
            arrival = int(request_id.rsplit("_", 1)[1])  # ids count arrivals (`_next`)
            at = bisect.bisect(self._log_order, arrival)
            self._log_order.insert(at, arrival)
            self._log.insert(
                at,
                {
                    "id": request_id,
                    "path": path,
                    "started_at": started_at,
                    "body": body,
                    "status": status,
                    "usage": usage,
                    "stream": stream,
                    "headers": redact_headers(headers),
                    "raw_body": base64.b64encode(raw_body).decode("ascii"),
                    "provider": provider,
                },
            )

    def requests(self) -> list[dict[str, Any]]:
        """Every completed request, in arrival order (deep copies)."""
        with self._lock:
            return copy.deepcopy(self._log)

    # --- script --------------------------------------------------------------------------

    def queue_responses(self, responses: list[ScriptedResponse]) -> int:
        with self._lock:
            self._script.extend(responses)
            return len(self._script)

    def pop_response(self) -> ScriptedResponse | None:
        with self._lock:
            return self._script.popleft() if self._script else None

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
            return {"ttft": self.ttft, "linger": self.linger, "tool_prompt": self.tool_prompt}

    def set_linger(self, linger: float) -> None:
        """Change the extra lifetime. The store fixes lifetimes when it is made, so a change
        starts an empty cache (like a reset of the cache alone); the same value is a no-op."""
        with self._lock:
            if linger != self.linger:
                self.cache = CacheStore(linger=linger)
                self.linger = linger

    def apply_cache(self, request: PreparedRequest, started_at: float) -> CacheResult:
        return self.cache.process(request, now=started_at, ttft=self.ttft)

    def reset(self) -> None:
        """Clear cache, log, script, faults, holds and counters; the clock goes back to 0 and
        the time-to-first-token and the linger to their initial values. Held requests are let go as reset."""
        with self._lock:
            self.release_holds(by_reset=True)
            self._pending_holds = 0
            self.ttft = self._default_ttft
            self.set_linger(self._default_linger)
            self.tool_prompt = self._default_tool_prompt
            self.cache.clear()
            self._log.clear()
            self._log_order.clear()
            self._script.clear()
            self._faults.clear()
            self._counters = dict.fromkeys(self._counters, 0)
            self.clock.set(0.0)
