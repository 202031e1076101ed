"""How every emulated API takes in a request, in one place so the Anthropic endpoint and each
provider module behave alike: read the body and headers, take the request id and start
time (`Arrival.read`), take the pending fault and hold in arrival order and wait out the
hold (`Arrival.admit`), and log the outcome (`Arrival.record`)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fastapi import Request

from .body import parse_body as parse_body

if TYPE_CHECKING:
    from .state import EmulatorState, FaultSpec, Hold

# How often a held request looks at its release flag. Polling a thread-safe flag works both
# in-process (the test's own event loop) and under uvicorn in another thread.
HOLD_POLL_SECONDS = 0.002


def request_headers(request: Request) -> dict[str, str]:
    """The request headers by lower-case name; a repeated header's values joined by ", "."""
    return {name: ", ".join(request.headers.getlist(name)) for name in request.headers}


async def wait_for_release(state: EmulatorState, hold: Hold) -> None:
    """Wait until the hold is released (or the state reset); a cancelled request stops
    counting as waiting."""
    try:
        while not hold.released.is_set():
            await asyncio.sleep(HOLD_POLL_SECONDS)
    finally:
        state.drop_hold(hold)


@dataclass
class Arrival:
    """One incoming request of any provider, from its arrival to its log entry."""

    state: EmulatorState
    provider: str
    path: str
    request_id: str
    started_at: float
    raw: bytes
    body: Any  # parsed JSON, or the text of a body that is not JSON
    parsed: bool
    headers: dict[str, str]
    too_large: bool = False  # over `read`'s `max_bytes`: not parsed (`body` None)
    stream: bool = False  # logged as `stream`; set by the endpoint once it knows
    fault: FaultSpec | None = None  # taken by `admit`

    @classmethod
    async def read(
        cls,
        state: EmulatorState,
        request: Request,
        *,
        provider: str,
        path: str | None = None,
        max_bytes: int | None = None,
    ) -> Arrival:
        """Read the body, then take the request id and the virtual start time (in this
        order, so ids and start times follow arrival order). A body over `max_bytes` is not
        parsed (`too_large`)."""
        raw = await request.body()
        request_id = state.next_request_id()
        started_at = state.clock.now()
        too_large = max_bytes is not None and len(raw) > max_bytes
        body, parsed = (None, False) if too_large else parse_body(raw)
        return cls(
            state=state,
            provider=provider,
            path=path if path is not None else request.url.path,
            request_id=request_id,
            started_at=started_at,
            raw=raw,
            body=body,
            parsed=parsed,
            headers=request_headers(request),
            too_large=too_large,
        )

    async def admit(self, *, hold: bool = True) -> bool:
        """Take the pending fault (kept as `fault`) and, with `hold`, a pending hold, both in
        arrival order, then wait for the hold's release. False: a reset let the request go,
        so it belongs to the state before the reset and must touch nothing (nor be logged);
        the endpoint answers an error in its own shape. Everything after (validation,
        cache, script, log, reply) happens only on release."""
        self.fault = self.state.take_fault()
        taken = self.state.take_hold() if hold else None
        if taken is None:
            return True
        await wait_for_release(self.state, taken)
        return not taken.by_reset

    def record(self, status: int, usage: dict[str, Any] | None, *, has_body: bool = True) -> None:
        """Log the request's outcome (`has_body=False`: its body is served as null)."""
        self.state.record(
            request_id=self.request_id,
            path=self.path,
            started_at=self.started_at,
            status=status,
            usage=usage,
            stream=self.stream,
            headers=self.headers,
            raw_body=self.raw if has_body else b"",
            has_body=has_body,
            provider=self.provider,
        )
