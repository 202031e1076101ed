"""The ten verification laws of session.generate, over the real store and the emulator,
through the official SDK. "Unchanged" means an equal dump of every table of the store.

Each test names the contract clause it establishes (SG-…, see contract/session-generate.md).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from sessiongen import (
    LLMRequest,
    LLMResponse,
    ProviderError,
    ProviderOverloaded,
    ProviderRateLimited,
    ProviderServerError,
    RequestInfo,
)
from sessiongen.lab import EmulatorLab
from sessiongen.llm.client import LLMClient
from sessiongen.llm.types import StreamEvent, SystemPart
from sessiongen.model import StepStarted, TextPart, UserMessage
from sessiongen.parity import WireRequest, diff
from sessiongen.providers.anthropic.adapter import AnthropicLLMClient, lower_request
from sessiongen.tools import BUILTIN_TOOLS, Tool, ToolRegistry

PROMPT = "Which functions lack type hints?"


async def _session_after_one_turn(emulated: EmulatorLab) -> str:
    session = emulated.engine.create_session("forge", workspace=emulated.workspace)
    emulated.script(
        {
            "text": "Looking.",
            "tool_calls": [{"name": "read_file", "input": {"path": "src/app.py"}}],
        },
        {"text": "add() and mean() are defined in src/app.py."},
    )
    await emulated.engine.run(session.id, "What is in src/app.py?")
    return session.id


@pytest.mark.clause("SG-PARITY-1")
async def test_law1_request_equivalence(emulated: EmulatorLab) -> None:
    """SG-PARITY-1: for one snapshot, generate's wire request equals the durable Step's
    wire request for the same prompt, byte for byte (default policy A)."""
    sid = await _session_after_one_turn(emulated)
    await emulated.engine.generate(sid, PROMPT)
    await emulated.engine.run(sid, PROMPT)
    logged = emulated.requests()
    generate_body, step_body = logged[-2]["body"], logged[-1]["body"]
    assert generate_body == step_body
    report = diff(WireRequest(step_body, {}), WireRequest(generate_body, {}))
    assert report.differences == ()


@pytest.mark.clause("SG-PARITY-2")
async def test_law1_parity_diff_has_no_violations_for_a_different_prompt(
    emulated: EmulatorLab,
) -> None:
    """SG-PARITY-2: with another prompt, the only differences are the transient message."""
    sid = await _session_after_one_turn(emulated)
    snapshot = emulated.engine.select(sid)
    promoted = UserMessage(id="next", parts=(TextPart(text=PROMPT),))
    step = emulated.engine.preparation.prepare(
        snapshot, operation="step", step=1, transient=(promoted,)
    )
    generate = emulated.engine.prepare_generate(sid, "Give this session a title.").request
    report = diff(WireRequest.of(step), WireRequest.of(generate))
    assert report.violations == ()
    assert {d.reason for d in report.allowed} == {
        "step's own trailing user text (the transient message)",
        "generate's own trailing user text (the transient message)",
    }


@pytest.mark.clause("SG-INV-1")
async def test_law2_transcript_immutability(emulated: EmulatorLab) -> None:
    """SG-INV-1: messages and pending inputs are unchanged; pending inputs and an open
    tool call never reach the transient request."""
    sid = await _session_after_one_turn(emulated)
    emulated.engine.prompt(sid, "A queued prompt that is not history yet.")
    # A Drain in flight: a started Step with no settlement yet.
    emulated.engine.store.append(
        sid,
        lambda r: [StepStarted(message_id=f"msg_{r + 1:06d}", step=1, model="claude-sonnet-4-6")],
    )
    before = emulated.engine.store.dump()
    result = await emulated.engine.generate(sid, PROMPT)
    assert emulated.engine.store.dump() == before
    body = emulated.requests()[-1]["body"]
    texts = [b.get("text") for m in body["messages"] for b in m["content"]]
    assert "A queued prompt that is not history yet." not in texts
    assert texts[-1] == PROMPT and body["messages"][-2]["role"] == "assistant"
    assert result.revision == emulated.engine.store.read(sid).session.revision


@pytest.mark.clause("SG-INV-2")
async def test_law3_instruction_immutability(emulated: EmulatorLab) -> None:
    """SG-INV-2: a changed instruction source reaches the transient request as an update,
    in memory only: no instruction event, no commit."""
    sid = await _session_after_one_turn(emulated)
    (emulated.workspace / "AGENTS.md").write_text("Always answer in French.\n")
    before = emulated.engine.store.dump()
    await emulated.engine.generate(sid, PROMPT)
    assert emulated.engine.store.dump() == before
    body = emulated.requests()[-1]["body"]
    last = body["messages"][-1]["content"]
    assert "Always answer in French." in last[-2]["text"] and last[-1]["text"] == PROMPT


@pytest.mark.parametrize(
    ("status", "error"),
    [(429, ProviderRateLimited), (529, ProviderOverloaded), (500, ProviderServerError)],
)
@pytest.mark.clause("SG-INV-3")
async def test_law4_single_attempt_under_faults(
    emulated: EmulatorLab, status: int, error: type[ProviderError]
) -> None:
    """SG-INV-3: one call is one logged provider request, also when it fails; the typed
    error carries the provider's status and request id; the store is unchanged."""
    sid = await _session_after_one_turn(emulated)
    assert isinstance(emulated.llm, AnthropicLLMClient)
    retrying = AnthropicLLMClient(emulated.llm.client.with_options(max_retries=2))
    engine = emulated.rebuild(llm=retrying)
    before_log = len(emulated.requests())
    before = engine.store.dump()
    emulated.faults(status=status, count=3)
    with pytest.raises(error) as raised:
        await engine.generate(sid, PROMPT)
    logged = emulated.requests()
    assert len(logged) == before_log + 1 and logged[-1]["status"] == status
    assert (
        raised.value.provider_status == status
        and raised.value.provider_request_id == logged[-1]["id"]
    )
    assert engine.store.dump() == before


@pytest.mark.clause("SG-INV-3")
async def test_law4_single_attempt_on_success(emulated: EmulatorLab) -> None:
    """SG-INV-3: exactly one provider request and no continuation after tool calls."""
    sid = await _session_after_one_turn(emulated)
    before_log = len(emulated.requests())
    emulated.script({"text": "", "tool_calls": [{"name": "list_files", "input": {}}]})
    await emulated.engine.generate(sid, PROMPT)
    assert len(emulated.requests()) == before_log + 1


@dataclass
class CountingTool:
    """Test double: wraps a real tool and counts executions."""

    inner: Tool[Any]
    runs: list[dict[str, Any]] = field(default_factory=list)

    def as_tool(self) -> Tool[Any]:
        def run(workspace: Any, args: Any) -> str:
            self.runs.append(args.model_dump())
            return self.inner.run(workspace, args)

        return Tool(self.inner.name, self.inner.description, self.inner.args, run)


@pytest.mark.clause("SG-TOOLS-1")
async def test_law5_no_tool_execution(emulated: EmulatorLab) -> None:
    """SG-TOOLS-1: tool calls come back in the result and are never executed."""
    counting = CountingTool(BUILTIN_TOOLS["list_files"])
    tools = ToolRegistry([counting.as_tool(), BUILTIN_TOOLS["read_file"], BUILTIN_TOOLS["grep"]])
    engine = emulated.rebuild(tools=tools)
    sid = await _session_after_one_turn(emulated)
    before = engine.store.dump()
    emulated.script({"text": "", "tool_calls": [{"name": "list_files", "input": {"path": "."}}]})
    result = await engine.generate(sid, PROMPT)
    assert [c.name for c in result.tool_calls] == ["list_files"]
    assert result.finish_reason == "tool_use" and result.tool_results == ()
    assert counting.runs == []
    assert engine.store.dump() == before


@pytest.mark.clause("SG-CACHE-1")
async def test_law6_cache_identity(emulated: EmulatorLab) -> None:
    """SG-CACHE-1: same prompt-cache key and headers as the Step; a generate right after a
    durable turn reads from cache every prefix token that the turn wrote."""
    sid = await _session_after_one_turn(emulated)
    snapshot = emulated.engine.select(sid)
    step = emulated.engine.preparation.prepare(snapshot, operation="step", step=1)
    generate = emulated.engine.prepare_generate(sid, PROMPT).request
    assert generate.prompt_cache_key == step.prompt_cache_key == sid
    assert generate.headers == step.headers
    turn_last = emulated.requests()[-1]["usage"]
    result = await emulated.engine.generate(sid, PROMPT)
    written_prefix = turn_last["cache_read_input_tokens"] + turn_last["cache_creation_input_tokens"]
    assert written_prefix > 0
    assert result.usage.cache_read_tokens == written_prefix


@pytest.mark.clause("SG-HOOK-1")
async def test_law7_hook_parity(emulated: EmulatorLab) -> None:
    """SG-HOOK-1: request hooks see the transient request through the same seam, are told
    the operation and the caller's tag, and their edits reach the wire."""
    seen: list[RequestInfo] = []

    def hook(request: LLMRequest, info: RequestInfo) -> LLMRequest:
        seen.append(info)
        return request.model_copy(
            update={"system": (*request.system, SystemPart(text="Hook was here."))}
        )

    engine = emulated.rebuild(hooks=[hook])
    sid = await _session_after_one_turn(emulated)
    await engine.generate(sid, PROMPT, tag="recap")
    emulated.script({"text": "ok"})
    await engine.run(sid, PROMPT)
    assert [(i.operation, i.tag) for i in seen] == [("generate", "recap"), ("step", None)]
    logged = emulated.requests()
    assert logged[-2]["body"]["system"][-1]["text"] == "Hook was here."
    assert logged[-2]["body"]["system"] == logged[-1]["body"]["system"]


@pytest.mark.clause("SG-RESULT-1")
async def test_law8_empty_success(emulated: EmulatorLab) -> None:
    """SG-RESULT-1: a response with no text is a success with text ""."""
    sid = await _session_after_one_turn(emulated)
    emulated.script({"text": ""})
    result = await emulated.engine.generate(sid, PROMPT)
    assert result.text == "" and result.tool_calls == ()


@dataclass
class GatedLLM:
    """Test double: holds generate() at the dispatch point until released; streams pass."""

    inner: LLMClient
    held: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    requests: list[LLMRequest] = field(default_factory=list)

    def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        return self.inner.stream(request)

    async def generate(self, request: LLMRequest) -> LLMResponse:
        self.requests.append(request)
        self.held.set()
        await self.release.wait()
        return await self.inner.generate(request)


@pytest.mark.clause("SG-SNAP-1")
@pytest.mark.clause("SG-RESULT-3")
async def test_law9_snapshot_isolation(emulated: EmulatorLab) -> None:
    """SG-SNAP-1, SG-RESULT-3: a Drain advancing while generate is in flight does not change
    the prepared request; the result reports the snapshot's revision."""
    gated = GatedLLM(emulated.llm)
    engine = emulated.rebuild(llm=gated)
    sid = await _session_after_one_turn(emulated)
    revision = engine.store.read(sid).session.revision
    pending = asyncio.create_task(engine.generate(sid, PROMPT))
    await gated.held.wait()
    prepared = lower_request(gated.requests[0])
    emulated.script({"text": "The durable turn moved on."})
    await engine.run(sid, "Another durable turn.")
    assert engine.store.read(sid).session.revision > revision
    gated.release.set()
    result = await pending
    logged = emulated.requests()
    assert {k: v for k, v in logged[-1]["body"].items() if k != "stream"} == prepared
    assert "Another durable turn." not in str(prepared)
    assert result.revision == revision


@pytest.mark.clause("SG-INV-4")
async def test_law10_no_accounting_mutation(emulated: EmulatorLab) -> None:
    """SG-INV-4: transient usage is returned, never added to the Session's totals."""
    sid = await _session_after_one_turn(emulated)
    totals = emulated.engine.store.read(sid).usage
    result = await emulated.engine.generate(sid, PROMPT)
    assert result.usage.total_input_tokens > 0
    assert emulated.engine.store.read(sid).usage == totals
