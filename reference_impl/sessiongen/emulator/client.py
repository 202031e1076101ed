"""Clients wired to an in-process emulator, with no socket: the one place they are built.

- `inprocess_llm(provider, state)`: a provider adapter (the engine's `LLMClient`) for any of
  the four providers over the emulator, through its official SDK. The lab and the embedded
  server of `sessiongen serve` build theirs here.
- `async_client(app)` / `sync_client(app)`: a bare `anthropic` SDK client over the app.

All of them address the emulator as `EMULATOR_BASE_URL`.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import anthropic
import httpx2
from anyio.from_thread import BlockingPortal, start_blocking_portal
from starlette.types import ASGIApp

from ..providers import PROVIDERS
from .app import create_app

if TYPE_CHECKING:
    from ..llm._adapter import ProviderAdapter
    from .state import EmulatorState

EMULATOR_BASE_URL = "http://emulator"
"""The base URL every in-process client gives the emulator (no socket: any host would do)."""
DEFAULT_BASE_URL = EMULATOR_BASE_URL


class SyncASGITransport(httpx2.BaseTransport):
    """Serves a synchronous `httpx2.Client` from an ASGI app.

    The app runs on an event loop in a helper thread (an anyio blocking portal), because the
    caller may itself be inside a running loop (a Jupyter kernel), where `asyncio.run` fails.
    Responses are read whole before they are returned, streams included.
    """

    def __init__(self, app: ASGIApp) -> None:
        self._transport = httpx2.ASGITransport(app=app)
        self._stack = contextlib.ExitStack()
        self._portal: BlockingPortal = self._stack.enter_context(start_blocking_portal())

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        content = request.read()
        forwarded = httpx2.Request(
            request.method, request.url, headers=request.headers, content=content
        )

        async def call() -> tuple[int, list[tuple[bytes, bytes]], bytes]:
            response = await self._transport.handle_async_request(forwarded)
            body = await response.aread()
            await response.aclose()
            return response.status_code, response.headers.raw, body

        status, headers, body = self._portal.call(call)
        return httpx2.Response(status, headers=headers, content=body, request=request)

    def close(self) -> None:
        self._stack.close()


def asgi_http(app: ASGIApp, base_url: str = EMULATOR_BASE_URL) -> httpx2.AsyncClient:
    """An `httpx2.AsyncClient` that sends to `app` in-process (the SDKs' own HTTP library)."""
    return httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url=base_url)


@contextlib.asynccontextmanager
async def inprocess_llm(
    provider: str,
    state: EmulatorState,
    *,
    max_retries: int = 0,
    api_key: str = "emulator",
    app: ASGIApp | None = None,
) -> AsyncIterator[ProviderAdapter]:
    """`provider`'s adapter on the emulator over `state`, through its official SDK, closed on
    exit, built by the provider's `connect` (its folder's emulator part): in-process over an
    ASGI transport (`app`, by default `create_app(state)`), except Bedrock: boto3 is
    synchronous, so it talks to a loopback `BackgroundServer` over the same state, stopped on
    exit. An unknown provider is `UnknownProvider`, a `ValueError`. `max_retries` is the adapter's (`ProviderAdapter`), 0 by default
    so each call is one logged request."""

    entry = PROVIDERS[provider]
    app = app if app is not None else create_app(state)
    async with contextlib.AsyncExitStack() as stack:
        adapter: ProviderAdapter = await entry.part("emulator").connect(
            app,
            state,
            stack,
            base_url=EMULATOR_BASE_URL,
            api_key=api_key,
            max_retries=max_retries,
        )
        async with adapter:
            yield adapter


def async_client(
    app: ASGIApp, *, base_url: str = EMULATOR_BASE_URL, max_retries: int = 0, **kwargs: Any
) -> anthropic.AsyncAnthropic:
    """`anthropic.AsyncAnthropic` over `httpx2.ASGITransport(app)`. Close it (`async with`)."""
    http = asgi_http(app, base_url)
    return anthropic.AsyncAnthropic(
        api_key="emulator", base_url=base_url, http_client=http, max_retries=max_retries, **kwargs
    )


def sync_client(
    app: ASGIApp, *, base_url: str = EMULATOR_BASE_URL, max_retries: int = 0, **kwargs: Any
) -> anthropic.Anthropic:
    """`anthropic.Anthropic` over `SyncASGITransport(app)`, usable inside a Jupyter kernel.
    Close it (`with`) to stop the helper thread."""
    http = httpx2.Client(transport=SyncASGITransport(app), base_url=base_url)
    return anthropic.Anthropic(
        api_key="emulator", base_url=base_url, http_client=http, max_retries=max_retries, **kwargs
    )
