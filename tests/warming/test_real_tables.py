"""The policy table on every committed real fixture is sane: the lower bound is below every
row, the optimum row is below every policy or the table says which policies beat it and
why (its caveats), and the CLI prints what each yardstick is."""

from __future__ import annotations

from pathlib import Path

import pytest
from sessiongen.warming.study.report import COST_TOLERANCE, PolicyTable, compare_policies
from sessiongen.warming.traces.formats import load_trace

REAL = Path(__file__).parent / "fixtures" / "real"
FIXTURES = sorted(
    [p for p in (REAL / "claude-code").iterdir() if p.is_dir()]
    + [p for p in (REAL / "opencode").iterdir() if p.is_dir()]
)


def table_of(path: Path) -> PolicyTable:
    return compare_policies(load_trace(path, path.parent.name))  # type: ignore[arg-type]


def test_every_real_fixture_is_here() -> None:
    assert len(FIXTURES) == 8


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_the_policy_table_is_sane(path: Path) -> None:
    table = table_of(path)
    bound = table.row("lower_bound")
    optimum = table.row("optimum")
    assert optimum.ratio_to_optimum == 1.0
    assert 0 < bound.ratio_to_optimum <= 1.0
    for row in table.rows:
        assert row.cost >= bound.cost - COST_TOLERANCE, row.policy
    below = table.below_optimum()
    # A policy below the optimum row is possible only when the plan is caveated, and is named.
    assert not below or table.optimum.caveats
    caveat = [line for line in table.yardsticks() if line.startswith("caveat:")]
    assert bool(caveat) == bool(below)
    for row in below:
        assert row.policy in caveat[0]


def test_the_reported_log_has_a_real_optimum() -> None:
    """The issue's log: its prefixes cached before the log made every policy cheaper than
    an optimum planned without them (5m at ratio 0.396) and than the lower bound. Planned
    with them, the optimum is the 5m schedule's cost and no policy is below it."""
    table = table_of(REAL / "claude-code" / "v2.1-subagents-dir")
    assert table.prepared is not None and table.prepared.trace.warm
    assert table.below_optimum() == ()
    assert table.best_online().ratio_to_optimum == pytest.approx(1.0)
    assert table.row("lower_bound").ratio_to_optimum < 1.0
