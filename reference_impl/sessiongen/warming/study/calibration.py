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
from collections.abc import Iterable
from dataclasses import dataclass

from ...cache import (
    MISS_CAUSES,
    TTL,
    TTL_SECONDS,
    CacheUsage,
    CallShape,
    count_causes,
    get_model,
    is_miss,
    miss_cause,
)
from ..policies import DEFAULT_MODEL, AsRecorded, History
from ..policies.trace_replay import (
    PreparedTrace,
    ReplayResult,
    TokenTotals,
    price_by_model,
    priced_model,
    replay,
)
from ..traces import TTL_TOLERANCE, WARM_KINDS, RecordedUsage, Trace, TraceRequest


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
    model: str = ""
    """The catalog model the request is cached and priced at: the one its log names, or the
    replay's model standing in for one the catalog does not know (`priced_model`)."""
    miss_cause: str = ""
    """Why the real call missed (`cache.miss_cause`; empty when it read all its session's
    previous call left, or, as a session's first call, read something)."""
    predicted_miss_cause: str = ""
    """Why the replay's call missed, by the same rule; empty when it did not."""
    warm_kind: str = ""
    """A prefix the record shows this call read that the log's own calls cannot have kept
    cached, put in the cache unbilled before it (`WarmEntry.kind`: `account`,
    `ttl_boundary` or `missing_calls`); empty for none."""
    warm_tokens: int = 0
    """That prefix's tokens."""


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
    miss_causes: tuple[tuple[str, int], ...] = ()
    """The real misses by cause (`cache.MISS_CAUSES` order, causes that occur)."""
    predicted_miss_causes: tuple[tuple[str, int], ...] = ()
    """The replay's misses by cause."""
    warm: tuple[tuple[str, int, int], ...] = ()
    """Per `WarmEntry.kind` that occurs: the calls and the tokens the record showed read
    that the log's own calls cannot have kept cached."""

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

    stand_ins: tuple[str, ...] = ()
    """Models the log names that the catalog does not know, priced at `model` instead."""

    def line(self) -> str:
        """The one-line summary the CLI prints."""
        t = self.total
        warm = dict((kind, (calls, tokens)) for kind, calls, tokens in t.warm)
        account = warm.get("account", (0, 0))
        boundary = warm.get("ttl_boundary", (0, 0))
        missing = warm.get("missing_calls", (0, 0))
        return (
            f"calibration ({t.requests:,} requests with recorded usage): predicted / real "
            f"cache reads {t.read_ratio:.3f}, cache writes {t.write_ratio:.3f}, prompt cost "
            f"{t.cost_ratio:.3f}; uncached input {t.predicted_input_tokens:,} predicted, "
            f"{t.real_input_tokens:,} real tokens; median error per request: reads "
            f"{t.read_error:.1%}, writes {t.write_error:.1%} of the prompt; misses by "
            f"cause, real: {count_causes(dict(t.miss_causes))}; predicted: "
            f"{count_causes(dict(t.predicted_miss_causes))}; warm outside the log: "
            f"account-level prefixes {account[0]:,} calls ({account[1]:,} tokens), read "
            f"within {TTL_TOLERANCE:.0f} s past the TTL {boundary[0]:,} calls "
            f"({boundary[1]:,} tokens); calls missing from the log: before {missing[0]:,} "
            f"calls ({missing[1]:,} tokens read that no logged prompt wrote)"
            + (
                f"; not catalogued, priced at {self.model}: {', '.join(self.stand_ins)}"
                if self.stand_ins
                else ""
            )
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
    warm = _warm_of(prepared.trace)
    causes = _miss_causes(prepared, result.usages, model)
    rows = []
    for i, (request, (usage, _)) in enumerate(zip(requests, result.usages, strict=True)):
        real = request.recorded
        if real is None:
            continue
        kind, tokens = warm.get(i, ("", 0))
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
                model=priced_model(request.model, model)[0],
                miss_cause=causes[i][0],
                predicted_miss_cause=causes[i][1],
                warm_kind=kind,
                warm_tokens=tokens,
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
        stand_ins=result.stand_ins,
    )


def _warm_of(trace: Trace) -> dict[int, tuple[str, int]]:
    """Request index -> the kind and tokens of the prefix put warm before it (the longest,
    when there are several)."""
    found: dict[int, tuple[str, int]] = {}
    for entry in trace.warm:
        tokens = sum(trace.requests[entry.request].block_tokens[: entry.block + 1])
        if tokens > found.get(entry.request, ("", 0))[1]:
            found[entry.request] = (entry.kind, tokens)
    return found


def _shape(request: TraceRequest, model: str, ttl: TTL | None) -> CallShape:
    """A trace request as the miss-cause rule compares it: its blocks are its messages (the
    trace knows no tools or system prompt apart from them)."""
    return CallShape(
        at=request.at,
        model=model,
        prompt_tokens=request.input_tokens,
        messages=request.blocks,
        ttl=ttl,
    )


def _miss_causes(
    prepared: PreparedTrace, usages: tuple[tuple[CacheUsage, int], ...], model: str
) -> list[tuple[str, str]]:
    """Per request, the cause of the real call's miss and of the replay's (empty: no miss),
    each judged against the session's previous request by `cache.miss_cause`. The real one
    allows the log's clock `TTL_TOLERANCE` at the TTL; the replay's clock is its own."""
    requests = prepared.trace.requests
    models = [priced_model(r.model, model)[0] for r in requests]
    ttls: list[TTL | None] = [None] * len(requests)  # the TTL each request's entry lives by
    found: list[tuple[str, str]] = []
    for i, request in enumerate(requests):
        p = prepared.previous[i]
        real, (predicted, _) = request.recorded, usages[i]
        ttls[i] = (real.ttl if real is not None else None) or (ttls[p] if p >= 0 else None)
        shape = _shape(request, models[i], ttls[i])
        before = _shape(requests[p], models[p], ttls[p]) if p >= 0 else None
        least = get_model(models[i]).min_cacheable_tokens
        causes = []
        for usage, left, tolerance in (
            (
                real,
                requests[p].recorded if p >= 0 else None,
                TTL_TOLERANCE,
            ),
            (predicted, usages[p][0] if p >= 0 else None, 0.0),
        ):
            if usage is None:
                causes.append("")
                continue
            read, kept = _read_and_left(usage, left)
            if not is_miss(read, kept, p < 0):
                causes.append("")
                continue
            causes.append(miss_cause(shape, before, min_tokens=least, tolerance=tolerance))
        found.append((causes[0], causes[1]))
    return found


def _read_and_left(
    usage: RecordedUsage | CacheUsage, previous: RecordedUsage | CacheUsage | None
) -> tuple[int, int]:
    """A call's cache read and what its session's previous call left cached (its read plus
    its write; 0 without one)."""

    def cached(u: RecordedUsage | CacheUsage) -> tuple[int, int]:
        if isinstance(u, CacheUsage):
            return u.cache_read_input_tokens, u.cache_creation_input_tokens
        return u.cache_read_tokens, u.cache_write_tokens

    read = cached(usage)[0]
    return read, sum(cached(previous)) if previous is not None else 0


def agreement(name: str, rows: list[CalibrationRow], model: str) -> Agreement:
    """Predicted against real over `rows`, both priced at each row's model (`model` for a
    row that names none)."""
    real = _totals(rows, predicted=False)
    predicted = _totals(rows, predicted=True)
    real_by: dict[str, TokenTotals] = {}
    predicted_by: dict[str, TokenTotals] = {}
    for row in rows:
        priced = row.model or model
        real_by[priced] = real_by.get(priced, TokenTotals()) + _totals([row], predicted=False)
        predicted_by[priced] = predicted_by.get(priced, TokenTotals()) + _totals(
            [row], predicted=True
        )
    warm: dict[str, tuple[int, int]] = {}
    for row in rows:
        if row.warm_kind:
            calls, tokens = warm.get(row.warm_kind, (0, 0))
            warm[row.warm_kind] = (calls + 1, tokens + row.warm_tokens)
    return Agreement(
        name=name,
        requests=len(rows),
        real_cache_read_tokens=real.cache_read,
        predicted_cache_read_tokens=predicted.cache_read,
        real_cache_write_tokens=real.cache_write_5m + real.cache_write_1h,
        predicted_cache_write_tokens=predicted.cache_write_5m + predicted.cache_write_1h,
        real_input_tokens=real.input,
        predicted_input_tokens=predicted.input,
        real_cost=price_by_model(real_by).total if rows else 0.0,
        predicted_cost=price_by_model(predicted_by).total if rows else 0.0,
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
        miss_causes=_cause_counts(r.miss_cause for r in rows),
        predicted_miss_causes=_cause_counts(r.predicted_miss_cause for r in rows),
        warm=tuple((kind, *warm[kind]) for kind in WARM_KINDS if kind in warm),
    )


def _totals(rows: list[CalibrationRow], *, predicted: bool) -> TokenTotals:
    if predicted:
        return TokenTotals(
            input=sum(r.predicted_input_tokens for r in rows),
            cache_write_5m=sum(
                r.predicted_cache_write_tokens - r.predicted_cache_write_1h_tokens for r in rows
            ),
            cache_write_1h=sum(r.predicted_cache_write_1h_tokens for r in rows),
            cache_read=sum(r.predicted_cache_read_tokens for r in rows),
        )
    return TokenTotals(
        input=sum(r.real_input_tokens for r in rows),
        cache_write_5m=sum(r.real_cache_write_tokens - r.real_cache_write_1h_tokens for r in rows),
        cache_write_1h=sum(r.real_cache_write_1h_tokens for r in rows),
        cache_read=sum(r.real_cache_read_tokens for r in rows),
    )


def _cause_counts(causes: Iterable[str]) -> tuple[tuple[str, int], ...]:
    counts: dict[str, int] = {}
    for cause in causes:
        if cause:
            counts[cause] = counts.get(cause, 0) + 1
    return tuple((cause, counts[cause]) for cause in MISS_CAUSES if cause in counts)


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
