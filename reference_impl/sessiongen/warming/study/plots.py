"""The warming experiment's figures, drawn from `warming.study.report`'s rows so the CLI (`sessiongen
experiment warming`) and the notebooks show the same numbers.

Each function returns a `matplotlib.figure.Figure` on the Agg canvas: no pyplot, so no global
figure state, no GUI backend and nothing to close; save with `figure.savefig(path)`, or let
Jupyter display it. matplotlib is an optional dependency (`sessiongen[experiments]`), imported
when a figure is made, so the package works without it.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ...cache import TTL_SECONDS
from .calibration import CalibrationRow
from .report import IntervalRow, PolicyRow

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

INSTALL_HINT = "install sessiongen[experiments] (matplotlib) to draw the plots"

ONLINE_COLOUR = "tab:blue"
OFFLINE_COLOUR = "tab:orange"
TTL_COLOURS = {"5m": "tab:blue", "1h": "tab:green"}
GAP_FLOOR = 0.01
"""Seconds: shorter reuse gaps (0 included) are drawn at this floor, a log axis has no 0."""
_SECOND_TICKS = (0.01, 0.1, 1, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400)


class PlotsUnavailable(ImportError):
    """matplotlib is not installed; the message says what to install."""


def require_matplotlib() -> None:
    """Raise PlotsUnavailable unless matplotlib imports: callers check before a long run."""
    try:
        # optional extra: matplotlib is imported only when it is used
        import matplotlib  # noqa: F401
    except ImportError as exc:
        raise PlotsUnavailable(INSTALL_HINT) from exc


def _figure(width: float, height: float) -> tuple[Figure, Axes]:
    """A figure on its own Agg canvas (PNG rendering without pyplot or a display)."""
    require_matplotlib()
    # optional extra: matplotlib is imported only when it is used
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(figure)
    return figure, figure.add_subplot()


def _duration(seconds: float) -> str:
    """A tick label: 30 s, 5 min, 2 h, 1 d."""
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:g} {unit}"
    return f"{seconds:g} s"


def _seconds_axis(axes: Axes) -> None:
    """Label a log x axis of seconds in readable durations at round points, not 10^k."""
    # optional extra: matplotlib is imported only when it is used
    from matplotlib.ticker import NullFormatter

    low, high = axes.get_xlim()
    ticks = [t for t in _SECOND_TICKS if low <= t <= high]
    axes.set_xticks(ticks, labels=[_duration(t) for t in ticks])
    axes.xaxis.set_minor_formatter(NullFormatter())


def _ratio_window(ratios: Sequence[float]) -> tuple[float, float]:
    """Where the cost axis starts and where bars are cut: from a little below the cheapest
    ratio (not 0: the differences that matter are a few percent), and, when the dearest
    ratio is over 1.5 times the next (no caching at all), cut at 1.25 times the next so it
    does not squeeze every other bar into a sliver."""
    top = sorted(ratios, reverse=True)
    cap = top[0]
    if len(top) > 1 and top[0] > 1.5 * top[1]:
        cap = max(top[1] * 1.25, 1.1)
    low = min(min(ratios), 1.0)
    left = max(0.0, math.floor((low - 0.25 * (cap - low)) * 20) / 20)
    return left, cap


def cost_by_policy(rows: Sequence[PolicyRow], *, title: str | None = None) -> Figure:
    """Horizontal bars of each policy's cost as a ratio to the optimum, cheapest on top,
    online policies and offline yardsticks in two colours, a line at 1 (the optimum)."""
    if not rows:
        raise ValueError("no policy rows to draw")
    # optional extra: matplotlib is imported only when it is used
    from matplotlib.patches import Patch

    ordered = sorted(rows, key=lambda r: r.ratio_to_optimum, reverse=True)
    ratios = [r.ratio_to_optimum for r in ordered]
    left, cap = _ratio_window(ratios)
    figure, axes = _figure(8.0, 0.32 * len(ordered) + 1.6)
    positions = range(len(ordered))
    axes.barh(
        positions,
        [min(ratio, cap) - left for ratio in ratios],
        left=left,
        color=[ONLINE_COLOUR if r.online else OFFLINE_COLOUR for r in ordered],
    )
    for position, ratio in zip(positions, ratios, strict=True):
        # Right of the bar and of the optimum's line, so a bar ending near 1 (the lower
        # bound) keeps its label off the line; a bar past the window says it is cut.
        label = f"{ratio:.3f}" + (" (cut: off the scale)" if ratio > cap else "")
        axes.annotate(
            label,
            (max(min(ratio, cap), 1.0), position),
            xytext=(3, 0),
            textcoords="offset points",
            va="center",
        )
    axes.set_yticks(list(positions), labels=[r.policy for r in ordered])
    axes.axvline(1.0, color="black", linewidth=1.0, linestyle="--")
    axes.set_xlabel(f"prompt cost / the optimum's (the axis starts at {left:g})")
    axes.set_xlim(left, cap + (cap - left) * 0.3)
    axes.legend(
        handles=[
            Patch(color=ONLINE_COLOUR, label="online policy"),
            Patch(color=OFFLINE_COLOUR, label="offline yardstick"),
        ],
        loc="upper right",
    )
    axes.set_title(title or "Warming policies against the offline optimum")
    return figure


def reuse_gap_cdf(gaps: Sequence[float], *, title: str | None = None) -> Figure:
    """The empirical CDF of reuse gaps (`report.reuse_gaps`) on a log axis of seconds, with
    the 5m and 1h TTLs marked: the share of reuses each TTL reaches without a ping."""
    figure, axes = _figure(8.0, 4.5)
    axes.set_xscale("log")
    if gaps:
        xs = sorted(max(g, GAP_FLOOR) for g in gaps)
        ys = [(i + 1) / len(xs) for i in range(len(xs))]
        axes.step(xs, ys, where="post", color="tab:purple", label=f"{len(xs):,} reuse gaps")
        axes.legend(loc="upper left")
    else:
        axes.text(
            0.5, 0.5, "no session has a second request", transform=axes.transAxes, ha="center"
        )
        axes.set_xlim(1.0, 10_000.0)
    for ttl, seconds in TTL_SECONDS.items():
        axes.axvline(seconds, color=TTL_COLOURS.get(ttl, "grey"), linestyle="--", linewidth=1)
        axes.annotate(
            f"{ttl} TTL",
            (seconds, 0.02),
            xytext=(4, 0),
            textcoords="offset points",
            color=TTL_COLOURS.get(ttl, "grey"),
        )
    axes.set_ylim(0, 1.02)
    low, high = axes.get_xlim()
    axes.set_xlim(low, max(high, 2.5 * max(TTL_SECONDS.values())))  # room for the 1h label
    _seconds_axis(axes)
    axes.set_xlabel("time from a request to its session's next one (log scale)")
    axes.set_ylabel("share of reuses")
    axes.grid(True, which="major", alpha=0.3)
    axes.set_title(title or "Reuse gaps")
    return figure


def cost_vs_interval(
    rows: Sequence[IntervalRow],
    *,
    references: Mapping[str, float] | None = None,
    title: str | None = None,
) -> Figure:
    """Cost ratio to the optimum against the ping interval (log seconds), one line per TTL
    (`report.sweep_intervals` rows), and each of `references` (label: ratio, such as the
    plain 5m and 1h rows) as a dashed horizontal line in its TTL's colour."""
    if not rows:
        raise ValueError("no interval rows to draw")
    figure, axes = _figure(8.0, 4.5)
    axes.set_xscale("log")
    for ttl in dict.fromkeys(r.ttl for r in rows):
        line = sorted((r for r in rows if r.ttl == ttl), key=lambda r: r.interval)
        horizon = line[0].horizon
        axes.plot(
            [r.interval for r in line],
            [r.ratio_to_optimum for r in line],
            marker="o",
            color=TTL_COLOURS.get(ttl),
            label=f"{ttl}, pings for {horizon / 60:g} min after a request",
        )
    for label, ratio in (references or {}).items():
        colour = next((c for t, c in TTL_COLOURS.items() if label.startswith(t)), "grey")
        axes.axhline(ratio, color=colour, linestyle="--", linewidth=1, label=label)
    axes.axhline(1.0, color="black", linewidth=1, label="the optimum")
    _seconds_axis(axes)
    axes.set_xlabel("ping interval (log scale)")
    axes.set_ylabel("prompt cost / the optimum's")
    axes.grid(True, which="major", alpha=0.3)
    axes.legend(loc="best", fontsize="small")
    axes.set_title(title or "Fixed-interval pings")
    return figure


def calibration(rows: Sequence[CalibrationRow], *, title: str | None = None) -> Figure:
    """Predicted against real tokens per recorded request, cache reads and cache writes side
    by side, on symmetric log axes (a request that read or wrote nothing sits at 0) with the
    line of exact agreement; each title counts the requests within 1% of their prompt."""
    if not rows:
        raise ValueError("no calibration rows to draw")
    figure, single = _figure(9.0, 4.2)
    single.remove()
    left, right = figure.subplots(1, 2)
    panels = (
        (
            left,
            "cache reads",
            [(r.real_cache_read_tokens, r.predicted_cache_read_tokens) for r in rows],
        ),
        (
            right,
            "cache writes",
            [(r.real_cache_write_tokens, r.predicted_cache_write_tokens) for r in rows],
        ),
    )
    prompts = [r.prompt_tokens for r in rows]
    for axes, label, points in panels:
        real = [p[0] for p in points]
        predicted = [p[1] for p in points]
        top = max(1, *real, *predicted) * 1.5
        axes.plot([0, top], [0, top], color="grey", linestyle="--", linewidth=1, label="exact")
        axes.scatter(real, predicted, s=14, alpha=0.6, color=ONLINE_COLOUR, label="request")
        axes.set_xscale("symlog", linthresh=100)
        axes.set_yscale("symlog", linthresh=100)
        axes.set_xlim(0, top)
        axes.set_ylim(0, top)
        close = sum(1 for (r, p), n in zip(points, prompts, strict=True) if abs(p - r) <= n / 100)
        axes.set_title(f"{label}: {close} of {len(points)} within 1% of the prompt")
        axes.set_xlabel("real tokens (the provider's usage)")
        axes.set_ylabel("predicted tokens (replay as recorded)")
        axes.legend(loc="upper left")
    if title:
        figure.suptitle(title)
    return figure


def fingerprint(figure: Figure) -> str:
    """A short digest of what `figure` shows: each axes' title, labels, limits and scales,
    every line's, marker collection's and bar's data (to 6 significant digits) and every
    text. Printed beside a figure in a notebook, it is text the notebook tests compare (they
    skip the PNG itself), so a stored figure drawn from other numbers than the code now
    gives fails the tests."""
    # optional extra: numpy comes with matplotlib
    import numpy as np

    parts: list[str] = [figure.get_suptitle()]

    def numbers(values: Any) -> str:  # numpy arrays, tuples, lists of floats
        return ",".join(f"{float(v):.6g}" for v in np.ravel(np.asarray(values, dtype=float)))

    for axes in figure.axes:
        parts += [axes.get_title(), axes.get_xlabel(), axes.get_ylabel()]
        parts += [axes.get_xscale(), axes.get_yscale()]
        parts += [numbers(axes.get_xlim()), numbers(axes.get_ylim())]
        for line in axes.get_lines():
            parts += [str(line.get_label()), numbers(line.get_xdata()), numbers(line.get_ydata())]
        for collection in axes.collections:
            parts.append(numbers(collection.get_offsets()))
        for patch in axes.patches:  # bars: data coordinates, not the layout's pixels
            corner = getattr(patch, "get_xy", lambda: ())()
            size = (
                getattr(patch, "get_width", lambda: 0)(),
                getattr(patch, "get_height", lambda: 0)(),
            )
            parts.append(numbers([*corner, *size]))
        parts += [text.get_text() for text in axes.texts]
        parts += [numbers(axes.get_xticks()), numbers(axes.get_yticks())]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:12]
