"""The warming report: every policy priced against the optimum on one trace, the reference
rows, the ping-interval sweep and the CSV, on a generated trace and (when present) the real
Mooncake first half."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from sessiongen.cache import price
from sessiongen.warming import policies
from sessiongen.warming.policies.trace_replay import replay
from sessiongen.warming.study.report import (
    REFERENCE_ROWS,
    PolicyTable,
    compare_held_back,
    compare_policies,
    prompt_cost,
    sweep_intervals,
    write_csv,
)
from sessiongen.warming.traces.formats import load_trace
from sessiongen.warming.traces.generator import generate_sessions
from sessiongen.warming.traces.mooncake import shared_mooncake_dir

FIRST_HALF = shared_mooncake_dir() / "conversation_trace_first_half.jsonl"
GENERATED = 20  # sessions: the learned policy needs some history to learn from
FIXED_PINGS = ("aider_1", "aider_3", "opencode", "ttl_aware_5m_30min", "ttl_aware_1h_120min")


@pytest.fixture(scope="module")
def generated() -> PolicyTable:
    return compare_policies(generate_sessions(GENERATED, seed=1))


def _check_default_wins(table: PolicyTable) -> None:
    """On the part held back from fitting: the default is within 1% of the best online
    policy and cheaper than plain 5m and every fixed ping schedule."""
    assert table.part == "held_back" and table.fitted_sessions > 0
    best = table.row("optimum").cost
    assert table.row("lower_bound").cost <= best
    for row in table.rows:
        assert row.cost >= best or row.policy == "lower_bound"
        assert row.ratio_to_optimum == pytest.approx(row.cost / best)
    default = table.default_row()
    assert default is not None and default.policy == policies.DEFAULT_POLICY
    assert default.cost <= 1.01 * table.best_online().cost
    assert all(default.cost < table.row(name).cost for name in ("5m", *FIXED_PINGS))


def test_every_reference_row_is_there_and_costs_are_prompt_costs(generated: PolicyTable) -> None:
    names = [r.policy for r in generated.rows]
    assert set(REFERENCE_ROWS) <= set(names) and len(names) == len(set(names))
    assert [r.cost for r in generated.rows] == sorted(r.cost for r in generated.rows)
    five = generated.row("5m")
    # Output tokens are left out: the same under every policy.
    trace = generate_sessions(GENERATED, seed=1)
    result = replay(trace, policies.five_minutes())
    assert five.cost + generated.output_cost == pytest.approx(result.total_cost)
    outputs = sum(r.output_tokens for r in trace.requests)
    assert generated.output_cost == pytest.approx(outputs * price(result.model).output / 1e6)
    assert generated.output_cost > 0


@pytest.mark.clause("SG-KEEP-4")
def test_the_default_policy_is_the_cheapest_online_one_on_a_generated_trace() -> None:
    _check_default_wins(compare_held_back(generate_sessions(30, seed=1)))


@pytest.mark.clause("SG-KEEP-4")
def test_the_default_policy_is_the_cheapest_online_one_on_the_mooncake_first_half() -> None:
    if not FIRST_HALF.exists():
        pytest.skip(f"the Mooncake trace is not at {FIRST_HALF} (../shared/data/mooncake)")
    _check_default_wins(compare_held_back(load_trace(FIRST_HALF, "mooncake")))


@pytest.mark.clause("SG-KEEP-3")
def test_blind_pings_cost_more_the_more_often_they_go(generated: PolicyTable) -> None:
    trace = generate_sessions(GENERATED, seed=1)
    rows = sweep_intervals(
        trace,
        "5m",
        intervals=(60.0, 120.0, 240.0, 295.0),
        optimum_cost=generated.row("optimum").cost,
    )
    costs = [r.cost for r in rows]
    assert costs == sorted(costs, reverse=True) and len(set(costs)) == 4
    assert [r.pings for r in rows] == sorted((r.pings for r in rows), reverse=True)


def test_policy_names_must_be_unique() -> None:
    trace = generate_sessions(2, seed=1)
    with pytest.raises(ValueError, match="unique"):
        compare_policies(trace, [policies.five_minutes(), policies.five_minutes()])


def test_the_csv_has_one_row_per_policy(generated: PolicyTable, tmp_path: Path) -> None:
    path = write_csv(list(generated.rows), tmp_path / "out" / "policies.csv")
    with path.open() as handle:
        rows = list(csv.DictReader(handle))
    assert [r["policy"] for r in rows] == [r.policy for r in generated.rows]
    assert {r["online"] for r in rows} == {"true", "false"}
    assert float(rows[0]["cost"]) == pytest.approx(generated.rows[0].cost)


def test_compare_held_back_fits_on_the_first_part_and_prices_the_rest() -> None:
    """The learning policies fit on the sessions that start first and every row is priced on
    the part held back: the learned row is what the policy fitted on the first part costs
    there, not what one fitted on the held-back part itself would."""
    trace = generate_sessions(8, seed=3)
    fit, held = trace.split(0.5)
    table = compare_held_back(trace, policies=[policies.Learned(), policies.five_minutes()])
    assert (table.part, table.trace, table.requests) == (
        "held_back",
        held.name,
        len(held.requests),
    )
    assert table.fitted_sessions == len(fit.sessions())
    expected = prompt_cost(replay(held, policies.Learned().fit(fit)))
    leaked = prompt_cost(replay(held, policies.Learned().fit(held)))
    assert expected != pytest.approx(leaked)
    assert table.row("learned").cost == pytest.approx(expected, rel=1e-12)
