"""The FastAPI app: each registered provider's API (its folder's `emulator` part) plus the
`/_emulator` admin endpoints."""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

from fastapi import FastAPI, Query, Request
from fastapi.exception_handlers import request_validation_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Scope

from .._bind import BearerGate, check_token
from ..cache import storage_cost
from ..providers import PROVIDERS
from .errors import error_body, error_response
from .intake import ReadBody, read_body, refuse
from .state import (
    DEFAULT_MAX_BODY_BYTES,
    LIFETIME_DEFAULTS,
    EmulatorState,
    FaultSpec,
    ScriptedResponse,
)

ADMIN_PREFIX = "/_emulator/"
LOG_DROPPED_HEADER = "x-emulator-log-dropped"
"""On `GET /_emulator/requests`: how many logged requests the log's capacity dropped."""
MAX_REQUEST_BYTES = DEFAULT_MAX_BODY_BYTES
"""The default body limit (`EmulatorState(max_body_bytes=...)`), the Messages API's 32 MB."""


class ClockUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    advance: float | None = Field(default=None, ge=0)
    now: float | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _exactly_one(self) -> ClockUpdate:
        if (self.advance is None) == (self.now is None):
            raise ValueError("give exactly one of 'advance' or 'now'")
        return self


class ScriptUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    responses: list[ScriptedResponse]


class ConfigUpdate(BaseModel):
    """Settings the docs give no number for; each is optional, an omitted one is unchanged."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    ttft: float | None = Field(default=None, ge=0)
    linger: float | None = Field(default=None, ge=0)
    tool_prompt: bool | None = None
    openai_in_memory_ttl: float | None = Field(default=None, gt=0)
    openai_in_memory_max: float | None = Field(default=None, gt=0)
    openai_extended_ttl: float | None = Field(default=None, gt=0)
    openai_extended_max: float | None = Field(default=None, gt=0)
    gemini_implicit_ttl: float | None = Field(default=None, gt=0)
    framing: bool | None = None


class HoldUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    count: int = Field(ge=1)


_Body = TypeVar("_Body", bound=BaseModel)


class _AdminBodyTooLarge(Exception):
    """An admin body over the state's `max_body_bytes` (answered 413, unread)."""

    def __init__(self, read: ReadBody) -> None:
        super().__init__("request_too_large")
        self.read = read


async def _admin_body(state: EmulatorState, request: Request, model: type[_Body]) -> _Body:
    """An admin endpoint's body as its pydantic model, whatever the content type; a body
    that is no JSON or breaks the model is the 400 of `invalid_body` (no request id), one
    over `max_body_bytes` the 413 of `admin_body_too_large`, unread."""
    read = await read_body(request, state.max_body_bytes)
    if read.raw is None:
        raise _AdminBodyTooLarge(read)
    try:
        return model.model_validate_json(read.raw)
    except ValidationError as exc:
        raise RequestValidationError(exc.errors(include_url=False)) from None


def _validation_message(exc: RequestValidationError) -> str:
    """`loc: msg` of each pydantic error, joined: `count: Input should be greater than ...`."""
    parts = []
    for error in exc.errors():
        loc = ".".join(str(x) for x in error.get("loc", ()) if x != "body")
        parts.append(f"{loc}: {error.get('msg', 'invalid')}" if loc else str(error.get("msg")))
    return "; ".join(parts) or "Invalid request"


def _admin_refusal(detail: str, scope: Scope) -> ASGIApp:
    """The admin API's 401, in the Messages API's error shape. It carries no request id:
    taking one would move the deterministic ids (`req_000001`, ...) that the emulator's own
    clients count on."""
    body = error_body(
        401,
        f"{detail}: this emulator's admin API requires Authorization: Bearer <token>",
        "",
        "authentication_error",
    )
    body["request_id"] = None
    return JSONResponse(
        body,
        status_code=401,
        headers={"WWW-Authenticate": 'Bearer realm="sessiongen-emulator"'},
    )


def create_app(state: EmulatorState | None = None, *, token: str | None = None) -> FastAPI:
    """The emulated provider APIs (Anthropic Messages, OpenAI, Bedrock, Gemini) over `state`
    (a fresh one if None), reachable as `app.state.emulator`. Any SDK key is accepted. With
    `token`, everything but the provider routes (the `/_emulator` admin and fault endpoints)
    requires `Authorization: Bearer <token>`: what `sessiongen emulator` sets off
    loopback."""
    check_token(token)  # UnusableToken (a ValueError): empty, or a placeholder
    emulator = state if state is not None else EmulatorState()
    app = FastAPI(
        title="sessiongen Anthropic emulator", docs_url=None, redoc_url=None, openapi_url=None
    )
    app.state.emulator = emulator
    for provider in PROVIDERS:
        app.include_router(provider.part("emulator").router(emulator))

    @app.get("/_emulator/requests")
    async def requests(
        response: Response,
        since: Annotated[int, Query(ge=0)] = 0,
        limit: Annotated[int | None, Query(ge=0)] = None,
    ) -> dict[str, Any]:
        # The status first: an entry dropped after it was read is counted by the next read.
        status = emulator.log_status()
        response.headers[LOG_DROPPED_HEADER] = str(status["dropped"])
        size = emulator.log_size()
        return {
            "requests": emulator.requests(since=since, limit=limit),
            "dropped": status["dropped"],
            "capacity": status["capacity"],
            "bytes": size["bytes"],
            "byte_capacity": size["byte_capacity"],
        }

    @app.get("/_emulator/clock")
    async def get_clock() -> dict[str, float]:
        return {"now": emulator.clock.now()}

    @app.post("/_emulator/clock")
    async def set_clock(request: Request) -> dict[str, float]:
        update = await _admin_body(emulator, request, ClockUpdate)
        if update.advance is not None:
            return {"now": emulator.clock.advance(update.advance)}
        assert update.now is not None
        return {"now": emulator.clock.set(update.now)}

    @app.post("/_emulator/script")
    async def script(request: Request) -> dict[str, int]:
        update = await _admin_body(emulator, request, ScriptUpdate)
        return {"queued": emulator.queue_responses(update.responses)}

    @app.post("/_emulator/faults")
    async def faults(request: Request) -> dict[str, int]:
        fault = await _admin_body(emulator, request, FaultSpec)
        return {"pending": emulator.add_fault(fault)}

    @app.post("/_emulator/config")
    async def config(request: Request) -> dict[str, Any]:
        update = await _admin_body(emulator, request, ConfigUpdate)
        if update.ttft is not None:
            emulator.ttft = update.ttft
        if update.linger is not None:
            emulator.set_linger(update.linger)
        if update.tool_prompt is not None:
            emulator.tool_prompt = update.tool_prompt
        lifetimes = {
            name: value
            for name, value in update.model_dump(exclude_none=True).items()
            if name in LIFETIME_DEFAULTS
        }
        if lifetimes:
            emulator.set_lifetimes(**lifetimes)
        if update.framing is not None:
            emulator.framing = update.framing
        return emulator.config()

    @app.get("/_emulator/cache")
    async def cache() -> dict[str, Any]:
        now = emulator.clock.now()
        return {
            "now": now,
            "capacity": emulator.cache.max_entries,
            "evicted": emulator.cache.evicted,
            "entries": [
                {
                    "model": e.model,
                    "prefix_hash": e.prefix_hash,
                    "tokens": e.tokens,
                    "ttl": e.ttl,
                    "written_at": e.written_at,
                    "available_at": e.available_at,
                    "expires_at": e.expires_at,
                    "hits": e.hits,
                    "alive": e.alive(now),
                    # what storing it has cost so far (Gemini explicit caches; else 0)
                    "storage_usd": (
                        storage_cost(e.stored_for, e.tokens, min(now, e.expires_at) - e.written_at)
                        if e.stored_for is not None
                        else 0.0
                    ),
                }
                for e in emulator.cache.entries()
            ],
        }

    @app.get("/_emulator/hold")
    async def hold_status() -> dict[str, int]:
        return emulator.hold_status()

    @app.post("/_emulator/hold")
    async def hold(request: Request) -> dict[str, int]:
        update = await _admin_body(emulator, request, HoldUpdate)
        emulator.add_holds(update.count)
        return emulator.hold_status()

    @app.post("/_emulator/release")
    async def release() -> dict[str, int]:
        return {"released": emulator.release_holds()}

    @app.post("/_emulator/reset")
    async def reset() -> dict[str, bool]:
        emulator.reset()
        return {"reset": True}

    @app.exception_handler(RequestValidationError)
    async def invalid_body(request: Request, exc: RequestValidationError) -> Response:
        if not request.url.path.startswith(ADMIN_PREFIX):
            return await request_validation_exception_handler(request, exc)
        # The admin API answers a bad body as the Messages API does: 400 in its error shape,
        # with no request id (taking one would move the deterministic ids).
        body = error_body(400, _validation_message(exc), "", "invalid_request_error")
        body["request_id"] = None
        return JSONResponse(body, status_code=400)

    @app.exception_handler(_AdminBodyTooLarge)
    async def admin_body_too_large(request: Request, exc: _AdminBodyTooLarge) -> Response:
        # As the Messages API answers it, with no request id (as `invalid_body`).
        body = error_body(413, None, "", "request_too_large")
        body["request_id"] = None
        return refuse(JSONResponse(body, status_code=413), exc.read, emulator.max_body_bytes)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Response:
        # Unknown paths and methods answer in the API's error shape too.
        request_id = emulator.next_request_id()
        return error_response(exc.status_code, request_id, str(exc.detail))

    if token is not None:
        # Deny by default: every path outside the providers' APIs (each provider's
        # `PATH_PREFIXES`), so all of `/_emulator/*` and any admin route added later, needs
        # the token.
        open_prefixes = tuple(
            prefix for provider in PROVIDERS for prefix in provider.part("emulator").PATH_PREFIXES
        )
        app.add_middleware(
            BearerGate,
            token=token,
            is_open=lambda path: path.startswith(open_prefixes),
            refusal=_admin_refusal,
        )
    return app
