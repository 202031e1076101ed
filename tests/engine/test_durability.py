"""Determinism and crash safety of the durable Drain."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

from sessiongen import Agent, SessionEngine, SessionStore
from sessiongen.model import AssistantMessage
from sessiongen.testing import RecordingLLMClient, ScriptedLLMClient, ScriptedReply


async def _two_tool_turn(
    db: Path, workspace: Path, agent: Agent
) -> dict[str, list[tuple[object, ...]]]:
    scripted = ScriptedLLMClient(
        [
            ScriptedReply.calling(
                ("toolu_a", "read_file", {"path": "src/app.py"}),
                ("toolu_b", "grep", {"pattern": "TODO"}),
            ),
            ScriptedReply(text="Done."),
        ]
    )
    store = SessionStore(db)
    engine = SessionEngine(store, RecordingLLMClient(scripted), [agent])
    session = engine.create_session("build", workspace=workspace)
    await engine.run(session.id, "Inspect the code.")
    dump = store.dump()
    store.close()
    return dump


async def test_same_turn_twice_yields_identical_events_and_projections(
    tmp_path: Path, workspace: Path, agent: Agent
) -> None:
    first = await _two_tool_turn(tmp_path / "one.db", workspace, agent)
    second = await _two_tool_turn(tmp_path / "two.db", workspace, agent)
    assert first == second
    assert len(first["events"]) == 10


CRASHING_DRAIN = textwrap.dedent(
    """
    import asyncio, sys
    from sessiongen import Agent, SessionEngine, SessionStore
    from sessiongen.testing import ScriptedLLMClient, ScriptedReply

    class HangsOnSecondCall(ScriptedLLMClient):
        '''Test double: answers the first call, then hangs until the process is killed.'''
        async def stream(self, request):
            if self.requests:
                print("HANGING", flush=True)
                await asyncio.sleep(3600)
            async for event in super().stream(request):
                yield event

    async def main():
        agent = Agent(name="build", tools=("read_file", "list_files", "grep"))
        llm = HangsOnSecondCall([ScriptedReply.calling(("toolu_1", "list_files", {}))])
        engine = SessionEngine(SessionStore(sys.argv[1]), llm, [agent])
        session = engine.create_session("build", workspace=sys.argv[2])
        await engine.run(session.id, "Explore.")

    asyncio.run(main())
    """
)


def test_killed_drain_leaves_a_sound_database_with_the_step_marked(
    tmp_path: Path, workspace: Path, agent: Agent
) -> None:
    db = tmp_path / "crash.db"
    script = tmp_path / "crash.py"
    script.write_text(CRASHING_DRAIN)
    proc = subprocess.Popen(
        [sys.executable, str(script), str(db), str(workspace)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()  # blocks until the second Step has started
    assert line.strip() == "HANGING"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    proc.stdout.close()

    raw = sqlite3.connect(db)
    assert raw.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    revisions = [
        r[0]
        for r in raw.execute(
            "SELECT revision FROM events WHERE session_id='ses_000001' ORDER BY revision"
        )
    ]
    raw.close()
    assert revisions == list(range(1, len(revisions) + 1))

    store = SessionStore(db)
    engine = SessionEngine(store, ScriptedLLMClient(), [agent])
    unsettled = [
        m
        for m in store.read("ses_000001").messages
        if isinstance(m, AssistantMessage) and not m.settled
    ]
    assert len(unsettled) == 1
    assert engine.runner.recover("ses_000001") == 1
    last = store.read("ses_000001").messages[-1]
    assert isinstance(last, AssistantMessage) and last.interrupted
    assert store.events("ses_000001")[-1][1].type == "step_interrupted"
    store.close()
