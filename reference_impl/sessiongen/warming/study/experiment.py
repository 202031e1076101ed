"""The warming experiment end to end, for one trace: every policy against the optimum, the two
ping-interval sweeps, the reuse gaps, written as two CSV tables and three PNG figures; and for
a trace that carries the provider's recorded usage, the calibration (the `as_recorded` replay
beside the real usage) as a third table and a fourth figure.

`sessiongen experiment warming` is a thin shell over `run_warming_experiment`: the numbers come
from `warming.study.report` and the figures from `warming.study.plots`, so a notebook calling either gets
the same ones. Costs are prompt costs (output tokens excluded; see `warming.study.report`).
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, replace
from pathlib import Path

from ...cache import TTL, get_model
from ..policies import (
    DEFAULT_MODEL,
    DEFAULT_POLICY,
    Learned,
    Tracking,
    reference_policies,
    saved,
)
from ..traces import Trace
from . import plots
from .calibration import calibrate, has_recorded_usage
from .report import (
    IntervalRow,
    PolicyTable,
    Progress,
    compare_held_back,
    default_intervals,
    reuse_gaps,
    sweep_interval_grid,
    write_csv,
)

Sweep = tuple[TTL, float, tuple[float, ...] | None]
"""One interval sweep: the TTL, how long (seconds) pings go on after each request, and the
intervals (seconds; None: `report.default_intervals` of the TTL)."""

HORIZONS: dict[TTL, float] = {"5m": 1800.0, "1h": 7200.0}
"""How long pings go on after a request in each TTL's default sweep."""

SWEEPS: tuple[Sweep, ...] = tuple((ttl, horizon, None) for ttl, horizon in HORIZONS.items())
"""The default interval sweeps: both TTLs, their default horizons and grids."""

POLICIES_CSV = "policies.csv"
INTERVALS_CSV = "intervals.csv"
COST_BY_POLICY_PNG = "cost_by_policy.png"
REUSE_GAP_CDF_PNG = "reuse_gap_cdf.png"
COST_VS_INTERVAL_PNG = "cost_vs_interval.png"
CALIBRATION_CSV = "calibration.csv"
CALIBRATION_PNG = "calibration.png"
WRITE_STEP = "writing tables and plots"


@dataclass(frozen=True)
class ExperimentResult:
    """What `run_warming_experiment` computed and where it wrote it."""

    table: PolicyTable
    intervals: tuple[IntervalRow, ...]
    policies_csv: Path
    intervals_csv: Path
    cost_by_policy_png: Path
    reuse_gap_cdf_png: Path
    cost_vs_interval_png: Path
    calibration_csv: Path | None = None
    """Per recorded request, real and predicted usage; None without recorded usage."""
    calibration_png: Path | None = None

    @property
    def paths(self) -> tuple[Path, ...]:
        """Every file written, tables first."""
        tables = (self.policies_csv, self.intervals_csv, self.calibration_csv)
        figures = (
            self.cost_by_policy_png,
            self.reuse_gap_cdf_png,
            self.cost_vs_interval_png,
            self.calibration_png,
        )
        return tuple(p for p in (*tables, *figures) if p is not None)


FIT_FRACTION = 0.5
"""The default share of a trace's requests (whole sessions, in time order) the learning
policies are fitted on; the table prices every policy on the rest."""


def experiment_steps(
    trace: Trace | None = None,
    model: str | None = None,
    fit_fraction: float = FIT_FRACTION,
    sweeps: Sequence[Sweep] = SWEEPS,
) -> int:
    """How many times `run_warming_experiment` calls `progress` on `trace`: the fitting, the
    optimum, the lower bound, each policy (`as_recorded` too where the trace has recorded
    usage), each sweep point and the writing; a progress bar's total."""
    model = model or DEFAULT_MODEL
    points = sum(len(grid or default_intervals(ttl)) for ttl, _, grid in sweeps)
    recorded = trace is not None and has_recorded_usage(trace)
    fitting = int(fit_fraction > 0)
    return fitting + 2 + len(reference_policies(model)) + int(recorded) + points + 1


def at_model(trace: Trace) -> Trace:
    """`trace` with no request naming its model, so that a replay's `model` prices them all."""
    plain = tuple(replace(r, model=None) for r in trace.requests)
    return Trace(trace.name, plain, trace.warm)


def run_warming_experiment(
    trace: Trace,
    out_dir: str | Path,
    *,
    fit_fraction: float = FIT_FRACTION,
    save_policy: str | Path | None = None,
    progress: Progress | None = None,
    executor: Executor | None = None,
    model: str | None = None,
    sweeps: Sequence[Sweep] = SWEEPS,
) -> ExperimentResult:
    """Fit the learning policies on the first `fit_fraction` of `trace` (whole sessions in
    time order, `Trace.split`), compare every reference policy on the part held back, sweep
    ping intervals for 5m and 1h on it, and write `policies.csv`, `intervals.csv` and the
    three PNGs into `out_dir` (created if missing); with recorded usage also
    `calibration.csv` and `calibration.png` (on the whole trace: calibration fits nothing).
    `fit_fraction` 0 prices the whole trace with unfitted policies. `save_policy` writes the
    default policy there, fitted on the whole trace (`warming.policies.saved`): the held-back figures
    say how well fitting does on data it has not seen. `progress` is called with each step's
    name before it runs. The replays are tasks of `executor` (`warming.study.shards.replay_policies`).
    `model` (a catalog id) prices every request at that model, whatever model the log names
    (default: each request at its own, `DEFAULT_MODEL` where it names none); to change a
    model's prices, run inside `cache.pricing.override_price`. `sweeps` are the interval
    sweeps (`Sweep`: TTL, horizon, intervals or None for the default grid).

    Raises ValueError for a trace without requests or prompt tokens (no ratio to the optimum
    exists) or a fraction outside [0, 1), PlotsUnavailable without matplotlib and OSError
    when `out_dir` cannot be made; all before the slow part, so a mistake costs no wait.
    """
    if not trace.requests:
        raise ValueError(f"the trace {trace.name!r} has no requests: nothing to compare")
    if not any(r.input_tokens for r in trace.requests):
        raise ValueError(f"the trace {trace.name!r} has no prompt tokens: nothing to cache")
    if not 0.0 <= fit_fraction < 1.0:
        raise ValueError(f"the fit fraction must be at least 0 and below 1, got {fit_fraction!r}")
    if not sweeps:
        raise ValueError("at least one interval sweep is needed")
    for ttl, horizon, grid in sweeps:
        if not horizon > 0:
            raise ValueError(f"the {ttl} sweep's horizon must be positive, got {horizon!r}")
        if grid is not None and not (grid and all(i > 0 for i in grid)):
            raise ValueError(f"the {ttl} sweep's intervals must be positive, got {grid!r}")
    if model is not None:
        get_model(model)  # UnknownModel before the slow part
        trace = at_model(trace)
    plots.require_matplotlib()
    out = Path(out_dir).expanduser()
    blocking = next((p for p in (out, *out.parents) if p.exists() and not p.is_dir()), None)
    if blocking is not None:  # mkdir would say only "File exists" or "Not a directory"
        raise NotADirectoryError(
            f"{out} cannot be the output directory: {blocking} is a file (the tables and "
            "plots are written into a directory)"
        )
    out.mkdir(parents=True, exist_ok=True)
    step = progress or (lambda _: None)

    priced = model or DEFAULT_MODEL
    if save_policy is not None:  # fitted on the whole trace: the held-back part is evidence too
        default = next(p for p in reference_policies(priced) if p.name == DEFAULT_POLICY)
        assert isinstance(default, Tracking | Learned)
        saved.save_policy(default.fit(trace), save_policy)
    table = compare_held_back(
        trace, fit_fraction=fit_fraction, progress=step, executor=executor, model=priced
    )
    if table.part != "whole" and table.calibration is not None:
        table = replace(table, calibration=calibrate(trace, model=priced))  # fits nothing
    prepared = table.prepared  # once: the policies, the optimum and the sweeps share it
    assert prepared is not None
    best = table.row("optimum").cost
    intervals = tuple(  # every TTL in one pass
        sweep_interval_grid(
            prepared, sweeps, optimum_cost=best, progress=step, executor=executor, model=priced
        )
    )

    step(WRITE_STEP)
    name = f"{table.trace}: {table.requests:,} requests, {table.sessions:,} sessions"
    figures = {
        COST_BY_POLICY_PNG: plots.cost_by_policy(table.rows, title=f"Warming policies, {name}"),
        REUSE_GAP_CDF_PNG: plots.reuse_gap_cdf(
            reuse_gaps(prepared.trace), title=f"Reuse gaps, {name}"
        ),
        COST_VS_INTERVAL_PNG: plots.cost_vs_interval(
            intervals,
            references={
                f"{ttl}, no pings": table.row(ttl).ratio_to_optimum
                for ttl in dict.fromkeys(ttl for ttl, _, _ in sweeps)
            },
            title=f"Fixed-interval pings, {name}",
        ),
    }
    calibration_csv = calibration_png = None
    if table.calibration is not None:
        # The calibration covers the whole trace (it fits nothing), not the priced part.
        recorded = table.calibration.total.requests
        figures[CALIBRATION_PNG] = plots.calibration(
            table.calibration.rows,
            title=f"Predicted against real usage, {trace.name}: {recorded:,} requests with "
            f"recorded usage of {len(trace.requests):,}",
        )
        calibration_csv = write_csv(table.calibration.rows, out / CALIBRATION_CSV)
        calibration_png = out / CALIBRATION_PNG
    for filename, figure in figures.items():
        figure.savefig(out / filename, dpi=110)
    return ExperimentResult(
        table=table,
        intervals=intervals,
        policies_csv=write_csv(table.rows, out / POLICIES_CSV),
        intervals_csv=write_csv(intervals, out / INTERVALS_CSV),
        cost_by_policy_png=out / COST_BY_POLICY_PNG,
        reuse_gap_cdf_png=out / REUSE_GAP_CDF_PNG,
        cost_vs_interval_png=out / COST_VS_INTERVAL_PNG,
        calibration_csv=calibration_csv,
        calibration_png=calibration_png,
    )
