"""Instructions: resolve and assemble read-only, commit only in the durable Step."""

from __future__ import annotations

from pathlib import Path

import pytest
from sessiongen import InstructionsInitializationBlocked, LLMRequest
from sessiongen.testing import ScriptedReply

from ..conftest import EngineFactory


async def test_first_step_commits_baseline_into_system(
    make_engine: EngineFactory, workspace: Path
) -> None:
    engine, _, recording = make_engine()
    session = engine.create_session("build", workspace=workspace)
    await engine.run(session.id, "hi")
    system = [p.text for p in recording.requests[0].system]
    assert system[1] == (
        "Instructions from agent:0:\nAnswer in English.\n\n"
        "Instructions from AGENTS.md:\nPrefer small functions. Run the tests before finishing.\n"
    )
    state = engine.store.read(session.id).instructions
    assert state is not None and state.initial == state.current


def test_select_is_read_only(make_engine: EngineFactory, workspace: Path) -> None:
    engine, _, _ = make_engine()
    session = engine.create_session("build", workspace=workspace)
    before = engine.store.dump()
    snapshot = engine.select(session.id)
    assert snapshot.instructions.needs_commit
    assert engine.store.dump() == before


async def test_changed_source_reaches_model_once_and_is_committed_by_the_step(
    make_engine: EngineFactory, workspace: Path
) -> None:
    engine, _, recording = make_engine()
    session = engine.create_session("build", workspace=workspace)
    await engine.run(session.id, "first")
    (workspace / "AGENTS.md").write_text("Use tabs.\n")
    # Selecting does not commit.
    assert engine.select(session.id).instructions.update is not None
    assert sum(e.type == "instructions_committed" for _, e in engine.store.events(session.id)) == 1
    await engine.run(session.id, "second")
    await engine.run(session.id, "third")
    events = [e for _, e in engine.store.events(session.id) if e.type == "instructions_committed"]
    assert len(events) == 2
    second, third = recording.requests[1], recording.requests[2]
    update_blocks = [
        b.text
        for m in second.messages
        for b in m.content
        if b.type == "text" and "Use tabs." in b.text
    ]
    assert len(update_blocks) == 1 and update_blocks[0].startswith("<system-reminder>")

    # The baseline in system never changes (its text: a session's first request, having no
    # previous tail, spends a spare breakpoint on the last system part); the update stays
    # where it was delivered.
    def texts(request: LLMRequest) -> list[str]:
        return [part.text for part in request.system]

    assert texts(second) == texts(third) == texts(recording.requests[0])
    assert second.system == third.system
    assert [
        b for m in third.messages for b in m.content if b.type == "text" and "Use tabs." in b.text
    ] == [
        b for m in second.messages for b in m.content if b.type == "text" and "Use tabs." in b.text
    ]
    # The update sits right before the prompt it accompanies.
    tail = [b.text for m in second.messages for b in m.content if b.type == "text"]
    assert tail[-2:] == [update_blocks[0], "second"]


async def test_unreadable_source_without_baseline_blocks_before_any_call(
    make_engine: EngineFactory, workspace: Path
) -> None:
    engine, _, recording = make_engine()
    (workspace / "AGENTS.md").write_bytes(b"\xff\xfe not utf-8")
    session = engine.create_session("build", workspace=workspace)
    engine.prompt(session.id, "hello")
    before = engine.store.dump()
    with pytest.raises(InstructionsInitializationBlocked):
        await engine.drain(session.id)
    assert recording.requests == []
    assert engine.store.dump() == before


async def test_unreadable_source_with_baseline_keeps_committed_value(
    make_engine: EngineFactory, workspace: Path
) -> None:
    engine, scripted, recording = make_engine()
    session = engine.create_session("build", workspace=workspace)
    await engine.run(session.id, "first")
    (workspace / "AGENTS.md").write_bytes(b"\xff\xfe")
    scripted.queue([ScriptedReply(text="fine")])
    await engine.run(session.id, "second")
    texts = [b.text for m in recording.requests[1].messages for b in m.content if b.type == "text"]
    assert not any("system-reminder" in t for t in texts)
