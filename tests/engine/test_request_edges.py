"""Request shapes that only rare sessions reach, checked on the request the provider gets:
an errored tool call in history, an agent's last Step past the small-integer cache, a
transient tool call (unhashable), a session id deleted and created again; and the bound on
what a session's active range keeps."""

from __future__ import annotations

import dataclasses
import operator
from pathlib import Path

from sessiongen import Agent, SessionStore
from sessiongen.llm.types import TextContent, ToolCallContent, ToolResultContent
from sessiongen.model import (
    AssistantMessage,
    CompactionCompleted,
    CompactionMessage,
    InputAdmitted,
    StepStarted,
    TextPart,
    ToolCallPart,
    Usage,
    UserMessage,
    message_id,
)
from sessiongen.session.context import ACTIVE_RANGES
from sessiongen.session.generate import APPENDED_KEPT
from sessiongen.session.request import TRANSIENT_LOWERINGS
from sessiongen.session.transcript import JOINS_KEPT, join_llm_messages, to_llm_messages
from sessiongen.testing import ScriptedReply

from ..conftest import EngineFactory


async def test_an_errored_tool_call_reaches_generate_as_an_error(
    make_engine: EngineFactory, workspace: Path
) -> None:
    engine, scripted, recording = make_engine()
    sid = engine.create_session("build", workspace=workspace).id
    scripted.queue(
        [
            ScriptedReply.calling(
                ("t1", "read_file", {"path": "src/missing.py"}),
                ("t2", "read_file", {"path": "src/app.py"}),
            ),
            ScriptedReply(text="One of them is missing."),
        ]
    )
    await engine.run(sid, "Read both files.")
    await engine.generate(sid, "Which one failed?")
    results = {
        block.tool_call_id: block.is_error
        for message in recording.requests[-1].messages
        for block in message.content
        if isinstance(block, ToolResultContent)
    }
    assert results == {"t1": True, "t2": False}


def test_the_last_of_300_steps_asks_for_no_tools(
    make_engine: EngineFactory, workspace: Path, agent: Agent
) -> None:
    """Step numbers above 256 are distinct int objects: the last Step is found by value."""
    steps = int("300")  # not a constant the compiler could share with the step number below
    engine, _, _ = make_engine(agents=[agent.model_copy(update={"steps": steps})])
    sid = engine.create_session("build", workspace=workspace).id
    snapshot = engine.select(sid)
    last = engine.preparation.prepare(snapshot, operation="step", step=299 + int("1"))
    before = engine.preparation.prepare(snapshot, operation="step", step=299)
    assert last.tool_choice is not None and last.tool_choice.type == "none"
    assert before.tool_choice is None


def test_a_transient_tool_call_is_lowered_though_it_cannot_be_hashed(
    make_engine: EngineFactory, workspace: Path
) -> None:
    """A tool call's input is a dict: such transient messages are lowered each time, not kept."""
    engine, _, _ = make_engine()
    sid = engine.create_session("build", workspace=workspace).id
    call = ToolCallPart(
        id="c1", name="read_file", input={"path": "src/app.py"}, state="completed", result="ok"
    )
    transient = (
        UserMessage(id="u", parts=(TextPart(text="Read it."),)),
        AssistantMessage(id="a", step=1, model="m", parts=(call,), completed=True),
    )
    for _ in range(2):
        request = engine.preparation.prepare(
            engine.select(sid), operation="generate", transient=transient
        )
        blocks = [b for m in request.messages for b in m.content]
        assert isinstance(blocks[0], TextContent) and blocks[0].text == "Read it."
        assert isinstance(blocks[1], ToolCallContent) and blocks[1].input == {"path": "src/app.py"}
        assert isinstance(blocks[2], ToolResultContent) and blocks[2].text == "ok"


def test_a_range_keeps_only_its_last_joins(make_engine: EngineFactory, workspace: Path) -> None:
    engine, _, _ = make_engine()
    sid = engine.create_session("build", workspace=workspace).id
    snapshot = engine.select(sid)
    assert snapshot.active is not None
    for prompt in ("one", "two", "three", "four"):
        engine.preparation.prepare(
            snapshot,
            operation="generate",
            transient=(UserMessage(id="p", parts=(TextPart(text=prompt),)),),
        )
    assert len(snapshot.active.__dict__["joins"]) == JOINS_KEPT


def test_a_preparation_keeps_only_its_last_transient_lowerings(
    make_engine: EngineFactory, workspace: Path
) -> None:
    """The lowerings of the transient messages are kept for the last `TRANSIENT_LOWERINGS`
    prompts, the newest last: a prompt sent again is lowered once, and the memory is bounded."""
    engine, _, _ = make_engine()
    snapshot = engine.select(engine.create_session("build", workspace=workspace).id)
    prompts = [f"prompt {n}" for n in range(TRANSIENT_LOWERINGS + 5)]
    for prompt in prompts:
        engine.preparation.prepare(
            snapshot,
            operation="generate",
            transient=(UserMessage(id="p", parts=(TextPart(text=prompt),)),),
        )
    known = engine.preparation._transient._known
    kept = [key[0].parts[0].text for key in known]  # type: ignore[union-attr]
    assert kept == prompts[-TRANSIENT_LOWERINGS:]


def test_generate_keeps_only_its_last_appended_prompts(
    make_engine: EngineFactory, workspace: Path
) -> None:
    """The transient messages generate appends are kept for its last `APPENDED_KEPT`
    prompts, the newest last: the same prompt again is the same messages, and memory is
    bounded."""
    engine, _, _ = make_engine()
    sid = engine.create_session("build", workspace=workspace).id
    prompts = [f"prompt {n}" for n in range(APPENDED_KEPT + 5)]
    for prompt in prompts:
        engine.prepare_generate(sid, prompt)
    assert [prompt for _, prompt in engine.generator._appended] == prompts[-APPENDED_KEPT:]


async def test_a_session_deleted_and_created_again_is_selected_afresh(
    tmp_path: Path, make_engine: EngineFactory, workspace: Path
) -> None:
    """The context's range for the old session (compacted, history from message 2) must not
    be advanced into the new one (no compaction: history from message 0)."""
    path = tmp_path / "sessions.sqlite"
    engine, _, recording = make_engine(store=SessionStore(path))
    sid = engine.create_session("build", workspace=workspace).id
    await engine.run(sid, "First?")
    engine.store.append(
        sid,
        lambda revision: [
            CompactionCompleted(
                message_id=message_id(revision + 1), summary="All of it.", usage=Usage()
            )
        ],
    )
    await engine.run(sid, "After the summary?")
    assert isinstance(engine.select(sid).history[0], CompactionMessage)
    other = SessionStore(path)
    other.delete(sid)
    other.create(agent="build", workspace=str(workspace), session_id=sid)
    await engine.run(sid, "Anew?")
    assert engine.select(sid).history == engine.store.read(sid).messages
    first = recording.requests[-1].messages[0].content[0]
    assert isinstance(first, TextContent) and first.text == "Anew?"


async def test_a_later_history_reuses_the_earlier_lowering(
    make_engine: EngineFactory, workspace: Path
) -> None:
    """Converted once, then only what is new: after a turn, the messages the earlier history
    lowered to are the very same objects in the later lowering."""
    engine, _, _ = make_engine()
    sid = engine.create_session("build", workspace=workspace).id
    await engine.run(sid, "First?")
    earlier = engine.select(sid).lowered
    await engine.run(sid, "Second?")
    later = engine.select(sid).lowered
    assert len(later) > len(earlier) >= 2
    assert all(map(operator.is_, earlier[:-1], later))
    # A Step started and not settled: more messages, the same active history (a new tuple of
    # the same messages), whose lowering is reused whole.
    engine.store.append(
        sid,
        lambda revision: [
            StepStarted(message_id=message_id(revision + 1), step=1, model="claude-sonnet-4-6")
        ],
    )
    unsettled = engine.select(sid).lowered
    assert len(unsettled) == len(later) and all(map(operator.is_, later, unsettled))


async def test_the_same_prompt_after_a_turn_reuses_its_marked_message(
    make_engine: EngineFactory, workspace: Path
) -> None:
    """The transient message with its tail breakpoint is kept on the transient lowering, so the
    same prompt on a later history is not marked again: the very same message object."""
    engine, _, _ = make_engine()
    sid = engine.create_session("build", workspace=workspace).id
    await engine.run(sid, "First?")
    before = engine.prepare_generate(sid, "Recap.").request.messages[-1]
    await engine.run(sid, "Second?")
    after = engine.prepare_generate(sid, "Recap.").request.messages[-1]
    assert before.content[-1].cache is not None
    assert after is before


def test_the_same_prompt_twice_is_the_same_request(
    make_engine: EngineFactory, workspace: Path
) -> None:
    """A history's lowering hashes like the tuple it is (it is the key its joins are kept
    by), so the same prompt on the same history is joined and marked once."""
    engine, _, _ = make_engine()
    sid = engine.create_session("build", workspace=workspace).id
    lowered = engine.select(sid).lowered
    assert hash(lowered) == hash(tuple(lowered))
    first = engine.prepare_generate(sid, "Recap.").request
    again = engine.prepare_generate(sid, "Recap.").request
    assert again.messages is first.messages


async def test_an_open_step_stays_out_of_history_while_a_prompt_waits(
    make_engine: EngineFactory, workspace: Path
) -> None:
    """A prompt admitted while a Step is open changes the session but no message: the open
    Step's assistant message (its cut) is still where history ends."""
    engine, _, _ = make_engine()
    sid = engine.create_session("build", workspace=workspace).id
    await engine.run(sid, "First?")
    engine.store.append(
        sid,
        lambda revision: [
            StepStarted(message_id=message_id(revision + 1), step=1, model="claude-sonnet-4-6")
        ],
    )
    before = engine.select(sid).history
    engine.store.append(
        sid, lambda revision: [InputAdmitted(input_id=f"in_{revision + 1}", text="Waiting.")]
    )
    after = engine.select(sid)
    assert after.pending and after.history == before
    assert not any(isinstance(m, AssistantMessage) and not m.settled for m in after.history)


async def test_a_snapshot_given_a_history_of_its_own_lowers_that_history(
    make_engine: EngineFactory, workspace: Path
) -> None:
    """The active range's lowering serves only the very history it was taken for; a snapshot
    replaced with a shorter or a longer one is converted afresh. Its repr leaves the range out."""
    engine, _, _ = make_engine()
    sid = engine.create_session("build", workspace=workspace).id
    await engine.run(sid, "First?")
    await engine.run(sid, "Second?")
    snapshot = engine.select(sid)
    assert "ActiveRange" not in repr(snapshot)
    extra = UserMessage(id="x", parts=(TextPart(text="Extra."),))
    tail = to_llm_messages((UserMessage(id="p", parts=(TextPart(text="Prompt."),)),))
    for history in (snapshot.history[:-2], (*snapshot.history, extra)):
        own = dataclasses.replace(snapshot, history=history)
        assert own.lowered == to_llm_messages(history)
        assert own.join(tail) == join_llm_messages(to_llm_messages(history), tail)


def test_a_context_keeps_a_bounded_number_of_ranges(
    make_engine: EngineFactory, workspace: Path
) -> None:
    """The least recently selected sessions' ranges go first."""
    engine, _, _ = make_engine()
    ids = [engine.create_session("build", workspace=workspace).id for _ in range(ACTIVE_RANGES + 2)]
    for sid in ids:
        engine.select(sid)
    assert list(engine.context._ranges) == ids[2:]
