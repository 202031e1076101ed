"""`sessiongen serve` SIGKILLed at random points of its Drains, then restarted on the same file.

One SQLite file across all runs. Each run starts `sessiongen serve --provider anthropic` (the
environment points the SDK at the emulator on loopback in this process, whose replies call
tools, so each Drain runs up to the sample agent's 6 Steps), creates a session, sends durable
turns to it (and to the previous run's session) and generates, and is SIGKILLed after a
seeded random delay. The last start (which only checks) execs the command; the others fork it
from a process that has imported it already (`_servers.Zygote`: the same `sessiongen.cli.main`, in
a process of its own), because an interpreter start with its imports takes seconds on a
loaded machine. After each restart:

- the store passes `PRAGMA integrity_check`;
- every session's revisions are contiguous (1..N, and N is the session's revision);
- every started Step is settled or marked interrupted (the server recovers the Steps a dead
  process left open before it binds: `sessiongen.server.serve.recover_interrupted`);
- every acknowledged record is there unchanged: each session and prompt whose HTTP 2xx
  arrived before the kill, and every event row seen at the previous restart;
- generate works on every session, at the session's current revision.

`RUNS` runs by default (seeds `SEED`..`SEED + RUNS - 1`); `SESSIONGEN_LONG=1` runs
`LONG_RUNS`. `SESSIONGEN_RELIABILITY_FIGURES=path.json` adds the figures to that file.
"""

from __future__ import annotations

import os
import random
import sqlite3
import threading
import time
from pathlib import Path

import httpx
from sessiongen import SessionStore
from sessiongen.lab import write_workspace
from sessiongen.model import AssistantMessage, UserMessage

from ._figures import record
from ._servers import (
    TOOL_MARK,
    ForkedServer,
    ToolEmulator,
    Worker,
    Zygote,
    provider_env,
    serve_args,
    serve_command,
)

SEED = 20261130
RUNS = 20
LONG_RUNS = 200
MAX_KILL_DELAY = 1.5  # seconds after the load starts


def run_count() -> int:
    return LONG_RUNS if os.environ.get("SESSIONGEN_LONG") == "1" else RUNS


class Load:
    """Turns and generates against the server from a thread, until the server dies. What
    was acknowledged (a 2xx received) is recorded."""

    def __init__(self, url: str, run: int, previous: str | None) -> None:
        self.url = url
        self.run = run
        self.previous = previous
        self.sessions: list[str] = []
        self.prompts: list[tuple[str, str]] = []
        self.thread = threading.Thread(target=self._work, daemon=True)

    def _work(self) -> None:
        try:
            with httpx.Client(base_url=self.url, timeout=60) as http:
                created = http.post("/api/session")
                assert created.status_code == 201, created.text
                sid = created.json()["id"]
                self.sessions.append(sid)
                for turn in range(1_000):
                    target = self.previous if self.previous and turn % 3 == 2 else sid
                    text = f"{TOOL_MARK} run {self.run} turn {turn}"
                    answer = http.post(f"/api/session/{target}/prompt", json={"prompt": text})
                    assert answer.status_code == 200, answer.text
                    self.prompts.append((target, text))
                    generated = http.post(f"/api/session/{sid}/generate", json={"prompt": "Hi"})
                    assert generated.status_code == 200, generated.text
        except httpx.TransportError:
            return  # killed


def check_store(db: Path, seen: dict[tuple[str, int], str]) -> dict[str, int]:
    """The invariants on the file as it is; returns counts. `seen` (event rows seen before)
    must all still be there, unchanged; it is then updated with the rows seen now."""
    with sqlite3.connect(db) as raw:
        assert raw.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        rows = raw.execute("SELECT session_id, revision, data FROM events").fetchall()
        heads = dict(raw.execute("SELECT id, revision FROM sessions").fetchall())
    current = {(sid, rev): data for sid, rev, data in rows}
    lost = [key for key, data in seen.items() if current.get(key) != data]
    for sid, head in heads.items():
        revisions = sorted(rev for s, rev in current if s == sid)
        assert revisions == list(range(1, head + 1)), sid
    seen.update(current)
    store = SessionStore(db)
    try:
        unsettled = 0
        for sid in heads:
            for message in store.read(sid).messages:
                if isinstance(message, AssistantMessage) and not message.settled:
                    unsettled += 1
    finally:
        store.close()
    return {
        "sessions": len(heads),
        "events": len(current),
        "unsettled": unsettled,
        "lost": len(lost),
    }


def session_ids(db: Path) -> list[str]:
    store = SessionStore(db)
    try:
        return store.session_ids()
    finally:
        store.close()


def prompts_present(db: Path, prompts: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The acknowledged prompts that are not in their session's history."""
    store = SessionStore(db)
    try:
        texts: dict[str, set[str]] = {}
        for sid in {sid for sid, _ in prompts}:
            texts[sid] = {
                part.text
                for m in store.read(sid).messages
                if isinstance(m, UserMessage)
                for part in m.parts
            }
    finally:
        store.close()
    return [(sid, text) for sid, text in prompts if text not in texts[sid]]


def test_sigkill_at_random_points_of_a_drain_loses_nothing(tmp_path: Path) -> None:
    db = tmp_path / "crash.db"
    workspace = write_workspace(tmp_path / "workspace")
    log = tmp_path / "serve.log"
    seen: dict[tuple[str, int], str] = {}
    acked_sessions: list[str] = []
    acked_prompts: list[tuple[str, str]] = []
    runs = run_count()
    open_at_kill = 0
    recovered_total = 0
    lost_total = 0
    with ToolEmulator(delay=0.01) as emulator:
        env = provider_env(emulator)
        zygote = Zygote(env, log)
        for run in range(runs + 1):  # the last start only checks
            worker: Worker | ForkedServer
            if run == runs:  # the command itself, exec'd
                worker = Worker(serve_command(db, workspace), env, log).wait_ready()
            else:  # the command's code, forked from a process that imported it already
                worker = zygote.spawn(serve_args(db, workspace)).wait_ready()
            try:
                after = check_store(db, seen)
                assert after["unsettled"] == 0, "a Step is neither settled nor interrupted"
                missing = prompts_present(db, acked_prompts)
                gone = set(acked_sessions) - set(session_ids(db))
                lost_total += after["lost"] + len(missing) + len(gone)
                assert not after["lost"], "event rows seen before were lost or changed"
                assert not missing, f"acknowledged prompts lost: {missing}"
                assert not gone, f"acknowledged sessions lost: {gone}"
                with httpx.Client(base_url=worker.url, timeout=60) as http:
                    for sid in acked_sessions[-2:]:
                        head = http.get(f"/api/session/{sid}").json()["revision"]
                        answer = http.post(f"/api/session/{sid}/generate", json={"prompt": "Ok?"})
                        assert answer.status_code == 200, answer.text
                        assert answer.json()["revision"] == head
                if run == runs:
                    break
                rng = random.Random(SEED + run)
                load = Load(worker.url, run, acked_sessions[-1] if acked_sessions else None)
                load.thread.start()
                time.sleep(rng.uniform(0.0, MAX_KILL_DELAY))
            finally:
                worker.kill()
            load.thread.join(timeout=60)
            assert not load.thread.is_alive()
            acked_sessions += load.sessions
            acked_prompts += load.prompts
            before = check_store(db, seen)  # what the kill left, before any recovery
            lost_total += before["lost"]
            assert not before["lost"], "event rows seen before were lost or changed"
            open_at_kill += before["unsettled"] > 0
            recovered_total += before["unsettled"]
        zygote.close()
    banners = log.read_text().count("interrupted Steps recovered:")
    assert banners == runs + 1
    record(
        "crash",
        {
            "runs": runs,
            "seeds": [SEED, SEED + runs - 1],
            "runs_killed_mid_step": open_at_kill,
            "steps_recovered": recovered_total,
            "acknowledged_prompts": len(acked_prompts),
            "sessions": len(acked_sessions),
            "event_rows_checked": len(seen),
            "lost_or_changed_records": lost_total,
        },
    )


def test_serve_marks_steps_left_open_interrupted_before_it_binds(tmp_path: Path) -> None:
    """What a kill leaves (a StepStarted with no settlement) is interrupted by the server's
    startup recovery, in every session, and only there."""
    from sessiongen import SessionEngine
    from sessiongen.model import StepStarted
    from sessiongen.sample import SAMPLE_AGENT
    from sessiongen.server.serving import recover_interrupted
    from sessiongen.testing import ScriptedLLMClient

    store = SessionStore(tmp_path / "s.db")
    try:
        engine = SessionEngine(store, ScriptedLLMClient(), [SAMPLE_AGENT])
        open_, clean = (engine.create_session(SAMPLE_AGENT.name).id for _ in range(2))
        store.append(open_, [StepStarted(message_id="msg_x", step=1, model="claude-sonnet-4-6")])
        assert recover_interrupted(engine) == 1
        (step,) = store.read(open_).messages
        assert isinstance(step, AssistantMessage) and step.interrupted and step.settled
        assert store.read(clean).messages == ()
        assert recover_interrupted(engine) == 0
    finally:
        store.close()
