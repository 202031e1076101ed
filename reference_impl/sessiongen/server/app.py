"""The HTTP server's FastAPI app: sessions, durable turns, session.generate and warming.

`create_app(engine)` serves one `SessionEngine` with its plugins (`sessiongen.plugins`):
the engine tells them each turn that settled (`sessiongen_turn_settled`; their host is one
of `engine.turn_listeners`), and the warming routes and the lifespan's keeper loop go
through the built-in `warming` plugin.

Every error is application/problem+json
(`problems.py`): a `SessiongenError` with the status and `type` `errors.py` gives it,
request validation as `InvalidArgument` (422), a missing token as `Unauthorized` (401), a
body over the limit as `RequestTooLarge` (413), a method the route does not take as
`MethodNotAllowed` (405, with `Allow`), and any other plain HTTP refusal as RFC 9457's
`about:blank`. With a token, every route but `/api/health` requires
`Authorization: Bearer <token>`, checked before the body is read.

Route handlers are coroutines on purpose: the store is one SQLite connection, so every store
call runs on the event loop's thread, one at a time, never from FastAPI's thread pool.
"""

from __future__ import annotations

import asyncio
import logging
import traceback
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager, suppress
from importlib.metadata import version
from pathlib import Path
from typing import Annotated, Any

from fastapi import Body, FastAPI, Request, Response, Security
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.security import HTTPBearer
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .._bind import BearerGate, check_token
from ..errors import (
    InvalidArgument,
    MethodNotAllowed,
    NotFound,
    RequestTooLarge,
    SessiongenError,
    SessionNotFound,
    Unauthorized,
)
from ..llm.types import ToolCall
from ..model import ToolCallPart
from ..plugins import (
    PluginErrorHandler,
    PluginHost,
    WarmingPlugin,
    load_plugins,
    log_plugin_error,
)
from ..sample import SAMPLE_AGENT
from ..session.admission import MAX_PROMPT_CHARS
from ..session.engine import SessionEngine
from ..session.generate import GenerateResult
from ..warming.keeper import MonotonicClock, WarmingKeeper
from .models import (
    CreatedSession,
    CreateSessionRequest,
    GenerateRequest,
    Health,
    LedgerEntryView,
    MessagesView,
    Problem,
    PromptRequest,
    SessionView,
    TurnResult,
    WarmingView,
)
from .problems import (
    MIN_SECRET_CHARS,
    PROBLEM_MEDIA_TYPE,
    Redactor,
    error_response,
    http_problem,
    problem_response,
)

__all__ = ["HEALTH_PATH", "MAX_BODY_BYTES", "create_app"]

logger = logging.getLogger("sessiongen.server")

MAX_BODY_BYTES = 12 * MAX_PROMPT_CHARS + 64 * 1024
"""The default body limit: any prompt admission accepts fits, however its JSON escapes it
(a character outside the BMP is 12 bytes as `\\ud83d\\ude00`), with room for the other
fields. Anything larger is refused with 413 before it is parsed."""

HEALTH_PATH = "/api/health"
KEEPER_RESTART_SECONDS = 1.0
"""How long the supervisor waits before restarting a keeper loop that failed."""

_bearer = HTTPBearer(
    auto_error=False,
    description="Required when the server was started with a token (`--token` or "
    "`SESSIONGEN_TOKEN`); `/api/health` never requires it.",
)


def _problems(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI documentation of a route's problem answers (media type fixed in `_openapi`)."""
    return {status: {"model": Problem, "description": _PROBLEMS[status]} for status in statuses}


_PROBLEMS = {
    401: "No or a wrong bearer token, when the server has one (`unauthorized`).",
    404: "No session of this id (`session-not-found`), or no such agent (`agent-not-found`).",
    409: "No instructions baseline and a source cannot be read "
    "(`instructions-initialization-blocked`), or another process sharing the store file is "
    "draining the session (`session-busy`; nothing was admitted).",
    413: "The prompt is over 200,000 characters (`prompt-too-large`), the context does not "
    "fit the model's window (`context-overflow`), or the body is over the server's limit "
    "(`request-too-large`).",
    422: "The body does not parse or validate (`invalid-argument`: unknown field, wrong "
    "type, malformed JSON), or the prompt is empty (`empty-prompt`).",
    502: "The provider call failed (`provider-*`, with `provider_status` and "
    "`provider_request_id` when the provider sent them).",
    503: "The provider rate-limited the call or is overloaded (`provider-rate-limited`, "
    "`provider-overloaded`); a `Retry-After` header (and `retry_after` member) when the "
    "provider said when to retry.",
    504: "The provider call timed out (`provider-timeout`).",
    507: "The store cannot write: its disk is full, or it was opened read-only "
    "(`insufficient-storage`); nothing of the call was written, unless its detail says "
    "a turn's prompt was stored with its Step.",
}
_PROVIDER = (409, 413, 502, 503, 504)


class _Service:
    """What the routes share: the engine, the plugins, per-session turn locks."""

    def __init__(
        self,
        engine: SessionEngine,
        plugins: PluginHost,
        warming: WarmingPlugin,
        workspace: Path | None,
        default_agent: str,
    ) -> None:
        self.engine = engine
        self.plugins = plugins
        self.warming_plugin = warming
        self.workspace = workspace
        self.default_agent = default_agent

    @property
    def keeper(self) -> WarmingKeeper:
        """The warming plugin's keeper, made when first needed (fitting the default policy
        takes time an app that never warms need not pay)."""
        return self.warming_plugin.keeper

    def view(self, session_id: str) -> SessionView:
        record = self.engine.store.read(session_id)
        s = record.session
        return SessionView(
            id=s.id,
            agent=s.agent,
            workspace=s.workspace,
            parent_id=s.parent_id,
            root_id=s.root_id,
            revision=s.revision,
            pending=list(record.pending),
            usage=record.usage,
            calls=record.calls,
        )

    async def turn(self, session_id: str, prompt: str) -> TurnResult:
        """`engine.run`: admitted and drained under the session's turn lock and drain lease
        (`SessionBusy`, 409, with nothing admitted, when another process is draining it);
        a full disk refuses the turn (`InsufficientStorage`, 507) before the prompt is
        stored, or says it was. The engine tells the plugins the turn ended."""
        drained = await self.engine.run(session_id, prompt)
        return TurnResult(
            session_id=session_id,
            revision=drained.revision,
            steps=drained.steps,
            finish_reason=drained.finish_reason,
            text=drained.text,
            tool_calls=[
                ToolCall(id=p.id, name=p.name, input=p.input)
                for m in drained.messages
                for p in m.parts
                if isinstance(p, ToolCallPart)
            ],
            usage=drained.usage,
            below_cache_minimum=drained.below_cache_minimum,
        )

    async def delete(self, session_id: str) -> None:
        async with self.engine.turn_lock(session_id):  # a turn in flight settles first
            self.engine.store.delete(session_id)  # first: a refused delete changes nothing
            self.warming_plugin.unwatch(session_id)
        self.engine.forget(session_id)

    def warming(self, session_id: str) -> WarmingView:
        if not self.engine.store.exists(session_id):
            raise SessionNotFound(session_id)
        ledger = self.keeper.ledger
        return WarmingView(
            session_id=session_id,
            watched=session_id in self.keeper.watched,
            now=self.keeper.clock.now(),
            next_ping_at=self.keeper.schedule(session_id),
            why_not_pinging=self.keeper.why_not_pinging(session_id),
            total_cost_usd=ledger.total_cost_usd(session_id),
            entries=[
                LedgerEntryView(
                    at=e.at,
                    revision=e.revision,
                    usage=e.usage,
                    cost_usd=e.cost_usd,
                    hit=e.hit,
                    error=e.error,
                )
                for e in ledger.for_session(session_id)
            ],
        )


def create_app(
    engine: SessionEngine,
    *,
    keeper: WarmingKeeper | None = None,
    plugins: PluginHost | None = None,
    token: str | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
    workspace: str | Path | None = None,
    default_agent: str | None = None,
    secrets: Iterable[str] = (),
) -> FastAPI:
    """The HTTP API over `engine`.

    `plugins`: the engine's `PluginHost` (started here if its host has not started it); it
    must have the built-in `warming` plugin, whose keeper runs in the app's lifespan. When
    None, the app hosts the built-ins itself, on real time, without entry points (an engine
    built without `request_hook(pm)` could not run a third party's request hook); `keeper`
    is then the warming plugin's keeper, for a caller that built its own (only without
    `plugins`: a host's warming plugin takes it as `WarmingPlugin(keeper=...)`).
    `token`: when set, every route but `/api/health` requires `Authorization: Bearer
    <token>`. `workspace`: the directory new sessions get (none: tool calls answer that the
    session has no workspace). `default_agent`: the agent of `POST /api/session` without
    one (the sample agent when the engine has it, else the engine's first). `secrets`:
    strings never to send or log, in addition to the token and the provider client's API key.
    """
    if max_body_bytes < 1:
        raise ValueError(f"max_body_bytes must be at least 1, got {max_body_bytes}")
    check_token(token)  # UnusableToken (a ValueError): empty, or a placeholder
    if not engine.agents:
        raise ValueError("the engine has no agents")
    agent = default_agent or (
        SAMPLE_AGENT.name if SAMPLE_AGENT.name in engine.agents else next(iter(engine.agents))
    )
    redactor = Redactor([token, *_client_secrets(engine), *secrets])
    if token is not None and len(token) < MIN_SECRET_CHARS:
        logger.warning(
            "the bearer token has fewer than %d characters: it is easy to guess, and not "
            "masked in error text or logs",
            MIN_SECRET_CHARS,
        )
    if plugins is None:
        plugins = _default_plugins(engine, keeper)
    elif keeper is not None:
        raise ValueError("give the keeper to the host's warming plugin, not with plugins")
    elif plugins.engine is not engine:
        # Its keeper would ask another engine whether a turn is in flight, and ping into it.
        raise ValueError("the plugins' host runs over another engine than the app's")
    if plugins.on_error is log_plugin_error:  # the server logs nothing unscrubbed
        plugins.on_error = _plugin_error_logger(redactor)
    plugins.startup()
    if plugins.turn_settled not in engine.turn_listeners:
        engine.turn_listeners.append(plugins.turn_settled)  # each turn's end, from the engine
    warming = plugins.plugin("warming")
    if not isinstance(warming, WarmingPlugin):
        raise ValueError("the server's warming routes need the built-in 'warming' plugin")
    service = _Service(
        engine, plugins, warming, None if workspace is None else Path(workspace), agent
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        task = asyncio.create_task(_keep_warm(service.keeper, redactor), name="warming-keeper")
        try:
            yield
        finally:
            task.cancel()
            with suppress(asyncio.CancelledError):
                await task

    app = FastAPI(
        title="sessiongen",
        summary="Durable agent sessions and session.generate over HTTP.",
        description="Create sessions, run durable turns, and call `session.generate` (one "
        "transient provider call over a session's context that leaves the session "
        "unchanged). Errors are `application/problem+json` (docs/errors.md).",
        version=version("sessiongen"),
        docs_url=None,
        redoc_url=None,
        lifespan=lifespan,
    )
    app.state.service = service
    app.state.plugins = plugins

    # --- routes ---------------------------------------------------------------------------

    guarded = [Security(_bearer)]  # documents the scheme; BearerGate enforces it

    @app.get(HEALTH_PATH, tags=["server"])
    async def health() -> Health:
        """Liveness; never requires the token."""
        return Health()

    @app.post(
        "/api/session",
        status_code=201,
        tags=["sessions"],
        dependencies=guarded,
        responses=_problems(401, 404, 413, 422, 507),
    )
    async def create_session(
        response: Response,
        body: Annotated[CreateSessionRequest | None, Body()] = None,
    ) -> CreatedSession:
        """Create a session for an agent (the server's default agent without a body)."""
        name = body.agent if body is not None and body.agent is not None else service.default_agent
        session = engine.create_session(name, workspace=service.workspace)
        response.headers["Location"] = f"/api/session/{session.id}"
        return CreatedSession(id=session.id)

    @app.get(
        "/api/session/{session_id}",
        tags=["sessions"],
        dependencies=guarded,
        responses=_problems(401, 404, 422),
    )
    async def get_session(session_id: str) -> SessionView:
        """The session as stored, with its current revision and usage totals."""
        return service.view(session_id)

    @app.get(
        "/api/session/{session_id}/messages",
        tags=["sessions"],
        dependencies=guarded,
        responses=_problems(401, 404, 422),
    )
    async def get_messages(session_id: str) -> MessagesView:
        """The session's history, in order, as stored."""
        record = engine.store.read(session_id)
        return MessagesView(
            session_id=session_id,
            revision=record.session.revision,
            messages=list(record.messages),
        )

    @app.delete(
        "/api/session/{session_id}",
        status_code=204,
        tags=["sessions"],
        dependencies=guarded,
        responses=_problems(401, 404, 422, 507),
    )
    async def delete_session(session_id: str) -> Response:
        """Delete the session and everything stored for it (a turn in flight settles
        first); its id is never reused."""
        await service.delete(session_id)
        return Response(status_code=204)

    @app.post(
        "/api/session/{session_id}/prompt",
        tags=["turns"],
        dependencies=guarded,
        responses=_problems(401, 404, 422, *_PROVIDER, 507),
    )
    async def prompt(session_id: str, body: PromptRequest) -> TurnResult:
        """A durable turn: admit the prompt, drain (tool rounds included), answer when it
        settled. Turns of one session run one at a time."""
        return await service.turn(session_id, body.prompt)

    @app.post(
        "/api/session/{session_id}/generate",
        tags=["turns"],
        dependencies=guarded,
        responses=_problems(401, 404, 422, *_PROVIDER),
    )
    async def generate(session_id: str, body: GenerateRequest) -> GenerateResult:
        """session.generate: one transient provider call over the session's context; the
        session is left unchanged (contract: contract/session-generate.md)."""
        return await engine.generate(
            session_id,
            body.prompt,
            tools_policy=body.tools_policy,
            warming=body.warming,
            tag=body.tag,
        )

    @app.post(
        "/api/session/{session_id}/warming",
        tags=["warming"],
        dependencies=guarded,
        responses=_problems(401, 404, 422),
    )
    async def start_warming(session_id: str) -> WarmingView:
        """Keep the session's prompt cache warm between durable turns (contract section 8)."""
        service.warming_plugin.watch(session_id)
        return service.warming(session_id)

    @app.get(
        "/api/session/{session_id}/warming",
        tags=["warming"],
        dependencies=guarded,
        responses=_problems(401, 404, 422),
    )
    async def get_warming(session_id: str) -> WarmingView:
        """Whether the session is watched, its next ping, and its pings' ledger entries."""
        return service.warming(session_id)

    @app.delete(
        "/api/session/{session_id}/warming",
        status_code=204,
        tags=["warming"],
        dependencies=guarded,
        responses=_problems(401, 404, 422),
    )
    async def stop_warming(session_id: str) -> Response:
        """Stop keeping the session warm; its ledger entries stay."""
        if not engine.store.exists(session_id):
            raise SessionNotFound(session_id)
        service.warming_plugin.unwatch(session_id)
        return Response(status_code=204)

    # --- errors: the one place a failure becomes an answer ---------------------------------

    @app.exception_handler(SessiongenError)
    async def sessiongen_error(request: Request, exc: SessiongenError) -> Response:
        return error_response(exc, instance=request.url.path, redactor=redactor)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> Response:
        errors = [_error_entry(e) for e in exc.errors()]
        detail = "; ".join(f"{e['loc']}: {e['msg']}" for e in errors) or "invalid request"
        content_type = request.headers.get("content-type", "")
        if any(e["loc"] == "body" for e in errors) and "json" not in content_type:
            detail += " (send the body as JSON, with Content-Type: application/json)"
        return error_response(
            InvalidArgument(detail),
            instance=request.url.path,
            redactor=redactor,
            extra={"errors": errors},
        )

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        path = request.url.path
        if exc.status_code == 404:
            missing = NotFound(f"no route {request.method} {path}")
            return error_response(missing, instance=path, redactor=redactor)
        if exc.status_code == 405:
            allowed = next((v for k, v in (exc.headers or {}).items() if k.lower() == "allow"), "")
            refused = MethodNotAllowed(
                f"{request.method} is not allowed on {path}; allowed: {allowed}"
            )
            return error_response(refused, instance=path, redactor=redactor, headers=exc.headers)
        return http_problem(
            exc.status_code, str(exc.detail), instance=path, redactor=redactor, headers=exc.headers
        )

    def _openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title,
                version=app.version,
                summary=app.summary,
                description=app.description,
                routes=app.routes,
            )
            _problem_media_types(schema)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = _openapi  # type: ignore[method-assign]

    # Outermost last: errors caught around everything, the token before the body is read.
    app.add_middleware(_BodyLimit, max_bytes=max_body_bytes, redactor=redactor)
    if token is not None:

        def refusal(detail: str, scope: Scope) -> ASGIApp:
            return problem_response(
                Unauthorized(
                    f"{detail}: this server requires Authorization: Bearer <token>"
                ).problem_details(),
                instance=_instance(scope),
                redactor=redactor,
                headers={"WWW-Authenticate": 'Bearer realm="sessiongen"'},
            )

        # Everything but /api/health.
        app.add_middleware(
            BearerGate, token=token, is_open=lambda path: path == HEALTH_PATH, refusal=refusal
        )
    app.add_middleware(_Unexpected, redactor=redactor)
    return app


def _default_plugins(engine: SessionEngine, keeper: WarmingKeeper | None) -> PluginHost:
    """The built-ins over `engine`, the given keeper as the warming plugin's if there is
    one."""
    pm = load_plugins(entry_points=False)
    if keeper is not None:
        pm.unregister(name="warming")
        pm.register(WarmingPlugin(keeper=keeper), name="warming")
    clock = keeper.clock if keeper is not None else MonotonicClock()
    return PluginHost(engine, pm, clock)


def _plugin_error_logger(redactor: Redactor) -> PluginErrorHandler:
    """An `on_error` for a `PluginHost`: the plugin's failure, logged with secrets scrubbed."""

    def report(plugin: str, hook: str, exc: Exception) -> None:
        logger.error("plugin %r failed in %s: %s", plugin, hook, _scrubbed(exc, redactor))

    return report


def _client_secrets(engine: SessionEngine) -> list[str]:
    """The provider client's credentials (the SDK client's `api_key` / `auth_token`), found
    without importing any SDK."""
    client = getattr(engine.llm, "client", None)
    found = [getattr(client, name, None) for name in ("api_key", "auth_token")]
    return [s for s in found if isinstance(s, str) and s]


def _error_entry(error: Any) -> dict[str, Any]:
    """One validation error without its `input` (which would echo the request back)."""
    parts = list(error.get("loc", ()))
    msg = str(error.get("msg", ""))
    if error.get("type") == "json_invalid":  # its loc is ("body", character position)
        context = error.get("ctx") or {}
        position = f" at character {parts[1]}" if len(parts) > 1 else ""
        msg = f"{msg}: {context.get('error', 'not JSON')}{position}"
        parts = parts[:1]
    loc = ".".join(str(part) for part in parts)
    return {"loc": loc, "msg": msg, "type": str(error.get("type", ""))}


def _problem_media_types(schema: dict[str, Any]) -> None:
    """Error answers are application/problem+json; FastAPI documents every model it is given
    as application/json."""
    for operations in schema.get("paths", {}).values():
        for operation in operations.values():
            for status, answer in operation.get("responses", {}).items():
                content = answer.get("content", {})
                if status.isdigit() and int(status) >= 400 and "application/json" in content:
                    content[PROBLEM_MEDIA_TYPE] = content.pop("application/json")


async def _keep_warm(keeper: WarmingKeeper, redactor: Redactor) -> None:
    """Run the keeper until cancelled; a failed loop (an error a ping does not catch) is
    logged and restarted, so one bad session does not stop warming for all."""
    while True:
        try:
            await keeper.run()
        except Exception as exc:
            logger.error("the warming keeper failed; restarting: %s", _scrubbed(exc, redactor))
            await asyncio.sleep(KEEPER_RESTART_SECONDS)


def _scrubbed(exc: BaseException, redactor: Redactor) -> str:
    return redactor.text("".join(traceback.format_exception(exc)).rstrip())


# --- ASGI middleware ---------------------------------------------------------------------


def _instance(scope: Scope) -> str:
    return str(scope.get("path", ""))


class _BodyLimit:
    """Refuses a body over `max_bytes` with 413 before anything parses it: by its
    Content-Length when sent, else while reading. The body is read whole first (requests
    here are small JSON), then replayed to the app."""

    def __init__(self, app: ASGIApp, *, max_bytes: int, redactor: Redactor) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.redactor = redactor

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await self._refuse(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break  # the client went away: the app sees the disconnect
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._refuse(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        replay: list[Message] = [{"type": "http.request", "body": b"".join(chunks)}]

        async def replayed() -> Message:
            return replay.pop() if replay else await receive()

        await self.app(scope, replayed, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        error = RequestTooLarge(
            f"the request body is over this server's limit of {self.max_bytes:,} bytes"
        )
        response = error_response(error, instance=_instance(scope), redactor=self.redactor)
        await response(scope, receive, send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


class _Unexpected:
    """An exception no handler knows is a bug: answer 500 `internal-error` without its
    message, and log its traceback with every secret scrubbed (not re-raised, so the server
    does not log it again unscrubbed)."""

    def __init__(self, app: ASGIApp, *, redactor: Redactor) -> None:
        self.app = app
        self.redactor = redactor

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except Exception as exc:
            logger.error(
                "unexpected error on %s %s\n%s",
                scope.get("method"),
                _instance(scope),
                _scrubbed(exc, self.redactor),
            )
            if started:
                return
            error = SessiongenError("an unexpected error; the server log has the details")
            response = error_response(error, instance=_instance(scope), redactor=self.redactor)
            await response(scope, receive, send)
