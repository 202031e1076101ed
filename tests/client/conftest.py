"""Fixtures for `sessiongen.client`: both clients against the server app in-process, and real
server processes for the end-to-end tests.

In-process, the app and its lab (engine, in-process emulator, SQLite) live on one event
loop in a portal thread (anyio's blocking portal). The async client runs there too, over
httpx's ASGI transport; the sync client reaches it through `PortalTransport`, because httpx's
ASGI transport is async only. The tests themselves are plain functions, so one test body
drives either client (`Driver`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from fastapi import FastAPI
from sessiongen.client import AsyncSessiongenClient, SessiongenClient
from sessiongen.emulator import free_port
from sessiongen.lab import EmulatorLab, emulator_lab
from sessiongen.server import create_app

BASE_URL = "http://sessiongen.test"
KINDS = ("sync", "async")


class PortalTransport(httpx.BaseTransport):
    """A sync httpx transport onto an ASGI app that runs on `portal`'s event loop; records
    every request it sends."""

    def __init__(self, app: FastAPI, portal: BlockingPortal, sent: list[httpx.Request]) -> None:
        self.asgi = RecordingASGITransport(app, sent)
        self.portal = portal

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        async def send() -> httpx.Response:
            response = await self.asgi.handle_async_request(request)
            content = await response.aread()
            return httpx.Response(response.status_code, headers=response.headers, content=content)

        return self.portal.call(send)


class RecordingASGITransport(httpx.ASGITransport):
    """httpx's ASGI transport (app exceptions become 500 answers, as on a real server) that
    records every request it sends."""

    def __init__(self, app: FastAPI, sent: list[httpx.Request]) -> None:
        super().__init__(app=app, raise_app_exceptions=False)
        self.sent = sent

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request)
        return await super().handle_async_request(request)


class Driver:
    """Either client, called the same way from a sync test: `driver.generate(sid, "hi")`.
    The async client's coroutines run on the portal's loop, where the app lives."""

    def __init__(
        self, kind: str, client: SessiongenClient | AsyncSessiongenClient, portal: BlockingPortal
    ) -> None:
        self.kind = kind
        self.client = client
        self.portal = portal

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method: Callable[..., Any] = getattr(self.client, name)
        if isinstance(self.client, SessiongenClient):
            return method
        return lambda *args, **kwargs: self.portal.call(partial(method, *args, **kwargs))


@pytest.fixture
def portal() -> Iterator[BlockingPortal]:
    with start_blocking_portal() as portal:
        yield portal


@pytest.fixture
def lab(portal: BlockingPortal, tmp_path: Path) -> Iterator[EmulatorLab]:
    with portal.wrap_async_context_manager(emulator_lab(tmp_path / "workspace")) as lab:
        yield lab


@pytest.fixture
def app(lab: EmulatorLab) -> FastAPI:
    return create_app(lab.engine, workspace=lab.workspace)


@pytest.fixture
def sent() -> list[httpx.Request]:
    """Every request the clients sent to the app, in order."""
    return []


@contextmanager
def driver_for(
    kind: str,
    app: FastAPI,
    portal: BlockingPortal,
    sent: list[httpx.Request],
    token: str | None = None,
) -> Iterator[Driver]:
    """A `Driver` of the `kind` client on `app`, closed on exit."""
    if kind == "sync":
        transport = PortalTransport(app, portal, sent)
        with SessiongenClient(BASE_URL, token=token, transport=transport) as client:
            yield Driver(kind, client, portal)
        return
    async_client = AsyncSessiongenClient(
        BASE_URL, token=token, transport=RecordingASGITransport(app, sent)
    )
    try:
        yield Driver(kind, async_client, portal)
    finally:
        portal.call(async_client.aclose)


@pytest.fixture(params=KINDS)
def driver(
    request: pytest.FixtureRequest,
    app: FastAPI,
    portal: BlockingPortal,
    sent: list[httpx.Request],
) -> Iterator[Driver]:
    """Each test runs once with the sync client and once with the async one."""
    with driver_for(request.param, app, portal, sent) as driver:
        yield driver


# --- real processes ----------------------------------------------------------------------


@contextmanager
def process(
    tmp_path: Path, name: str, *args: str, ready: str, env: dict[str, str] | None = None
) -> Iterator[Path]:
    """`python -m sessiongen.cli <args>` as a child process, waited for until `ready` (a URL)
    answers; yields the file its output goes to. Stopped with SIGINT (Ctrl-C) on exit."""
    log = tmp_path / f"{name}.log"
    command = [sys.executable, "-m", "sessiongen.cli", *args]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            command, env={**os.environ, **(env or {})}, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + 180  # a guard against a hang, not a timing check
        while True:
            try:
                httpx.get(ready, timeout=1)
                break
            except httpx.TransportError:
                pass
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, f"{name} never answered:\n{log.read_text()}"
            time.sleep(0.05)
        yield log
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise


def local_url() -> tuple[int, str]:
    """A free loopback port and its URL."""
    port = free_port()
    return port, f"http://127.0.0.1:{port}"
