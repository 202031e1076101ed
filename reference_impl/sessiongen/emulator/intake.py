"""How every emulated API takes in a request, in one place so the Anthropic endpoint and each
provider module behave alike: read the body (no more than the state's `max_body_bytes`,
`read_body`) and headers, take the request id and start time (`Arrival.read`), take the
pending fault and hold in arrival order and wait out the hold (`Arrival.admit`), and log the
outcome (`Arrival.record`)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fastapi import Request
from starlette.requests import ClientDisconnect
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from .body import parse_body as parse_body

if TYPE_CHECKING:
    from .state import EmulatorState, FaultSpec, Hold

# How often a held request looks at its release flag. Polling a thread-safe flag works both
# in-process (the test's own event loop) and under uvicorn in another thread.
HOLD_POLL_SECONDS = 0.002

LINGER_FACTOR = 2
"""After refusing a body over the limit, at most this many times the limit of its rest is
read and dropped before the connection is closed (`Refused`)."""


def declared_length(request: Request) -> int | None:
    """The `Content-Length` the client declared (None: none, or not a number)."""
    text = request.headers.get("content-length")
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


@dataclass(frozen=True)
class ReadBody:
    """What `read_body` took in: `raw` (None: over the limit, the bytes read so far let go)
    and whether the body ended (False: some of it is still unread)."""

    raw: bytes | None
    ended: bool


async def read_body(request: Request, max_bytes: int | None) -> ReadBody:
    """The body, unless it is over `max_bytes`: by its `Content-Length` before a byte is
    read, else (a chunked body, or a length that lied) as soon as the bytes read pass the
    limit, leaving the rest unread. So a body over the limit costs at most the limit to read
    and is never parsed. A client gone before its body ended raises `ClientDisconnect`, as
    Starlette's `Request.body` does."""
    if max_bytes is not None:
        declared = declared_length(request)
        if declared is not None and declared > max_bytes:
            return ReadBody(None, ended=False)
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await request.receive()
        if message["type"] != "http.request":
            raise ClientDisconnect()
        chunk: bytes = message.get("body", b"")
        ended = not message.get("more_body", False)
        size += len(chunk)
        if max_bytes is not None and size > max_bytes:
            return ReadBody(None, ended=ended)
        chunks.append(chunk)
        if ended:
            return ReadBody(b"".join(chunks), ended=True)


class Refused(Response):
    """The answer to a body over the limit, sent whole before the rest of the body is read.
    Then that rest is read and dropped (never kept) until it ends, or until `LINGER_FACTOR` x
    the limit of it has passed, and the connection is closed (`connection: close`). A client
    that sends all of a body somewhat over the limit so still reads the answer (closing with
    bytes unread would make the kernel reset the connection and lose the answer), and an
    endless body is cut off."""

    def __init__(self, answer: Response, *, unread: bool, linger: int) -> None:
        super().__init__(answer.body, status_code=answer.status_code)
        self.raw_headers = [
            *((k, v) for k, v in answer.raw_headers if k != b"connection"),
            (b"connection", b"close"),
        ]
        self.unread = unread
        self.linger = linger

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        start = {"type": "http.response.start", "status": self.status_code}
        await send({**start, "headers": self.raw_headers})
        await send({"type": "http.response.body", "body": self.body, "more_body": True})
        dropped = 0
        while self.unread and dropped <= self.linger:
            message = await receive()
            if message["type"] != "http.request" or not message.get("more_body", False):
                break
            dropped += len(message.get("body", b""))
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def refuse(answer: Response, read: ReadBody, max_bytes: int | None) -> Refused:
    """`answer` to a body `read_body` found over `max_bytes`, as `Refused`."""
    return Refused(answer, unread=not read.ended, linger=LINGER_FACTOR * (max_bytes or 0))


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
    too_large: bool = False  # over the state's `max_body_bytes`: unread, unparsed
    taken: ReadBody | None = None  # how the body was taken in (`refuse` needs it)
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
    ) -> Arrival:
        """Read the body, then take the request id and the virtual start time (in this
        order, so ids and start times follow arrival order). A body over the state's
        `max_body_bytes` is neither read whole nor parsed (`too_large`, `raw` empty): the
        endpoint answers its provider's "too large" error through `refuse`."""
        read = await read_body(request, state.max_body_bytes)
        request_id = state.next_request_id()
        started_at = state.clock.now()
        too_large = read.raw is None
        raw = read.raw if read.raw is not None else b""
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
            taken=read,
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

    def refuse(self, answer: Response) -> Refused:
        """Log this too large request with `answer`'s status (its body not kept) and answer it
        (`Refused`): before faults, holds and parsing, as Cloudflare answers the Messages API's
        413 before the API (AD:api/errors)."""
        assert self.too_large and self.taken is not None
        self.record(answer.status_code, None, has_body=False)
        return refuse(answer, self.taken, self.state.max_body_bytes)

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
