"""Trace replay speed against the emulator over the official SDK, and the warming table.

1. Speed: the replay of the Mooncake conversation trace's first half (aligned to prompts by
   the importer, `warming.traces.mooncake.align_to_prompts`) under each policy, best of `--repeats`
   runs. Then the
   first `--sample` requests go through `anthropic.AsyncAnthropic` to the in-process
   emulator (ASGI transport, virtual clock and scripted outputs set in process) under the
   "aider_1" policy (so pings are sent too). Both are timed in CPU seconds of this process
   (client and emulator share it), which a shared machine's load does not inflate. The usage of every request and ping must be
   identical to the replay's on the same sample. The ratio is seconds per call (requests
   plus pings) through the SDK over seconds per call in the replay.
2. Table: each policy's cost on the trace, as a ratio to the optimum and to the optimum that
   writes every prompt (`warming.optimum`), with and without the output tokens (the same
   for every policy), and the per-block lower bound.

Run: uv run python benchmarks/replay_speed.py [--sample 200] [--repeats 3] [--no-table]
Without the Mooncake file (../shared/data/mooncake) it says so and uses a generated trace.

`run(quick=False)` returns the speed figures for `sessiongen bench` (no table): the SDK's CPU
milliseconds a call, the slowest policy's replay microseconds a call, and the smallest
speed-up over the SDK; `quick` replays 60 generated sessions, a 20-request SDK sample, once.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Callable
from functools import partial

import anthropic
import httpx2
from sessiongen.emulator import EmulatorState, create_app
from sessiongen.emulator.state import ScriptedResponse
from sessiongen.warming import policies
from sessiongen.warming.policies.trace_replay import (
    PreparedTrace,
    ReplayResult,
    prepare,
    replay,
    replay_through_client,
)
from sessiongen.warming.study.offline_optimum import lower_bound, optimum
from sessiongen.warming.traces import Trace
from sessiongen.warming.traces.formats import load_trace
from sessiongen.warming.traces.generator import generate_sessions
from sessiongen.warming.traces.mooncake import shared_mooncake_dir

MODEL = "claude-sonnet-4-6"
MOONCAKE = shared_mooncake_dir() / "conversation_trace_first_half.jsonl"


def load(echo: Callable[[str], None] = print) -> Trace:
    if MOONCAKE.exists():
        return load_trace(MOONCAKE, "mooncake")
    echo(f"{MOONCAKE} is absent: using a generated trace of 600 sessions instead")
    return generate_sessions(600, seed=1)


def best_of(repeats: int, run: Callable[[], ReplayResult]) -> tuple[float, ReplayResult]:
    best, result = float("inf"), None
    for _ in range(repeats):
        start = time.process_time()
        result = run()
        best = min(best, time.process_time() - start)
    assert result is not None
    return best, result


async def through_sdk(
    trace: Trace, policy: policies.Policy, echo: Callable[[str], None] = print
) -> tuple[float, ReplayResult]:
    # The traces are sized in the bare byte-based count: no template framing, no tool prompt.
    state = EmulatorState(tool_prompt=False, framing=False)
    app = create_app(state)
    url = "http://emulator"
    http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url=url)
    client = anthropic.AsyncAnthropic(api_key="bench", base_url=url, http_client=http)

    async def set_clock(now: float) -> None:
        state.clock.set(now)

    async def script_output(tokens: int) -> None:
        state.queue_responses([ScriptedResponse(text="ok", output_tokens=tokens)])

    async with client:
        wall, cpu = time.perf_counter(), time.process_time()
        result = await replay_through_client(
            trace, policy, client, set_clock=set_clock, script_output=script_output, model=MODEL
        )
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        echo(f"SDK sample: {wall:.2f} s wall, {cpu:.2f} s CPU (client and emulator both)")
        return cpu, result


def calls(result: ReplayResult) -> int:
    return result.requests + result.pings


def speed(
    prepared: PreparedTrace, sample: int, repeats: int, echo: Callable[[str], None] = print
) -> tuple[float, list[tuple[str, float, int]]]:
    """SDK seconds a call, then each policy's (name, best replay seconds, calls)."""
    trace = prepared.trace
    head = Trace(trace.name + f"[:{sample}]", trace.requests[:sample])
    sdk_policy = policies.aider(1)
    sdk_seconds, sdk = asyncio.run(through_sdk(head, sdk_policy, echo))
    mine = replay(head, sdk_policy, model=MODEL, keep_usage=True)
    assert mine.usages == sdk.usages, "request usage differs from the emulator's"
    assert mine.ping_usages == sdk.ping_usages, "ping usage differs from the emulator's"
    assert mine == sdk
    per_sdk = sdk_seconds / calls(sdk)
    echo(
        f"SDK -> in-process emulator: {calls(sdk)} calls ({sdk.requests} requests, {sdk.pings} "
        f"pings) of the first {sample} requests in {sdk_seconds:.2f} s = {per_sdk * 1e3:.2f} ms "
        "a call; usage identical to the replay's, call by call"
    )
    echo(f"\nreplay of {trace.name}: {len(trace.requests)} requests, best of {repeats} (CPU)")
    echo(f"{'policy':24s} {'ms':>8s} {'calls':>7s} {'us/call':>8s} {'x SDK':>8s}")
    rows = []
    for policy in [*policies.reference_policies(MODEL), policies.GapOracle(trace, model=MODEL)]:
        seconds, result = best_of(repeats, partial(replay, prepared, policy, model=MODEL))
        per_call = seconds / calls(result)
        rows.append((policy.name, seconds, calls(result)))
        echo(
            f"{policy.name:24s} {seconds * 1e3:8.1f} {calls(result):7d} {per_call * 1e6:8.1f} "
            f"{per_sdk / per_call:8.0f}"
        )
    return per_sdk, rows


def run(quick: bool = False, sample: int = 200, repeats: int = 3) -> dict[str, float]:
    """The speed figures, silently: the Mooncake first half (or the generated fallback)."""

    def quiet(line: str) -> None:
        pass

    if quick:
        trace, sample, repeats = generate_sessions(60, seed=1), 20, 1
    else:
        trace = load(quiet)
    per_sdk, rows = speed(prepare(trace), sample, repeats, quiet)
    per_call = [seconds / count for _, seconds, count in rows]
    return {
        "requests": float(len(trace.requests)),
        "sdk_ms_per_call": per_sdk * 1e3,
        "replay_us_per_call_max": max(per_call) * 1e6,
        "speedup_min": per_sdk / max(per_call),
    }


def table(prepared: PreparedTrace) -> None:
    trace = prepared.trace
    start = time.process_time()
    free = optimum(prepared, model=MODEL)
    must = optimum(prepared, model=MODEL, must_write=True)
    bound = lower_bound(prepared, model=MODEL)
    seconds = time.process_time() - start
    output = free.result.cost.output  # the same for every schedule
    print(
        f"\ncosts on {trace.name} ({MODEL}; optimum, must-write optimum and bound: {seconds:.1f} s)"
    )
    print("'in' columns leave out the output tokens, which no policy changes")
    header = f"{'policy':24s} {'USD':>8s} {'/opt':>7s} {'/opt in':>8s} {'/must':>7s}"
    print(header + f" {'/must in':>9s} {'pings':>7s}")

    def row(name: str, usd: float, pings: int | str) -> None:
        print(
            f"{name:24s} {usd:8.2f} {usd / free.total_cost:7.3f} "
            f"{(usd - output) / (free.total_cost - output):8.3f} {usd / must.total_cost:7.3f} "
            f"{(usd - output) / (must.total_cost - output):9.3f} {pings:>7}"
        )

    extra = [
        policies.GapOracle(trace, model=MODEL),
        policies.GapOracle(trace, must_write=False, model=MODEL),
    ]
    for policy in [*policies.reference_policies(MODEL), *extra]:
        result = replay(prepared, policy, model=MODEL)
        row(policy.name, result.total_cost, result.pings)
    row("optimum_must_write", must.total_cost, must.result.pings)
    row("optimum", free.total_cost, free.result.pings)
    row("lower_bound (per block)", bound, "-")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sample", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-table", action="store_true")
    args = parser.parse_args()
    prepared = prepare(load())
    speed(prepared, args.sample, args.repeats)
    if not args.no_table:
        table(prepared)


if __name__ == "__main__":
    main()
