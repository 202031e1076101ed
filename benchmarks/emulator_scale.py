"""How the emulator scales with what it holds: the cache store's `apply` with 100,000 live
entries against 1 (it should not care), and the request log's memory per logged request
against the request's raw body (a 50-message prompt, about 14 KB).

Run: uv run python benchmarks/emulator_scale.py [--entries N] [--requests N]

`run()` returns the figures as a dict (for `sessiongen bench`):
- `apply_ms_1`, `apply_ms_many`: median wall time of one apply (a new 50-block prompt, one
  breakpoint: a miss and a write) with 1 and with `entries` live entries;
- `apply_ratio`: `apply_ms_many / apply_ms_1` (about 1 when the cost ignores stored entries);
- `body_bytes`: the raw body of each logged request;
- `log_bytes_per_request`: memory the emulator retains per request (tracemalloc, after GC),
  measured through the app over an in-process ASGI transport;
- `memory_ratio`: `log_bytes_per_request / body_bytes` (the target is at most 1.2).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import time
import tracemalloc
from typing import Any

import httpx2
from sessiongen.cache import CacheStore
from sessiongen.emulator import EmulatorState, create_app

MODEL = "claude-sonnet-4-6"
BLOCKS = 50  # blocks of each timed apply, like a 50-message prompt
TIMED_APPLIES = 101  # the median is over this many (>= 5)


def _prompt(tag: str) -> list[tuple[str, int, Any]]:
    blocks: list[tuple[str, int, Any]] = [(f"{tag}/{k}", 60, None) for k in range(BLOCKS - 1)]
    return [*blocks, (f"{tag}/{BLOCKS - 1}", 60, "5m")]


def _filled(entries: int) -> CacheStore:
    """A store holding `entries` live 1h entries (one single-block prompt each)."""
    store = CacheStore()
    for k in range(entries):
        store.apply([(f"live{k}", 2000, "1h")], model=MODEL, now=0.0, min_tokens=1024)
    assert len(store.entries()) == entries
    return store


def apply_ms(entries: int) -> float:
    """Median wall milliseconds of one apply of a new prompt with `entries` live entries."""
    store = _filled(entries)
    prompts = [_prompt(f"p{k}") for k in range(TIMED_APPLIES)]
    times = []
    for k, prompt in enumerate(prompts):
        start = time.perf_counter()
        store.apply(prompt, model=MODEL, now=1.0 + k, min_tokens=1024)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def body(turns: int = BLOCKS, words: int = 40) -> bytes:
    """A Messages request of `turns` alternating messages (about 14 KB), with automatic
    caching, as the SDK would send it."""
    messages: list[dict[str, Any]] = []
    for i in range(turns - 1):
        role = "user" if i % 2 == 0 else "assistant"
        messages.append({"role": role, "content": f"message {i}: " + "lorem ipsum " * (words // 2)})
    messages.append({"role": "user", "content": "And now the question?"})
    params = {
        "model": MODEL,
        "max_tokens": 64,
        "system": "You are a benchmark.",
        "messages": messages,
        "cache_control": {"type": "ephemeral"},
    }
    return json.dumps(params).encode()


HEADERS = {
    "content-type": "application/json",
    "x-api-key": "sk-ant-bench",
    "anthropic-version": "2023-06-01",
    "x-session-id": "ses_bench",
}


async def _log_bytes(requests: int) -> tuple[int, float]:
    """(raw body bytes, bytes retained per logged request)."""
    raw = body()
    state = EmulatorState()
    app = create_app(state)
    transport = httpx2.ASGITransport(app=app)
    async with httpx2.AsyncClient(transport=transport, base_url="http://emulator") as client:
        for _ in range(3):  # warm up: imports, caches, the prompt's cache entries
            (await client.post("/v1/messages", content=raw, headers=HEADERS)).raise_for_status()
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.take_snapshot()
        for _ in range(requests):
            # A fresh bytes object each time, as a server reads each body anew.
            sent = bytes(bytearray(raw))
            (await client.post("/v1/messages", content=sent, headers=HEADERS)).raise_for_status()
            del sent
        gc.collect()
        after = tracemalloc.take_snapshot()
        tracemalloc.stop()
    assert len(state.requests()) == requests + 3
    grown = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    return len(raw), grown / requests


def run(entries: int = 100_000, requests: int = 200) -> dict[str, float]:
    one = min(apply_ms(1) for _ in range(3))
    many = min(apply_ms(entries) for _ in range(1))
    body_bytes, per_request = asyncio.run(_log_bytes(requests))
    return {
        "apply_ms_1": one,
        "apply_ms_many": many,
        "apply_ratio": many / one,
        "body_bytes": float(body_bytes),
        "log_bytes_per_request": per_request,
        "memory_ratio": per_request / body_bytes,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()
    figures = run(args.entries, args.requests)
    print(f"apply, 1 live entry:          {figures['apply_ms_1']:.4f} ms (median)")
    print(f"apply, {args.entries:,} live entries: {figures['apply_ms_many']:.4f} ms (median)")
    print(f"ratio:                        {figures['apply_ratio']:.2f}")
    print(f"raw body:                     {figures['body_bytes']:,.0f} bytes")
    print(f"retained per logged request:  {figures['log_bytes_per_request']:,.0f} bytes")
    print(f"memory / raw body:            {figures['memory_ratio']:.3f}")


if __name__ == "__main__":
    main()
