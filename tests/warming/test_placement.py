"""Cache breakpoint placement on tool-heavy sessions: the scenario, the wire, the rows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from itertools import cycle, islice
from typing import Any

import pytest
from sessiongen.cache import cost, flatten_request
from sessiongen.cache_policy import (
    CachePolicy,
    lookback_ladder,
    no_cache,
    opencode_default,
    previous_tail,
)
from sessiongen.emulator.validation import for_model
from sessiongen.lab import emulator_lab, logged_usage
from sessiongen.llm.types import (
    LLMMessage,
    LLMRequest,
    ReasoningContent,
    SystemPart,
    TextContent,
    ToolDefinition,
)
from sessiongen.sample import SAMPLE_AGENT, SAMPLE_WORKSPACE
from sessiongen.warming.study.placement import (
    PLACEMENT_POLICIES,
    WORKSPACE_CALLS,
    PlacementMix,
    ScriptedSession,
    ScriptedStep,
    ScriptedTurn,
    build_scenario,
    measure_placement,
    placement_agent,
    placement_row,
    placement_table,
    run_scenario,
)
from sessiongen.warming.traces.generator import SessionMix

# Short sessions, so a full measurement over every policy stays well under a second each.
SMALL = PlacementMix(session=replace(SessionMix(), max_turns=2, max_calls_per_turn=4))


# --- the scenario ---------------------------------------------------------------------------


def test_the_same_seed_gives_the_same_scenario() -> None:
    assert build_scenario(12, seed=4) == build_scenario(12, seed=4)
    assert build_scenario(12, seed=4) != build_scenario(12, seed=5)


def test_the_scenario_is_tool_heavy_with_real_calls_on_sample_files() -> None:
    mix = PlacementMix()
    scenario = build_scenario(40, seed=1, mix=mix)
    steps = [step for session in scenario for step in session.steps]
    calls = [step.tool_calls for step in steps if step.tool_calls]
    assert min(calls) >= 1 and max(calls) <= 16
    assert sum(c >= 10 for c in calls) >= 0.04 * len(calls)  # the tail past 20 blocks
    assert sum(c <= 3 for c in calls) >= 0.4 * len(calls)  # the body stays small
    names = {c["name"] for step in steps for c in step.reply.get("tool_calls", [])}
    assert names <= set(SAMPLE_AGENT.tools)
    paths = {c["input"].get("path") for step in steps for c in step.reply.get("tool_calls", [])}
    dirs = {".", *(name.rsplit("/", 1)[0] for name in SAMPLE_WORKSPACE if "/" in name)}
    assert paths <= {None, *SAMPLE_WORKSPACE, *dirs} and set(SAMPLE_WORKSPACE) <= paths
    agent = placement_agent(mix)
    for session in scenario:
        for turn in session.turns:
            *tool_steps, final = turn.steps
            assert all(s.tool_calls for s in tool_steps) and final.tool_calls == 0
            assert len(turn.steps) < agent.steps  # never the Step that sends tool_choice none
    assert scenario[0].turns[0].steps[0].gap_s == 0.0
    sm = mix.session
    for session in scenario:
        assert all(s.gap_s >= sm.step_gap_s.low for t in session.turns for s in t.steps[1:])
        assert all(t.steps[0].gap_s >= sm.short_gap_s.low for t in session.turns[1:])


# --- the wire -------------------------------------------------------------------------------


def _step(calls: int) -> ScriptedStep:
    return ScriptedStep(
        5.0,
        {"text": "Reading the files.", "tool_calls": list(islice(cycle(WORKSPACE_CALLS), calls))},
    )


async def _wire(policy: CachePolicy, calls: Sequence[int]) -> list[dict[str, Any]]:
    """One turn: a tool Step per entry of `calls` (that many parallel calls), then a text
    reply; returns the emulator's request log."""
    steps = (*(_step(n) for n in calls), ScriptedStep(5.0, {"text": "Done."}))
    scenario = (ScriptedSession("s", (ScriptedTurn("Explore the repository.", steps),)),)
    async with emulator_lab(agents=(placement_agent(PlacementMix()),)) as lab:
        await run_scenario(lab, policy, scenario)
        return lab.requests()


def _tools_and_system_tokens(logged: dict[str, Any]) -> int:
    # As the emulator bills them (framing and the tool-use system prompt, `for_model`).
    body = logged["body"]
    blocks = for_model(flatten_request(body), body).blocks
    return max(b.prefix_tokens for b in blocks if b.section != "messages")


async def test_a_twelve_call_step_misses_with_the_default_and_not_with_previous_tail() -> None:
    """Twelve parallel calls add 25 blocks: the default's tail breakpoint cannot look back to
    the previous entry and falls back to the tools+system entry; previous_tail and the ladder
    read the previous request's whole prompt."""
    logs = {name: await _wire(policy, [2, 12]) for name, policy in PLACEMENT_POLICIES.items()}
    usage = {name: [logged_usage(r) for r in log] for name, log in logs.items()}
    default, previous = usage["opencode_default"], usage["previous_tail"]
    assert [len(log) for log in logs.values()] == [3, 3, 3]
    # The same prompts went out under every policy; only the breakpoints differ.
    assert {tuple(u.total_input_tokens for u in us) for us in usage.values()} == {
        tuple(u.total_input_tokens for u in default)
    }
    # Request 2 (after the 2-call Step) reads the previous prompt under every policy.
    assert all(us[1].cache_read_tokens == us[0].total_input_tokens for us in usage.values())
    # Request 3 (after the 12-call Step): the default misses, down to tools+system ...
    assert default[2].cache_read_tokens < default[1].total_input_tokens
    assert default[2].cache_read_tokens == _tools_and_system_tokens(logs["opencode_default"][2])
    # ... previous_tail and the ladder read the whole previous prompt.
    assert previous[2].cache_read_tokens == previous[1].total_input_tokens
    assert usage["lookback_ladder"][2].cache_read_tokens == previous[1].total_input_tokens
    assert all(
        p.cache_read_tokens >= d.cache_read_tokens for p, d in zip(previous, default, strict=True)
    )
    # The rows count exactly that one miss, and price the default's rewrite.
    rows = {name: placement_row(name, log, ttl_s=300.0) for name, log in logs.items()}
    assert [r.misses for r in rows.values()] == [1, 0, 0]
    assert rows["previous_tail"].cost_usd < rows["opencode_default"].cost_usd


async def test_the_ladder_reaches_back_40_blocks_and_previous_tail_any_distance() -> None:
    """Twenty calls add 41 blocks: past the ladder's two windows, not past previous_tail."""
    ladder = [logged_usage(r) for r in await _wire(lookback_ladder, [20])]
    previous = [logged_usage(r) for r in await _wire(previous_tail, [20])]
    assert ladder[1].cache_read_tokens < ladder[0].total_input_tokens
    assert previous[1].cache_read_tokens == previous[0].total_input_tokens
    nineteen = [logged_usage(r) for r in await _wire(lookback_ladder, [19])]
    assert (
        nineteen[1].cache_read_tokens == nineteen[0].total_input_tokens
    )  # 39 blocks: inside the windows


# --- the rows -------------------------------------------------------------------------------


async def test_measure_placement_is_deterministic_with_a_row_per_policy() -> None:
    policies = {**PLACEMENT_POLICIES, "no_cache": no_cache}
    first = await measure_placement(policies, sessions=3, seed=11, mix=SMALL)
    second = await measure_placement(policies, sessions=3, seed=11, mix=SMALL)
    assert first == second
    assert [r.policy for r in first] == list(policies)
    assert len({r.requests for r in first}) == 1 and first[0].requests > 3
    assert len({r.usage.total_input_tokens for r in first}) == 1  # same prompts, other breakpoints
    nothing = first[-1]
    assert (
        nothing.usage.cache_read_tokens
        == nothing.usage.cache_write_5m_tokens
        == nothing.usage.cache_write_1h_tokens
        == 0
    )
    assert nothing.hit_ratio == 0.0 and nothing.misses == 0
    for row in first:
        assert 0.0 <= row.hit_ratio <= 1.0
        assert row.expired_misses <= row.misses
    rows = {r.policy: r for r in first}
    assert (
        rows["previous_tail"].usage.cache_read_tokens
        >= rows["opencode_default"].usage.cache_read_tokens
    )
    assert "previous_tail" in placement_table(first)


async def test_costs_are_the_one_pricing_rule_on_the_rows_token_counts() -> None:
    rows = await measure_placement(sessions=2, seed=3, mix=SMALL)
    for row in rows:
        usage = row.usage
        assert row.model == SAMPLE_AGENT.model.id
        assert row.cost_usd == cost(usage, row.model)
        assert row.hit_ratio == row.usage.cache_read_tokens / usage.total_input_tokens


async def test_a_row_sums_the_wire_and_its_cost_is_the_sum_of_request_costs() -> None:
    log = await _wire(opencode_default, [3, 11])
    row = placement_row("opencode_default", log, ttl_s=300.0)
    wire = [r["usage"] for r in log]
    assert row.requests == len(log)
    assert row.usage.cache_read_tokens == sum(u["cache_read_input_tokens"] for u in wire)
    assert row.usage.cache_write_5m_tokens + row.usage.cache_write_1h_tokens == sum(
        u["cache_creation_input_tokens"] for u in wire
    )
    assert row.usage.input_tokens == sum(u["input_tokens"] for u in wire)
    assert row.usage.output_tokens == sum(u["output_tokens"] for u in wire)
    per_request = sum(cost(u, r["body"]["model"]) for u, r in zip(wire, log, strict=True))
    assert abs(row.cost_usd - per_request) < 1e-12


def test_a_miss_after_the_ttl_counts_as_expired() -> None:
    def logged(at: float, read: int, written: int) -> dict[str, Any]:
        usage = {
            "input_tokens": 0,
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": written,
            "output_tokens": 1,
        }
        body = {"model": SAMPLE_AGENT.model.id}
        return {"headers": {"x-session-id": "a"}, "started_at": at, "usage": usage, "body": body}

    log = [logged(0, 0, 2_000), logged(10, 1_000, 1_500), logged(400, 0, 3_000)]
    row = placement_row("p", log, ttl_s=300.0)
    assert (row.misses, row.expired_misses) == (2, 1)


# --- the ladder policy ----------------------------------------------------------------------


def _request(blocks: int, reasoning_at: int | None = None) -> LLMRequest:
    content: list[Any] = [TextContent(text=f"b{i}") for i in range(blocks)]
    if reasoning_at is not None:
        content[reasoning_at] = ReasoningContent(text="thinking", signature="sig")
    return LLMRequest(
        model="claude-sonnet-4-6",
        system=(SystemPart(text="s0"), SystemPart(text="s1")),
        tools=(ToolDefinition(name="a", description="", input_schema={}),),
        messages=tuple(
            LLMMessage(role="user" if i % 2 == 0 else "assistant", content=(block,))
            for i, block in enumerate(content)
        ),
    )


def _marked(request: LLMRequest) -> list[str]:
    marks = [f"tool:{t.name}" for t in request.tools if t.cache]
    marks += [f"system:{i}" for i, p in enumerate(request.system) if p.cache]
    marks += [f"block:{i}" for i, m in enumerate(request.messages) for b in m.content if b.cache]
    return marks


def test_the_ladder_marks_the_tail_and_a_rung_one_window_back() -> None:
    assert _marked(lookback_ladder(_request(30), anchor=None, ttl="5m")) == [
        "tool:a",
        "system:1",
        "block:9",
        "block:29",
    ]
    # An anchor moves both; a short request has only the tail; within 4 marks always.
    assert _marked(lookback_ladder(_request(30), anchor=24, ttl="5m"))[-2:] == [
        "block:4",
        "block:24",
    ]
    assert _marked(lookback_ladder(_request(20), anchor=None, ttl="5m")) == [
        "tool:a",
        "system:1",
        "block:19",
    ]
    for size in range(1, 50):
        assert len(_marked(lookback_ladder(_request(size), anchor=None, ttl="1h"))) <= 4


def test_the_ladder_never_puts_its_rung_on_a_reasoning_block() -> None:
    marked = lookback_ladder(_request(30, reasoning_at=9), anchor=None, ttl="5m")
    assert _marked(marked)[-2:] == ["block:10", "block:29"]


def test_the_ladder_rung_may_sit_on_block_0_and_moves_off_a_first_reasoning_block() -> None:
    """21 blocks: the rung lands on block 0 itself; on a reasoning block 0 it moves to 1. 20
    blocks with a reasoning block 0: the rung would be at -1, before the request, so there is
    none (it must not be walked forward into the request)."""
    assert _marked(lookback_ladder(_request(21), anchor=None, ttl="5m"))[-2:] == [
        "block:0",
        "block:20",
    ]
    marked = lookback_ladder(_request(21, reasoning_at=0), anchor=None, ttl="5m")
    assert _marked(marked)[-2:] == ["block:1", "block:20"]
    marked = lookback_ladder(_request(20, reasoning_at=0), anchor=None, ttl="5m")
    assert _marked(marked) == ["tool:a", "system:1", "block:19"]


def test_the_ladder_finds_a_reasoning_block_inside_a_longer_message() -> None:
    """Blocks are counted across messages: in a message of several blocks, the one at the
    rung is found by its offset in that message."""
    user = LLMMessage(role="user", content=tuple(TextContent(text=f"u{i}") for i in range(3)))
    thinking = ReasoningContent(text="thinking", signature="sig")
    assistant = LLMMessage(
        role="assistant",
        content=(
            thinking,
            TextContent(text="a"),
            thinking,
            *(TextContent(text="b") for _ in range(5)),
        ),
    )
    rest = tuple(LLMMessage(role="user", content=(TextContent(text=f"r{i}"),)) for i in range(15))
    request = _request(1).model_copy(update={"messages": (user, assistant, *rest)})
    marked = lookback_ladder(request, anchor=None, ttl="5m")  # 26 blocks: tail 25, rung 5
    flat = [b for m in marked.messages for b in m.content]
    assert [i for i, b in enumerate(flat) if b.cache] == [6, 25]  # block 5 is reasoning


@pytest.mark.parametrize("policy", [opencode_default, lookback_ladder])
def test_the_last_of_three_system_parts_is_marked(policy: CachePolicy) -> None:
    """A hook may add a third system part: the last one is still the one marked."""
    request = _request(3)
    request = request.model_copy(update={"system": (*request.system, SystemPart(text="s2"))})
    assert "system:2" in _marked(policy(request, anchor=None, ttl="5m"))
    assert "system:1" not in _marked(policy(request, anchor=None, ttl="5m"))
