"""The built-in `recap` plugin, a consumer outside the core: a recap is a tagged generate
through `ctx.session`; it is returned while the session stays put and suppressed when a
turn lands while it runs (SG-RESULT-3); on idle, the host drives it on the clock."""

from __future__ import annotations

import ast
import asyncio
import inspect

import pytest
import sessiongen.plugins.recap as recap_module
from sessiongen import RequestInfo
from sessiongen.lab import EmulatorLab
from sessiongen.plugins import RECAP_PROMPT, RecapPlugin, hookimpl

from .conftest import host_on, turn


class Tags:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str | None, bool]] = []

    @hookimpl
    def sessiongen_request(self, info: RequestInfo) -> None:
        self.seen.append((info.operation, info.tag, info.warming))


@pytest.mark.clause("SG-RESULT-3")
@pytest.mark.clause("SG-RECAP-1")
async def test_a_recap_is_returned_while_the_session_stays_put(lab: EmulatorLab) -> None:
    recaps, tags = RecapPlugin(), Tags()
    engine, host = host_on(lab, ("recap", recaps), ("tags", tags))
    sid = engine.create_session("forge", workspace=lab.workspace).id
    await turn(lab, engine, host, sid)
    before = engine.store.dump()
    lab.advance_by(30)

    made = await recaps.recap(sid)
    assert made is not None and made.revision == engine.store.read(sid).session.revision
    assert made.text == f"Emulated reply to: {RECAP_PROMPT}" and made.at == 30
    assert made.usage.cache_read_tokens > 0
    assert recaps.recaps == {sid: made}
    assert tags.seen[-1] == ("generate", "recap", False)
    assert engine.store.dump() == before

    await turn(lab, engine, host, sid)
    assert recaps.recaps == {}  # a new turn makes the last recap stale


@pytest.mark.clause("SG-RESULT-3")
@pytest.mark.clause("SG-RECAP-1")
async def test_a_recap_is_suppressed_when_a_turn_lands_while_it_runs(lab: EmulatorLab) -> None:
    """The recap's provider call is held; a durable turn runs meanwhile; released, the
    recap's snapshot revision is behind the session's, so it is suppressed."""
    recaps = RecapPlugin()
    engine, host = host_on(lab, ("recap", recaps))
    sid = engine.create_session("forge", workspace=lab.workspace).id
    await turn(lab, engine, host, sid)
    (await lab.admin.post("/_emulator/hold", json={"count": 1})).raise_for_status()
    running = asyncio.create_task(recaps.recap(sid))
    while (await lab.admin.get("/_emulator/hold")).json()["waiting"] < 1:
        await asyncio.sleep(0.01)
    await turn(lab, engine, host, sid)  # not held: only the first request was
    (await lab.admin.post("/_emulator/release")).raise_for_status()
    assert await running is None
    assert recaps.recaps == {}
    logged = lab.requests()  # in arrival order: the turn, the held recap, the second turn
    assert len(logged) == 3 and logged[1]["status"] == 200
    assert RECAP_PROMPT in str(logged[1]["body"]["messages"][-1])  # answered, then suppressed


async def test_idle_recaps_come_due_after_the_delay_and_a_new_turn_moves_them(
    lab: EmulatorLab,
) -> None:
    recaps = RecapPlugin(idle_after=120)
    engine, host = host_on(lab, ("recap", recaps))
    one = engine.create_session("forge", workspace=lab.workspace).id
    two = engine.create_session("forge", workspace=lab.workspace).id
    await turn(lab, engine, host, one)
    lab.advance_by(60)
    await turn(lab, engine, host, two)
    assert (recaps.scheduled(one), recaps.scheduled(two)) == (120, 180)
    assert recaps.due() == [] and await recaps.run_due() == []

    lab.advance_by(90)  # t = 150: one is due, two is not
    assert recaps.due() == [one]
    made = await recaps.run_due()
    assert [(r.session_id, r.at) for r in made] == [(one, 150)]
    assert recaps.scheduled(one) is None and await recaps.run_due() == []

    await turn(lab, engine, host, two)  # t = 150: two's idle timer starts again
    lab.advance_by(100)
    assert recaps.due() == [] and recaps.due(now=270) == [two]
    engine.store.delete(two)
    lab.advance_by(20)
    assert await recaps.run_due() == []  # deleted meanwhile: dropped, nothing raised
    assert recaps.scheduled(two) is None


def test_recap_is_written_against_the_context_only() -> None:
    """The recap plugin imports nothing of the engine's internals: what it does, a
    third-party plugin can do with `ctx.session`."""
    tree = ast.parse(inspect.getsource(recap_module))
    imported = {
        node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
    }
    assert imported <= {
        "__future__",
        "logging",
        "dataclasses",
        "errors",
        "llm.types",
        "context",
        "hookspecs",
    }
    assert RecapPlugin(idle_after=None).idle_after is None
    with pytest.raises(ValueError, match="idle_after"):
        RecapPlugin(idle_after=-1)


async def test_an_unstarted_recap_plugin_says_so() -> None:
    with pytest.raises(RuntimeError, match="has not been started"):
        await RecapPlugin().recap("ses_000001")
