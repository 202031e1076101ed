"""Scale (issue 12): incremental snapshots, closed streams, and a package that imports no SDK.

Nothing here measures time. Incremental reads are counted in messages loaded from SQLite,
leaks in live objects, and the import in the modules a fresh interpreter holds.
"""

from __future__ import annotations

import asyncio
import functools
import json
import subprocess
import sys
import weakref
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from sessiongen import (
    Agent,
    ProviderOverloaded,
    SessionEngine,
    SessionModelRequest,
    SessionStore,
    Snapshot,
)
from sessiongen.cache import get_model, override_model
from sessiongen.llm.client import collect
from sessiongen.llm.types import (
    FinishEvent,
    LLMMessage,
    LLMRequest,
    LLMResponse,
    StreamEvent,
    TextContent,
    TextDelta,
    Usage,
    UsageEvent,
)
from sessiongen.model import (
    AssistantMessage,
    Event,
    InputAdmitted,
    InputPromoted,
    Message,
    ReasoningPart,
    StepSettled,
    StepStarted,
    TextPart,
    ToolCallPart,
    UserMessage,
    message_id,
)
from sessiongen.providers import count_request_tokens
from sessiongen.session import store as store_module
from sessiongen.session.counting import RequestCounter
from sessiongen.session.request import RequestInfo
from sessiongen.session.transcript import active_history, to_llm_messages
from sessiongen.testing import RecordingLLMClient, ScriptedLLMClient, ScriptedReply

from ..conftest import EngineFactory

# The tool-use system prompt the API adds for the agent's tools (counted since it is billed):
# a window this much larger leaves the history the room these tests were sized with.
TOOL_PROMPT = get_model("claude-sonnet-4-6").tool_prompt_tokens("auto")

# --- helpers ------------------------------------------------------------------------------

request_tokens = RequestCounter().count
"""One counter over the whole module, so what it remembers serves later requests."""


class LoadCounter:
    """Counts the messages the store loads from SQLite rows (`_store.load_message`)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.loaded = 0
        original = store_module.load_message

        def counting(data: str) -> Message:
            self.loaded += 1
            return original(data)

        monkeypatch.setattr(store_module, "load_message", counting)

    def take(self) -> int:
        loaded, self.loaded = self.loaded, 0
        return loaded


def cold_read(path: Path, session_id: str) -> store_module.SessionRecord:
    """The record as a store that never read the session before sees it."""
    fresh = SessionStore(path)
    try:
        return fresh.read(session_id)
    finally:
        fresh.close()


async def varied_turns(engine: SessionEngine, scripted: ScriptedLLMClient, session: str) -> None:
    """Turns of every kind: tool calls, several steps, an interrupted step, plain answers."""
    scripted.queue(
        [
            ScriptedReply.calling(("t1", "read_file", {"path": "src/app.py"})),
            ScriptedReply(text="app.py adds."),
        ]
    )
    await engine.run(session, "What does app.py do?")
    scripted.queue([ScriptedReply(text="partial", error=ProviderOverloaded("busy"))])
    with pytest.raises(ProviderOverloaded):
        await engine.run(session, "and util.py?")
    scripted.queue([ScriptedReply.calling(("t2", "grep", {"pattern": "TODO"}), text="Looking.")])
    scripted.queue([ScriptedReply(text="util.py has a TODO.")])
    await engine.run(session, "again, util.py?")
    for turn in range(3):
        scripted.queue([ScriptedReply(text=f"answer {turn}")])
        await engine.run(session, f"question {turn}")


# --- incremental snapshots ----------------------------------------------------------------


async def test_a_read_loads_only_what_changed(
    make_engine: EngineFactory, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.sqlite"
    engine, scripted, _ = make_engine(store=SessionStore(path))
    session = engine.create_session("build", workspace=workspace).id
    await varied_turns(engine, scripted, session)
    counter = LoadCounter(monkeypatch)
    engine.store.read(session)
    # Nothing: the turn read the session after its last Step settled (for the revision it
    # returns), and a read of an unchanged revision loads nothing.
    assert counter.take() == 0
    engine.store.read(session)
    assert counter.take() == 0  # unchanged: the record as it was
    total = len(engine.store.read(session).messages)
    assert total > 10
    # One more turn: a prompt promoted, a Step started then settled (one message, changed).
    scripted.queue([ScriptedReply(text="one more")])
    await engine.run(session, "one more?")
    record = engine.store.read(session)
    # The turn's reads and this one loaded the new user message and the new Step (each
    # once, and the Step again when it settled): never the history before them.
    assert counter.take() <= 4
    assert len(record.messages) == total + 2
    assert record == cold_read(path, session)


async def test_an_incremental_record_equals_a_cold_read_after_every_change(
    make_engine: EngineFactory, workspace: Path, tmp_path: Path
) -> None:
    path = tmp_path / "s.sqlite"
    store = SessionStore(path)
    engine, scripted, _ = make_engine(store=store)
    session = engine.create_session("build", workspace=workspace).id
    original_append = store.append
    checked: list[int] = []

    def append_then_compare(session_id: str, events: object) -> int:
        revision = original_append(session_id, events)  # type: ignore[arg-type]
        assert store.read(session_id) == cold_read(path, session_id)
        checked.append(revision)
        return revision

    store.append = append_then_compare  # type: ignore[method-assign]
    await varied_turns(engine, scripted, session)
    assert len(checked) > 15  # a turn's prompt and its Step's opening are one change


async def test_a_write_by_another_connection_is_seen_at_its_revision(
    tmp_path: Path, agent: Agent, workspace: Path
) -> None:
    path = tmp_path / "s.sqlite"
    mine, theirs = SessionStore(path), SessionStore(path)
    engine = SessionEngine(mine, ScriptedLLMClient(), [agent])
    session = engine.create_session("build", workspace=workspace).id
    await engine.run(session, "first")
    before = mine.read(session)
    # Another process (connection) runs a turn on the same file.
    other = SessionEngine(theirs, ScriptedLLMClient(default_text="theirs"), [agent])
    await other.run(session, "second")
    after = mine.read(session)
    assert after.session.revision > before.session.revision
    assert after == theirs.read(session) == cold_read(path, session)
    assert engine.select(session).history == active_history(after.messages)
    texts = [
        p.text
        for m in after.messages
        if isinstance(m, UserMessage | AssistantMessage)
        for p in m.parts
        if isinstance(p, TextPart)
    ]
    assert texts[-1] == "theirs"


async def test_a_session_recreated_elsewhere_under_the_same_id_is_read_afresh(
    tmp_path: Path, agent: Agent, workspace: Path
) -> None:
    """Deleted and created again by another connection, the session restarts its revisions:
    a record kept for the old one must not pass for the new one at an equal revision."""
    path = tmp_path / "s.sqlite"
    mine, theirs = SessionStore(path), SessionStore(path)
    session = mine.create(agent="build", session_id="ses_reused")
    mine.append(session, [InputAdmitted(input_id="in_1", text="old")])
    old = mine.read(session)
    theirs.delete(session)
    theirs.create(agent="build", session_id=session)
    theirs.append(session, [InputAdmitted(input_id="in_2", text="new")])
    assert theirs.read(session).session.revision == old.session.revision
    assert mine.read(session) == cold_read(path, session)
    assert [p.text for p in mine.read(session).pending] == ["new"]


async def test_a_session_recreated_with_messages_is_read_afresh(
    tmp_path: Path, agent: Agent
) -> None:
    path = tmp_path / "s.sqlite"
    mine, theirs = SessionStore(path), SessionStore(path)
    session = mine.create(agent="build", session_id="ses_reused")
    settled = StepSettled(
        message_id=message_id(2),
        parts=(TextPart(text="old answer"),),
        finish_reason="end_turn",
        usage=Usage(),
    )
    mine.append(session, [StepStarted(message_id=message_id(2), step=1, model="m"), settled])
    assert len(mine.read(session).messages) == 1
    theirs.delete(session)
    theirs.create(agent="build", session_id=session)
    new = settled.model_copy(update={"parts": (TextPart(text="new answer"),)})
    theirs.append(session, [StepStarted(message_id=message_id(2), step=1, model="m"), new])
    record = mine.read(session)
    assert record == cold_read(path, session)
    assert record.messages[0].parts == (TextPart(text="new answer"),)  # type: ignore[union-attr]


def test_a_rolled_back_write_leaves_the_record_as_committed(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    store = SessionStore(path)
    session = store.create(agent="build")
    before = store.read(session)

    def failing(revision: int) -> list[InputAdmitted]:
        raise RuntimeError("no")

    with pytest.raises(RuntimeError):
        store.append(session, failing)
    assert store.read(session) is before
    store.append(session, [InputAdmitted(input_id="in_2", text="kept")])
    assert store.read(session) == cold_read(path, session)


def test_a_deleted_session_is_not_served_from_memory(tmp_path: Path) -> None:
    from sessiongen import SessionNotFound

    path = tmp_path / "s.sqlite"
    mine, theirs = SessionStore(path), SessionStore(path)
    session = mine.create(agent="build")
    mine.read(session)
    theirs.delete(session)
    with pytest.raises(SessionNotFound):
        mine.read(session)


# --- preparation built once: the same requests as converting everything ------------------


class ComparingPreparation:
    """The engine's preparation, also asking a fresh one (which keeps nothing) each time."""

    def __init__(self, inner: SessionModelRequest, store: SessionStore, session: str) -> None:
        self.inner, self.store, self.session = inner, store, session
        self.budget = inner.budget
        self.sent: list[tuple[LLMRequest, LLMRequest]] = []

    def build(self, snapshot: Snapshot, **kwargs: Any) -> LLMRequest:
        return self.inner.build(snapshot, **kwargs)

    def prepare(self, snapshot: Snapshot, **kwargs: Any) -> LLMRequest:
        request = self.inner.prepare(snapshot, **kwargs)
        fresh = SessionModelRequest(cache_policy=self.inner.cache_policy)
        self.sent.append((request, fresh.prepare(snapshot, **kwargs)))
        assert snapshot.history == active_history(self.store.read(self.session).messages)
        return request


async def test_prepared_requests_equal_a_preparation_without_memory(
    make_engine: EngineFactory, workspace: Path, agent: Agent
) -> None:
    """Every request the Drain sends equals what a fresh preparation (nothing kept) makes of
    the same snapshot, and its token count equals the whole-body count."""
    engine, scripted, recording = make_engine()
    session = engine.create_session("build", workspace=workspace).id
    comparing = ComparingPreparation(engine.preparation, engine.store, session)
    engine.runner.preparation = comparing  # type: ignore[assignment]
    await varied_turns(engine, scripted, session)
    for warming in (False, True):
        result = engine.prepare_generate(session, "recap", warming=warming)
        fresh_engine = SessionEngine(engine.store, scripted, [agent])
        assert (
            result.request
            == fresh_engine.prepare_generate(session, "recap", warming=warming).request
        )
        assert request_tokens(result.request) == count_request_tokens(result.request)
    assert len(comparing.sent) == 8
    for request, expected in comparing.sent:
        assert request == expected
        assert request_tokens(request) == count_request_tokens(request)
    for request in recording.requests:
        assert request_tokens(request) == count_request_tokens(request)


async def test_compacted_and_unsettled_histories_are_cut_as_before(
    make_engine: EngineFactory, workspace: Path, agent: Agent
) -> None:
    small = agent.model_copy(update={"max_output_tokens": 64})
    with override_model("claude-sonnet-4-6", context_window=1200 + TOOL_PROMPT):
        engine, scripted, recording = make_engine(agents=[small])
        session = engine.create_session("build", workspace=workspace).id
        for turn in range(4):
            scripted.queue([ScriptedReply(text="The answer involves many details. " * 40)])
            await engine.run(session, f"question {turn}")
            messages = engine.store.read(session).messages
            assert engine.select(session).history == active_history(messages)
        # A Step left unsettled (a process that died mid-stream) cuts active history there.
        engine.store.append(
            session,
            lambda revision: [StepStarted(message_id=message_id(revision + 1), step=1, model="m")],
        )
        messages = engine.store.read(session).messages
        assert isinstance(messages[-1], AssistantMessage) and not messages[-1].settled
        assert engine.select(session).history == active_history(messages)
        # Settled later, it joins active history.
        settled = StepSettled(
            message_id=messages[-1].id,
            parts=(TextPart(text="late"),),
            finish_reason="end_turn",
            usage=Usage(),
        )
        engine.store.append(session, [settled])
        messages = engine.store.read(session).messages
        assert engine.select(session).history == active_history(messages)
        assert engine.select(session).history[-1].id == settled.message_id
    for request in recording.requests:
        assert request_tokens(request) == count_request_tokens(request)


async def test_a_session_recreated_under_its_id_is_lowered_afresh(
    make_engine: EngineFactory, workspace: Path, agent: Agent
) -> None:
    engine, scripted, _ = make_engine()
    session = engine.create_session("build", workspace=workspace, session_id="ses_again").id
    await engine.run(session, "first life")
    engine.prepare_generate(session, "recap")  # kept: the first life's history, lowered
    engine.store.delete(session)
    engine.create_session("build", workspace=workspace, session_id=session)
    # Its second life grows as long as the first without a read in between.
    for turn in range(2):
        engine.store.append(session, functools.partial(turn_events, turn=turn))
    fresh = SessionEngine(engine.store, scripted, [agent])
    expected = fresh.prepare_generate(session, "recap").request
    assert engine.prepare_generate(session, "recap").request == expected


def turn_events(revision: int, turn: int) -> list[Event]:
    """The events of one plain turn, as the Drain records them."""
    started = message_id(revision + 3)
    return [
        InputAdmitted(input_id=f"in_{revision + 1}", text=f"second life {turn}"),
        InputPromoted(input_id=f"in_{revision + 1}", message_id=message_id(revision + 2)),
        StepStarted(message_id=started, step=1, model="claude-sonnet-4-6"),
        StepSettled(
            message_id=started,
            parts=(TextPart(text=f"answer {turn}"),),
            finish_reason="end_turn",
            usage=Usage(),
        ),
    ]


async def test_a_step_left_unsettled_under_a_warm_engine_is_recovered(
    make_engine: EngineFactory, workspace: Path
) -> None:
    """Steps another process left open are found by the next Drain, though this engine read
    the session before they appeared (and kept what it read)."""
    engine, scripted, _ = make_engine()
    session = engine.create_session("build", workspace=workspace).id
    await varied_turns(engine, scripted, session)
    open_call = ToolCallPart(id="t9", name="grep", input={"pattern": "x"})
    engine.store.append(
        session,
        lambda revision: [
            StepStarted(message_id=message_id(revision + 1), step=1, model="claude-sonnet-4-6"),
            StepSettled(
                message_id=message_id(revision + 1),
                parts=(open_call,),
                finish_reason="tool_use",
                usage=Usage(),
            ),
            StepStarted(message_id=message_id(revision + 3), step=2, model="claude-sonnet-4-6"),
        ],
    )
    stale = [m.id for m in engine.store.read(session).messages[-2:]]
    assert [m.id for m in engine.context.unsettled(session)] == stale
    # A message after them (read incrementally) leaves them as they were: still open.
    engine.store.append(
        session,
        lambda revision: [
            InputAdmitted(input_id=f"in_{revision + 1}", text="meanwhile"),
            InputPromoted(input_id=f"in_{revision + 1}", message_id=message_id(revision + 2)),
        ],
    )
    assert [m.id for m in engine.context.unsettled(session)] == stale
    await engine.run(session, "go on")
    messages = {m.id: m for m in engine.store.read(session).messages}
    assert all(messages[i].interrupted for i in stale)  # type: ignore[union-attr]
    assert engine.context.unsettled(session) == ()
    assert engine.select(session).history == active_history(tuple(messages.values()))


def test_token_counts_of_changed_requests_equal_the_whole_body_count() -> None:
    """Hook-made messages, reasoning (whose count depends on what follows it) and provider
    options that replace body fields are all counted as the whole body counts them."""
    from sessiongen.session.transcript import join_llm_messages

    user = LLMMessage(role="user", content=(TextContent(text="hello " * 50),))
    history = to_llm_messages(
        [
            AssistantMessage(
                id="a",
                step=1,
                model="claude-sonnet-4-6",
                parts=(ReasoningPart(text="hmm " * 30, signature="sig"), TextPart(text="hi")),
                completed=True,
            )
        ]
    )
    base = LLMRequest(model="claude-sonnet-4-6", messages=(user, *history, user))
    joined = base.model_copy(update={"messages": join_llm_messages(base.messages, (user,))})
    cases = [
        base,
        joined,
        LLMRequest(model="claude-sonnet-4-6", messages=(user,)),
        LLMRequest(
            model="claude-sonnet-4-6",
            messages=(user,),
            provider_options={"anthropic": {"system": "x" * 99}},
        ),
        # A model that drops prior-turn thinking once a new user message follows it.
        LLMRequest(model="claude-haiku-4-5", messages=(user, *history, user)),
        LLMRequest(model="claude-haiku-4-5", messages=(user, *history)),
    ]
    for request in cases:
        assert request_tokens(request) == count_request_tokens(request), request


def test_hooks_see_and_change_the_request_as_before(agent: Agent, workspace: Path) -> None:
    seen: list[int] = []

    def drop_first(request: LLMRequest, info: RequestInfo) -> LLMRequest:
        seen.append(len(request.messages))
        return request.model_copy(update={"messages": request.messages[1:]})

    engine = SessionEngine(SessionStore(), ScriptedLLMClient(), [agent], hooks=[drop_first])
    session = engine.create_session("build", workspace=workspace).id
    asyncio.run(engine.run(session, "one"))
    asyncio.run(engine.run(session, "two"))
    prepared = engine.prepare_generate(session, "three").request
    assert request_tokens(prepared) == count_request_tokens(prepared)
    assert seen[-1] == 5 and len(prepared.messages) == 4


# --- streams are closed ------------------------------------------------------------------


class Payload:
    """Stands for what an open stream holds: the request, its wire body, a connection."""


class ClosingProbeLLM:
    """An in-process client whose streams report whether they were left open."""

    def __init__(self) -> None:
        self.open = 0
        self.payloads: weakref.WeakSet[Payload] = weakref.WeakSet()
        self.gate: asyncio.Event | None = None

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        payload = Payload()
        self.payloads.add(payload)
        self.open += 1
        try:
            yield TextDelta(text="ok")
            if self.gate is not None:
                await self.gate.wait()
            yield UsageEvent(usage=Usage(input_tokens=1, output_tokens=1))
            yield FinishEvent(reason="end_turn", model=request.model)
            yield TextDelta(text="after the finish: never read")
        finally:
            self.open -= 1
            del payload

    async def generate(self, request: LLMRequest) -> LLMResponse:
        return await collect(self.stream(request))


def live(objects: Iterator[object] | weakref.WeakSet[Payload]) -> int:
    return sum(1 for _ in objects)


async def test_a_thousand_turns_leave_no_stream_open(agent: Agent, workspace: Path) -> None:
    llm = ClosingProbeLLM()
    engine = SessionEngine(SessionStore(), llm, [agent.model_copy(update={"tools": ()})])
    session = engine.create_session("build", workspace=workspace).id
    for turn in range(1000):
        await engine.run(session, f"turn {turn}")
        # Checked at once, before the event loop could finalise an abandoned generator.
        assert llm.open == 0, f"turn {turn} left its stream open"
        assert live(llm.payloads) == 0
        if turn % 100 == 0:
            await engine.generate(session, "recap")
            assert llm.open == 0 and live(llm.payloads) == 0
    assert len(engine.store.read(session).messages) == 2000


async def test_a_stream_is_closed_when_settlement_fails(
    agent: Agent, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    llm = ClosingProbeLLM()
    store = SessionStore()
    engine = SessionEngine(store, llm, [agent])
    session = engine.create_session("build", workspace=workspace).id
    original = store.append

    def refuse_settlement(session_id: str, events: object) -> int:
        if isinstance(events, list) and any(isinstance(e, StepSettled) for e in events):
            raise OSError("disk full")
        return original(session_id, events)  # type: ignore[arg-type]

    monkeypatch.setattr(store, "append", refuse_settlement)
    with pytest.raises(OSError):
        await engine.run(session, "hello")
    assert llm.open == 0 and live(llm.payloads) == 0


async def test_a_stream_is_closed_when_the_turn_is_cancelled(agent: Agent, workspace: Path) -> None:
    llm = ClosingProbeLLM()
    llm.gate = asyncio.Event()
    engine = SessionEngine(SessionStore(), llm, [agent])
    session = engine.create_session("build", workspace=workspace).id
    turn = asyncio.create_task(engine.run(session, "hello"))
    while llm.open == 0:
        await asyncio.sleep(0)
    turn.cancel()
    with pytest.raises(asyncio.CancelledError):
        await turn
    assert llm.open == 0 and live(llm.payloads) == 0


async def test_collect_and_the_recording_client_close_the_stream() -> None:
    inner = ClosingProbeLLM()
    recording = RecordingLLMClient(inner)
    request = LLMRequest(model="claude-sonnet-4-6")
    response = await recording.generate(request)
    assert response.text == "ok" and inner.open == 0
    response = await collect(recording.stream(request))
    assert response.text == "ok" and inner.open == 0 and live(inner.payloads) == 0


# --- the package imports no provider SDK -------------------------------------------------

SDKS = ("anthropic", "openai", "boto3", "botocore", "google.genai")


def test_importing_sessiongen_loads_no_provider_sdk() -> None:
    probe = (
        "import sys, json, sessiongen, sessiongen.testing\n"
        "names = sessiongen.__all__\n"
        f"print(json.dumps([m for m in {SDKS!r} if m in sys.modules]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], check=True, capture_output=True, text=True
    ).stdout
    assert json.loads(out) == []
