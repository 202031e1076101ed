"""Official-SDK clients wired to an in-process emulator app, sync and async, with no socket."""

from __future__ import annotations

import contextlib
from typing import Any

import anthropic
import httpx2
from anyio.from_thread import BlockingPortal, start_blocking_portal
from starlette.types import ASGIApp

DEFAULT_BASE_URL = "http://emulator"


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


def async_client(
    app: ASGIApp, *, base_url: str = DEFAULT_BASE_URL, max_retries: int = 0, **kwargs: Any
) -> anthropic.AsyncAnthropic:
    """`anthropic.AsyncAnthropic` over `httpx2.ASGITransport(app)`. Close it (`async with`)."""
    http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url=base_url)
    return anthropic.AsyncAnthropic(
        api_key="emulator", base_url=base_url, http_client=http, max_retries=max_retries, **kwargs
    )


def sync_client(
    app: ASGIApp, *, base_url: str = DEFAULT_BASE_URL, max_retries: int = 0, **kwargs: Any
) -> anthropic.Anthropic:
    """`anthropic.Anthropic` over `SyncASGITransport(app)`, usable inside a Jupyter kernel.
    Close it (`with`) to stop the helper thread."""
    http = httpx2.Client(transport=SyncASGITransport(app), base_url=base_url)
    return anthropic.Anthropic(
        api_key="emulator", base_url=base_url, http_client=http, max_retries=max_retries, **kwargs
    )
