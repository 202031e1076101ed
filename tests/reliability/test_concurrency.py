"""64 concurrent session.generate calls over HTTP while a Drain runs 20 Steps with tool calls.

Real sockets and processes: the session server is a child process (uvicorn on loopback,
`serve_async`), its provider the official anthropic SDK to the emulator on loopback in this
process. Checked for each generate: it returns, and its wire request (the body in the
emulator's log) equals the request prepared from the events up to its reported revision,
replayed into a fresh store. Checked for the session: the durable usage totals are the sum
over its settled Steps, never a generate. Then the same with two server processes sharing
one SQLite file (WAL; busy handling shown by a write that waits for another process's lock).

`SESSIONGEN_RELIABILITY_FIGURES=path.json` makes the tests add their figures to that file.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from sessiongen import SessionEngine, SessionStore
from sessiongen.lab import logged_usage, write_workspace
from sessiongen.model import (
    AssistantMessage,
    SessionCreated,
    StepSettled,
    TextPart,
    Usage,
    UserMessage,
)
from sessiongen.providers.anthropic.wire import lower_request
from sessiongen.testing import ScriptedLLMClient

from ._figures import record
from ._servers import (
    GENERATE_MARK,
    TOOL_MARK,
    ToolEmulator,
    Worker,
    latest_user_text,
    steps_agent,
    worker_command,
)

GENERATES = 64
WAVE = 8
GIVE_UP_SECONDS = 300.0
DRAIN_STEPS = 20
POLICIES = ("definitions", "no_tools", "choice_none", "execute_once")


def rebuilt_body(
    events: list[tuple[int, Any]], session_id: str, revision: int, prompt: str, policy: str
) -> dict[str, Any]:
    """The wire body generate sends at `revision`: the events up to it, replayed into a
    fresh in-memory store, and the request prepared there as the server prepares it."""
    created = events[0][1]
    assert isinstance(created, SessionCreated)
    store = SessionStore()
    try:
        store.create(agent=created.agent, workspace=created.workspace, session_id=session_id)
        later = [event for rev, event in events[1:] if rev <= revision]
        if later:
            assert store.append(session_id, later) == revision
        engine = SessionEngine(store, ScriptedLLMClient(), [steps_agent(DRAIN_STEPS)])
        request = engine.prepare_generate(session_id, prompt, tools_policy=policy).request
    finally:
        store.close()
    return {**lower_request(request), "stream": True}


async def _generate(http: httpx.AsyncClient, sid: str, index: int) -> tuple[str, str, Any]:
    prompt = f"{GENERATE_MARK} question {index}: what does src/app.py define?"
    policy = POLICIES[index % len(POLICIES)]
    response = await http.post(
        f"/api/session/{sid}/generate", json={"prompt": prompt, "tools_policy": policy}
    )
    assert response.status_code == 200, response.text
    return prompt, policy, response.json()


async def _wait_for_revision(http: httpx.AsyncClient, sid: str, revision: int) -> int:
    """Wait until the session's revision is at least `revision`; returns the one seen."""
    deadline = time.monotonic() + GIVE_UP_SECONDS  # a guard against a hang, not a timing check
    while (seen := (await http.get(f"/api/session/{sid}")).json()["revision"]) < revision:
        assert time.monotonic() < deadline, f"the session never reached revision {revision}"
        await asyncio.sleep(0.01)
    return int(seen)


async def _run(workers: list[Worker], emulator: ToolEmulator, db: Path) -> dict[str, Any]:
    clients = [httpx.AsyncClient(base_url=w.url, timeout=120) for w in workers]
    try:
        first = clients[0]
        sid = (await first.post("/api/session")).json()["id"]
        side = (await clients[-1].post("/api/session")).json()["id"]
        turn = asyncio.create_task(
            first.post(f"/api/session/{sid}/prompt", json={"prompt": f"{TOOL_MARK} inspect"})
        )
        # With two workers, the second one writes too (its own session's turns) meanwhile.
        side_turns = asyncio.gather(
            *(
                clients[-1].post(f"/api/session/{side}/prompt", json={"prompt": f"side {i}"})
                for i in range(5)
            )
        )
        # Eight waves of eight, each sent once the Drain has moved on (so the snapshots
        # differ); the emulator holds each generate long enough for all of them to overlap.
        waves = []
        floors: dict[int, int] = {}  # each generate's index: the revision seen before it left
        for wave in range(GENERATES // WAVE):
            floor = await _wait_for_revision(first, sid, 4 + 3 * wave)
            floors.update({i: floor for i in range(wave * WAVE, (wave + 1) * WAVE)})
            calls = [
                _generate(clients[i % len(clients)], sid, i)
                for i in range(wave * WAVE, (wave + 1) * WAVE)
            ]
            waves.append(asyncio.gather(*calls))
        results = [r for wave_results in await asyncio.gather(*waves) for r in wave_results]
        for answer in await side_turns:
            assert answer.status_code == 200, answer.text
        done = await turn
        assert done.status_code == 200, done.text
        assert done.json()["steps"] == DRAIN_STEPS
    finally:
        for client in clients:
            await client.aclose()

    store = SessionStore(db)
    try:
        events = store.events(sid)
        record = store.read(sid)
    finally:
        store.close()
    # Revisions are contiguous.
    assert [rev for rev, _ in events] == list(range(1, len(events) + 1))
    assert record.session.revision == len(events)

    log = emulator.requests()
    by_prompt = {latest_user_text(r["body"]): r for r in log if r["path"] == "/v1/messages"}
    revisions = set()
    for index, (prompt, policy, result) in enumerate(results):
        # The snapshot was taken during the call: not before the revision seen before it
        # was sent, not after the last one.
        assert floors[index] <= result["revision"] <= len(events)
        logged = by_prompt[prompt]
        assert logged["status"] == 200
        assert logged["body"] == rebuilt_body(events, sid, result["revision"], prompt, policy)
        revisions.add(result["revision"])

    # Usage: the totals are the settled Steps' sum; the generates' usage is in none of them.
    settled = [e for _, e in events if isinstance(e, StepSettled)]
    assert len(settled) == DRAIN_STEPS == record.calls
    total = sum((e.usage for e in settled), start=Usage())
    assert record.usage == total
    steps_logged = [
        r for r in log
        if r["path"] == "/v1/messages" and r["headers"].get("x-session-id") == sid
        and not latest_user_text(r["body"]).startswith(GENERATE_MARK)
    ]  # fmt: skip
    assert len(steps_logged) == DRAIN_STEPS
    assert sum((logged_usage(r) for r in steps_logged), start=Usage()) == total
    return {
        "generates": len(results),
        "distinct_revisions": len(revisions),
        "max_in_flight": emulator.max_in_flight,
    }


def _start(tmp_path: Path, emulator: ToolEmulator, db: Path, count: int) -> list[Worker]:
    workspace = tmp_path / "workspace"
    if not workspace.exists():
        write_workspace(workspace)
    command = worker_command(db, emulator.url, workspace, DRAIN_STEPS)
    env = {**os.environ, "ANTHROPIC_API_KEY": "reliability-test-key", "SESSIONGEN_TOKEN": ""}
    workers = [Worker(command, env, tmp_path / f"worker-{i}.log") for i in range(count)]
    return [w.wait_ready() for w in workers]


@pytest.mark.parametrize("processes", [1, 2])
def test_concurrent_generates_during_a_drain_match_their_snapshots(
    tmp_path: Path, processes: int
) -> None:
    db = tmp_path / "sessions.db"
    with ToolEmulator(delay=0.02, generate_delay=3.0) as emulator:
        workers = _start(tmp_path, emulator, db, processes)
        try:
            figures = asyncio.run(_run(workers, emulator, db))
        finally:
            for worker in workers:
                assert worker.stop() == 0, worker.log.read_text()
    assert figures["generates"] == GENERATES
    record(f"concurrency_{processes}_process", figures)


def test_the_store_file_is_in_wal_mode_with_a_busy_timeout(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "s.db")
    try:
        assert store._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert store._db.execute("PRAGMA busy_timeout").fetchone()[0] > 0
    finally:
        store.close()
    with sqlite3.connect(tmp_path / "s.db") as other:  # persistent: any connection sees WAL
        assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_write_waits_for_another_processes_lock(tmp_path: Path) -> None:
    """Busy handling across processes: while this process holds the file's write lock, the
    server's write waits for it (instead of failing with `database is locked`), then lands."""
    db = tmp_path / "sessions.db"
    SessionStore(db).close()
    with ToolEmulator() as emulator:
        (worker,) = _start(tmp_path, emulator, db, 1)
        try:
            blocker = sqlite3.connect(db, isolation_level=None)
            blocker.execute("BEGIN IMMEDIATE")  # the write lock, held
            answers: list[httpx.Response] = []
            thread = threading.Thread(
                target=lambda: answers.append(httpx.post(f"{worker.url}/api/session", timeout=60))
            )
            thread.start()
            time.sleep(0.5)  # the request arrives while the lock is held (not asserted)
            blocker.execute("COMMIT")
            blocker.close()
            thread.join(timeout=60)
            assert answers and answers[0].status_code == 201, answers and answers[0].text
            sid = answers[0].json()["id"]
            assert httpx.get(f"{worker.url}/api/session/{sid}").status_code == 200
        finally:
            assert worker.stop() == 0, worker.log.read_text()


def test_a_drain_in_another_process_leaves_an_open_step_alone(tmp_path: Path) -> None:
    """Two processes on one file, a turn on each for the same session: the second Drain
    must not mark the first one's open Step interrupted. The first process holds the
    session's drain lease, so the second turn is refused (409 `session-busy`) with nothing
    admitted, and the first turn answers its own reply."""
    db = tmp_path / "sessions.db"
    with ToolEmulator() as emulator:
        workers = _start(tmp_path, emulator, db, 2)
        try:
            with httpx.Client(timeout=60) as http:
                sid = http.post(f"{workers[0].url}/api/session").json()["id"]
                emulator.state.add_holds(1)  # the first Step's provider call waits
                answers: list[httpx.Response] = []
                first = threading.Thread(
                    target=lambda: answers.append(
                        http.post(
                            f"{workers[0].url}/api/session/{sid}/prompt", json={"prompt": "a"}
                        )
                    )
                )
                first.start()
                deadline = time.monotonic() + GIVE_UP_SECONDS
                while emulator.state.hold_status()["waiting"] == 0:
                    assert time.monotonic() < deadline, "the first Step never reached the emulator"
                    time.sleep(0.01)
                second = http.post(
                    f"{workers[1].url}/api/session/{sid}/prompt", json={"prompt": "b"}
                )
                emulator.state.release_holds()
                first.join(timeout=60)
        finally:
            for worker in workers:
                assert worker.stop() == 0, worker.log.read_text()
    store = SessionStore(db)
    try:
        record = store.read(sid)
        lease = store.drain_lease(sid)
    finally:
        store.close()
    steps = [m for m in record.messages if isinstance(m, AssistantMessage)]
    assert steps and not any(m.interrupted for m in steps), steps
    assert all(m.completed for m in steps), steps
    assert [a.status_code for a in (*answers, second)] == [200, 409], second.text
    assert second.json()["type"] == "https://sessiongen.dev/problems/session-busy"
    users = [m for m in record.messages if isinstance(m, UserMessage)]
    assert [m.parts[0].text for m in users] == ["a"]  # the refused prompt was not admitted
    assert record.pending == ()
    assert lease is None  # released when the Drain ended
    done = answers[0].json()
    reply = "".join(p.text for p in steps[-1].parts if isinstance(p, TextPart))
    assert done["steps"] == 1 and done["text"] == reply and reply
