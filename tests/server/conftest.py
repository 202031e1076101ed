"""Fixtures for the HTTP server: the app over a lab engine (in-process emulator, SQLite),
driven through httpx's ASGI transport, with no socket."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sessiongen.lab import EmulatorLab, emulator_lab
from sessiongen.server import create_app

BASE_URL = "http://sessiongen.test"
PROBLEMS = "https://sessiongen.dev/problems/"

TOOL_TURN: tuple[dict[str, Any], ...] = (
    {
        "text": "Let me look at the code.",
        "tool_calls": [
            {"name": "read_file", "input": {"path": "src/app.py"}},
            {"name": "grep", "input": {"pattern": "TODO"}},
        ],
    },
    {"text": "app.py defines add() and mean(); util.py still has a TODO."},
)


@pytest.fixture
async def lab(tmp_path: Path) -> AsyncIterator[EmulatorLab]:
    async with emulator_lab(tmp_path / "workspace") as lab:
        yield lab


@pytest.fixture
def app(lab: EmulatorLab) -> FastAPI:
    return create_app(lab.engine, workspace=lab.workspace)


def asgi_client(app: FastAPI, **headers: str) -> httpx.AsyncClient:
    """An httpx client on the app in-process; app exceptions become 500 answers, as on a
    real server."""
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    return httpx.AsyncClient(transport=transport, base_url=BASE_URL, headers=headers)


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(app) as client:
        yield client


async def create(client: httpx.AsyncClient) -> str:
    response = await client.post("/api/session")
    assert response.status_code == 201, response.text
    session_id: str = response.json()["id"]
    return session_id


def assert_problem(response: httpx.Response, status: int, problem: str) -> dict[str, Any]:
    """`response` is an application/problem+json answer of `status` and type `problem` (a
    sessiongen slug, or a full URI such as about:blank)."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = response.json()
    expected = problem if ":" in problem else PROBLEMS + problem
    assert body["type"] == expected, body
    assert body["status"] == status
    assert {"type", "title", "status", "detail", "instance"} <= set(body)
    assert body["instance"] == response.request.url.path
    return body
