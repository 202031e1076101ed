"""How the warming experiment scales: the replay against a minimal loop, the optimum on 1,000
sessions, and every policy plus the optimum over a million requests on 2 cores.

1. The replay against a minimal loop: `minimal_5m` below is the least a replay of plain 5m
   caching must do in Python (a dict of prefix hash -> expiry; per request, each breakpoint
   that reaches the minimum reads the newest live entry in its lookback window and writes
   its own), checked to give the replay's exact tokens. The figure is the slowest fixed-TTL
   policy's (no_cache, 5m, 1h: one call a request) replay CPU µs per request over the loop's,
   on the Mooncake first half (when present) and `generate_sessions(200, seed=0)`, the worse
   of the two. Policies with pings are reported per call (a request or a ping).
2. `optimum(generate_sessions(1000, seed=0))` wall seconds, in process (a pool costs more
   than it spreads).
3. Every `reference_policies()` policy (`replay_policies` on a 2-process pool) plus the
   optimum over about 1,000,000 generated requests, as ten independent traces of 100,000
   (one trace of a million does not fit the machine's memory), wall minutes; and the log-log
   slopes of time against requests over three sizes, for the replays and the optimum.

A `--quick` run measures smaller sizes (the replays in one process) and extrapolates the
1,000-session optimum and the million requests by the measured slopes (the figures' names
say so); it skips the Mooncake trace.

Run: uv run python benchmarks/warming_scale.py [--quick]
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from itertools import accumulate
from typing import Any

from sessiongen.cache import get_model
from sessiongen.warming import policies
from sessiongen.warming.policies.trace_replay import PreparedTrace, prepare, replay
from sessiongen.warming.study.offline_optimum import optimum
from sessiongen.warming.study.shards import replay_policies
from sessiongen.warming.traces import Trace
from sessiongen.warming.traces.formats import load_trace
from sessiongen.warming.traces.generator import generate_sessions
from sessiongen.warming.traces.mooncake import shared_mooncake_dir

MODEL = "claude-sonnet-4-6"
MOONCAKE = shared_mooncake_dir() / "conversation_trace_first_half.jsonl"
FIXED = ("no_cache", "5m", "1h")
MILLION = 1_000_000
CHUNKS = 10  # the million requests as this many independent traces (memory, below)
WORKERS = 2


def minimal_5m(prepared: PreparedTrace, min_tokens: int) -> tuple[int, int, int]:
    """Plain 5m caching in one plain loop: (input, cache read, cache write) tokens."""
    expires: dict[str, float] = {}
    inp = read = write = 0
    for request, hashes in zip(prepared.trace.requests, prepared.hashes, strict=True):
        now = request.at
        prefix = list(accumulate(request.block_tokens))
        marks = [k for k in request.marks if prefix[k] >= min_tokens]
        a = 0
        keys = expires.keys()
        for bp in marks:
            lo = max(bp - 19, 0)
            if keys.isdisjoint(hashes[lo : bp + 1]):
                continue
            for pos in range(bp, lo - 1, -1):
                expiry = expires.get(hashes[pos])
                if expiry is not None and now <= expiry:
                    expires[hashes[pos]] = now + 300.0  # a read refreshes
                    a = max(a, prefix[pos])
                    break
        for bp in marks:
            expiry = expires.get(hashes[bp])
            if expiry is None or now > expiry:
                expires[hashes[bp]] = now + 300.0
        c = prefix[marks[-1]] if marks else a
        read += a
        write += c - a
        inp += prefix[-1] - c
    return inp, read, write


def cpu(repeats: int, work: Callable[[], Any]) -> float:
    best = math.inf
    for _ in range(repeats):
        start = time.process_time()
        work()
        best = min(best, time.process_time() - start)
    return best


def wall(work: Callable[[], Any]) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def slope(points: list[tuple[int, float]]) -> float:
    """Least-squares slope of log(time) against log(requests)."""
    xs = [math.log(n) for n, _ in points]
    ys = [math.log(t) for _, t in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mx) ** 2 for x in xs
    )


def run_optimum(trace: Trace | PreparedTrace) -> None:
    # In process: the pruned program solves each group in milliseconds, so a process pool's
    # start-up and pickling cost more than the solving it spreads (measured: 9.4 s on 2
    # processes against 6.3 s in one for 1,000 sessions).
    optimum(trace, model=MODEL)


def run_replays(trace: Trace) -> None:
    """The reference policies' replays of `trace`, its preparation included."""
    replay_policies(prepare(trace), policies.reference_policies(MODEL), model=MODEL)


def versus_minimal(
    traces: list[Trace], repeats: int, echo: Callable[[str], None]
) -> dict[str, float]:
    min_tokens = get_model(MODEL).min_cacheable_tokens
    worst = {"ratio": 0.0, "replay": 0.0, "minimal": 0.0, "per_call": 0.0}
    for trace in traces:
        prepared = prepare(trace)
        n = len(trace.requests)
        plain = replay(prepared, policies.five_minutes(), model=MODEL)
        t = plain.tokens
        loop = minimal_5m(prepared, min_tokens)
        assert loop == (t.input, t.cache_read, t.cache_write_5m), "the loop's usage differs"
        minimal = cpu(repeats, partial(minimal_5m, prepared, min_tokens)) / n
        echo(f"{trace.name}: {n} requests; minimal loop {minimal * 1e6:.2f} µs a request")
        for policy in policies.reference_policies(MODEL):
            result = replay(prepared, policy, model=MODEL)  # compiles the blocks once
            seconds = cpu(repeats, partial(replay, prepared, policy, model=MODEL))
            calls = result.requests + result.pings
            echo(
                f"  {policy.name:22s} {seconds / n * 1e6:7.2f} µs/request "
                f"{seconds / calls * 1e6:7.2f} µs/call ({result.pings} pings)"
            )
            worst["per_call"] = max(worst["per_call"], seconds / calls)
            if policy.name in FIXED and seconds / n / minimal > worst["ratio"]:
                worst.update(ratio=seconds / n / minimal, replay=seconds / n, minimal=minimal)
    return worst


def everything(trace: Trace) -> tuple[float, float]:
    """Wall seconds of the replays (preparation included) and of the optimum."""
    prepared: list[PreparedTrace] = []

    def replays() -> None:
        prepared.append(prepare(trace))
        with ProcessPoolExecutor(WORKERS) as pool:
            replay_policies(
                prepared[0], policies.reference_policies(MODEL), model=MODEL, executor=pool
            )

    seconds = wall(replays)
    return seconds, wall(lambda: run_optimum(prepared[0]))


def run(quick: bool = False, echo: Callable[[str], None] | None = None) -> dict[str, float]:
    say = echo or (lambda line: None)
    traces = [generate_sessions(200, seed=0)]
    if MOONCAKE.exists() and not quick:
        traces.insert(0, load_trace(MOONCAKE, "mooncake"))
    speed = versus_minimal(traces, 3 if quick else 5, say)

    # Sizes (sessions) for the slopes; the optimum's are smaller while it is the slow part.
    replay_sizes = (50, 100, 200) if quick else (1000, 3000, 10000)
    optimum_sizes = (10, 20, 40) if quick else (250, 500, 1000)
    replay_points: list[tuple[int, float]] = []
    for sessions in replay_sizes:
        trace = generate_sessions(sessions, seed=0)
        seconds = wall(partial(run_replays, trace))
        replay_points.append((len(trace.requests), seconds))
        say(f"replays, {len(trace.requests)} requests: {seconds:.2f} s")
    optimum_points: list[tuple[int, float]] = []
    for sessions in optimum_sizes:
        trace = generate_sessions(sessions, seed=0)
        seconds = wall(partial(run_optimum, trace))
        optimum_points.append((len(trace.requests), seconds))
        say(f"optimum, {len(trace.requests)} requests: {seconds:.2f} s")
    replay_slope, optimum_slope = slope(replay_points), slope(optimum_points)

    per_session = len(generate_sessions(1000, seed=0).requests) / 1000
    thousand = 1000 * per_session
    if quick:
        n, seconds = optimum_points[-1]
        optimum_1000 = seconds * (thousand / n) ** optimum_slope
        n, seconds = replay_points[-1]
        replays_million = seconds * (MILLION / n) ** replay_slope  # measured on one core
        n, seconds = optimum_points[-1]
        optimum_million = seconds * (MILLION / n) ** optimum_slope
        million = (replays_million + optimum_million) / 60
    else:
        optimum_1000 = optimum_points[-1][1]  # the 1,000-session trace, measured
        # A million requests as ten independent traces of 100,000 (seeds 0-9), one after the
        # other: one trace of a million needs more than the machine's 24 GB (the prepared
        # blocks of every request at once), while sessions of separate traces share nothing.
        replays_million = optimum_million = 0.0
        requests = 0
        for seed in range(CHUNKS):
            chunk = generate_sessions(round(MILLION / CHUNKS / per_session), seed=seed)
            replays, best = everything(chunk)
            replays_million += replays
            optimum_million += best
            requests += len(chunk.requests)
            say(
                f"chunk {seed}: {len(chunk.requests)} requests, replays {replays:.0f} s, optimum {best:.0f} s"
            )
        say(
            f"{requests} requests: replays {replays_million:.0f} s, optimum {optimum_million:.0f} s"
        )
        million = (replays_million + optimum_million) / 60
    return {
        "replay_over_minimal_loop": speed["ratio"],
        "optimum_1000_sessions_s": optimum_1000,
        "million_requests_minutes": million,
        "replay_slope": replay_slope,
        "optimum_slope": optimum_slope,
        "replay_us_per_request": speed["replay"] * 1e6,
        "minimal_us_per_request": speed["minimal"] * 1e6,
        "replay_us_per_call_max": speed["per_call"] * 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    for key, value in run(args.quick, print).items():
        print(f"{key}: {value:.3g}")


if __name__ == "__main__":
    main()
