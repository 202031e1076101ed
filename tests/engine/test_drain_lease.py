"""The drain lease: one Drain of a session at a time across processes sharing a store file.

A Drain holds the session's lease row from before its recovery to its end (error and
cancellation included); recovery only interrupts Steps when no live process holds it; a
lease of a dead process, or a stale one of this process, is taken over. "Another process"
is a lease row naming a live pid (this test process's parent) or another host.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from sessiongen import (
    Agent,
    EmptyPrompt,
    ProviderOverloaded,
    SessionBusy,
    SessionEngine,
    SessionNotFound,
    SessionStore,
)
from sessiongen.llm.types import LLMRequest, StreamEvent
from sessiongen.model import AssistantMessage, StepStarted, UserMessage
from sessiongen.server import create_app
from sessiongen.server.serving import recover_interrupted
from sessiongen.testing import ScriptedLLMClient, ScriptedReply

from ..conftest import EngineFactory


def _hold(store: SessionStore, session_id: str, *, pid: int, host: str | None = None) -> None:
    """A lease row as another process would have written it."""
    lease_host = host if host is not None else _this_host(store)
    store._db.execute(
        "INSERT OR REPLACE INTO drain_leases (session_id, owner, pid, host, acquired_at)"
        " VALUES (?, 'elsewhere', ?, ?, 0)",
        (session_id, pid, lease_host),
    )


def _this_host(store: SessionStore) -> str:
    lease = store.acquire_drain_lease(store.session_ids()[0])
    store.release_drain_lease(lease.session_id)
    return lease.host


def _owner(store: SessionStore, session_id: str) -> str | None:
    lease = store.drain_lease(session_id)
    return None if lease is None else lease.owner


def _open_step(store: SessionStore, session_id: str) -> None:
    """A Step a process started and never settled."""
    store.append(
        session_id,
        lambda revision: [
            StepStarted(message_id=f"msg_{revision + 1:06d}", step=1, model="claude-sonnet-4-6")
        ],
    )


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(timeout=60)  # reaped: the pid names no process now
    return proc.pid


class LeaseSeen(ScriptedLLMClient):
    """Test double: records the session's lease row when each Step's call starts."""

    def __init__(self, store: SessionStore, replies: list[ScriptedReply]) -> None:
        super().__init__(replies)
        self.store = store
        self.seen: list[tuple[str, int] | None] = []

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        lease = self.store.drain_lease(self.store.session_ids()[0])
        self.seen.append(None if lease is None else (lease.owner, lease.pid))
        async for event in super().stream(request):
            yield event


async def test_a_drain_holds_the_lease_and_releases_it(agent: Agent, workspace: Path) -> None:
    store = SessionStore()
    llm = LeaseSeen(store, [ScriptedReply.calling(("t1", "list_files", {})), ScriptedReply()])
    engine = SessionEngine(store, llm, [agent])
    session = engine.create_session("build", workspace=workspace)
    result = await engine.run(session.id, "hello")
    assert result.steps == 2
    assert llm.seen == [(store.owner, os.getpid())] * 2
    assert store.drain_lease(session.id) is None


async def test_the_lease_is_released_when_the_drain_fails(
    make_engine: EngineFactory, workspace: Path, tmp_path: Path
) -> None:
    db = tmp_path / "s.db"
    engine, scripted, _ = make_engine(store=SessionStore(db))
    scripted.queue([ScriptedReply(error=ProviderOverloaded("Overloaded", provider_status=529))])
    session = engine.create_session("build", workspace=workspace)
    with pytest.raises(ProviderOverloaded):
        await engine.run(session.id, "hello")
    assert engine.store.drain_lease(session.id) is None
    # Another store (as another process would) can drain the session now.
    other, other_scripted, _ = make_engine(store=SessionStore(db))
    other_scripted.queue([ScriptedReply(text="ok")])
    assert (await other.run(session.id, "again")).steps == 1
    other.store.close()
    engine.store.close()


async def test_the_lease_is_released_when_the_drain_is_cancelled(
    agent: Agent, workspace: Path
) -> None:
    started = asyncio.Event()

    class Hangs(ScriptedLLMClient):
        async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
            started.set()
            await asyncio.Event().wait()  # until cancelled
            yield  # type: ignore[misc]

    store = SessionStore()
    engine = SessionEngine(store, Hangs(), [agent])
    session = engine.create_session("build", workspace=workspace)
    task = asyncio.create_task(engine.run(session.id, "hello"))
    await started.wait()
    assert store.drain_lease(session.id) is not None
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert store.drain_lease(session.id) is None


async def test_a_live_lease_refuses_the_drain_and_the_turn_with_nothing_written(
    make_engine: EngineFactory, workspace: Path
) -> None:
    engine, scripted, _ = make_engine()
    session = engine.create_session("build", workspace=workspace)
    _open_step(engine.store, session.id)
    _hold(engine.store, session.id, pid=os.getppid())  # a live process of this host
    before = engine.store.dump()
    with pytest.raises(SessionBusy) as busy:
        await engine.run(session.id, "hello")
    assert busy.value.session_id == session.id and busy.value.problem_status == 409
    with pytest.raises(SessionBusy):
        await engine.drain(session.id)
    assert engine.store.dump() == before  # nothing admitted, the open Step left alone
    assert scripted.requests == []
    assert _owner(engine.store, session.id) == "elsewhere"
    # Caller mistakes come first; an unknown session is still not found.
    with pytest.raises(EmptyPrompt):
        await engine.run(session.id, " ")
    with pytest.raises(SessionNotFound):
        await engine.drain("ses_999999")


def test_recovery_leaves_a_session_a_live_process_drains_alone(
    make_engine: EngineFactory, workspace: Path
) -> None:
    engine, _, _ = make_engine()
    busy = engine.create_session("build", workspace=workspace).id
    idle = engine.create_session("build", workspace=workspace).id
    for sid in (busy, idle):
        _open_step(engine.store, sid)
    _hold(engine.store, busy, pid=os.getppid())
    assert engine.runner.recover(busy) == 0
    assert recover_interrupted(engine) == 1  # only the session no live process holds
    open_steps = [
        m
        for m in engine.store.read(busy).messages
        if isinstance(m, AssistantMessage) and not m.settled
    ]
    assert len(open_steps) == 1
    last = engine.store.read(idle).messages[-1]
    assert isinstance(last, AssistantMessage) and last.interrupted
    assert engine.store.drain_lease(idle) is None


def test_another_hosts_lease_counts_as_live(make_engine: EngineFactory, workspace: Path) -> None:
    engine, _, _ = make_engine()
    sid = engine.create_session("build", workspace=workspace).id
    _open_step(engine.store, sid)
    _hold(engine.store, sid, pid=_dead_pid(), host="elsewhere.example")
    assert engine.runner.recover(sid) == 0
    with pytest.raises(SessionBusy):
        engine.store.acquire_drain_lease(sid)


@pytest.mark.parametrize("holder", ["dead process", "this process, no store holding it"])
async def test_a_stale_lease_is_taken_over(
    make_engine: EngineFactory, workspace: Path, holder: str
) -> None:
    engine, scripted, _ = make_engine()
    sid = engine.create_session("build", workspace=workspace).id
    _open_step(engine.store, sid)
    _hold(engine.store, sid, pid=_dead_pid() if holder == "dead process" else os.getpid())
    scripted.queue([ScriptedReply(text="ok")])
    result = await engine.run(sid, "hello")  # recovers the open Step, then drains
    assert result.steps == 1
    steps = [m for m in engine.store.read(sid).messages if isinstance(m, AssistantMessage)]
    assert [(m.interrupted, m.completed) for m in steps] == [(True, False), (False, True)]
    assert engine.store.drain_lease(sid) is None


async def test_another_store_of_this_process_is_refused_while_one_drains(
    make_engine: EngineFactory, workspace: Path, tmp_path: Path
) -> None:
    db = tmp_path / "s.db"
    first, _, _ = make_engine(store=SessionStore(db))
    second, _, _ = make_engine(store=SessionStore(db))
    sid = first.create_session("build", workspace=workspace).id
    with first.lease(sid):
        with first.lease(sid):  # re-entrant within a store
            pass
        assert first.store.drain_lease(sid) is not None  # still held: one take left
        with pytest.raises(SessionBusy):
            await second.run(sid, "hello")
        assert second.runner.recover(sid) == 0
    assert first.store.drain_lease(sid) is None
    with second.lease(sid):
        with pytest.raises(SessionBusy):
            first.store.acquire_drain_lease(sid)
    first.store.close()
    second.store.close()


def test_a_file_without_the_lease_table_opens_and_gets_it(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    SessionStore(db).close()
    with sqlite3.connect(db) as raw:  # as an older version left it
        raw.execute("DROP TABLE drain_leases")
    store = SessionStore(db)
    try:
        sid = store.create(agent="build")
        assert store.drain_lease(sid) is None
        lease = store.acquire_drain_lease(sid)
        assert store.drain_lease(sid) == lease
        store.release_drain_lease(sid)
        assert store.drain_lease(sid) is None
        assert "drain_leases" not in store.dump()  # not an event projection
    finally:
        store.close()


async def test_the_http_turn_is_refused_with_session_busy(
    make_engine: EngineFactory, workspace: Path
) -> None:
    engine, scripted, _ = make_engine()
    sid = engine.create_session("build", workspace=workspace).id
    _hold(engine.store, sid, pid=os.getppid())
    app = create_app(engine)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        answer = await http.post(f"/api/session/{sid}/prompt", json={"prompt": "hello"})
        assert answer.status_code == 409, answer.text
        assert answer.json()["type"] == "https://sessiongen.dev/problems/session-busy"
        assert (await http.get(f"/api/session/{sid}")).json()["pending"] == []
        engine.store.release_drain_lease(sid)  # not this store's row: it stays
        assert _owner(engine.store, sid) == "elsewhere"
        engine.store._db.execute("DELETE FROM drain_leases")  # the other process ended
        scripted.queue([ScriptedReply(text="hi")])
        answer = await http.post(f"/api/session/{sid}/prompt", json={"prompt": "hello"})
        assert answer.status_code == 200, answer.text
        assert answer.json()["text"] == "hi"
    users = [m for m in engine.store.read(sid).messages if isinstance(m, UserMessage)]
    assert len(users) == 1
