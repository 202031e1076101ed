"""How much session.generate adds over the shared preparation, and how both scale.

For sessions of growing history, time (median of repeats) and peak memory of:
  select+prepare   SessionContext.select + SessionModelRequest.prepare (what a Step pays)
  generate         engine.generate against an instant in-process LLM client (test double)
and report the ratio generate / (select+prepare) and the log-log slope of each against
history length. Run: uv run python benchmarks/generate_overhead.py

`run(quick=False)` returns the figures `sessiongen bench` reports (informational: the
targeted ratio, at 100 to 10,000 messages, is benchmarks/engine_scale.py's).
"""

from __future__ import annotations

import asyncio
import math
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

from sessiongen import SessionEngine, SessionStore
from sessiongen.lab import write_workspace
from sessiongen.llm.client import collect
from sessiongen.llm.types import (
    FinishEvent,
    LLMRequest,
    LLMResponse,
    StreamEvent,
    Usage,
    UsageEvent,
)
from sessiongen.sample import SAMPLE_AGENT
from sessiongen.testing import ScriptedLLMClient, ScriptedReply

SIZES = (10, 50, 200, 800)
REPEATS = 30
QUICK_SIZES = (10, 200)
QUICK_REPEATS = 5


class InstantLLM:
    """Test double: answers every request at once with an empty reply."""

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        yield UsageEvent(usage=Usage(input_tokens=1))
        yield FinishEvent(reason="end_turn", model=request.model)

    async def generate(self, request: LLMRequest) -> LLMResponse:
        return await collect(self.stream(request))


async def build_session(messages: int, workspace: Path) -> tuple[SessionEngine, str]:
    """A session whose history has `messages` messages, built by real durable turns."""
    scripted = ScriptedLLMClient(default_text="An answer of moderate length. " * 8)
    store = SessionStore()
    engine = SessionEngine(store, scripted, [SAMPLE_AGENT])
    session = engine.create_session("forge", workspace=workspace)
    turns = max(1, (messages - 1) // 2)
    scripted.queue([ScriptedReply(text="An answer of moderate length. " * 8)] * turns)
    for turn in range(turns):
        await engine.run(session.id, f"Question number {turn}: what next?")
    return SessionEngine(store, InstantLLM(), [SAMPLE_AGENT]), session.id


def median_seconds(fn: Callable[[], object], repeats: int = REPEATS) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


async def amedian_seconds(fn: Callable[[], Awaitable[object]], repeats: int = REPEATS) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        await fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def slope(xs: list[float], ys: list[float]) -> float:
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = statistics.mean(lx), statistics.mean(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly, strict=True)) / sum(
        (a - mx) ** 2 for a in lx
    )


Row = tuple[int, float, float, int]  # history messages, select+prepare s, generate s, peak B


async def measure(sizes: tuple[int, ...] = SIZES, repeats: int = REPEATS) -> list[Row]:
    """One row per size: history length, the two medians (seconds) and generate's peak."""
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as scratch:
        workspace = write_workspace(Path(scratch))
        for size in sizes:
            engine, sid = await build_session(size, workspace)
            history = len(engine.select(sid).history)

            def prepare_only(engine: SessionEngine = engine, sid: str = sid) -> None:
                engine.preparation.prepare(engine.select(sid), operation="step", step=1)

            async def generate(engine: SessionEngine = engine, sid: str = sid) -> None:
                await engine.generate(sid, "Recap in one sentence.")

            prep = median_seconds(prepare_only, repeats)
            gen = await amedian_seconds(generate, repeats)
            tracemalloc.start()
            await generate()
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            rows.append((history, prep, gen, peak))
    return rows


def run(quick: bool = False) -> dict[str, float]:
    """The figures for `sessiongen bench`: the ratio and medians at the largest size (800
    messages; 200 with `quick`), and the log-log slopes against history length."""
    sizes, repeats = (QUICK_SIZES, QUICK_REPEATS) if quick else (SIZES, REPEATS)
    rows = asyncio.run(measure(sizes, repeats))
    hs = [float(r[0]) for r in rows]
    _, prep, gen, _ = rows[-1]
    return {
        "ratio_largest": gen / prep,
        "prepare_ms_largest": prep * 1e3,
        "generate_ms_largest": gen * 1e3,
        "slope_prepare": slope(hs, [r[1] for r in rows]),
        "slope_generate": slope(hs, [r[2] for r in rows]),
    }


async def main() -> None:
    rows = await measure()
    print(
        f"{'history':>8} {'select+prepare (ms)':>20} {'generate (ms)':>14} {'ratio':>6} {'peak KiB':>9}"
    )
    for history, prep, gen, peak in rows:
        print(
            f"{history:>8} {prep * 1e3:>20.2f} {gen * 1e3:>14.2f} {gen / prep:>6.2f} {peak / 1024:>9.0f}"
        )
    hs = [float(r[0]) for r in rows]
    print(
        f"slope (log time / log history): select+prepare {slope(hs, [r[1] for r in rows]):.2f}, "
        f"generate {slope(hs, [r[2] for r in rows]):.2f}; memory {slope(hs, [float(r[3]) for r in rows]):.2f}"
    )


if __name__ == "__main__":
    asyncio.run(main())
