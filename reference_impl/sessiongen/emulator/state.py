"""All mutable emulator state in one object: clock, cache, request log, script queue, faults
and the deterministic id counters."""

from __future__ import annotations

import copy
import threading
from collections import deque
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


class EmulatorState:
    """The one state object behind an emulator app (`app.state.emulator`).

    Every method takes one `threading.RLock`, so tests may poke it directly while uvicorn
    serves the app from another thread; nothing here is asyncio-bound.
    """

    def __init__(self, *, ttft: float = 0.0, clock: VirtualClock | None = None) -> None:
        self.clock = clock or VirtualClock()
        self.cache = CacheStore()
        self.ttft = ttft  # virtual seconds from a request's start to its response start
        self._default_ttft = ttft
        self._lock = threading.RLock()
        self._log: list[dict[str, Any]] = []
        self._script: deque[ScriptedResponse] = deque()
        self._faults: deque[list[Any]] = deque()  # [FaultSpec, remaining]
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
    ) -> None:
        with self._lock:
            self._log.append(
                {
                    "id": request_id,
                    "path": path,
                    "started_at": started_at,
                    "body": body,
                    "status": status,
                    "usage": usage,
                    "stream": stream,
                }
            )

    def requests(self) -> list[dict[str, Any]]:
        """Every request received, in order (deep copies)."""
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

    # --- cache ---------------------------------------------------------------------------

    def apply_cache(self, request: PreparedRequest, started_at: float) -> CacheResult:
        return self.cache.process(request, now=started_at, ttft=self.ttft)

    def reset(self) -> None:
        """Clear cache, log, script, faults and counters; the clock goes back to 0 and the
        time-to-first-token to its initial value."""
        with self._lock:
            self.ttft = self._default_ttft
            self.cache.clear()
            self._log.clear()
            self._script.clear()
            self._faults.clear()
            self._counters = dict.fromkeys(self._counters, 0)
            self.clock.set(0.0)
