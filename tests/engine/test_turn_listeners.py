"""The engine owns the durable turn (issue 30): `engine.run` holds the session's turn lock,
tells its `turn_listeners` that the turn ended (the server no longer re-implements `run` to
do so), and returns the turn's Steps as they settled."""

from __future__ import annotations

from pathlib import Path

import pytest
from sessiongen import Agent
from sessiongen.errors import ProviderError, SessionNotFound
from sessiongen.model import AssistantMessage
from sessiongen.testing import ScriptedReply

from ..conftest import EngineFactory


async def test_a_turn_tells_its_listeners_the_revision_it_left(
    make_engine: EngineFactory, workspace: Path, agent: Agent
) -> None:
    engine, scripted, _ = make_engine(agents=[agent])
    told: list[tuple[str, int | None]] = []
    engine.turn_listeners.append(lambda sid, revision: told.append((sid, revision)))
    session = engine.create_session("build", workspace=workspace).id
    scripted.queue(
        [
            ScriptedReply.calling(("c1", "read_file", {"path": "src/app.py"})),
            ScriptedReply(text="It adds."),
        ]
    )
    drained = await engine.run(session, "What does app.py do?")
    record = engine.store.read(session)
    assert told == [(session, drained.revision)] == [(session, record.session.revision)]
    steps = [m for m in record.messages if isinstance(m, AssistantMessage)]
    assert drained.messages == tuple(steps) and len(steps) == drained.steps == 2


async def test_a_failed_turn_is_told_too_and_keeps_its_error(
    make_engine: EngineFactory, workspace: Path, agent: Agent
) -> None:
    """A listener hears a failed turn (revision None: it reads the store's), and a listener
    that fails then never masks the turn's own error."""
    engine, scripted, _ = make_engine(agents=[agent])
    told: list[int | None] = []

    def failing(sid: str, revision: int | None) -> None:
        raise RuntimeError("a listener's own fault")

    engine.turn_listeners += [lambda sid, revision: told.append(revision), failing]
    session = engine.create_session("build", workspace=workspace).id
    scripted.queue([ScriptedReply(error=ProviderError("overloaded", provider_status=529))])
    with pytest.raises(ProviderError, match="overloaded"):
        await engine.run(session, "hi")
    assert told == [None]


async def test_an_unknown_session_gets_no_lock(make_engine: EngineFactory) -> None:
    engine, _, _ = make_engine()
    told: list[object] = []
    engine.turn_listeners.append(lambda *args: told.append(args))
    for run in (engine.run("ses_missing", "hi"), engine.drain("ses_missing")):
        with pytest.raises(SessionNotFound):
            await run
    assert engine._turns == {} and told == []
