"""State owned by the objects it belongs to (issue 20, item 1).

A provider message tuple (`LLMMessages`) keeps its block count and marked variants, and
knows the tuple it was made from; a request counter (`RequestCounter`, owned by whoever
counts) remembers its last requests by value, never on the messages; the session's active
range keeps its lowering; an instruction file is read again only when its
stat changed. Whatever is kept must never change a request: each test compares against
the same work done from scratch (full placement, the whole-body count, a fresh engine on a
fresh store). Nothing here measures time.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import os
import re
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sessiongen import Agent, SessionEngine, SessionModelRequest, SessionStore
from sessiongen.llm.types import (
    CacheMark,
    LLMMessage,
    LLMRequest,
    SystemPart,
    TextContent,
    ToolDefinition,
)
from sessiongen.model import (
    AssistantMessage,
    CompactionCompleted,
    CompactionMessage,
    InstructionMessage,
    Message,
    ReasoningPart,
    StepSettled,
    StepStarted,
    TextPart,
    ToolCallPart,
    Usage,
    UserMessage,
    message_id,
)
from sessiongen.providers import count_request_tokens
from sessiongen.providers.anthropic.wire import lower_request
from sessiongen.session import instructions as instructions_module
from sessiongen.session.breakpoints import (
    MARKED_VARIANTS,
    _marked,
    lookback_ladder,
    mark_blocks,
    opencode_default,
    previous_tail,
)
from sessiongen.session.counting import ContextBudget, RequestCounter
from sessiongen.session.instructions import InstructionFiles
from sessiongen.session.transcript import (
    LLMMessages,
    active_history,
    join_llm_messages,
    lower_history,
    to_llm_messages,
)
from sessiongen.testing import ScriptedLLMClient, ScriptedReply

# --- varied histories ----------------------------------------------------------------------

_texts = st.sampled_from(["", "ok", "hello there", "a longer answer " * 5])

request_tokens = RequestCounter().count
"""One counter over the whole module, so what it remembers serves later requests."""


@st.composite
def _message(draw: st.DrawFn, index: int) -> Message:
    kind = draw(st.sampled_from(["user", "assistant", "tools", "reasoning", "instruction"]))
    mid = f"m{index}"
    if kind == "user":
        return UserMessage(id=mid, parts=tuple(TextPart(text=t) for t in draw(st.lists(_texts))))
    if kind == "instruction":
        return InstructionMessage(id=mid, text=draw(_texts) or "rules")
    parts: list[Any] = []
    if kind == "reasoning":
        signed = draw(st.booleans())
        parts.append(ReasoningPart(text="thinking " * 3, signature="sig" if signed else None))
    parts += [TextPart(text=t) for t in draw(st.lists(_texts, max_size=2))]
    if kind == "tools":
        for call in range(draw(st.integers(1, 3))):
            state = draw(st.sampled_from(["completed", "error"]))
            parts.append(
                ToolCallPart(
                    id=f"{mid}_c{call}", name="grep", input={"q": call}, state=state, result="r"
                )
            )
    return AssistantMessage(
        id=mid, step=1, model="claude-sonnet-4-6", parts=tuple(parts), completed=True
    )


@st.composite
def _history(draw: st.DrawFn) -> tuple[Message, ...]:
    size = draw(st.integers(0, 12))
    return tuple(draw(_message(i)) for i in range(size))


_transients = st.sampled_from(
    [
        (UserMessage(id="p", parts=(TextPart(text="Recap in one sentence."),)),),
        (
            InstructionMessage(id="u", text="Your instructions changed."),
            UserMessage(id="p", parts=(TextPart(text="Recap."),)),
        ),
        (UserMessage(id="p", parts=(TextPart(text=""),)),),  # an empty run: dropped
        (),
    ]
)


def _plain(messages: tuple[Any, ...]) -> tuple[Any, ...]:
    """The same messages as a plain tuple, which knows nothing: full placement and whole
    counts are all it can get."""
    return tuple(messages)


# --- mark only the appended messages == full placement -------------------------------------


@settings(max_examples=300, deadline=None)
@given(
    history=_history(),
    earlier=_history(),
    transient=_transients,
    picks=st.lists(st.integers(0, 60), max_size=4),
    warm=st.lists(st.integers(0, 60), max_size=3),
    ttl=st.sampled_from(["5m", "1h"]),
)
def test_marking_a_joined_history_equals_full_placement(
    history: tuple[Message, ...],
    earlier: tuple[Message, ...],
    transient: tuple[Message, ...],
    picks: list[int],
    warm: list[int],
    ttl: Any,
) -> None:
    """The history's own marked variant plus the appended messages marked alone equals
    marking every block of the joined messages from scratch; whatever the history already
    keeps (other variants, an earlier lowering it was extended from) changes nothing."""
    prior = lower_history(earlier, None)
    lowered = lower_history((*earlier, *history), prior)  # extended, not converted whole
    assert lowered == to_llm_messages((*earlier, *history))
    joined = join_llm_messages(lowered, to_llm_messages(transient))
    assert joined == to_llm_messages((*earlier, *history, *transient))
    total = sum(len(m.content) for m in joined)
    mark = CacheMark(ttl=ttl)
    blocks = tuple(sorted({p % total for p in picks})) if total else ()
    kept = tuple(sorted({w % lowered.blocks for w in warm})) if lowered.blocks else ()
    other = CacheMark(ttl="1h" if ttl == "5m" else "5m")
    mark_blocks(lowered, kept, mark)  # variants the history keeps beforehand
    mark_blocks(joined, blocks, other)
    expected = _marked(_plain(joined), blocks, mark)
    for _ in range(2):  # made, then served from what was kept
        assert mark_blocks(joined, blocks, mark) == expected
    assert mark_blocks(_plain(joined), blocks, mark) == expected
    assert block_total(mark_blocks(joined, blocks, mark)) == total


def block_total(messages: tuple[Any, ...]) -> int:
    return len([b for m in messages for b in m.content])


def _request(messages: tuple[Any, ...]) -> LLMRequest:
    return LLMRequest(
        model="claude-sonnet-4-6",
        system=(SystemPart(text="system"), SystemPart(text="instructions")),
        tools=(ToolDefinition(name="grep", description="search", input_schema={"type": "object"}),),
    ).model_copy(update={"messages": messages})


@settings(max_examples=200, deadline=None)
@given(history=_history(), transient=_transients, anchor=st.sampled_from([None, 0, 3]))
def test_policies_place_the_same_marks_on_a_joined_history_as_on_a_plain_one(
    history: tuple[Message, ...], transient: tuple[Message, ...], anchor: int | None
) -> None:
    """Every policy, through `_place`, marks the owned messages exactly as it marks the same
    messages in a plain tuple, and their token count is the whole body's."""
    joined = join_llm_messages(lower_history(history, None), to_llm_messages(transient))
    if anchor is not None and anchor >= joined.blocks:
        anchor = None
    for policy in (previous_tail, opencode_default, lookback_ladder):
        ours = policy(_request(joined), anchor=anchor, ttl="5m")
        theirs = policy(_request(_plain(joined)), anchor=anchor, ttl="5m")
        assert ours == theirs
        assert json.dumps(lower_request(ours)) == json.dumps(lower_request(theirs))
        assert request_tokens(ours) == count_request_tokens(theirs)


def test_a_copy_of_owned_messages_is_a_plain_tuple() -> None:
    """A slice, copy or pickle of owned messages knows nothing of what they keep."""
    import copy
    import pickle

    lowered = lower_history((UserMessage(id="a", parts=(TextPart(text="hi"),)),), None)
    assert isinstance(lowered, LLMMessages)
    for made in (lowered[:1], tuple(lowered), pickle.loads(pickle.dumps(lowered))):
        assert type(made) is tuple and made == lowered
    assert type(copy.deepcopy(lowered)) is tuple


def test_a_changed_message_is_counted_afresh_and_messages_keep_nothing() -> None:
    """The counter compares what it remembers by value: a message changed in place of the
    one it counted (same position, same role) is counted again; messages stay plain values."""
    counter = RequestCounter()
    message = to_llm_messages([UserMessage(id="a", parts=(TextPart(text="hello " * 20),))])[0]
    request = LLMRequest(model="claude-sonnet-4-6", messages=(message,))
    assert counter.count(request) == count_request_tokens(request)
    changed = message.model_copy(update={"content": message.content * 2})
    bigger = LLMRequest(model="claude-sonnet-4-6", messages=(changed,))
    assert counter.count(bigger) == count_request_tokens(bigger) > counter.count(request)
    assert not hasattr(message, "__dict__") or set(vars(message)) == {"role", "content"}
    # Far from the end too (the counter compares a request's head in one pass).
    long = tuple(
        LLMMessage(
            role="user" if i % 2 == 0 else "assistant",
            content=(TextContent(text=f"message {i} " * 10),),
        )
        for i in range(40)
    )
    first = LLMRequest(model="claude-sonnet-4-6", messages=long)
    assert counter.count(first) == count_request_tokens(first)
    edited = (*long[:5], long[5].model_copy(update={"content": long[5].content * 3}), *long[6:])
    second = LLMRequest(model="claude-sonnet-4-6", messages=edited)
    assert counter.count(second) == count_request_tokens(second) > counter.count(first)


# --- a preparation with what was kept equals one from scratch, after every change ----------


class Checker:
    """Prepares the session's requests on the long-lived engine and on a fresh engine over a
    fresh store of the same file (nothing kept anywhere), and compares them."""

    def __init__(self, engine: SessionEngine, path: Path, agent: Agent, session: str) -> None:
        self.engine, self.path, self.agent, self.session = engine, path, agent, session
        self.checks = 0

    def __call__(self) -> None:
        store = SessionStore(self.path)
        fresh = SessionEngine(store, ScriptedLLMClient(), [self.agent])
        try:
            for warming in (False, True):
                for prompt in ("Recap in one sentence.", "Recap in one sentence.", "Other?"):
                    ours = self.engine.prepare_generate(self.session, prompt, warming=warming)
                    theirs = fresh.prepare_generate(self.session, prompt, warming=warming)
                    _same(ours.request, theirs.request)
            for step in (1, self.agent.steps):
                ours_step = self.engine.preparation.prepare(
                    self.engine.select(self.session), operation="step", step=step
                )
                theirs_step = SessionModelRequest().prepare(
                    fresh.select(self.session), operation="step", step=step
                )
                _same(ours_step, theirs_step)
            incoming = (UserMessage(id="in", parts=(TextPart(text="Next?"),)),)
            snapshot = self.engine.select(self.session)
            probe = self.engine.preparation.build(
                snapshot, operation="step", step=1, transient=incoming
            )
            fresh_snapshot = fresh.select(self.session)
            fresh_probe = SessionModelRequest().build(
                fresh_snapshot, operation="step", step=1, transient=incoming
            )
            _same(probe, fresh_probe)
            ours_budget = self.engine.preparation.budget
            assert ours_budget.compaction_required(
                snapshot, probe
            ) == ContextBudget().compaction_required(fresh_snapshot, fresh_probe)
            messages = self.engine.store.read(self.session).messages
            assert snapshot.history == active_history(messages)
            self.checks += 1
        finally:
            store.close()


def _same(ours: LLMRequest, theirs: LLMRequest) -> None:
    assert ours == theirs
    assert json.dumps(lower_request(ours)) == json.dumps(lower_request(theirs))
    assert request_tokens(ours) == count_request_tokens(ours) == count_request_tokens(theirs)


def _age(path: Path, seconds: float) -> None:
    """Move the file's modification time `seconds` into the past (older than the racy
    window), or into the future for a negative `seconds`."""
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns - int(seconds * 1e9)))


async def test_prepared_requests_equal_ones_prepared_from_scratch_after_every_change(
    tmp_path: Path, workspace: Path, agent: Agent
) -> None:
    path = tmp_path / "sessions.sqlite"
    scripted = ScriptedLLMClient()
    engine = SessionEngine(SessionStore(path), scripted, [agent])
    session = engine.create_session("build", workspace=workspace).id
    check = Checker(engine, path, agent, session)
    instructions = workspace / "AGENTS.md"
    _age(instructions, 60)

    await engine.run(session, "First question?")
    check()
    # A new turn, and a tool call.
    scripted.queue(
        [
            ScriptedReply.calling(("t1", "read_file", {"path": "src/app.py"})),
            ScriptedReply(text="It adds."),
        ]
    )
    await engine.run(session, "What does app.py do?")
    check()
    # Turns written by another connection, two of them with no preparation in between, and
    # one where only a Step was prepared (which counts no tokens).
    other = SessionStore(path)
    for turn in range(2):
        other.append(session, functools.partial(_turn, text=f"elsewhere {turn}"))
    check()
    for text in ("before a step", "after a step"):  # the history between is never counted
        other.append(session, functools.partial(_turn, text=text))
        engine.preparation.prepare(engine.select(session), operation="step", step=1)
    check()
    # An instruction file edited: the pending update is appended (until a Step commits it).
    instructions.write_text("Prefer large functions.\n")
    _age(instructions, 30)
    check()
    assert "Prefer large functions." in _last_user_text(engine, session)
    await engine.run(session, "Noted?")
    check()
    # A compaction: history restarts at the summary.
    other.append(
        session,
        lambda revision: [
            CompactionCompleted(
                message_id=message_id(revision + 1), summary="All of it.", usage=Usage()
            )
        ],
    )
    check()
    assert isinstance(engine.select(session).history[0], CompactionMessage)
    await engine.run(session, "After the summary?")
    check()
    # Prompts promoted with no Step yet: the second joins the first (one user run), so the
    # history's lowering replaces its last message.
    other.append(session, lambda revision: _turn(revision, "one prompt")[:2])
    check()
    other.append(session, lambda revision: _turn(revision, "and a second")[:2])
    check()
    # A Step left unsettled: history ends at the user message, which the prompt joins.
    other.append(session, lambda revision: _turn(revision, "left open")[:3])
    check()
    assert isinstance(engine.select(session).history[-1], UserMessage)
    open_step = engine.store.read(session).messages[-1].id
    other.append(
        session,
        [
            StepSettled(
                message_id=open_step,
                parts=(TextPart(text="settled late"),),
                finish_reason="end_turn",
                usage=Usage(),
            )
        ],
    )
    check()
    other.close()
    assert check.checks == 12


def _turn(revision: int, text: str) -> list[Any]:
    from sessiongen.model import InputAdmitted, InputPromoted

    started = message_id(revision + 3)
    return [
        InputAdmitted(input_id=f"in_{revision + 1}", text=text),
        InputPromoted(input_id=f"in_{revision + 1}", message_id=message_id(revision + 2)),
        StepStarted(message_id=started, step=1, model="claude-sonnet-4-6"),
        StepSettled(
            message_id=started,
            parts=(TextPart(text=f"answer to {text}"),),
            finish_reason="end_turn",
            usage=Usage(),
        ),
    ]


def _last_user_text(engine: SessionEngine, session: str) -> str:
    request = engine.prepare_generate(session, "Recap.").request
    return " ".join(getattr(b, "text", "") for b in request.messages[-1].content)


def test_preparations_from_several_threads_equal_ones_from_scratch(
    tmp_path: Path, workspace: Path, agent: Agent
) -> None:
    """Threads preparing on one engine while turns are recorded: every request equals a
    preparation of the same snapshot with nothing kept, and counts as the whole body."""
    engine = SessionEngine(SessionStore(tmp_path / "s.sqlite"), ScriptedLLMClient(), [agent])
    session = engine.create_session("build", workspace=workspace).id
    asyncio.run(engine.run(session, "Start."))
    failures: list[BaseException] = []
    done = threading.Event()

    def prepare_many() -> None:
        try:
            while not done.is_set():
                snapshot = engine.select(session)
                bare = dataclasses.replace(snapshot, active=None)  # lowered from scratch
                for transient in ((), (UserMessage(id="p", parts=(TextPart(text="Recap."),)),)):
                    kwargs: dict[str, Any] = {"operation": "generate", "transient": transient}
                    ours = engine.preparation.prepare(snapshot, **kwargs)
                    theirs = SessionModelRequest().prepare(bare, **kwargs)
                    assert ours == theirs
                    assert request_tokens(ours) == count_request_tokens(ours)
        except BaseException as error:  # reported by the main thread
            failures.append(error)

    threads = [threading.Thread(target=prepare_many) for _ in range(3)]
    for thread in threads:
        thread.start()
    try:
        for turn in range(15):
            engine.store.append(session, functools.partial(_turn, text=f"q{turn}"))
    finally:
        done.set()
        for thread in threads:
            thread.join()
    assert not failures, failures[0]


# --- instruction files: read again only when their stat changed ----------------------------


class Reads:
    """Counts the files `_instructions` opens."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0

        def counting(*args: Any, **kwargs: Any) -> Any:
            self.count += 1
            return open(*args, **kwargs)

        monkeypatch.setattr(instructions_module, "open", counting, raising=False)


def test_an_unchanged_instruction_file_is_not_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads = Reads(monkeypatch)
    path = tmp_path / "AGENTS.md"
    path.write_text("Use tabs.\n")
    _age(path, 60)
    files = InstructionFiles()
    assert [files.read(str(path)) for _ in range(5)] == ["Use tabs.\n"] * 5
    assert reads.count == 1


def test_an_edited_instruction_file_is_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads = Reads(monkeypatch)
    path = tmp_path / "AGENTS.md"
    path.write_text("Use tabs.\n")
    _age(path, 60)
    files = InstructionFiles()
    assert files.read(str(path)) == "Use tabs.\n"
    path.write_text("Use spaces\n")  # the same size
    _age(path, 30)
    assert files.read(str(path)) == "Use spaces\n"
    # Only its modification time moved (same size, same inode): read again too.
    path.write_text("Use commas\n")
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns - 10**10 + 1))
    assert files.read(str(path)) == "Use commas\n"
    assert reads.count == 3
    path.unlink()
    assert files.read(str(path)) is None


def test_a_file_changed_within_the_racy_window_is_read_every_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file whose stat is newer than the file system's timestamp granularity could change
    again without its stat changing: it is not served from what was read."""
    reads = Reads(monkeypatch)
    path = tmp_path / "AGENTS.md"
    path.write_text("Use tabs.\n")
    _age(path, -60)  # modified "now" for the next minute, however slow this machine is
    files = InstructionFiles()
    for _ in range(3):
        assert files.read(str(path)) == "Use tabs.\n"
    assert reads.count == 3


def test_an_engine_sees_an_edited_instruction_file(
    workspace: Path, agent: Agent, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = SessionEngine(SessionStore(), ScriptedLLMClient(), [agent])
    session = engine.create_session("build", workspace=workspace).id
    _age(workspace / "AGENTS.md", 60)
    asyncio.run(engine.run(session, "Start."))
    reads = Reads(monkeypatch)
    for _ in range(3):
        assert engine.select(session).instructions.update is None
    assert reads.count == 0
    (workspace / "AGENTS.md").write_text("Prefer small functions. Run nothing.\n")
    _age(workspace / "AGENTS.md", 30)
    update = engine.select(session).instructions.update
    assert update is not None and "Run nothing." in update
    assert reads.count == 1


# --- no cache keyed by object identity -----------------------------------------------------

PACKAGE = Path(__file__).resolve().parents[2] / "reference_impl" / "sessiongen"


def test_no_module_keeps_a_cache_keyed_by_object_identity() -> None:
    """`id(` appears only where it is no cache key: the plugin hook's hash (equal to any
    adapter of the same manager, so hashed as it)."""
    found = [
        (path.relative_to(PACKAGE).as_posix(), line.strip())
        for path in sorted(PACKAGE.rglob("*.py"))
        for line in path.read_text(encoding="utf-8").splitlines()
        if re.search(r"(?<![\w.])id\(", line)
    ]
    assert found == [("plugins/manager.py", "return id(self.pm)")]


def test_the_active_history_ends_before_the_first_unsettled_message() -> None:
    """The rule every incremental range is checked against: history is cut at the first
    unsettled assistant message, and settled messages after it stay out with it."""
    user = UserMessage(id="u0", parts=(TextPart(text="hi"),))
    settled = AssistantMessage(id="a1", step=1, model="m", completed=True)
    open_step = AssistantMessage(id="a2", step=1, model="m")
    later = AssistantMessage(id="a3", step=1, model="m", completed=True)
    assert active_history((user, settled, open_step, user, later)) == (user, settled)
    assert active_history((user, open_step, later)) == (user,)


def test_a_message_tuple_keeps_only_its_last_marked_variants() -> None:
    """Each placement of marks is kept on the tuple for the next request that asks for it,
    the last `MARKED_VARIANTS` of them, newest last: bounded memory, and the repeated one
    is the very same object."""
    lowered = to_llm_messages(
        tuple(UserMessage(id=f"m{i}", parts=(TextPart(text=f"t{i}"),)) for i in range(12))
    )
    mark = CacheMark(ttl="5m")
    asked = [(i,) for i in range(MARKED_VARIANTS + 3)]
    for blocks in asked:
        mark_blocks(lowered, blocks, mark)
    assert [blocks for blocks, _ in lowered.marked] == asked[-MARKED_VARIANTS:]
    last = next(reversed(lowered.marked.values()))
    assert mark_blocks(lowered, asked[-1], mark) is last
