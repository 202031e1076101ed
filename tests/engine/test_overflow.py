"""Overflow decided the cheap way (issue 30), as opencode's `overflow.ts` decides it: from
the usage the provider reported for the session's latest Step plus an estimate of what was
added since, counted exactly only near the limit.

Each test watches the requests the provider received (the scripted provider's log) and the
counter's exact counts, never the budget's own answer alone."""

from __future__ import annotations

from pathlib import Path

import pytest
from sessiongen import Agent
from sessiongen.cache import get_model, override_model
from sessiongen.llm.types import Usage
from sessiongen.model import CompactionMessage
from sessiongen.providers import count_request_tokens
from sessiongen.session.counting import ESTIMATE_MARGIN, RequestCounter
from sessiongen.testing import ScriptedReply
from sessiongen.tokens import count_text_tokens

from ..conftest import EngineFactory

MODEL = "claude-sonnet-4-6"
WINDOW = 50_000


class CountingSpy:
    """The budget's counter, recording each exact count it is asked for."""

    def __init__(self, inner: RequestCounter) -> None:
        self.inner, self.counted = inner, 0

    def count(self, request: object) -> int:
        self.counted += 1
        return self.inner.count(request)  # type: ignore[arg-type]


def _compactions(engine: object, session: str) -> int:
    record = engine.store.read(session)  # type: ignore[attr-defined]
    return sum(isinstance(m, CompactionMessage) for m in record.messages)


async def test_the_providers_report_of_a_full_context_compacts(
    make_engine: EngineFactory, workspace: Path, agent: Agent
) -> None:
    """The provider billed the last Step at the threshold: the next turn compacts first,
    though the history the engine would count is a few hundred tokens."""
    with override_model(MODEL, context_window=WINDOW):
        engine, scripted, recording = make_engine(agents=[agent])
        session = engine.create_session("build", workspace=workspace).id
        limit = WINDOW * agent.compaction_threshold - agent.max_output_tokens
        scripted.queue([ScriptedReply(text="done", usage=Usage(input_tokens=int(limit)))])
        await engine.run(session, "first")
        assert count_request_tokens(recording.requests[-1]) < WINDOW // 20
        scripted.queue([ScriptedReply(text="summary"), ScriptedReply(text="next")])
        await engine.run(session, "second")
    assert _compactions(engine, session) == 1
    texts = [r.messages[-1].content[-1] for r in recording.requests]
    assert texts[1].text.startswith("Summarise this conversation")  # type: ignore[union-attr]


async def test_far_from_the_limit_nothing_is_counted(
    make_engine: EngineFactory, workspace: Path, agent: Agent
) -> None:
    """Each Step after the first is cleared by the report alone: the exact counter is asked
    only for the first turn's check, which has no report to start from."""
    engine, scripted, _ = make_engine(agents=[agent])
    spy = CountingSpy(engine.preparation.budget.counter)
    engine.preparation.budget.counter = spy  # type: ignore[assignment]
    session = engine.create_session("build", workspace=workspace).id
    await engine.run(session, "first")
    assert spy.counted == 1
    for turn in range(3):
        await engine.run(session, f"turn {turn}")
        engine.prepare_generate(session, "Recap.")
    assert spy.counted == 1


async def test_near_the_limit_the_exact_count_decides_when_it_is_larger(
    make_engine: EngineFactory, workspace: Path, agent: Agent
) -> None:
    """A provider that reports too little is not believed near the limit: the history is
    counted and, being over the threshold, compacted."""
    with override_model(MODEL, context_window=WINDOW):
        engine, scripted, recording = make_engine(agents=[agent])
        session = engine.create_session("build", workspace=workspace).id
        limit = WINDOW * agent.compaction_threshold - agent.max_output_tokens
        near = int(limit * (1 - ESTIMATE_MARGIN / 2))
        long = "word " * int(limit * 1.1 / count_text_tokens("word " * 100) * 100)
        # Reported: near the limit, and no output; the long answer is in the history.
        scripted.queue([ScriptedReply(text=long, usage=Usage(input_tokens=near))])
        await engine.run(session, "first")
        scripted.queue([ScriptedReply(text="summary"), ScriptedReply(text="next")])
        await engine.run(session, "second")
        assert count_request_tokens(recording.requests[1]) > limit
    assert _compactions(engine, session) == 1


async def test_a_step_on_another_model_is_no_report(
    make_engine: EngineFactory, workspace: Path, agent: Agent
) -> None:
    """A report from another model (its tokenizer, its tool prompt) says nothing about this
    one: the request is counted exactly."""
    other = agent.model_copy(update={"name": "other"})
    engine, scripted, _ = make_engine(agents=[agent, other])
    spy = CountingSpy(engine.preparation.budget.counter)
    engine.preparation.budget.counter = spy  # type: ignore[assignment]
    session = engine.create_session("build", workspace=workspace).id
    await engine.run(session, "first")
    snapshot = engine.select(session)
    request = engine.preparation.build(snapshot, operation="step", step=1)
    budget = engine.preparation.budget
    assert budget.estimate(snapshot, request) is not None
    moved = request.model_copy(update={"model": "claude-opus-4-5"})
    assert budget.estimate(snapshot, moved) is None
    before = spy.counted
    budget.compaction_required(snapshot, moved)
    assert spy.counted == before + 1


@pytest.mark.parametrize("added", ["a prompt", "a tool result"])
async def test_the_estimate_is_close_to_the_count(
    make_engine: EngineFactory, workspace: Path, agent: Agent, added: str
) -> None:
    """On the scripted provider (which reports the exact count), the estimate of the next
    request is within 2% and a few tokens of its exact count (framing it leaves out)."""
    # One Step a turn: a tool result (of 2,000 tokens) is then new since the reported Step.
    engine, scripted, recording = make_engine(agents=[agent.model_copy(update={"steps": 1})])
    session = engine.create_session("build", workspace=workspace).id
    if added == "a tool result":
        (workspace / "big.txt").write_text("abcd" * 2000)
        scripted.queue([ScriptedReply.calling(("c1", "read_file", {"path": "big.txt"}))])
    await engine.run(session, "first " * 50)
    snapshot = engine.select(session)
    request = engine.preparation.build(snapshot, operation="generate", step=None)
    estimate = engine.preparation.budget.estimate(snapshot, request)
    exact = count_request_tokens(request)
    assert estimate is not None and abs(estimate - exact) <= 16 + exact // 50, (estimate, exact)
    assert get_model(MODEL).context_window > exact


@pytest.mark.clause("SG-FAIL-3")
async def test_generate_believes_a_report_of_a_full_window(
    make_engine: EngineFactory, workspace: Path, agent: Agent
) -> None:
    """SG-FAIL-3 as decided from the report: the provider billed the last Step at the whole
    window, so generate's request cannot fit; it fails before any provider call."""
    from sessiongen.errors import ContextOverflow

    with override_model(MODEL, context_window=WINDOW):
        engine, scripted, recording = make_engine(agents=[agent])
        session = engine.create_session("build", workspace=workspace).id
        scripted.queue([ScriptedReply(text="done", usage=Usage(input_tokens=WINDOW))])
        await engine.run(session, "first")
        sent = len(recording.requests)
        with pytest.raises(ContextOverflow) as raised:
            await engine.generate(session, "Recap.")
    assert len(recording.requests) == sent
    assert raised.value.tokens is not None and raised.value.tokens > WINDOW
