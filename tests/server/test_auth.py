"""With a token, every route but /api/health needs `Authorization: Bearer <token>`; a
refusal is a 401 problem, sent before the body is read, that changes nothing."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI
from sessiongen.lab import EmulatorLab
from sessiongen.server import create_app

from .conftest import asgi_client, assert_problem

TOKEN = "tok-3f9c2a71"
ROUTES = [
    ("POST", "/api/session"),
    ("GET", "/api/session/ses_000001"),
    ("GET", "/api/session/ses_000001/messages"),
    ("POST", "/api/session/ses_000001/prompt"),
    ("POST", "/api/session/ses_000001/generate"),
    ("POST", "/api/session/ses_000001/warming"),
    ("GET", "/api/session/ses_000001/warming"),
    ("DELETE", "/api/session/ses_000001/warming"),
    ("DELETE", "/api/session/ses_000001"),
    ("GET", "/openapi.json"),
    ("GET", "/api/no-such-route"),
]


@pytest.fixture
def guarded(lab: EmulatorLab) -> FastAPI:
    lab.engine.create_session("forge", workspace=lab.workspace)
    return create_app(lab.engine, token=TOKEN, workspace=lab.workspace)


@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer wrong", f"Bearer {TOKEN}x", f"Basic {TOKEN}", TOKEN, "Bearer "],
    ids=["missing", "wrong", "longer", "basic", "no-scheme", "empty"],
)
@pytest.mark.parametrize(("method", "path"), ROUTES)
@pytest.mark.clause("SG-HTTP-3")
async def test_every_route_but_health_needs_the_token(
    guarded: FastAPI, lab: EmulatorLab, authorization: str | None, method: str, path: str
) -> None:
    headers = {} if authorization is None else {"authorization": authorization}
    before = lab.engine.store.dump()
    async with asgi_client(guarded, **headers) as client:
        response = await client.request(method, path, json={"prompt": "hi"})
    body = assert_problem(response, 401, "unauthorized")
    assert body["title"] == "Unauthorized"
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert TOKEN not in response.text
    assert lab.engine.store.dump() == before and lab.requests() == []


async def test_the_token_opens_every_route(guarded: FastAPI, lab: EmulatorLab) -> None:
    async with asgi_client(guarded, authorization=f"bearer {TOKEN}") as client:
        assert (await client.get("/api/session/ses_000001")).status_code == 200
        assert (await client.get("/openapi.json")).status_code == 200
        created = await client.post("/api/session")
        assert created.status_code == 201
        generated = await client.post(
            f"/api/session/{created.json()['id']}/generate", json={"prompt": "Hi"}
        )
        assert generated.status_code == 200, generated.text


async def test_health_never_needs_the_token(guarded: FastAPI) -> None:
    async with asgi_client(guarded) as client:
        response = await client.get("/api/health")
    assert response.status_code == 200 and response.json() == {"status": "ok"}


async def test_a_refused_request_is_not_read(guarded: FastAPI) -> None:
    """The token is checked before the body: a huge or malformed body still gets a 401."""
    async with asgi_client(guarded) as client:
        big = await client.post("/api/session/ses_000001/generate", content=b"x" * 5_000_000)
        bad = await client.post("/api/session/ses_000001/generate", content=b"{")
    assert_problem(big, 401, "unauthorized")
    assert_problem(bad, 401, "unauthorized")


async def test_without_a_token_nothing_is_required(client: httpx.AsyncClient) -> None:
    assert (await client.post("/api/session")).status_code == 201


def test_an_empty_token_is_refused(lab: EmulatorLab) -> None:
    with pytest.raises(ValueError, match="empty"):
        create_app(lab.engine, token="")
