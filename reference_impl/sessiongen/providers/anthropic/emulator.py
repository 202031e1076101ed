"""Anthropic's Messages API on the emulator: `POST /v1/messages` and its `count_tokens`,
validated, cached, scripted and logged on the shared `EmulatorState`, and the adapter pointed
at it in-process."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from starlette.types import ASGIApp

from ...cache import FlatBlock, flatten_request
from ...emulator.client import asgi_http
from ...emulator.errors import APIError, error_response, invalid_request
from ...emulator.intake import Arrival
from ...emulator.logged import messages_texts, tool_names
from ...emulator.responder import build_reply, offered_tools
from ...emulator.state import EmulatorState
from ...emulator.streaming import INVALID_BODY, RESET_MESSAGE, SSEResponse, message_events
from ...emulator.validation import for_model, validate_count_tokens, validate_messages
from ...llm._adapter import ProviderAdapter
from .adapter import AnthropicLLMClient

MESSAGES_PATH = "/v1/messages"
COUNT_TOKENS_PATH = "/v1/messages/count_tokens"
PATH_PREFIXES = ("/v1/",)
"""The Anthropic API's paths: open to any SDK credentials, with or without a token."""
RESET_WHILE_HELD = "The emulator was reset while this request was held."


def router(state: EmulatorState) -> APIRouter:
    """The Messages API's two endpoints over `state`."""
    routes = APIRouter()

    @routes.post(MESSAGES_PATH)
    async def messages(request: Request) -> Response:
        return await _handle(state, request, MESSAGES_PATH)

    @routes.post(COUNT_TOKENS_PATH)
    async def count_tokens(request: Request) -> Response:
        return await _handle(state, request, COUNT_TOKENS_PATH)

    return routes


def logged_blocks(body: Any, path: str | None, model: str) -> list[FlatBlock]:
    """A logged Messages body's cache positions, as the emulator's cache model sees them."""
    return for_model(flatten_request(body), body).flat()


async def connect(
    app: ASGIApp,
    state: EmulatorState,
    stack: contextlib.AsyncExitStack,
    *,
    base_url: str,
    api_key: str,
    max_retries: int,
) -> ProviderAdapter:
    """The Anthropic adapter over the official SDK, sending to `app` in-process."""
    return AnthropicLLMClient(
        api_key=api_key, http_client=asgi_http(app, base_url), max_retries=max_retries
    )


async def _handle(
    state: EmulatorState, request: Request, path: str
) -> Response:  # one code path for both endpoints, so faults and logging behave the same
    arrival = await Arrival.read(state, request, provider="anthropic", path=path)
    request_id = arrival.request_id
    if arrival.too_large:
        # Answered before anything else, as Cloudflare answers it before the API (AD:api/errors).
        return arrival.refuse(error_response(413, request_id, error_type="request_too_large"))
    body = arrival.body
    stream = path == MESSAGES_PATH and isinstance(body, dict) and body.get("stream") is True
    arrival.stream = stream
    record = arrival.record

    # Id, start time and fault follow arrival order; everything after the hold (validation,
    # cache, script, log, reply) happens only on release, so a held request has not written
    # the cache yet.
    if not await arrival.admit(hold=path == MESSAGES_PATH):
        # It belongs to the state before the reset: it touches nothing and is not logged.
        return error_response(500, request_id, RESET_WHILE_HELD)
    fault = arrival.fault
    if fault is not None and fault.effective_status != 200:
        # A failed request never reaches the cache: the error is decided before any work.
        status = fault.effective_status
        record(status, None)
        if fault.delay:
            await asyncio.sleep(fault.delay)
        return error_response(status, request_id, fault.message, fault.error_type, fault.headers)
    try:
        if not arrival.parsed:
            raise invalid_request("There was an error parsing the body as JSON")
        if path == COUNT_TOKENS_PATH:
            _, prepared = validate_count_tokens(
                body, tool_prompt=state.tool_prompt, framing=state.framing
            )
        else:
            _, prepared = validate_messages(
                body, tool_prompt=state.tool_prompt, framing=state.framing
            )
    except APIError as exc:
        record(exc.status, None)
        return error_response(exc.status, request_id, exc.message, exc.error_type)

    extra_headers = {**(fault.headers if fault else {}), "request-id": request_id}
    if path == COUNT_TOKENS_PATH:
        record(200, None)
        return JSONResponse({"input_tokens": prepared.total_tokens}, headers=extra_headers)

    result = state.apply_cache(prepared, arrival.started_at)
    # A pre-warm (max_tokens 0) produces nothing, so it leaves the script queue alone.
    scripted = (
        state.pop_response(str(body["model"]), offered_tools(body), arrival.headers)
        if body["max_tokens"] > 0
        else None
    )
    reply = build_reply(body, scripted, state.next_tool_use_id)
    usage = result.usage.to_api(reply.output_tokens)
    message = {
        "id": state.next_message_id(),
        "type": "message",
        "role": "assistant",
        "model": body["model"],
        "content": reply.content,
        "stop_reason": reply.stop_reason,
        "stop_sequence": reply.stop_sequence,
        "usage": usage,
    }
    record(200, usage)
    delay = fault.delay if fault else 0.0
    if stream:
        error_event = None
        if fault is not None and fault.error_event is not None:
            error_event = {
                "type": "error",
                "error": {"type": fault.error_event, "message": fault.message or "Overloaded"},
            }
        return SSEResponse(
            message_events(message),
            headers=extra_headers,
            delay=delay,
            cut_after=fault.cut_after_events if fault else None,
            abort=fault is not None and fault.cut_mode == "abort",
            error_event=error_event,
            kind=fault.kind if fault else None,
        )
    if delay:
        await asyncio.sleep(delay)
    if fault is not None and fault.kind == "reset":
        raise ConnectionResetError(RESET_MESSAGE)
    if fault is not None and fault.kind == "invalid-body":
        return Response(INVALID_BODY, media_type="application/json", headers=extra_headers)
    return JSONResponse(message, headers=extra_headers)


def logged_model(path: str, body: Mapping[str, Any]) -> str:
    """The model a logged Messages request named."""
    return str(body.get("model") or "")


def logged_tool_names(body: Mapping[str, Any]) -> list[str]:
    """The tools a logged Messages request offered."""
    return tool_names(body.get("tools") or [])


def logged_texts(body: Mapping[str, Any]) -> tuple[str, str]:
    """A logged Messages request's system prompt and last user text."""
    return messages_texts(body)
