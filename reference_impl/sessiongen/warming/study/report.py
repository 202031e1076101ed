"""The warming experiment: every policy replayed over one trace and priced against the
offline optimum, ping-interval sweeps, and the reuse gaps. The CLI (`sessiongen experiment
warming`) and notebook 03 both call these functions, so their tables are the same numbers.

Rows are plain dataclasses: `pandas.DataFrame(rows)` reads them as they are, and `write_csv`
needs nothing but the standard library.

Costs are prompt costs: input, cache writes and cache reads, requests and pings together.
Output tokens cost the same under every policy (a ping has none), so they are left out of
`cost` and of every ratio, which would otherwise shrink towards 1 with the output's share;
`PolicyTable.output_cost` says what they add.
"""

from __future__ import annotations

import csv
import dataclasses
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...cache import TTL, TTL_SECONDS
from ..policies import (
    DEFAULT_MODEL,
    DEFAULT_POLICY,
    PING_MARGIN,
    AsRecorded,
    Fixed,
    Policy,
    reference_policies,
)
from ..policies.trace_replay import PreparedTrace, ReplayResult, priced_model
from ..traces import Trace
from .calibration import Calibration, calibrate, has_recorded_usage
from .offline_optimum import Optimum, lower_bound, optimum
from .shards import replay_policies

REFERENCE_ROWS = ("no_cache", "5m", "1h", "optimum", "lower_bound")
COST_TOLERANCE = 1e-9
"""USD below which two costs are the same (float sums of the same tokens in another order)."""
"""Rows every policy table has: the three fixed TTL choices and the two yardsticks."""


@dataclass(frozen=True)
class PolicyRow:
    """One policy's prompt cost (USD) on one trace; `ratio_to_optimum` is cost / the
    optimum's. The `real_` columns are what the provider billed for the same requests, on
    the `as_recorded` row of a trace that carries recorded usage, and None elsewhere."""

    policy: str
    online: bool
    cost: float
    ratio_to_optimum: float
    pings: int
    cache_read_tokens: int
    cache_write_tokens: int
    input_tokens: int
    real_cost: float | None = None
    real_cache_read_tokens: int | None = None
    real_cache_write_tokens: int | None = None
    part: str = "whole"
    """Which part of the trace the row is priced on: `held_back` (the learning policies
    were fitted on the part before it) or `whole`."""
    default: bool = False
    """Whether this is the keeper's default policy (`DEFAULT_POLICY`)."""


PARTS = ("whole", "held_back")


@dataclass(frozen=True)
class PolicyTable:
    """`compare_policies`' answer: one row per policy plus the two yardsticks, cheapest
    first, and the optimum itself (its schedule can be replayed as a policy)."""

    trace: str
    requests: int
    sessions: int
    model: str
    rows: tuple[PolicyRow, ...]
    optimum: Optimum
    output_cost: float
    """USD of the trace's output tokens, the same under every policy."""
    calibration: Calibration | None = None
    """The `as_recorded` replay beside the real usage, for a trace that carries it."""
    output_unknown: int = 0
    """Requests whose output count is not known (a placeholder in the log): then
    `output_cost` is not what their output cost."""
    part: str = "whole"
    """The part of the trace every row is priced on (`PolicyRow.part`)."""
    fitted_sessions: int = 0
    """Sessions the learning policies were fitted on before the priced part (0: none)."""
    prepared: PreparedTrace | None = dataclasses.field(default=None, repr=False, compare=False)
    """The prepared trace (the priced part) the rows come from, for more replays on it."""
    as_recorded: Calibration | None = None
    """The `as_recorded` row's own calibration: the priced part only (its sessions, its real
    usage), where `calibration` may cover the whole trace (`run_warming_experiment`)."""

    def models(self) -> tuple[tuple[str, int], ...]:
        """The catalog models the priced part's requests are priced at, with their request
        counts, most requests first; empty when no request names its model (all at
        `model`)."""
        if self.prepared is None or all(r.model is None for r in self.prepared.trace.requests):
            return ()
        counts: dict[str, int] = {}
        for request in self.prepared.trace.requests:
            name = priced_model(request.model, self.model)[0]
            counts[name] = counts.get(name, 0) + 1
        return tuple(sorted(counts.items(), key=lambda item: (-item[1], item[0])))

    def row(self, policy: str) -> PolicyRow:
        """The row named `policy` (KeyError naming the rows there are)."""
        for row in self.rows:
            if row.policy == policy:
                return row
        raise KeyError(f"no row {policy!r}; rows: {', '.join(r.policy for r in self.rows)}")

    def best_online(self) -> PolicyRow:
        """The cheapest online policy: one a live client could run."""
        return min((r for r in self.rows if r.online), key=lambda r: r.cost)

    def default_row(self) -> PolicyRow | None:
        """The keeper's default policy's row, if the table has one."""
        return next((r for r in self.rows if r.default), None)

    def below_optimum(self) -> tuple[PolicyRow, ...]:
        """Policy rows that cost less than the optimum row (ratio below 1): possible only
        when the optimum was planned in a simpler model than the replay (`Optimum.caveats`)."""
        floor = self.row("optimum").cost
        return tuple(
            r
            for r in self.rows
            if r.policy not in ("optimum", "lower_bound") and r.cost < floor - COST_TOLERANCE
        )

    def yardsticks(self) -> tuple[str, ...]:
        """What the optimum and lower_bound rows are on this table, a line each, and a
        caveat line naming any policy that costs less than the optimum row."""
        caveats = self.optimum.caveats
        if caveats:
            optimum = (
                "optimum (ratio 1): the cheapest schedule knowing every request, planned with "
                + "; ".join(caveats)
                + "; replayed as the client runs, so a schedule, not a proven floor"
            )
        else:
            optimum = (
                "optimum (ratio 1): the cheapest schedule knowing every request; no policy "
                "costs less"
            )
        bound = self.row("lower_bound").ratio_to_optimum
        lines = [
            optimum,
            f"lower_bound (ratio {bound:.3f}): a per-block relaxation no schedule costs less than",
        ]
        below = self.below_optimum()
        if below:
            lines.append(
                f"caveat: {', '.join(r.policy for r in below)} cost less than the optimum "
                "row (ratio below 1), which is therefore not the best schedule here; "
                "lower_bound is the floor"
            )
        return tuple(lines)


def prompt_cost(result: ReplayResult) -> float:
    """A replay's cost without its output tokens (USD)."""
    return result.total_cost - result.cost.output


def _row(result: ReplayResult, online: bool, best: float) -> PolicyRow:
    t = result.tokens
    cost = prompt_cost(result)
    return PolicyRow(
        policy=result.policy,
        online=online,
        cost=cost,
        ratio_to_optimum=cost / best,
        pings=result.pings,
        cache_read_tokens=t.cache_read,
        cache_write_tokens=t.cache_write_5m + t.cache_write_1h,
        input_tokens=t.input,
    )


Progress = Callable[[str], None]
"""Called with a step's name before the step runs (a policy's name, "optimum", ...)."""


def compare_policies(
    trace: Trace | PreparedTrace,
    policies: Sequence[Policy] | None = None,
    *,
    model: str = DEFAULT_MODEL,
    progress: Progress | None = None,
    part: str = "whole",
    fitted_sessions: int = 0,
    executor: Executor | None = None,
) -> PolicyTable:
    """Replay every policy (default: `reference_policies`) over `trace` and price each
    against the offline optimum; add the optimum and the lower bound as rows. A trace that
    carries recorded usage also gets the `as_recorded` row (by default, or when an
    `AsRecorded` policy is given) with its `real_` columns, and the table its calibration.
    `part` names the part of a split trace `trace` is (`PARTS`), and `fitted_sessions` how
    many sessions before it the learning policies were fitted on (`fit_policies`). The
    policies replay as tasks of `executor` (`warming.study.shards.replay_policies`)."""
    if part not in PARTS:
        raise ValueError(f"part must be one of {PARTS}, got {part!r}")
    prepared = PreparedTrace.of(trace)
    recorded = has_recorded_usage(prepared.trace)
    chosen = list(policies) if policies is not None else reference_policies(model)
    if policies is None and recorded:
        chosen.append(AsRecorded())
    names = [p.name for p in chosen]
    clash = {n for n in names if names.count(n) > 1 or n in ("optimum", "lower_bound")}
    if clash:
        raise ValueError(f"policy names must be unique and not a yardstick's: {sorted(clash)}")
    step = progress or (lambda _: None)
    step("optimum")
    best = optimum(prepared, model=model)
    step("lower_bound")
    bound = lower_bound(prepared, model=model)
    output = best.result.cost.output
    floor = prompt_cost(best.result)
    rows: list[PolicyRow] = []
    calibration = None
    # One pass over every policy, in parallel; the steps below then name finished replays.
    others = [p for p in chosen if not (isinstance(p, AsRecorded) and recorded)]
    replayed = iter(replay_policies(prepared, others, model=model, executor=executor))
    for policy in chosen:
        step(policy.name)
        if isinstance(policy, AsRecorded) and recorded:
            calibration = calibrate(prepared, model=model)  # its replay is the row's
            t = calibration.total
            row = dataclasses.replace(
                _row(calibration.result, policy.online, floor),
                real_cost=t.real_cost,
                real_cache_read_tokens=t.real_cache_read_tokens,
                real_cache_write_tokens=t.real_cache_write_tokens,
            )
        else:
            row = _row(next(replayed), policy.online, floor)
        rows.append(row)
    rows.append(dataclasses.replace(_row(best.result, False, floor), policy="optimum"))
    rows.append(
        PolicyRow("lower_bound", False, bound - output, (bound - output) / floor, 0, 0, 0, 0)
    )
    rows = [dataclasses.replace(r, part=part, default=r.policy == DEFAULT_POLICY) for r in rows]
    rows.sort(key=lambda r: r.cost)
    sessions = len({r.session for r in prepared.trace.requests})
    return PolicyTable(
        prepared.trace.name,
        len(prepared.trace.requests),
        sessions,
        best.result.model,
        tuple(rows),
        best,
        output,
        calibration,
        sum(1 for r in prepared.trace.requests if not r.output_known),
        part,
        fitted_sessions,
        prepared,
        calibration,
    )


def compare_held_back(
    trace: Trace,
    *,
    fit_fraction: float = 0.5,
    policies: Sequence[Policy] | None = None,
    model: str = DEFAULT_MODEL,
    progress: Progress | None = None,
    executor: Executor | None = None,
) -> PolicyTable:
    """`compare_policies` on the part of `trace` held back from fitting: the learning
    policies (default: `reference_policies`, plus `as_recorded` where the trace has recorded
    usage) fit on the sessions that start first, holding `fit_fraction` of the requests
    (`Trace.split`); every policy is priced on the rest. `fit_fraction` 0: the whole trace,
    nothing fitted. `progress` is told `FIT_STEP` before the fitting."""
    chosen = list(policies) if policies is not None else reference_policies(model)
    if policies is None and has_recorded_usage(trace):
        chosen.append(AsRecorded())
    if fit_fraction == 0:
        return compare_policies(trace, chosen, model=model, progress=progress, executor=executor)
    (progress or (lambda _: None))(FIT_STEP)
    fit, held = trace.split(fit_fraction)
    fit_policies(chosen, fit)
    return compare_policies(
        held,
        chosen,
        model=model,
        progress=progress,
        executor=executor,
        part="held_back",
        fitted_sessions=len({r.session for r in fit.requests}),
    )


FIT_STEP = "fitting the learning policies"
"""The progress step `compare_held_back` names before it fits."""


def fit_policies(policies: Sequence[Policy], trace: Trace) -> list[Policy]:
    """Fit every policy that learns (has `fit`) on `trace`, in place; returns the policies.
    A trace without requests fits nothing."""
    for policy in policies:
        fit = getattr(policy, "fit", None)
        if fit is not None and trace.requests:
            fit(trace)
    return list(policies)


@dataclass(frozen=True)
class IntervalRow:
    """Fixed-interval pings: the TTL, the interval, how long after each request pings go
    on, and the cost."""

    ttl: TTL
    interval: float
    horizon: float
    cost: float
    """Prompt cost (USD), as in `PolicyRow`."""
    ratio_to_optimum: float
    pings: int


def interval_policy(ttl: TTL, interval: float, horizon: float) -> Fixed:
    """Pings every `interval` seconds after each request while before `horizon` (a ping
    after the entry has expired is not sent: the client's bookkeeping drops it)."""
    if not 0 < interval:
        raise ValueError(f"the interval must be positive, got {interval!r}")
    offsets: list[float] = []
    k = 1
    while interval * k < horizon:
        offsets.append(interval * k)
        k += 1
    return Fixed(f"{ttl}_every_{interval:g}s", ttl, offsets)


def default_intervals(ttl: TTL) -> tuple[float, ...]:
    """The sweep's grid: from a twentieth of the TTL up to just past it."""
    life = TTL_SECONDS[ttl]
    grid = [life * f for f in (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)]
    return (*grid, life - PING_MARGIN, life + 60.0)


def sweep_intervals(
    trace: Trace | PreparedTrace,
    ttl: TTL,
    *,
    intervals: Iterable[float] | None = None,
    horizon: float = 1800.0,
    optimum_cost: float | None = None,
    model: str = DEFAULT_MODEL,
    progress: Progress | None = None,
    executor: Executor | None = None,
) -> list[IntervalRow]:
    """Cost against the ping interval for one TTL, pings going on for `horizon` seconds
    after each request. `optimum_cost` (else computed) is the ratios' denominator: a prompt
    cost, like `PolicyTable.row("optimum").cost`. The policies replay as tasks of `executor`."""
    grid = tuple(intervals) if intervals is not None else None
    return sweep_interval_grid(
        trace,
        [(ttl, horizon, grid)],
        optimum_cost=optimum_cost,
        model=model,
        progress=progress,
        executor=executor,
    )


def sweep_interval_grid(
    trace: Trace | PreparedTrace,
    sweeps: Iterable[tuple[TTL, float, Iterable[float] | None]],
    *,
    optimum_cost: float | None = None,
    model: str = DEFAULT_MODEL,
    progress: Progress | None = None,
    executor: Executor | None = None,
) -> list[IntervalRow]:
    """`sweep_intervals` for several (TTL, horizon, intervals or None for the default grid)
    at once, in that order: one preparation and one `replay_policies` pass, so every
    interval policy of every TTL is a task of the same `executor`."""
    prepared = PreparedTrace.of(trace)
    best = (
        optimum_cost
        if optimum_cost is not None
        else prompt_cost(optimum(prepared, model=model).result)
    )
    grid = [
        (ttl, interval, horizon)
        for ttl, horizon, intervals in sweeps
        for interval in (intervals if intervals is not None else default_intervals(ttl))
    ]
    chosen = [interval_policy(ttl, interval, horizon) for ttl, interval, horizon in grid]
    results = replay_policies(prepared, chosen, model=model, executor=executor)
    rows = []
    for (ttl, interval, horizon), policy, result in zip(grid, chosen, results, strict=True):
        if progress:
            progress(policy.name)
        cost = prompt_cost(result)
        rows.append(IntervalRow(ttl, interval, horizon, cost, cost / best, result.pings))
    return rows


def reuse_gaps(trace: Trace) -> list[float]:
    """The seconds from each request to its session's next one, sorted (a session's last
    request has none): the gaps a cached prefix must outlive to be read again."""
    return sorted(g for g in trace.reuse_gaps() if g is not None)


def write_csv(rows: Sequence[Any], path: Path) -> Path:
    """Rows (this module's dataclasses, all of one kind) as CSV with a header; booleans are
    written `true`/`false`."""
    if not rows:
        raise ValueError("no rows to write")
    fields = [f.name for f in dataclasses.fields(rows[0])]
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(fields)
        for row in rows:
            values = dataclasses.astuple(row)
            writer.writerow([str(v).lower() if isinstance(v, bool) else v for v in values])
            # None is written as an empty field (csv's own rule): "not applicable here".
    return path
