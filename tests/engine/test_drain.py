"""The Drain: tool loops, the step limit, settlement, usage, interruption, bad input."""

from __future__ import annotations

from pathlib import Path

import pytest
from sessiongen import (
    AgentNotFound,
    EmptyPrompt,
    PromptTooLarge,
    ProviderOverloaded,
    SessionNotFound,
)
from sessiongen.llm.types import ToolChoice
from sessiongen.model import AssistantMessage, TextPart, ToolCallPart
from sessiongen.testing import ScriptedReply

from ..conftest import EngineFactory


async def test_tool_loop_runs_tools_and_continues(
    make_engine: EngineFactory, workspace: Path
) -> None:
    engine, scripted, recording = make_engine()
    scripted.queue(
        [
            ScriptedReply.calling(
                ("t1", "read_file", {"path": "src/app.py"}), ("t2", "grep", {"pattern": "TODO"})
            ),
            ScriptedReply(text="add() returns a + b; util.py has a TODO."),
        ]
    )
    session = engine.create_session("build", workspace=workspace)
    result = await engine.run(session.id, "What does app.py do?")
    assert result.steps == 2 and result.finish_reason == "end_turn"
    assistants = [
        m for m in engine.store.read(session.id).messages if isinstance(m, AssistantMessage)
    ]
    calls = [p for p in assistants[0].parts if isinstance(p, ToolCallPart)]
    assert [(c.state, c.result) for c in calls] == [
        ("completed", "def add(a, b):\n    return a + b\n"),
        ("completed", "src/util.py:1: TODO = 'remove me'"),
    ]
    assert assistants[1].parts == (TextPart(text="add() returns a + b; util.py has a TODO."),)
    # The second request carries the tool results right after the tool calls.
    second = recording.requests[1].messages
    assert [m.role for m in second] == ["user", "assistant", "user"]
    assert [b.type for b in second[-1].content] == ["tool_result", "tool_result"]


async def test_usage_is_recorded_per_step(make_engine: EngineFactory, workspace: Path) -> None:
    engine, scripted, _ = make_engine()
    scripted.queue([ScriptedReply.calling(("t1", "list_files", {})), ScriptedReply(text="ok")])
    session = engine.create_session("build", workspace=workspace)
    result = await engine.run(session.id, "list")
    record = engine.store.read(session.id)
    assert record.calls == 2
    assert record.usage == result.usage
    assert record.usage.input_tokens > 0 and record.usage.output_tokens > 0


async def test_step_limit_keeps_tools_and_sets_choice_none(
    make_engine: EngineFactory, workspace: Path
) -> None:
    engine, scripted, recording = make_engine()
    scripted.queue([ScriptedReply.calling((f"t{i}", "list_files", {})) for i in range(10)])
    session = engine.create_session("build", workspace=workspace)
    result = await engine.run(session.id, "loop forever")
    assert result.steps == 4  # the agent's step limit
    assert [r.tool_choice for r in recording.requests] == [
        None,
        None,
        None,
        ToolChoice(type="none"),
    ]
    assert all(len(r.tools) == 3 for r in recording.requests)


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (("t1", "read_file", {"path": "../outside.txt"}), "PathOutsideWorkspace"),
        (("t1", "read_file", {"path": 42}), "InvalidToolArguments"),
        (("t1", "read_file", {"path": "missing.txt"}), "ToolExecutionFailed"),
        (("t1", "grep", {"pattern": "("}), "InvalidToolArguments"),
        (("t1", "delete_everything", {}), "ToolError"),
    ],
)
async def test_bad_tool_calls_are_tool_errors_not_crashes(
    make_engine: EngineFactory,
    workspace: Path,
    call: tuple[str, str, dict[str, object]],
    expected: str,
) -> None:
    (workspace.parent / "outside.txt").write_text("secret")
    engine, scripted, _ = make_engine()
    scripted.queue([ScriptedReply.calling(call), ScriptedReply(text="sorry")])
    session = engine.create_session("build", workspace=workspace)
    await engine.run(session.id, "try it")
    first = next(
        m for m in engine.store.read(session.id).messages if isinstance(m, AssistantMessage)
    )
    part = first.parts[0]
    assert isinstance(part, ToolCallPart) and part.state == "error"
    assert part.result is not None and part.result.startswith(expected)
    assert "secret" not in part.result


async def test_provider_failure_marks_step_interrupted(
    make_engine: EngineFactory, workspace: Path
) -> None:
    engine, scripted, _ = make_engine()
    scripted.queue(
        [
            ScriptedReply(
                error=ProviderOverloaded(
                    "Overloaded", provider_status=529, provider_request_id="req_1"
                )
            )
        ]
    )
    session = engine.create_session("build", workspace=workspace)
    with pytest.raises(ProviderOverloaded):
        await engine.run(session.id, "hello")
    last = engine.store.read(session.id).messages[-1]
    assert isinstance(last, AssistantMessage) and last.interrupted and not last.completed
    assert engine.store.events(session.id)[-1][1].type == "step_interrupted"


async def test_cut_stream_keeps_partial_text_and_marks_interrupted(
    make_engine: EngineFactory, workspace: Path
) -> None:
    engine, scripted, _ = make_engine()
    scripted.queue([ScriptedReply(text="partial answer", cut_after_events=1)])
    session = engine.create_session("build", workspace=workspace)
    with pytest.raises(Exception, match="ended before it finished"):
        await engine.run(session.id, "hello")
    last = engine.store.read(session.id).messages[-1]
    assert isinstance(last, AssistantMessage) and last.interrupted
    assert last.parts == (TextPart(text="partial answer"),)


@pytest.mark.parametrize(
    ("text", "error"), [("", EmptyPrompt), ("   \n", EmptyPrompt), ("x" * 200_001, PromptTooLarge)]
)
def test_bad_prompts_are_rejected_and_change_nothing(
    make_engine: EngineFactory, workspace: Path, text: str, error: type[Exception]
) -> None:
    engine, _, _ = make_engine()
    session = engine.create_session("build", workspace=workspace)
    before = engine.store.dump()
    with pytest.raises(error):
        engine.prompt(session.id, text)
    assert engine.store.dump() == before


async def test_unknown_session_and_agent_are_typed(make_engine: EngineFactory) -> None:
    engine, _, recording = make_engine()
    with pytest.raises(SessionNotFound):
        engine.prompt("ses_missing", "hello")
    with pytest.raises(SessionNotFound):
        await engine.drain("ses_missing")
    with pytest.raises(AgentNotFound):
        engine.create_session("no-such-agent")
    assert engine.store.dump()["sessions"] == [] and recording.requests == []


async def test_session_whose_agent_was_removed_is_agent_not_found(
    make_engine: EngineFactory, workspace: Path
) -> None:
    engine, _, _ = make_engine()
    session = engine.create_session("build", workspace=workspace)
    engine.agents.clear()
    with pytest.raises(AgentNotFound):
        engine.select(session.id)


async def test_a_turn_returns_its_revision_and_get_session_reads_the_session_back(
    make_engine: EngineFactory, workspace: Path
) -> None:
    """The prototyper's engine API: `run` says which revision the turn left, and
    `get_session` reads the session back (messages, usage totals, calls) without the store;
    a `generate` after it reports the same revision and changes nothing of it."""
    engine, scripted, _ = make_engine()
    scripted.queue(
        [
            ScriptedReply.calling(("t1", "read_file", {"path": "src/app.py"})),
            ScriptedReply(text="It adds."),
            ScriptedReply(text="A title"),
        ]
    )
    session = engine.create_session("build", workspace=workspace)
    turn = await engine.run(session.id, "What does src/app.py do?")
    record = engine.get_session(session.id)
    assert (
        turn.revision == record.session.revision == engine.store.read(session.id).session.revision
    )
    assert turn.steps == 2 and record.calls == 2 and record.usage == turn.usage
    assert [type(m).__name__ for m in record.messages] == [
        "UserMessage",
        "AssistantMessage",
        "AssistantMessage",
    ]
    result = await engine.generate(session.id, "Give this session a title.")
    assert result.revision == turn.revision and engine.get_session(session.id) == record
    with pytest.raises(SessionNotFound):
        engine.get_session("ses_nope")
