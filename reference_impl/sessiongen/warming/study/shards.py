"""Replay many policies over one trace in parallel, on local processes or a Dask cluster.

Requests interact only through the cache entries they read and write, and through their
session's bookkeeping (pings cancelled by the next request, the policy's `History`). A
request's breakpoints read and write only the entries keyed by the prefix hashes in their
lookback windows (`LOOKBACK_WINDOW` positions ending at each breakpoint, plus its warm
prefixes), so `split_trace` puts two requests in the same part when they share such a hash or a
session (union-find, as the optimum groups its components), then bin-packs the groups into
parts in time order. Each part replays on its own store, and the parts' totals add up to the
whole trace's: tokens are integers, and costs are priced on the summed tokens, as `replay`
prices its own. So for a policy that keeps no state across sessions the sum is identical to
the unsharded replay.

A policy that learns across sessions (`Learned`; any policy whose `shardable` is False)
replays the whole trace in one task, in parallel with the parts. The tasks go to any
`concurrent.futures.Executor`: a `ProcessPoolExecutor` on one machine, or a Dask cluster's
`Client.get_executor()` past it (docs/warming.md).
"""

from __future__ import annotations

import copy
import dataclasses
import os
from collections.abc import Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor

from ...cache import LOOKBACK_WINDOW
from ..policies import DEFAULT_MODEL, Policy
from ..policies.trace_replay import (
    PreparedTrace,
    ReplayResult,
    TokenTotals,
    price_by_model,
    replay,
)
from ..traces import Trace
from ._grouping import connected

LARGE_TRACE = 20_000
"""Requests from which `replay_policies` starts its own process pool: below it, starting
the processes and sending them the trace costs more than the replays."""


def _groups(prepared: PreparedTrace) -> list[list[int]]:
    """Requests grouped so that no cache entry and no session spans two groups."""
    ttl = next(iter(prepared.blocks), None)  # every TTL marks the same positions
    keys: list[set[object]] = []
    for i, hashes in enumerate(prepared.hashes):
        # The session, and every prefix an entry of this request can be read or written at.
        mine: set[object] = {("session", prepared.trace.requests[i].session)}
        marks = prepared.blocks[ttl][i] if ttl is not None else ()
        for k, (_, _, mark) in enumerate(marks):
            if mark is not None:
                mine.update(hashes[max(k - LOOKBACK_WINDOW + 1, 0) : k + 1])
        for entry in prepared.warm.get(i, ()):
            mine.add(entry[-1][0])
        keys.append(mine)
    return connected(keys)


def _part(prepared: PreparedTrace, indices: Sequence[int]) -> PreparedTrace:
    """The requests `indices` (in time order, whole sessions) as a trace of their own, its
    `origin` pointing back into the whole trace."""
    position = {i: k for k, i in enumerate(indices)}
    trace = prepared.trace
    warm = tuple(
        dataclasses.replace(e, request=position[e.request])
        for e in trace.warm
        if e.request in position
    )
    origin = prepared.origin
    return PreparedTrace(
        trace=Trace(trace.name, tuple(trace.requests[i] for i in indices), warm),
        hashes=tuple(prepared.hashes[i] for i in indices),
        blocks={t: tuple(v[i] for i in indices) for t, v in prepared.blocks.items()},
        whole={t: tuple(v[i] for i in indices) for t, v in prepared.whole.items()},
        tokens=tuple(prepared.tokens[i] for i in indices),
        previous=tuple(position[p] if (p := prepared.previous[i]) >= 0 else -1 for i in indices),
        turn=tuple(prepared.turn[i] for i in indices),
        extends=tuple(prepared.extends[i] for i in indices),
        marked=prepared.marked,
        warm={position[i]: v for i, v in prepared.warm.items() if i in position},
        origin=tuple(indices) if origin is None else tuple(origin[i] for i in indices),
    )


def split_trace(trace: Trace | PreparedTrace, shards: int) -> list[PreparedTrace]:
    """`trace` as at most `shards` independent parts (no cache entry or session spans two),
    each in time order and with its `origin` indices, the groups bin-packed by request
    count, largest first; fewer parts when there are fewer groups."""
    if shards < 1:
        raise ValueError(f"shards must be >= 1, got {shards}")
    prepared = PreparedTrace.of(trace)
    bins: list[list[int]] = [[] for _ in range(shards)]
    for group in sorted(_groups(prepared), key=len, reverse=True):
        min(bins, key=len).extend(group)
    return [_part(prepared, sorted(b)) for b in bins if b]


def _replay_each(
    prepared: PreparedTrace, policies: Sequence[Policy], model: str
) -> list[ReplayResult]:
    """One task: every policy over one trace (a part, or the whole for a learning policy)."""
    return [replay(prepared, policy, model=model) for policy in policies]


def _sum(results: Sequence[ReplayResult], prepared: PreparedTrace) -> ReplayResult:
    """The parts' replays of one policy as the whole trace's: counts and tokens summed,
    costs priced on the summed tokens (as `replay` prices its own)."""
    first = results[0]
    if len(results) == 1 and first.requests == len(prepared.trace.requests):
        return first

    def total(field: str) -> TokenTotals:
        rows = [dataclasses.astuple(getattr(r, field)) for r in results]
        return TokenTotals(*(sum(column) for column in zip(*rows, strict=True)))

    tokens, ping_tokens = total("tokens"), total("ping_tokens")
    cost, ping_cost = tokens.cost(first.model), ping_tokens.cost(first.model).total
    merged: dict[str, tuple[TokenTotals, TokenTotals]] = {}
    for result in results:
        for name, both, pings in result.by_model:
            if name in merged:
                both, pings = merged[name][0] + both, merged[name][1] + pings
            merged[name] = (both, pings)
    by_model = tuple((name, *merged[name]) for name in sorted(merged))
    if by_model:
        cost = price_by_model({name: both for name, both, _ in by_model})
        ping_cost = price_by_model({name: pings for name, _, pings in by_model}).total
    return ReplayResult(
        policy=first.policy,
        trace=prepared.trace.name,
        model=first.model,
        requests=sum(r.requests for r in results),
        pings=sum(r.pings for r in results),
        pings_cancelled=sum(r.pings_cancelled for r in results),
        pings_dropped=sum(r.pings_dropped for r in results),
        tokens=tokens,
        ping_tokens=ping_tokens,
        cost=cost,
        ping_cost=ping_cost,
        by_model=by_model,
        stand_ins=tuple(sorted({m for r in results for m in r.stand_ins})),
    )


def replay_policies(
    trace: Trace | PreparedTrace,
    policies: Sequence[Policy],
    *,
    model: str = DEFAULT_MODEL,
    executor: Executor | None = None,
    shards: int | None = None,
) -> list[ReplayResult]:
    """`replay(trace, policy)` for every policy, in the given order, as tasks of `executor`:
    the trace split into `shards` parts (default `os.cpu_count()`), one task per part
    replaying every shardable policy, and one task per policy whose `shardable` is False
    replaying the whole trace. The results equal the unsharded replays (usage is not kept).

    Without an executor, a trace of `LARGE_TRACE` requests or more gets a process pool of
    `os.cpu_count()` workers for the call; a smaller one replays in this process."""
    prepared = PreparedTrace.of(trace)
    if not policies:
        return []
    n = len(prepared.trace.requests)
    if executor is None and n < LARGE_TRACE:
        return _replay_each(prepared, policies, model)
    if executor is None:
        with ProcessPoolExecutor(os.cpu_count()) as pool:
            return replay_policies(prepared, policies, model=model, executor=pool, shards=shards)

    # Sent without the lazily compiled blocks a replay in this process may have added.
    whole = dataclasses.replace(prepared, _compiled={})
    alone = [k for k, p in enumerate(policies) if not getattr(p, "shardable", True)]
    together = [k for k, p in enumerate(policies) if getattr(p, "shardable", True)]
    # The whole-trace tasks go first: each is as long as a part's task for every policy.
    solo: dict[int, Future[list[ReplayResult]]] = {
        k: executor.submit(_replay_each, whole, [policies[k]], model) for k in alone
    }
    parts: list[Future[list[ReplayResult]]] = []
    if together:
        for part in split_trace(whole, shards or os.cpu_count() or 1) if n else [whole]:
            # Copies: a policy's state is per run, and tasks in one process share objects.
            chosen = [copy.copy(policies[k]) for k in together]
            parts.append(executor.submit(_replay_each, part, chosen, model))
    results: list[ReplayResult | None] = [None] * len(policies)
    for k, future in solo.items():
        (results[k],) = future.result()
    per_part = [future.result() for future in parts]
    for j, k in enumerate(together):
        results[k] = _sum([done[j] for done in per_part], prepared)
    return [r for r in results if r is not None]
