"""Compaction: a provider call summarises history; a durable marker makes history start there."""

from __future__ import annotations

from pathlib import Path

from sessiongen import Agent
from sessiongen.cache import get_model, override_model
from sessiongen.model import CompactionMessage
from sessiongen.testing import ScriptedReply

from ..conftest import EngineFactory

# The tool-use system prompt the API adds for the agent's tools (counted since it is billed):
# a window this much larger leaves the history the room these tests were sized with.
TOOL_PROMPT = get_model("claude-sonnet-4-6").tool_prompt_tokens("auto")


async def test_compaction_replaces_active_history(
    make_engine: EngineFactory, workspace: Path, agent: Agent
) -> None:
    small = agent.model_copy(
        update={
            "max_output_tokens": 64,
        }
    )
    with override_model("claude-sonnet-4-6", context_window=1200 + TOOL_PROMPT):
        engine, scripted, recording = make_engine(agents=[small])
        session = engine.create_session("build", workspace=workspace)
        long_answer = "The answer involves many details. " * 40
        for turn in range(3):
            scripted.queue([ScriptedReply(text=long_answer)])
            await engine.run(session.id, f"question {turn}")
        operations = []
        compacted = False
        for request in recording.requests:
            last = request.messages[-1].content[-1]
            is_compaction = last.type == "text" and last.text.startswith(
                "Summarise this conversation"
            )
            operations.append("compaction" if is_compaction else "step")
            compacted |= is_compaction
        assert compacted, operations
        record = engine.store.read(session.id)
        markers = [m for m in record.messages if isinstance(m, CompactionMessage)]
        assert markers and engine.store.dump()["compactions"]
        # After the marker, the next Step's history starts with the summary.
        scripted.queue([ScriptedReply(text="short")])
        await engine.run(session.id, "after")
        first_block = recording.requests[-1].messages[0].content[0]
        assert first_block.type == "text" and first_block.text.startswith(
            "Summary of the conversation so far:"
        )
        # The compaction call keeps the Step's prefix: the same tools and system, breakpoints
        # included, as the Step before it.
        at = operations.index("compaction")
        compaction_request, step_before = recording.requests[at], recording.requests[at - 1]
        assert operations[at - 1] == "step"
        assert compaction_request.tools == step_before.tools
        assert compaction_request.system == step_before.system
        assert record.calls == len(recording.requests) - 1


async def test_compaction_reads_the_cached_prefix_on_the_emulator(tmp_path: Path) -> None:
    """Compaction goes through the shared preparation (tools, system, history kept), so its
    provider call reads the prefix the last Step cached instead of paying for it again."""
    from sessiongen.lab import emulator_lab
    from sessiongen.sample import SAMPLE_AGENT

    tight = SAMPLE_AGENT.model_copy(
        update={
            "max_output_tokens": 512,
        }
    )
    with override_model("claude-sonnet-4-6", context_window=4000):
        async with emulator_lab(tmp_path, agents=[tight]) as lab:
            session = lab.engine.create_session("forge", workspace=lab.workspace)
            for turn in range(12):
                lab.script({"text": f"Answer {turn}. " + "Many details follow. " * 30})
                await lab.engine.run(session.id, f"Question {turn}?")
                if lab.engine.store.dump()["compactions"]:
                    break
            assert lab.engine.store.dump()["compactions"], "history never reached the threshold"
            logged = lab.requests()
            compaction = next(
                i
                for i, r in enumerate(logged)
                if "Summarise this conversation" in str(r["body"]["messages"][-1])
            )
            before, call = logged[compaction - 1]["usage"], logged[compaction]["usage"]
            assert (
                call["cache_read_input_tokens"]
                == before["cache_read_input_tokens"] + before["cache_creation_input_tokens"]
            )
