"""Every route through both clients, in-process: the answers are the server's own models,
every route of docs/openapi.json has a client method, and the two clients are the same API."""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from anyio.from_thread import BlockingPortal
from fastapi import FastAPI
from sessiongen import GenerateResult, InvalidArgument, SessionNotFound, ToolsPolicy
from sessiongen.client import AsyncSessiongenClient, SessiongenClient
from sessiongen.lab import EmulatorLab
from sessiongen.model import AssistantMessage, UserMessage
from sessiongen.server import create_app
from sessiongen.server.models import (
    CreatedSession,
    Health,
    MessagesView,
    SessionView,
    TurnResult,
    WarmingView,
)
from sessiongen.warming import policies
from sessiongen.warming.keeper import FromPolicy, WarmingKeeper

from .conftest import KINDS, Driver, driver_for

OPENAPI = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"
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
CLOSERS = {"close", "aclose"}


def test_health_and_sessions(driver: Driver) -> None:
    assert driver.health() == Health(status="ok")
    created = driver.create_session()
    assert isinstance(created, CreatedSession)
    named = driver.create_session("forge")
    assert named.id != created.id
    session = driver.get_session(created.id)
    assert isinstance(session, SessionView)
    assert (session.id, session.agent, session.revision, session.calls) == (
        created.id,
        "forge",
        1,
        0,
    )
    history = driver.messages(created.id)
    assert history == MessagesView(session_id=created.id, revision=1, messages=[])
    assert driver.delete_session(created.id) is None
    assert driver.get_session(named.id).id == named.id


def test_a_turn_with_tool_calls_then_generates_leave_the_session_as_it_was(
    driver: Driver, lab: EmulatorLab
) -> None:
    sid = driver.create_session().id
    lab.script(*TOOL_TURN)
    turn = driver.prompt(sid, "What does src/app.py do?")
    assert isinstance(turn, TurnResult)
    assert turn.steps == 2 and turn.text == TOOL_TURN[1]["text"]
    assert [c.name for c in turn.tool_calls] == ["read_file", "grep"]
    before = (driver.get_session(sid), driver.messages(sid))
    roles = [type(m) for m in before[1].messages]
    assert roles[0] is UserMessage and roles[-1] is AssistantMessage

    logged = len(lab.requests())
    for i, policy in enumerate((ToolsPolicy.DEFINITIONS, "definitions", "no_tools")):
        result = driver.generate(sid, f"Give this session a title ({i}).", tools_policy=policy)
        assert isinstance(result, GenerateResult)
        assert result.revision == turn.revision and result.model == "claude-sonnet-4-6"
        assert len(lab.requests()) == logged + i + 1
    assert "tools" not in lab.requests()[-1]["body"]  # the policy reached the wire
    assert (driver.get_session(sid), driver.messages(sid)) == before


def test_generate_sends_warming_and_tag(driver: Driver, lab: EmulatorLab) -> None:
    sid = driver.create_session().id
    driver.prompt(sid, "Hello")
    ping = driver.generate(sid, "ping", warming=True, tag="keepalive")
    assert ping.text == "" and ping.usage.output_tokens == 0
    assert lab.requests()[-1]["body"]["max_tokens"] == 0  # a warming ping requests no output


def test_warming_start_ledger_stop(driver: Driver) -> None:
    sid = driver.create_session().id
    started = driver.start_warming(sid)
    assert isinstance(started, WarmingView)
    assert started.session_id == sid and started.watched
    assert driver.warming(sid).watched
    assert driver.stop_warming(sid) is None
    stopped = driver.warming(sid)
    assert not stopped.watched and stopped.entries == []


@pytest.mark.parametrize("kind", KINDS)
def test_the_warming_ledger_arrives_as_models(
    kind: str, lab: EmulatorLab, portal: BlockingPortal
) -> None:
    """A keeper on the emulator's virtual clock pings once; the client reads its entry."""
    policy = FromPolicy(policies.ttl_aware("5m", 1800.0))
    keeper = WarmingKeeper(lab.engine, clock=lab.emulator.clock, policy=policy)
    app = create_app(lab.engine, keeper=keeper, workspace=lab.workspace)
    with driver_for(kind, app, portal, []) as driver:
        sid = driver.create_session().id
        driver.start_warming(sid)
        turn = driver.prompt(sid, "Hello")
        assert driver.warming(sid).next_ping_at == 295
        portal.call(keeper.advance_to, 296)
        ledger = driver.warming(sid)
        (entry,) = ledger.entries
        assert entry.hit and entry.error is None and entry.revision == turn.revision
        assert entry.usage.cache_read_tokens > 1024
        assert ledger.total_cost_usd == pytest.approx(entry.cost_usd)


def test_session_ids_are_one_escaped_path_segment(driver: Driver, sent: list[Any]) -> None:
    """A query or fragment character in an id stays in the id; an id that cannot be one
    segment (the server decodes %2F before routing) is refused before anything is sent."""
    sid = driver.create_session().id
    with pytest.raises(SessionNotFound) as raised:
        driver.messages(f"{sid}?x=1#y")  # unescaped, this would read `sid`'s session
    assert sent[-1].url.raw_path == f"/api/session/{sid}%3Fx%3D1%23y/messages".encode()
    assert raised.value.session_id == f"{sid}?x=1#y"
    count = len(sent)
    for bad in ("", ".", "..", f"{sid}/warming"):
        with pytest.raises(InvalidArgument, match="one path segment"):
            driver.delete_session(bad)
    assert len(sent) == count
    assert driver.get_session(sid).id == sid


# --- coverage: one client method per route ------------------------------------------------


def _openapi_routes() -> set[tuple[str, str]]:
    paths = json.loads(OPENAPI.read_text())["paths"]
    return {(method.upper(), path) for path, ops in paths.items() for method in ops}


def _route_methods(cls: type) -> set[str]:
    return {
        name
        for name, _ in inspect.getmembers(cls, inspect.isfunction)
        if not name.startswith("_") and name not in CLOSERS
    }


def _template(path: str, templates: set[str]) -> str:
    """The OpenAPI path template `path` matches (its `{param}` segments are any segment)."""
    for template in templates:
        pattern = re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(template))
        if re.fullmatch(pattern, path):
            return template
    raise AssertionError(f"{path} matches no route of docs/openapi.json")


@pytest.mark.clause("SG-HTTP-1")
def test_every_route_of_the_openapi_document_has_a_client_method(
    driver: Driver, sent: list[httpx.Request]
) -> None:
    """Calls every public method once and records the wire: the (method, path) pairs they
    reach are exactly the document's. A route added to the server (and the document) with
    no client method fails here; so does a method this test does not call."""
    sid = driver.create_session().id
    calls: dict[str, Callable[[], object]] = {
        "health": lambda: driver.health(),
        "create_session": lambda: driver.create_session("forge"),
        "get_session": lambda: driver.get_session(sid),
        "messages": lambda: driver.messages(sid),
        "prompt": lambda: driver.prompt(sid, "Hello"),
        "generate": lambda: driver.generate(sid, "Title?"),
        "start_warming": lambda: driver.start_warming(sid),
        "warming": lambda: driver.warming(sid),
        "stop_warming": lambda: driver.stop_warming(sid),
        "delete_session": lambda: driver.delete_session(sid),
    }
    assert set(calls) == _route_methods(type(driver.client))
    for call in calls.values():
        call()
    routes = _openapi_routes()
    templates = {path for _, path in routes}
    reached = {(r.method, _template(r.url.path, templates)) for r in sent}
    assert reached == routes


def test_the_two_clients_have_the_same_methods_and_signatures() -> None:
    names = _route_methods(SessiongenClient)
    assert names == _route_methods(AsyncSessiongenClient)
    for name in names:
        sync, async_ = getattr(SessiongenClient, name), getattr(AsyncSessiongenClient, name)
        assert inspect.iscoroutinefunction(async_) and not inspect.iscoroutinefunction(sync)
        assert inspect.signature(sync) == inspect.signature(async_), name
        assert (sync.__doc__ or "").strip() == (async_.__doc__ or "").strip(), name


def test_the_token_is_sent_as_a_bearer_header(lab: EmulatorLab, portal: BlockingPortal) -> None:
    app: FastAPI = create_app(lab.engine, token="s3cret")
    for kind in KINDS:
        sent: list[httpx.Request] = []
        with driver_for(kind, app, portal, sent, token="s3cret") as driver:
            assert driver.create_session().id
        assert sent[-1].headers["authorization"] == "Bearer s3cret"
