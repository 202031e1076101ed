"""The emulator's bind rule, the session server's own check: off loopback it needs a token
(`--token` or SESSIONGEN_EMULATOR_TOKEN), and with one the admin and fault endpoints
(`/_emulator/*`) want `Authorization: Bearer <token>` while `/v1/messages` takes the SDK's
own credentials as before."""

from __future__ import annotations

import re
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import anthropic
import httpx2
import pytest
from sessiongen import SessionEngine, SessionStore
from sessiongen._bind import UnusableToken, check_token
from sessiongen.cli import main
from sessiongen.emulator import BackgroundServer, create_app, serve
from sessiongen.sample import SAMPLE_AGENT
from sessiongen.server import InsecureBind
from sessiongen.server import create_app as create_server_app
from sessiongen.testing import ScriptedLLMClient

from .conftest import ASGI_URL, MODEL

TOKEN = "emulator-token-3f5e7d9c"
ENV = "SESSIONGEN_EMULATOR_TOKEN"


def _one_line(err: str) -> str:
    assert "Traceback" not in err, err
    assert err.endswith("\n") and err.count("\n") == 1, err
    return err.rstrip("\n")


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "", "192.0.2.1"])
@pytest.mark.clause("SG-HTTP-3")
def test_a_public_bind_without_a_token_is_refused_before_binding(
    host: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV, raising=False)
    with pytest.raises(SystemExit) as exited:
        main(["emulator", "--host", host, "--port", "8765"])
    assert exited.value.code == 2
    out, err = capsys.readouterr()
    line = _one_line(err)
    assert out == "" and line.startswith("sessiongen: error: refusing to bind")
    assert ENV in line and "/_emulator" in line


def test_an_empty_token_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["emulator", "--token", ""])
    assert exited.value.code == 2
    assert "--token: must not be empty" in _one_line(capsys.readouterr().err)


@pytest.mark.parametrize("given", ["flag", "env"])
def test_with_a_token_a_public_bind_gets_past_the_rule(
    given: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The port is taken, so the command stops at binding (exit 1), after the rule let the
    token through: nothing is served by the test."""
    args = ["--token", TOKEN] if given == "flag" else []
    if given == "env":
        monkeypatch.setenv(ENV, TOKEN)
    else:
        monkeypatch.delenv(ENV, raising=False)
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["emulator", "--host", "0.0.0.0", "--port", str(port), *args]) == 1
    line = _one_line(capsys.readouterr().err)
    assert line.startswith(f"sessiongen: error: cannot bind 0.0.0.0:{port}: "), line


def test_programmatic_servers_follow_the_same_rule() -> None:
    with pytest.raises(InsecureBind, match="SESSIONGEN_EMULATOR_TOKEN"):
        serve(host="0.0.0.0", port=8765)
    with pytest.raises(InsecureBind):
        BackgroundServer(host="0.0.0.0")
    with pytest.raises(ValueError, match="must not be empty"):
        create_app(token="")


@pytest.fixture
async def admin_app() -> AsyncIterator[httpx2.AsyncClient]:
    app = create_app(token=TOKEN)
    async with httpx2.AsyncClient(
        transport=httpx2.ASGITransport(app=app), base_url=ASGI_URL
    ) as http:
        yield http


ADMIN = [
    ("GET", "/_emulator/requests", None),
    ("GET", "/_emulator/clock", None),
    ("POST", "/_emulator/clock", {"advance": 1}),
    ("POST", "/_emulator/script", {"responses": [{"text": "hi"}]}),
    ("POST", "/_emulator/faults", {"status": 529}),
    ("POST", "/_emulator/config", {"ttft": 0}),
    ("GET", "/_emulator/cache", None),
    ("GET", "/_emulator/hold", None),
    ("POST", "/_emulator/hold", {"count": 1}),
    ("POST", "/_emulator/release", None),
    ("POST", "/_emulator/reset", None),
    ("GET", "/_emulator/no-such-route", None),
]


@pytest.mark.parametrize(("method", "path", "body"), ADMIN, ids=[f"{m} {p}" for m, p, _ in ADMIN])
@pytest.mark.clause("SG-HTTP-3")
async def test_with_a_token_every_admin_route_wants_the_bearer(
    admin_app: httpx2.AsyncClient, method: str, path: str, body: object
) -> None:
    for headers in ({}, {"authorization": "Bearer wrong"}, {"x-api-key": TOKEN}):
        refused = await admin_app.request(method, path, json=body, headers=headers)
        assert refused.status_code == 401, (headers, refused.text)
        assert refused.headers["www-authenticate"] == 'Bearer realm="sessiongen-emulator"'
        error = refused.json()
        assert error["type"] == "error" and error["request_id"] is None
        assert error["error"]["type"] == "authentication_error"
        assert TOKEN not in refused.text
    allowed = await admin_app.request(
        method, path, json=body, headers={"authorization": f"Bearer {TOKEN}"}
    )
    assert allowed.status_code == (404 if "no-such" in path else 200), allowed.text


async def test_the_messages_api_keeps_taking_the_sdks_credentials(
    admin_app: httpx2.AsyncClient,
) -> None:
    """The SDK sends its own x-api-key, not the token; refused admin calls take no request
    id, so the ids stay the deterministic ones."""
    assert (await admin_app.get("/_emulator/requests")).status_code == 401
    client = anthropic.AsyncAnthropic(
        api_key="any-sdk-key", base_url=ASGI_URL, http_client=admin_app, max_retries=0
    )
    raw = await client.messages.with_raw_response.create(
        model=MODEL, max_tokens=16, messages=[{"role": "user", "content": "hi"}]
    )
    assert raw.headers["request-id"] == "req_000001"
    counted = await client.messages.count_tokens(
        model=MODEL, messages=[{"role": "user", "content": "hi"}]
    )
    assert counted.input_tokens > 0
    logged = await admin_app.get(
        "/_emulator/requests", headers={"authorization": f"Bearer {TOKEN}"}
    )
    assert [r["id"] for r in logged.json()["requests"]] == ["req_000001", "req_000002"]


async def test_without_a_token_the_admin_api_is_open_as_before() -> None:
    async with httpx2.AsyncClient(
        transport=httpx2.ASGITransport(app=create_app()), base_url=ASGI_URL
    ) as http:
        assert (await http.get("/_emulator/clock")).json() == {"now": 0.0}


@pytest.mark.parametrize(
    ("headers", "token"),
    [
        ([(b"authorization", b"Bearer s3cret")], b"s3cret"),
        ([(b"authorization", b"bearer  s3cret ")], b"s3cret"),  # scheme case, 1*SP before it
        ([(b"authorization", b"Basic s3cret")], b""),
        ([(b"x-api-key", b"s3cret")], b""),
        ([], b""),
    ],
)
def test_the_bearer_token_both_servers_read(
    headers: list[tuple[bytes, bytes]], token: bytes
) -> None:
    """One reading of `Authorization: Bearer …` for the emulator's admin API and the session
    server (`sessiongen._bind.bearer_token`)."""
    from sessiongen._bind import bearer_token

    assert bearer_token(headers) == token


@pytest.mark.parametrize("placeholder", ["...", "<token>", "changeme", "  "])
def test_a_placeholder_token_is_refused_where_it_comes_in(
    placeholder: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`SESSIONGEN_EMULATOR_TOKEN=...` copied from a how-to would guard the admin API with a
    token everyone has read: refused (exit 2, naming the variable) before anything binds,
    and by the servers built in Python."""
    monkeypatch.setenv(ENV, placeholder)
    with pytest.raises(UnusableToken, match="placeholder"):
        create_app(token=placeholder)
    with socket.socket() as taken:  # were the token let through, nothing could be served
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        with pytest.raises(SystemExit) as exited:
            main(["emulator", "--host", "127.0.0.1", "--port", port])
        assert exited.value.code == 2
        line = _one_line(capsys.readouterr().err)
        assert f"${ENV}: {placeholder!r} is a placeholder, not a token; make one with" in line
        with pytest.raises(UnusableToken, match="placeholder"):
            serve(host="127.0.0.1", port=int(port), token=placeholder)
    with pytest.raises(UnusableToken, match="placeholder"):
        engine = SessionEngine(SessionStore(), ScriptedLLMClient(), [SAMPLE_AGENT])
        create_server_app(engine, token=placeholder)


def test_the_docs_show_no_token_a_reader_could_copy() -> None:
    """Every `..._TOKEN=value` the README and the docs show is one the servers accept: a
    command that makes a token, never a placeholder to paste."""
    root = Path(__file__).resolve().parents[2]
    pages = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    shown = [
        (page.name, value)
        for page in pages
        for value in re.findall(r"SESSIONGEN_(?:EMULATOR_)?TOKEN=(\S+)", page.read_text())
    ]
    assert ("README.md", "$(python") in shown  # the rule sees the README's command at all
    for page, value in shown:
        if not value.startswith("$("):
            check_token(value, page)  # UnusableToken for a placeholder
