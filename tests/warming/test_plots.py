"""The plots show the differences that matter: what `cost_by_policy` draws, read back from
the matplotlib figure it returns."""

from __future__ import annotations

import pytest

pytest.importorskip("matplotlib")

from matplotlib.patches import Rectangle
from sessiongen.warming.study import plots
from sessiongen.warming.study.report import PolicyRow


def _row(policy: str, ratio: float, online: bool = True) -> PolicyRow:
    return PolicyRow(policy, online, ratio, ratio, 0, 0, 0, 0)


ROWS = [
    _row("optimum", 1.0, online=False),
    _row("lower_bound", 0.997, online=False),
    _row("5m", 1.067),
    _row("ski_rental_5m", 1.45),
    _row("no_cache", 6.566),
]


def test_a_bar_that_dwarfs_the_rest_is_cut_and_says_so() -> None:
    figure = plots.cost_by_policy(ROWS)
    axes = figure.axes[0]
    left, right = axes.get_xlim()
    assert 0.5 < left < 0.997  # starts near the cheapest ratio, not at 0
    assert right < 2.5  # no_cache (6.6) does not set the scale
    labels = {t.get_text(): t for t in axes.texts}
    assert "6.566 (cut: off the scale)" in labels and "1.450" in labels
    bars = [p for p in axes.patches if isinstance(p, Rectangle)]
    ends = sorted(bar.get_x() + bar.get_width() for bar in bars)
    assert ends[-1] == pytest.approx(1.45 * 1.25)  # cut at 1.25 times the next
    assert "the axis starts at" in axes.get_xlabel()


def test_no_label_sits_on_the_optimums_line() -> None:
    """The lower bound's bar ends just left of 1; its label starts right of the line."""
    axes = plots.cost_by_policy(ROWS).axes[0]
    anchors = {t.get_text(): t.xy[0] for t in axes.texts}  # type: ignore[attr-defined]
    assert anchors["0.997"] >= 1.0
    assert all(x >= 1.0 for x in anchors.values())


def test_without_an_outlier_nothing_is_cut() -> None:
    axes = plots.cost_by_policy(ROWS[:4]).axes[0]
    assert not any("cut" in t.get_text() for t in axes.texts)
    assert axes.get_xlim()[1] > 1.45


def test_the_fingerprint_changes_with_the_numbers_not_with_drawing() -> None:
    """Notebooks print it beside each figure so nbval, which skips PNGs, compares it: the
    same rows give the same digest (drawn or not), one cost moved gives another, as does
    another title."""
    import dataclasses
    import io

    rows = ROWS
    figure = plots.cost_by_policy(rows, title="t")
    before = plots.fingerprint(figure)
    figure.savefig(io.BytesIO(), format="png")
    assert (
        plots.fingerprint(figure)
        == before
        == plots.fingerprint(plots.cost_by_policy(rows, title="t"))
    )
    moved = [*rows[:2], dataclasses.replace(rows[2], ratio_to_optimum=1.08), *rows[3:]]
    assert plots.fingerprint(plots.cost_by_policy(moved, title="t")) != before
    assert plots.fingerprint(plots.cost_by_policy(rows, title="u")) != before
