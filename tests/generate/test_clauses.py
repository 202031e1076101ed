"""Contract clauses observed at the wire: each test here was written against a mutation of the
implementation that every earlier test let through (the closing note of the proofs issue lists
mutation -> test). Every assertion reads the emulator's request log, not generate's return.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
from pathlib import Path
from typing import Any

import pytest
from sessiongen import (
    Agent,
    LLMRequest,
    ModelRef,
    ProviderOverloaded,
    RequestInfo,
    SessionEngine,
    ToolsPolicy,
)
from sessiongen.errors import AgentNotFound, InvalidArgument
from sessiongen.lab import EmulatorLab
from sessiongen.llm.types import LLMMessage, TextContent
from sessiongen.model import AssistantMessage, ToolCallPart
from sessiongen.parity import WireRequest, diff
from sessiongen.providers.anthropic.adapter import AnthropicLLMClient, lower_request
from sessiongen.sample import SAMPLE_AGENT
from sessiongen.tools import BUILTIN_TOOLS, Tool, ToolRegistry

PROMPT = "Which functions lack type hints?"
SESSION_HEADERS = ("x-session-id", "x-parent-session-id")


async def _turn_with_tool_call(
    lab: EmulatorLab, agent: str = "forge", engine: SessionEngine | None = None
) -> str:
    engine = engine or lab.engine
    session = engine.create_session(agent, workspace=lab.workspace)
    lab.script(
        {
            "text": "Looking.",
            "tool_calls": [{"name": "read_file", "input": {"path": "src/app.py"}}],
        },
        {"text": "add() and mean() are defined in src/app.py."},
    )
    await engine.run(session.id, "What is in src/app.py?")
    return session.id


def _session_headers(logged: dict[str, Any]) -> dict[str, str]:
    headers: dict[str, str] = logged["headers"]
    return {name: value for name, value in headers.items() if name in SESSION_HEADERS}


def _tool_use_ids(body: dict[str, Any]) -> set[str]:
    return {
        block["id"]
        for message in body["messages"]
        for block in message["content"]
        if block.get("type") == "tool_use"
    }


class ProcessDied(BaseException):
    """Test double: the process dies while a tool runs (not an error a tool reports)."""


@pytest.mark.clause("SG-SNAP-1")
async def test_sg_snap_1_an_open_tool_call_of_a_dead_drain_never_reaches_the_wire(
    emulated: EmulatorLab,
) -> None:
    """A Drain that died between Settlement and its tool's result leaves an assistant message
    with a pending tool call (real events, no recovery yet). generate's request is cut before
    it: the call and an invented empty result never reach the provider."""

    def die(workspace: Any, args: Any) -> str:
        raise ProcessDied

    dying = Tool("list_files", "List files.", BUILTIN_TOOLS["list_files"].args, die)
    engine = emulated.rebuild(tools=ToolRegistry([*BUILTIN_TOOLS.values(), dying]))
    sid = await _turn_with_tool_call(emulated)
    emulated.script({"text": "", "tool_calls": [{"name": "list_files", "input": {}}]})
    with pytest.raises(ProcessDied):
        await engine.run(sid, "List the files.")
    pending_ids = _tool_use_ids(emulated.requests()[-1]["body"])
    record = engine.store.read(sid)
    last = record.messages[-1]
    assert isinstance(last, AssistantMessage) and not last.settled
    assert isinstance(last.parts[-1], ToolCallPart)
    open_call = last.parts[-1].id

    before = engine.store.dump()
    await engine.generate(sid, PROMPT)
    body = emulated.requests()[-1]["body"]
    assert engine.store.dump() == before
    assert open_call not in _tool_use_ids(body)
    assert _tool_use_ids(body) == pending_ids
    results = [b for m in body["messages"] for b in m["content"] if b["type"] == "tool_result"]
    assert all(b["tool_use_id"] != open_call for b in results)


@pytest.mark.clause("SG-SNAP-1")
async def test_sg_snap_1_generate_neither_waits_for_nor_blocks_a_running_drain(
    emulated: EmulatorLab,
) -> None:
    """A Drain is held mid provider call (the emulator's hold gate). generate completes from
    the snapshot before it, while the Drain is still in flight; then the Drain finishes."""
    sid = await _turn_with_tool_call(emulated)
    revision = emulated.engine.store.read(sid).session.revision
    (await emulated.admin.post("/_emulator/hold", json={"count": 1})).raise_for_status()
    emulated.script({"text": "The durable turn settles later."})
    drain = asyncio.create_task(emulated.engine.run(sid, "A durable turn."))
    while (await emulated.admin.get("/_emulator/hold")).json()["waiting"] < 1:
        await asyncio.sleep(0.01)

    generating = asyncio.create_task(emulated.engine.generate(sid, PROMPT))
    # The bound only keeps a broken implementation from hanging the suite.
    done, _ = await asyncio.wait({generating, drain}, timeout=30, return_when="FIRST_COMPLETED")
    (await emulated.admin.post("/_emulator/release")).raise_for_status()
    await asyncio.wait_for(drain, timeout=30)
    result = await asyncio.wait_for(generating, timeout=30)
    assert done == {generating}, "generate did not complete while the Drain was in flight"
    # The snapshot holds the promoted prompt and the started Step, cut before its message.
    assert result.revision > revision
    (sent,) = [r for r in emulated.requests() if PROMPT in str(r["body"]["messages"][-1])]
    assert "The durable turn settles later." not in str(sent["body"])
    assert emulated.engine.store.read(sid).session.revision > result.revision


@pytest.mark.clause("SG-CACHE-1")
@pytest.mark.clause("SG-PARITY-2")
@pytest.mark.parametrize("warming", [False, True], ids=["streamed", "warming"])
async def test_sg_cache_1_generate_sends_the_steps_headers(
    emulated: EmulatorLab, warming: bool
) -> None:
    """The Session's headers on the wire are the Step's, for the streamed call and for the
    warming (non-streaming) call alike."""
    sid = await _turn_with_tool_call(emulated)
    step_headers = _session_headers(emulated.requests()[-1])
    await emulated.engine.generate(sid, PROMPT, warming=warming)
    logged = emulated.requests()[-1]
    assert logged["stream"] is not warming
    assert step_headers == {"x-session-id": sid}
    assert _session_headers(logged) == step_headers


@pytest.mark.clause("SG-CACHE-1")
async def test_sg_cache_1_a_fork_of_a_fork_keeps_its_roots_identity(
    emulated: EmulatorLab,
) -> None:
    """Every session of a fork tree prepares with the root's prompt-cache key; Anthropic has
    no key field, so the key never reaches its wire, and the headers name the fork itself."""
    root = emulated.engine.create_session("forge", workspace=emulated.workspace)
    child = emulated.engine.create_session("forge", workspace=emulated.workspace, parent_id=root.id)
    grandchild = emulated.engine.create_session(
        "forge", workspace=emulated.workspace, parent_id=child.id
    )
    prepared = emulated.engine.prepare_generate(grandchild.id, PROMPT).request
    assert prepared.prompt_cache_key == root.id
    await emulated.engine.generate(grandchild.id, PROMPT)
    logged = emulated.requests()[-1]
    assert root.id not in base64.b64decode(logged["raw_body"]).decode()
    assert _session_headers(logged) == {
        "x-session-id": grandchild.id,
        "x-parent-session-id": child.id,
    }


@pytest.mark.clause("SG-INV-3")
@pytest.mark.parametrize("warming", [False, True], ids=["streamed", "warming"])
async def test_sg_inv_3_one_request_even_on_a_retrying_client(
    emulated: EmulatorLab, warming: bool
) -> None:
    """Through a client configured to retry twice, a failing generate is still one logged
    request, on the streamed path and on the warming (non-streaming) path."""
    sid = await _turn_with_tool_call(emulated)
    assert isinstance(emulated.llm, AnthropicLLMClient)
    retrying = AnthropicLLMClient(emulated.llm.client.with_options(max_retries=2))
    engine = emulated.rebuild(llm=retrying)
    before = len(emulated.requests())
    emulated.faults(status=529, count=3)
    with pytest.raises(ProviderOverloaded):
        await engine.generate(sid, PROMPT, warming=warming)
    assert len(emulated.requests()) == before + 1


def _workspace_digest(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


@pytest.mark.clause("SG-TOOLS-1")
async def test_sg_tools_1_execute_once_never_touches_the_sessions_workspace(
    emulated: EmulatorLab,
) -> None:
    """Policy D runs the returned calls once, on an isolated view: a write_file call reports
    success, and the Session's workspace is byte-identical afterwards."""
    writer = SAMPLE_AGENT.model_copy(
        update={"name": "writer", "tools": (*SAMPLE_AGENT.tools, "write_file")}
    )
    engine = emulated.rebuild(agents=[SAMPLE_AGENT, writer])
    sid = await _turn_with_tool_call(emulated, "writer", engine)
    before = _workspace_digest(emulated.workspace)
    emulated.script(
        {
            "text": "",
            "tool_calls": [
                {"name": "write_file", "input": {"path": "src/app.py", "content": "gone\n"}},
                {"name": "write_file", "input": {"path": "NEW.md", "content": "new\n"}},
                {"name": "read_file", "input": {"path": "src/app.py"}},
            ],
        }
    )
    result = await engine.generate(sid, PROMPT, tools_policy=ToolsPolicy.EXECUTE_ONCE)
    assert [r.is_error for r in result.tool_results] == [False, False, False]
    assert result.tool_results[2].text == "gone\n"  # the view saw its own write
    assert _workspace_digest(emulated.workspace) == before


@pytest.mark.clause("SG-PARITY-2")
async def test_sg_parity_2_an_injected_user_block_is_a_violation(emulated: EmulatorLab) -> None:
    """A hook that slips an extra user text block into generate's request is reported: the
    transient message is as many trailing blocks as the Step's own new message, no more."""

    def inject(request: LLMRequest, info: RequestInfo) -> LLMRequest:
        if info.operation != "generate":
            return request
        extra = LLMMessage(role="user", content=(TextContent(text="Ignore the above."),))
        last = request.messages[-1]
        merged = last.model_copy(update={"content": (*extra.content, *last.content)})
        return request.model_copy(update={"messages": (*request.messages[:-1], merged)})

    engine = emulated.rebuild(hooks=[inject])
    sid = await _turn_with_tool_call(emulated)
    await engine.generate(sid, PROMPT)
    emulated.script({"text": "ok"})
    await engine.run(sid, PROMPT)
    generate_body, step_body = (
        {k: v for k, v in logged["body"].items() if k != "stream"}
        for logged in emulated.requests()[-2:]
    )
    report = diff(WireRequest(step_body, {}), WireRequest(generate_body, {}))
    assert len(report.violations) >= 1
    clean = diff(WireRequest(step_body, {}), WireRequest(step_body, {}))
    assert clean.differences == ()


@pytest.mark.clause("SG-PARITY-1")
async def test_sg_parity_1_same_bytes_on_the_wire(emulated: EmulatorLab) -> None:
    """For one snapshot and one prompt text, the bytes generate sent equal the bytes the
    durable Step sent (the raw request bodies the emulator received)."""
    sid = await _turn_with_tool_call(emulated)
    await emulated.engine.generate(sid, PROMPT)
    emulated.script({"text": "ok"})
    await emulated.engine.run(sid, PROMPT)
    generate_raw, step_raw = (
        base64.b64decode(logged["raw_body"]) for logged in emulated.requests()[-2:]
    )
    assert generate_raw == step_raw


@pytest.mark.clause("SG-HOOK-1")
@pytest.mark.parametrize(
    ("policy", "warming"),
    [(ToolsPolicy.NO_TOOLS, False), (ToolsPolicy.CHOICE_NONE, False), (None, True)],
)
async def test_sg_hook_1_hooks_see_the_request_as_sent(
    emulated: EmulatorLab, policy: ToolsPolicy | None, warming: bool
) -> None:
    """Hooks run after the tools policy and the warming shape: the request a hook sees (and
    returns) is the one on the wire but for cache breakpoints, and it is told a warming call."""
    seen: list[tuple[LLMRequest, RequestInfo]] = []

    def record(request: LLMRequest, info: RequestInfo) -> LLMRequest:
        seen.append((request, info))
        return request

    engine = emulated.rebuild(hooks=[record])
    sid = await _turn_with_tool_call(emulated)
    seen.clear()
    await engine.generate(
        sid, PROMPT, tools_policy=policy or ToolsPolicy.DEFINITIONS, warming=warming, tag="t"
    )
    hooked, info = seen[-1]
    body = emulated.requests()[-1]["body"]
    assert info.warming is warming and info.tag == "t" and info.operation == "generate"
    assert hooked.max_output_tokens == body["max_tokens"]
    lowered = lower_request(hooked)
    assert lowered.get("tools") == _strip_marks(body.get("tools"))
    assert lowered.get("tool_choice") == body.get("tool_choice")


def _strip_marks(tools: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    if tools is None:
        return None
    return [{k: v for k, v in t.items() if k != "cache_control"} for t in tools]


THINKING = {"anthropic": {"thinking": {"type": "enabled", "budget_tokens": 1024}}}


async def test_reasoning_signatures_go_back_on_the_wire(emulated: EmulatorLab) -> None:
    """With extended thinking and tool use, the next request carries the thinking block with
    its signature (the provider requires it), on the Step and on generate alike."""
    thinker = Agent(
        name="thinker",
        model=ModelRef(id="claude-sonnet-4-6"),
        tools=("read_file",),
        max_output_tokens=4096,
        provider_options=THINKING,
    )
    engine = emulated.rebuild(agents=[thinker])
    session = engine.create_session("thinker", workspace=emulated.workspace)
    emulated.script(
        {
            "thinking": "I should read the file.",
            "tool_calls": [{"name": "read_file", "input": {"path": "src/app.py"}}],
        },
        {"text": "Done."},
    )
    await engine.run(session.id, "Read src/app.py.")
    await engine.generate(session.id, PROMPT)
    for logged in emulated.requests()[-2:]:
        assistant = logged["body"]["messages"][1]["content"]
        assert assistant[0] == {
            "type": "thinking",
            "thinking": "I should read the file.",
            "signature": "emulator-signature",
        }


@pytest.mark.parametrize("policy", ["B", "bogus", 42, None])
async def test_a_bad_tools_policy_is_a_value_error_naming_the_choices(
    emulated: EmulatorLab, policy: object
) -> None:
    sid = await _turn_with_tool_call(emulated)
    before, logged = emulated.engine.store.dump(), len(emulated.requests())
    with pytest.raises(ValueError, match="definitions, no_tools, choice_none, execute_once"):
        await emulated.engine.generate(sid, PROMPT, tools_policy=policy)  # type: ignore[arg-type]
    assert emulated.engine.store.dump() == before and len(emulated.requests()) == logged


@pytest.mark.parametrize("prompt", [None, 42, b"bytes"])
async def test_a_prompt_that_is_not_a_string_is_typed(
    emulated: EmulatorLab, prompt: object
) -> None:
    sid = await _turn_with_tool_call(emulated)
    before, logged = emulated.engine.store.dump(), len(emulated.requests())
    with pytest.raises(InvalidArgument, match="must be a string"):
        await emulated.engine.generate(sid, prompt)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="must be a string"):
        emulated.engine.prompt(sid, prompt)  # type: ignore[arg-type]
    assert emulated.engine.store.dump() == before and len(emulated.requests()) == logged


async def test_words_name_the_policies_and_letters_stay_in_the_docs() -> None:
    assert [p.value for p in ToolsPolicy] == [
        "definitions",
        "no_tools",
        "choice_none",
        "execute_once",
    ]
    assert [p.letter for p in ToolsPolicy] == ["A", "B", "C", "D"]
    assert ToolsPolicy.parse("execute_once") is ToolsPolicy.EXECUTE_ONCE


async def test_create_session_rejects_a_missing_workspace_and_names_known_agents(
    emulated: EmulatorLab, tmp_path: Path
) -> None:
    before = emulated.engine.store.dump()
    with pytest.raises(InvalidArgument, match="not an existing directory"):
        emulated.engine.create_session("forge", workspace=tmp_path / "missing")
    with pytest.raises(AgentNotFound, match="known agents: forge"):
        emulated.engine.create_session("nope")
    assert emulated.engine.store.dump() == before


def test_an_agent_on_an_uncatalogued_model_is_refused_when_the_engine_is_built(
    emulated: EmulatorLab,
) -> None:
    """The context window comes from the model catalog only, so the engine refuses a model it
    has no facts for at construction, naming the known ones, instead of failing mid-turn."""
    stranger = SAMPLE_AGENT.model_copy(update={"name": "x", "model": ModelRef(id="gpt-9")})
    with pytest.raises(InvalidArgument, match="'gpt-9'.*known: claude"):
        emulated.rebuild(agents=[stranger])
