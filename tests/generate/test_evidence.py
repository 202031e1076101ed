"""The measurements that decided the tools policy and the warming shape (SG-TOOLS-2,
SG-WARM-1), asserted so that a change in the engine or emulator that flips a decision fails."""

from __future__ import annotations

from pathlib import Path

import pytest
from sessiongen import ToolsPolicy
from sessiongen.lab import emulator_lab
from sessiongen_tooling.evidence import (
    EVIDENCE_DIR,
    PLACEMENTS,
    contract_tables,
    measure_tools_policies,
    measure_warming,
)


@pytest.mark.clause("SG-TOOLS-2")
async def test_only_the_default_wire_shape_keeps_the_whole_prefix(tmp_path: Path) -> None:
    """SG-TOOLS-2: A (and D, which sends the same request) read every prefix token the turn
    wrote; B reads nothing; C keeps tools and system but loses the history."""
    rows = {r.policy: r for r in await measure_tools_policies(tmp_path, later_turns=2)}
    assert rows["A"].prefix_hit == rows["D"].prefix_hit == 1.0
    assert rows["B"].read == 0 and rows["B"].tools_on_wire == 0
    assert 0 < rows["C"].read < rows["C"].prefix_written and rows["C"].tool_choice == "none"
    # B also moves the tool breakpoint the cache policy no longer needs onto the system.
    assert [rows[p].parity_violations for p in "ABCD"] == [0, 2, 1, 0]
    assert [rows[p].tools_executed for p in "ABCD"] == [0, 0, 0, 1]
    assert rows["A"].cost_usd < rows["C"].cost_usd < rows["B"].cost_usd


@pytest.mark.clause("SG-WARM-1")
async def test_warming_shape_is_the_cheapest_ping_that_keeps_the_next_turn_warm(
    tmp_path: Path,
) -> None:
    """SG-WARM-1: a ping at 4 min keeps a turn at 7 min warm; the warming shape (max_tokens
    0, breakpoint on the last shared block) costs less than a ping whose breakpoint sits on
    the keep-alive prompt, and the next turn then reads more."""
    none, on_prompt, shaped = [
        await measure_warming(tmp_path / str(i), p) for i, p in enumerate(PLACEMENTS)
    ]
    assert none.next_read == 0 and none.next_written > 0
    assert on_prompt.next_read > 0 and shaped.next_read > on_prompt.next_read
    assert shaped.ping_output == 0 and shaped.ping_cost_usd < on_prompt.ping_cost_usd
    assert shaped.total_cost_usd < on_prompt.total_cost_usd < none.total_cost_usd


@pytest.mark.clause("SG-WARM-2")
async def test_warming_request_shape_on_the_wire(tmp_path: Path) -> None:
    """SG-WARM-2: warming sends max_tokens 0 without streaming, keeps tools, system and
    history, and moves the last breakpoint from the prompt to the last shared block."""
    async with emulator_lab(tmp_path) as lab:
        session = lab.engine.create_session("forge", workspace=lab.workspace)
        await lab.engine.run(session.id, "Hello.")
        result = await lab.engine.generate(
            session.id, "keep-alive", warming=True, tools_policy=ToolsPolicy.DEFINITIONS
        )
        body = lab.requests()[-1]["body"]
    assert (
        result.text == ""
        and result.finish_reason == "max_tokens"
        and result.usage.output_tokens == 0
    )
    assert body["max_tokens"] == 0 and not body.get("stream")
    assert "cache_control" in body["messages"][-2]["content"][-1]
    assert "cache_control" not in body["messages"][-1]["content"][-1]
    assert body["messages"][-1]["content"][-1]["text"] == "keep-alive"
    assert len(body["tools"]) == 3


ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.clause("SG-TOOLS-2")
@pytest.mark.clause("SG-WARM-1")
@pytest.mark.clause("SG-REPLAY-1")
@pytest.mark.clause("SG-REPLAY-2")
async def test_the_contracts_tables_are_the_fresh_measurement(tmp_path: Path) -> None:
    """Every figure of the contract's measured tables is generated: the committed tables equal
    a fresh run of the evidence (regenerate with `uv run python -m sessiongen_tooling.evidence`)."""
    fresh = await contract_tables(tmp_path, ROOT)
    contract = (ROOT / "contract" / "session-generate.md").read_text()
    for name, table in fresh.items():
        committed = (ROOT / EVIDENCE_DIR / name).read_text()
        assert committed == table, f"{EVIDENCE_DIR / name} is stale: rerun the evidence"
        assert f'--8<-- "{EVIDENCE_DIR / name}"' in contract
