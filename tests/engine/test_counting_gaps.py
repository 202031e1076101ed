"""The overflow estimate on the session messages its existing tests never put after the
reported Step (issue 30's mutation run, `benchmarks/mutation-report.md`): a prompt and an
instruction update whose Step reported no input tokens."""

from __future__ import annotations

from pathlib import Path

from sessiongen import Agent
from sessiongen.llm.types import Usage
from sessiongen.model import AssistantMessage, InstructionMessage, UserMessage
from sessiongen.providers import count_request_tokens
from sessiongen.testing import ScriptedReply

from ..conftest import EngineFactory


async def test_a_prompt_and_an_instruction_update_after_the_report_are_estimated(
    make_engine: EngineFactory, workspace: Path, agent: Agent
) -> None:
    """The second turn's Step reported no input tokens, so the first turn's report is the
    anchor: the AGENTS.md update committed with the second prompt, and that prompt, are new since, and
    the estimate of the next request counts them, within 2% and a few tokens of the exact
    count, as it does for tool results and transient prompts."""
    engine, scripted, _ = make_engine(agents=[agent.model_copy(update={"steps": 1})])
    session = engine.create_session("build", workspace=workspace).id
    await engine.run(session, "first")
    (workspace / "AGENTS.md").write_text("Prefer tabs. " * 400)
    scripted.queue([ScriptedReply(text="done", usage=Usage(output_tokens=1))])
    await engine.run(session, "second " * 500)
    snapshot = engine.select(session)
    kinds = [type(m) for m in snapshot.history[-3:]]
    assert kinds == [InstructionMessage, UserMessage, AssistantMessage]
    request = engine.preparation.build(snapshot, operation="generate", step=None)
    estimate = engine.preparation.budget.estimate(snapshot, request)
    exact = count_request_tokens(request)
    assert estimate is not None and abs(estimate - exact) <= 16 + exact // 50, (estimate, exact)
