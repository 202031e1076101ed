"""Characterization: a normal Step's prepared request, pinned as recorded JSON.

These pin the request before any refactor of preparation (law 1, request equivalence): the
agent and model, system and instruction assembly, active history after compaction, tool
definitions and last-step behaviour, headers and prompt-cache key, and hook transformations.
"""

from __future__ import annotations

from pathlib import Path

from sessiongen import Agent, LLMRequest, RequestInfo
from sessiongen.cache import get_model, override_model
from sessiongen.llm.types import SystemPart
from sessiongen.testing import ScriptedReply

from ..conftest import EngineFactory
from ..golden import assert_golden

# The tool-use system prompt the API adds for the agent's tools (counted since it is billed):
# a window this much larger leaves the history the room these tests were sized with.
TOOL_PROMPT = get_model("claude-sonnet-4-6").tool_prompt_tokens("auto")

GOLDEN = Path(__file__).parent / "golden"


def _dump(request: LLMRequest) -> dict[str, object]:
    return request.model_dump(mode="json", exclude_none=True)


async def test_normal_step_request(make_engine: EngineFactory, workspace: Path) -> None:
    engine, scripted, recording = make_engine()
    session = engine.create_session("build", workspace=workspace, session_id="ses_characterize")
    scripted.queue(
        [
            ScriptedReply.calling(("toolu_1", "read_file", {"path": "src/app.py"})),
            ScriptedReply(text="It adds two numbers."),
            ScriptedReply(text="Second answer."),
        ]
    )
    await engine.run(session.id, "What does src/app.py do?")
    (workspace / "AGENTS.md").write_text("Prefer small functions. Always add type hints.\n")
    await engine.run(session.id, "Add type hints to it.")
    assert_golden(GOLDEN / "step_turn1_step1.json", _dump(recording.requests[0]))
    assert_golden(GOLDEN / "step_turn1_step2.json", _dump(recording.requests[1]))
    assert_golden(GOLDEN / "step_turn2_with_instruction_update.json", _dump(recording.requests[2]))


async def test_last_step_request(make_engine: EngineFactory, workspace: Path, agent: Agent) -> None:
    engine, scripted, recording = make_engine(agents=[agent.model_copy(update={"steps": 2})])
    session = engine.create_session("build", workspace=workspace, session_id="ses_laststep")
    scripted.queue([ScriptedReply.calling((f"toolu_{i}", "list_files", {})) for i in range(3)])
    await engine.run(session.id, "Explore.")
    assert len(recording.requests) == 2
    assert_golden(GOLDEN / "step_last_step.json", _dump(recording.requests[-1]))


async def test_step_after_compaction(
    make_engine: EngineFactory, workspace: Path, agent: Agent
) -> None:
    small = agent.model_copy(
        update={
            "max_output_tokens": 64,
        }
    )
    with override_model("claude-sonnet-4-6", context_window=1200 + TOOL_PROMPT):
        engine, scripted, recording = make_engine(agents=[small])
        session = engine.create_session("build", workspace=workspace, session_id="ses_compacted")
        for turn in range(10):
            scripted.queue([ScriptedReply(text=f"Answer {turn}. " + "Many details follow. " * 25)])
            await engine.run(session.id, f"Question {turn}?")
            if engine.store.dump()["compactions"]:
                break
        assert engine.store.dump()["compactions"], "history never grew past the threshold"
        scripted.queue([ScriptedReply(text="Final.")])
        await engine.run(session.id, "And now?")
        assert_golden(GOLDEN / "step_after_compaction.json", _dump(recording.requests[-1]))


async def test_hooks_transform_the_step_request(
    make_engine: EngineFactory, workspace: Path
) -> None:
    seen: list[RequestInfo] = []

    def add_reminder(request: LLMRequest, info: RequestInfo) -> LLMRequest:
        seen.append(info)
        return request.model_copy(
            update={
                "system": (*request.system, SystemPart(text="Hooked system part.")),
                "provider_options": {**request.provider_options, "anthropic": {"temperature": 0}},
            }
        )

    engine, _, recording = make_engine(hooks=[add_reminder])
    session = engine.create_session("build", workspace=workspace, session_id="ses_hooked")
    await engine.run(session.id, "Hello.")
    assert [(i.operation, i.step, i.revision) for i in seen] == [("step", 1, 4)]
    assert_golden(GOLDEN / "step_hooked.json", _dump(recording.requests[0]))
