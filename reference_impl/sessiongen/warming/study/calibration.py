"""Calibration: the replay of a trace as its client ran it, set beside what the provider
really billed, request by request.

A trace imported from agent logs can carry each request's real usage
(`TraceRequest.recorded`). `calibrate` replays such a trace under `AsRecorded` (the TTL the
usage shows, the client's own breakpoints) through the one cache model, and pairs each
predicted usage with the recorded one. How far the two agree says how far to trust the
policy table on this data, before trusting its ranking.

Errors are reported two ways: totals as predicted / real (1.0 is exact), and the median of
per-request absolute errors, each relative to the request's prompt tokens (so a request that
really read nothing, and is predicted to read nothing, is no error, and one of 100 tokens
off a 20,000-token prompt is 0.5%).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from ...cache import TTL_SECONDS
from ..policies import DEFAULT_MODEL, AsRecorded, History
from ..policies.trace_replay import PreparedTrace, ReplayResult, TokenTotals, replay
from ..traces import Trace


@dataclass(frozen=True)
class CalibrationRow:
    """One recorded request: real and predicted uncached input, cache reads and writes
    (5m and 1h together), and the TTL the real usage shows (empty when nothing was
    written)."""

    request: int
    session: str
    at: float
    ttl: str
    prompt_tokens: int
    real_input_tokens: int
    predicted_input_tokens: int
    real_cache_read_tokens: int
    predicted_cache_read_tokens: int
    real_cache_write_tokens: int
    predicted_cache_write_tokens: int
    real_cache_write_1h_tokens: int
    """The 1h part of the writes (the rest is 5m)."""
    predicted_cache_write_1h_tokens: int


@dataclass(frozen=True)
class Agreement:
    """Predicted against real over a set of requests (a log, or the whole trace)."""

    name: str
    requests: int
    real_cache_read_tokens: int
    predicted_cache_read_tokens: int
    real_cache_write_tokens: int
    predicted_cache_write_tokens: int
    real_input_tokens: int
    predicted_input_tokens: int
    real_cost: float
    predicted_cost: float
    """Prompt costs (USD, output excluded) of the same requests at the same prices."""
    read_error: float
    """Median per-request |predicted - real| cache reads over the request's prompt tokens."""
    write_error: float
    """The same for cache writes."""

    @property
    def read_ratio(self) -> float:
        return _ratio(self.predicted_cache_read_tokens, self.real_cache_read_tokens)

    @property
    def write_ratio(self) -> float:
        return _ratio(self.predicted_cache_write_tokens, self.real_cache_write_tokens)

    @property
    def cost_ratio(self) -> float:
        return _ratio(self.predicted_cost, self.real_cost)


def _ratio(predicted: float, real: float) -> float:
    if real == 0:
        return 1.0 if predicted == 0 else float("inf")
    return predicted / real


@dataclass(frozen=True)
class Calibration:
    """Every recorded request's real and predicted usage, and their agreement."""

    trace: str
    model: str
    rows: tuple[CalibrationRow, ...]
    total: Agreement
    logs: tuple[Agreement, ...]
    """One agreement per log: requests grouped by their session's root (the part before the
    first `/`: a subagent counts with the session that started it)."""
    result: ReplayResult
    """The `as_recorded` replay the predictions come from (usage kept)."""

    def line(self) -> str:
        """The one-line summary the CLI prints."""
        t = self.total
        return (
            f"calibration ({t.requests:,} requests with recorded usage): predicted / real "
            f"cache reads {t.read_ratio:.3f}, cache writes {t.write_ratio:.3f}, prompt cost "
            f"{t.cost_ratio:.3f}; uncached input {t.predicted_input_tokens:,} predicted, "
            f"{t.real_input_tokens:,} real tokens; median error per request: reads "
            f"{t.read_error:.1%}, writes {t.write_error:.1%} of the prompt"
        )


def has_recorded_usage(trace: Trace) -> bool:
    """Whether any request of `trace` carries the provider's real usage."""
    return any(r.recorded is not None for r in trace.requests)


def calibrate(trace: Trace | PreparedTrace, *, model: str = DEFAULT_MODEL) -> Calibration:
    """Replay `trace` as recorded and set each prediction beside the real usage. Raises
    ValueError when no request has recorded usage."""
    prepared = PreparedTrace.of(trace)
    requests = prepared.trace.requests
    if not has_recorded_usage(prepared.trace):
        raise ValueError(f"the trace {prepared.trace.name!r} has no recorded usage to compare")
    result = replay(prepared, AsRecorded(), model=model, keep_usage=True)
    assert result.usages is not None
    rows = []
    for i, (request, (usage, _)) in enumerate(zip(requests, result.usages, strict=True)):
        real = request.recorded
        if real is None:
            continue
        rows.append(
            CalibrationRow(
                request=i,
                session=request.session,
                at=request.at,
                ttl=real.ttl or "",
                prompt_tokens=request.input_tokens,
                real_input_tokens=real.input_tokens,
                predicted_input_tokens=usage.input_tokens,
                real_cache_read_tokens=real.cache_read_tokens,
                predicted_cache_read_tokens=usage.cache_read_input_tokens,
                real_cache_write_tokens=real.cache_write_tokens,
                predicted_cache_write_tokens=usage.cache_creation_input_tokens,
                real_cache_write_1h_tokens=real.cache_write_1h_tokens,
                predicted_cache_write_1h_tokens=usage.ephemeral_1h_input_tokens,
            )
        )
    logs: dict[str, list[CalibrationRow]] = {}
    for row in rows:
        logs.setdefault(row.session.split("/", 1)[0], []).append(row)
    return Calibration(
        trace=prepared.trace.name,
        model=result.model,
        rows=tuple(rows),
        total=agreement("all", rows, result.model),
        logs=tuple(agreement(name, group, result.model) for name, group in logs.items()),
        result=result,
    )


def agreement(name: str, rows: list[CalibrationRow], model: str) -> Agreement:
    """Predicted against real over `rows`, both priced at `model`."""
    real = TokenTotals(
        input=sum(r.real_input_tokens for r in rows),
        cache_write_5m=sum(r.real_cache_write_tokens - r.real_cache_write_1h_tokens for r in rows),
        cache_write_1h=sum(r.real_cache_write_1h_tokens for r in rows),
        cache_read=sum(r.real_cache_read_tokens for r in rows),
    )
    predicted = TokenTotals(
        input=sum(r.predicted_input_tokens for r in rows),
        cache_write_5m=sum(
            r.predicted_cache_write_tokens - r.predicted_cache_write_1h_tokens for r in rows
        ),
        cache_write_1h=sum(r.predicted_cache_write_1h_tokens for r in rows),
        cache_read=sum(r.predicted_cache_read_tokens for r in rows),
    )
    return Agreement(
        name=name,
        requests=len(rows),
        real_cache_read_tokens=real.cache_read,
        predicted_cache_read_tokens=predicted.cache_read,
        real_cache_write_tokens=real.cache_write_5m + real.cache_write_1h,
        predicted_cache_write_tokens=predicted.cache_write_5m + predicted.cache_write_1h,
        real_input_tokens=real.input,
        predicted_input_tokens=predicted.input,
        real_cost=real.cost(model).total,
        predicted_cost=predicted.cost(model).total,
        read_error=_median_error(
            [
                (r.predicted_cache_read_tokens, r.real_cache_read_tokens, r.prompt_tokens)
                for r in rows
            ]
        ),
        write_error=_median_error(
            [
                (r.predicted_cache_write_tokens, r.real_cache_write_tokens, r.prompt_tokens)
                for r in rows
            ]
        ),
    )


def _median_error(values: list[tuple[int, int, int]]) -> float:
    errors = [abs(p - r) / n for p, r, n in values if n]
    return statistics.median(errors) if errors else 0.0


@dataclass(frozen=True)
class GapOutcome:
    """What the provider did with a session's cached prompt across one gap: request
    `request` came `gap` seconds after its session's previous request, which was written or
    read with `ttl` and left `previous_tokens` in the cache (what it read plus what it
    wrote, by its own recorded usage), and it really read `real_read`."""

    request: int
    session: str
    gap: float
    ttl: str
    previous_tokens: int
    real_read: int

    @property
    def outcome(self) -> str:
        """`hit`: all the previous request left cached was read; `partial`: a shorter
        prefix (another session's system prompt, an earlier breakpoint); `miss`: nothing."""
        if self.real_read >= self.previous_tokens:
            return "hit"
        return "partial" if self.real_read else "miss"


def gap_outcomes(trace: Trace) -> list[GapOutcome]:
    """Every recorded request whose session's previous request is recorded too, left
    something cached, and is extended by this one (its prompt starts with the previous one's
    blocks): the real record of whether an entry outlived a gap. The TTL of each entry is
    the one the client wrote with, as `AsRecorded` reads it off the usage."""
    last: dict[str, int] = {}
    ttl_of: dict[str, str] = {}
    rows: list[GapOutcome] = []
    requests = trace.requests
    recorded_ttl = AsRecorded()
    for i, request in enumerate(requests):
        p = last.get(request.session)
        last[request.session] = i
        real = request.recorded
        if real is None:
            continue
        previous_ttl = ttl_of.get(request.session)
        ttl = recorded_ttl.decide(request, History(i, 0, None, 0, 0)).ttl
        if ttl is not None:
            ttl_of[request.session] = ttl
        if p is None or previous_ttl is None:
            continue
        before = requests[p]
        cached = before.recorded
        if cached is None or request.blocks[: len(before.blocks)] != before.blocks:
            continue
        left = cached.cache_read_tokens + cached.cache_write_tokens
        if not left:
            continue
        rows.append(
            GapOutcome(
                request=i,
                session=request.session,
                gap=request.at - before.at,
                ttl=previous_ttl,
                previous_tokens=left,
                real_read=real.cache_read_tokens,
            )
        )
    return rows


@dataclass(frozen=True)
class TtlBoundary:
    """Where the real record puts an entry's end, for gaps after a write or read of `ttl`.

    `longest_hit` is the longest gap after which the whole previous prompt was still read,
    `shortest_miss` the shortest after which it was not (None when there is none). An entry
    lives at least `longest_hit` seconds; past the TTL, the data bounds the linger: at least
    `longest_hit - ttl` (when positive) and at most `shortest_miss - ttl` among misses beyond
    the TTL."""

    ttl: str
    gaps: int
    hits: int
    misses: int
    longest_hit: float | None
    shortest_miss: float | None
    hits_within_ttl: int
    misses_within_ttl: int
    hits_past_ttl: int
    misses_past_ttl: int
    linger_at_most: float | None


def ttl_boundary(outcomes: list[GapOutcome], ttl: str = "5m") -> TtlBoundary:
    """The boundary the outcomes of gaps after `ttl` entries show (partial reads count as
    misses of the session's own entry)."""
    life = TTL_SECONDS[ttl]
    rows = [o for o in outcomes if o.ttl == ttl]
    hits = [o.gap for o in rows if o.outcome == "hit"]
    misses = [o.gap for o in rows if o.outcome != "hit"]
    late_misses = [g for g in misses if g > life]
    return TtlBoundary(
        ttl=ttl,
        gaps=len(rows),
        hits=len(hits),
        misses=len(misses),
        longest_hit=max(hits, default=None),
        shortest_miss=min(misses, default=None),
        hits_within_ttl=sum(1 for g in hits if g <= life),
        misses_within_ttl=sum(1 for g in misses if g <= life),
        hits_past_ttl=sum(1 for g in hits if g > life),
        misses_past_ttl=len(late_misses),
        linger_at_most=min(late_misses) - life if late_misses else None,
    )
