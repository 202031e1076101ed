"""The return shape and the purpose boundary of session.generate."""

from __future__ import annotations

from pathlib import Path

import pytest
from sessiongen import GenerateResult, ToolsPolicy
from sessiongen.cache import override_model
from sessiongen.lab import EmulatorLab
from sessiongen.sample import SAMPLE_AGENT
from sessiongen.testing import ScriptedReply

from ..conftest import EngineFactory


@pytest.mark.clause("SG-RESULT-2")
async def test_result_fields(emulated: EmulatorLab) -> None:
    """SG-RESULT-2: the documented fields, filled from the one provider response."""
    assert list(GenerateResult.model_fields) == [
        "text",
        "tool_calls",
        "finish_reason",
        "usage",
        "model",
        "revision",
        "tool_results",
        "below_cache_minimum",
    ]
    session = emulated.engine.create_session("forge", workspace=emulated.workspace)
    emulated.script({"text": "A title."})
    result = await emulated.engine.generate(session.id, "Title?")
    logged = emulated.requests()[-1]
    assert result.text == "A title." and result.finish_reason == "end_turn"
    assert result.model == logged["body"]["model"]
    usage = logged["usage"]
    assert result.usage.output_tokens == usage["output_tokens"]
    assert (
        result.usage.cache_write_5m_tokens == usage["cache_creation"]["ephemeral_5m_input_tokens"]
    )
    assert result.usage.input_tokens == usage["input_tokens"]
    assert result.revision == emulated.engine.store.read(session.id).session.revision


@pytest.mark.clause("SG-PURPOSE-1")
async def test_generate_is_not_a_runner(emulated: EmulatorLab) -> None:
    """SG-PURPOSE-1: no compaction even past the compaction threshold, no continuation
    after tool calls, no tool execution: one request, and the Session unchanged."""
    tight = SAMPLE_AGENT.model_copy(
        update={
            "compaction_threshold": 0.5,
        }
    )
    with override_model("claude-sonnet-4-6", context_window=2400):
        engine = emulated.rebuild(agents=[tight])
        session = engine.create_session("forge", workspace=emulated.workspace)
        snapshot = engine.select(session.id)
        request = engine.prepare_generate(session.id, "Recap.").request
        assert engine.preparation.budget.compaction_required(snapshot, request)
        before = engine.store.dump()
        emulated.script({"text": "", "tool_calls": [{"name": "list_files", "input": {}}]})
        result = await engine.generate(session.id, "Recap.")
        assert result.tool_calls and len(emulated.requests()) == 1
        assert engine.store.dump() == before


@pytest.mark.clause("SG-TOOLS-2")
async def test_policy_d_runs_permitted_calls_once_in_a_copy(emulated: EmulatorLab) -> None:
    """SG-TOOLS-2: D executes returned calls once, on an isolated view, only if permitted;
    the Session is unchanged and no second provider request is made."""
    reader = SAMPLE_AGENT.model_copy(update={"tools": ("list_files", "read_file")})
    engine = emulated.rebuild(agents=[reader])
    session = engine.create_session("forge", workspace=emulated.workspace)
    before = engine.store.dump()
    emulated.script(
        {
            "text": "",
            "tool_calls": [
                {"name": "list_files", "input": {"path": "src"}},
                {"name": "grep", "input": {"pattern": "x"}},
            ],
        }
    )
    result = await engine.generate(session.id, "Outline?", tools_policy=ToolsPolicy.EXECUTE_ONCE)
    assert [(r.is_error, r.text) for r in result.tool_results] == [
        (False, "src/app.py\nsrc/util.py"),
        (True, "ToolError: tool 'grep' is not permitted for this agent"),
    ]
    assert len(emulated.requests()) == 1 and engine.store.dump() == before


@pytest.mark.clause("SG-TOOLS-1")
@pytest.mark.parametrize(
    "policy", [p for p in ToolsPolicy if p is not ToolsPolicy.EXECUTE_ONCE], ids=str
)
async def test_only_policy_d_runs_a_returned_call(
    make_engine: EngineFactory, workspace: Path, policy: ToolsPolicy
) -> None:
    """Under every other policy a returned tool call is returned, never run, even when the
    model calls a tool it was not shown (no_tools) or told not to call (choice_none)."""
    engine, scripted, _ = make_engine()
    sid = engine.create_session("build", workspace=workspace).id
    scripted.queue([ScriptedReply.calling(("c1", "write_file", {"path": "x.txt", "content": "x"}))])
    result = await engine.generate(sid, "Outline?", tools_policy=policy)
    assert [c.name for c in result.tool_calls] == ["write_file"]
    assert result.tool_results == ()
    assert not (workspace / "x.txt").exists()
