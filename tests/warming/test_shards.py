"""Sharded replays (`warming.study.shards`): the parts are independent, and the summed replays
are identical to the whole trace's, in process, on a process pool and on Dask."""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import pytest
from sessiongen.cache import LOOKBACK_WINDOW, TTL
from sessiongen.warming import generate_sessions, prepare, replay, replay_policies, split_trace
from sessiongen.warming.policies import GapOracle, Learned, Tracking, reference_policies
from sessiongen.warming.study.report import sweep_interval_grid
from sessiongen.warming.traces import Trace

TRACE = generate_sessions(60, seed=3)


def _keys(part: Trace) -> set[object]:
    """Sessions and the block ids in every breakpoint's lookback window."""
    keys: set[object] = {r.session for r in part.requests}
    for request in part.requests:
        for k in request.marks:
            keys.update(request.blocks[max(k - LOOKBACK_WINDOW + 1, 0) : k + 1])
    return keys


def test_parts_cover_the_trace_in_time_order_and_share_nothing() -> None:
    # Two agents, every session of one sharing its prefix: at most two parts.
    parts = split_trace(TRACE, 4)
    assert 1 < len(parts) <= 4
    indices = sorted(i for part in parts for i in part.origin or ())
    assert indices == list(range(len(TRACE.requests)))
    for part in parts:
        assert part.origin == tuple(sorted(part.origin or ()))
        assert [TRACE.requests[i] for i in part.origin or ()] == list(part.trace.requests)
    first, second = (_keys(p.trace) for p in parts[:2])
    assert not first & second


def test_a_policy_sees_its_index_in_the_whole_trace() -> None:
    oracle = GapOracle(TRACE)  # reads the whole trace by History.index
    whole = replay(TRACE, oracle)
    with ThreadPoolExecutor(2) as pool:
        (sharded,) = replay_policies(TRACE, [oracle], executor=pool, shards=3)
    assert sharded == whole


def test_sharded_replays_equal_the_whole_ones() -> None:
    policies = [*reference_policies(), GapOracle(TRACE)]
    whole = [replay(TRACE, p) for p in policies]
    with ThreadPoolExecutor(2) as pool:
        assert replay_policies(TRACE, policies, executor=pool, shards=5) == whole
    assert replay_policies(TRACE, policies) == whole  # small: in process
    learning = (Learned, Tracking)  # they learn from one session what to do in another
    assert not Learned().shardable and not Tracking().shardable
    # read as the shards read it: a policy without the attribute is shardable
    assert all(getattr(p, "shardable", True) for p in policies if not isinstance(p, learning))


def test_a_process_pool_and_dask_give_the_same_sweep() -> None:
    """The interval sweep (both TTLs, one pass) in process, on 2 local processes and on a
    Dask client in this process: the same rows."""
    distributed = pytest.importorskip("distributed")
    prepared = prepare(TRACE)
    sweeps: list[tuple[TTL, float, tuple[float, float]]] = [
        ("5m", 1800.0, (60.0, 295.0)),
        ("1h", 7200.0, (1200.0, 3595.0)),
    ]
    local = sweep_interval_grid(prepared, sweeps, optimum_cost=1.0)
    with ProcessPoolExecutor(2) as pool:
        assert sweep_interval_grid(prepared, sweeps, optimum_cost=1.0, executor=pool) == local
    with distributed.Client(processes=False, dashboard_address=None) as client:
        executor = client.get_executor()
        rows = sweep_interval_grid(prepared, sweeps, optimum_cost=1.0, executor=executor)
    assert rows == local
    assert [(r.ttl, r.interval) for r in rows] == [(t, i) for t, _, grid in sweeps for i in grid]
