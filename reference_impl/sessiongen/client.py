"""A Python client for `sessiongen serve`: one method per route of docs/openapi.json, sync
(`SessiongenClient`) and async (`AsyncSessiongenClient`).

Answers are the server's own models (`sessiongen.server.models`, and `GenerateResult` for
`generate`), validated on arrival, so a caller gets the types the engine returns. A
problem+json answer raises the sessiongen exception its `type` names
(`SessiongenError.from_problem`, with the body in `problem_body`): over HTTP a caller catches
`SessionNotFound`, `EmptyPrompt` or `ProviderRateLimited` as it would in-process. An unknown
type falls back by status to the closest base (`about:blank` 405 is a `SessiongenError`).

Failing to reach the server (refused connection, timeout) raises httpx's own exceptions,
unchanged: they are about this server, not the provider, so they are never a
`ProviderError`. An error answer that is not problem+json (a proxy's 502 page) raises
`httpx.HTTPStatusError`.

Both clients share one core, `_Call`: each route's method, path, body and answer model are
written once; the two classes differ only in how they send a request.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx

from ._resource import AsyncResource
from .errors import InvalidArgument, SessiongenError
from .server.models import (
    CreatedSession,
    Health,
    MessagesView,
    SessionView,
    TurnResult,
    WarmingView,
)
from .server.problems import PROBLEM_MEDIA_TYPE
from .session.generate import DEFAULT_TOOLS_POLICY, GenerateResult, ToolsPolicy

__all__ = ["DEFAULT_TIMEOUT", "AsyncSessiongenClient", "SessiongenClient"]

DEFAULT_TIMEOUT = httpx.Timeout(600.0, connect=10.0)
"""A durable turn is several provider calls (tool rounds) answered at once, so reads may
take minutes; connecting to the server should not."""

T = TypeVar("T")


@dataclass(frozen=True)
class _Call(Generic[T]):
    """One call of one route: what to send and how to read the answer. Everything the two
    clients share; they only send `request()` and hand the response to `answer()`."""

    method: str
    path: str
    read: Callable[[bytes], T]
    json: dict[str, Any] | None = None

    def request(self, http: httpx.Client | httpx.AsyncClient) -> httpx.Request:
        return http.build_request(self.method, self.path, json=self.json)

    def answer(self, response: httpx.Response) -> T:
        _raise_for_error(response)
        return self.read(response.content)


def _nothing(_: bytes) -> None:
    """The answer of a 204 route."""


def _session(session_id: str, tail: str = "") -> str:
    """A session's path, the id one escaped segment, so it cannot name another route. An id
    that cannot be one segment is refused here: the server decodes `%2F` before routing,
    and httpx resolves `.` and `..`."""
    if session_id in ("", ".", "..") or "/" in session_id:
        raise InvalidArgument(f"session_id must be one path segment; got {session_id!r}")
    return f"/api/session/{quote(session_id, safe='')}{tail}"


def _raise_for_error(response: httpx.Response) -> None:
    """Raise the sessiongen error a problem+json answer describes; any other non-2xx answer
    is not our server speaking, and raises httpx.HTTPStatusError."""
    if response.is_success:
        return
    media_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type == PROBLEM_MEDIA_TYPE:
        try:
            body = response.json()
        except ValueError:
            body = None
        if isinstance(body, dict):
            raise SessiongenError.from_problem(body)
    response.raise_for_status()


# --- the routes, once --------------------------------------------------------------------


def _health() -> _Call[Health]:
    return _Call("GET", "/api/health", Health.model_validate_json)


def _create_session(agent: str | None) -> _Call[CreatedSession]:
    body = None if agent is None else {"agent": agent}
    return _Call("POST", "/api/session", CreatedSession.model_validate_json, body)


def _get_session(session_id: str) -> _Call[SessionView]:
    return _Call("GET", _session(session_id), SessionView.model_validate_json)


def _messages(session_id: str) -> _Call[MessagesView]:
    return _Call("GET", _session(session_id, "/messages"), MessagesView.model_validate_json)


def _delete_session(session_id: str) -> _Call[None]:
    return _Call("DELETE", _session(session_id), _nothing)


def _prompt(session_id: str, prompt: str) -> _Call[TurnResult]:
    path = _session(session_id, "/prompt")
    return _Call("POST", path, TurnResult.model_validate_json, {"prompt": prompt})


def _generate(
    session_id: str, prompt: str, tools_policy: ToolsPolicy | str, warming: bool, tag: str | None
) -> _Call[GenerateResult]:
    body = {"prompt": prompt, "tools_policy": tools_policy, "warming": warming, "tag": tag}
    path = _session(session_id, "/generate")
    return _Call("POST", path, GenerateResult.model_validate_json, body)


def _start_warming(session_id: str) -> _Call[WarmingView]:
    return _Call("POST", _session(session_id, "/warming"), WarmingView.model_validate_json)


def _warming(session_id: str) -> _Call[WarmingView]:
    return _Call("GET", _session(session_id, "/warming"), WarmingView.model_validate_json)


def _stop_warming(session_id: str) -> _Call[None]:
    return _Call("DELETE", _session(session_id, "/warming"), _nothing)


def _options(
    base_url: str, token: str | None, timeout: httpx.Timeout | float | None
) -> dict[str, Any]:
    headers = {"accept": f"application/json, {PROBLEM_MEDIA_TYPE}"}
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    return {"base_url": base_url, "headers": headers, "timeout": timeout}


# --- the two clients: the same methods, sent two ways --------------------------------------


class SessiongenClient:
    """A blocking client for a sessiongen server (`sessiongen serve`).

    `token` is sent as `Authorization: Bearer <token>` (a server off loopback requires it);
    `transport` replaces httpx's network transport (tests, proxies). Use it as a context
    manager, or call `close()`.
    """

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        transport: httpx.BaseTransport | None = None,
        timeout: httpx.Timeout | float | None = DEFAULT_TIMEOUT,
    ) -> None:
        self._http = httpx.Client(transport=transport, **_options(base_url, token, timeout))

    def _send(self, call: _Call[T]) -> T:
        return call.answer(self._http.send(call.request(self._http)))

    def health(self) -> Health:
        """Liveness; the one route that never needs the token."""
        return self._send(_health())

    def create_session(self, agent: str | None = None) -> CreatedSession:
        """A new session for `agent` (the server's default agent when None)."""
        return self._send(_create_session(agent))

    def get_session(self, session_id: str) -> SessionView:
        """The session as stored: its revision, pending inputs and usage totals."""
        return self._send(_get_session(session_id))

    def messages(self, session_id: str) -> MessagesView:
        """The session's history, in order, with its revision."""
        return self._send(_messages(session_id))

    def prompt(self, session_id: str, prompt: str) -> TurnResult:
        """A durable turn (tool rounds included), answered once it settled."""
        return self._send(_prompt(session_id, prompt))

    def generate(
        self,
        session_id: str,
        prompt: str,
        *,
        tools_policy: ToolsPolicy | str = DEFAULT_TOOLS_POLICY,
        warming: bool = False,
        tag: str | None = None,
    ) -> GenerateResult:
        """session.generate: one transient provider call; the session is left unchanged."""
        return self._send(_generate(session_id, prompt, tools_policy, warming, tag))

    def start_warming(self, session_id: str) -> WarmingView:
        """Keep the session's prompt cache warm between durable turns."""
        return self._send(_start_warming(session_id))

    def warming(self, session_id: str) -> WarmingView:
        """Whether the session is watched, its next ping, and the pings' ledger."""
        return self._send(_warming(session_id))

    def stop_warming(self, session_id: str) -> None:
        """Stop keeping the session warm; its ledger stays."""
        self._send(_stop_warming(session_id))

    def delete_session(self, session_id: str) -> None:
        """Delete the session and everything stored for it."""
        self._send(_delete_session(session_id))

    def close(self) -> None:
        """Close the connection pool (what leaving the `with` block does)."""
        self._http.close()

    def __enter__(self) -> SessiongenClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class AsyncSessiongenClient(AsyncResource):
    """The same client for asyncio: every method is a coroutine. `transport` may be an
    `httpx.ASGITransport` over `sessiongen.server.create_app(engine)` to talk to a server
    in-process, with no socket."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout: httpx.Timeout | float | None = DEFAULT_TIMEOUT,
    ) -> None:
        self._http = httpx.AsyncClient(transport=transport, **_options(base_url, token, timeout))

    async def _send(self, call: _Call[T]) -> T:
        return call.answer(await self._http.send(call.request(self._http)))

    async def health(self) -> Health:
        """Liveness; the one route that never needs the token."""
        return await self._send(_health())

    async def create_session(self, agent: str | None = None) -> CreatedSession:
        """A new session for `agent` (the server's default agent when None)."""
        return await self._send(_create_session(agent))

    async def get_session(self, session_id: str) -> SessionView:
        """The session as stored: its revision, pending inputs and usage totals."""
        return await self._send(_get_session(session_id))

    async def messages(self, session_id: str) -> MessagesView:
        """The session's history, in order, with its revision."""
        return await self._send(_messages(session_id))

    async def prompt(self, session_id: str, prompt: str) -> TurnResult:
        """A durable turn (tool rounds included), answered once it settled."""
        return await self._send(_prompt(session_id, prompt))

    async def generate(
        self,
        session_id: str,
        prompt: str,
        *,
        tools_policy: ToolsPolicy | str = DEFAULT_TOOLS_POLICY,
        warming: bool = False,
        tag: str | None = None,
    ) -> GenerateResult:
        """session.generate: one transient provider call; the session is left unchanged."""
        return await self._send(_generate(session_id, prompt, tools_policy, warming, tag))

    async def start_warming(self, session_id: str) -> WarmingView:
        """Keep the session's prompt cache warm between durable turns."""
        return await self._send(_start_warming(session_id))

    async def warming(self, session_id: str) -> WarmingView:
        """Whether the session is watched, its next ping, and the pings' ledger."""
        return await self._send(_warming(session_id))

    async def stop_warming(self, session_id: str) -> None:
        """Stop keeping the session warm; its ledger stays."""
        await self._send(_stop_warming(session_id))

    async def delete_session(self, session_id: str) -> None:
        """Delete the session and everything stored for it."""
        await self._send(_delete_session(session_id))

    async def aclose(self) -> None:
        """Close the connection pool (what leaving the `async with` block does)."""
        await self._http.aclose()
