"""Emulator throughput through the official SDK over a real loopback socket, with 50-message
prompts and automatic caching: sequential (sync client) and concurrent (async client).

Run: uv run python benchmarks/emulator_throughput.py [--requests N] [--concurrency C]

`run(quick=False)` returns the three rates (requests/s) for `sessiongen bench`: 300 requests
in each mode, 8 concurrent (30 requests with `quick`).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

import anthropic
from sessiongen.emulator import BackgroundServer

MODEL = "claude-sonnet-4-6"


def conversation(turns: int = 50, words: int = 40) -> list[dict[str, Any]]:
    """`turns` alternating messages ending with a user message, ~50 tokens each."""
    messages: list[dict[str, Any]] = []
    for i in range(turns - 1):
        role = "user" if i % 2 == 0 else "assistant"
        messages.append({"role": role, "content": f"message {i}: " + "lorem ipsum " * (words // 2)})
    messages.append({"role": "user", "content": "And now the question?"})
    return messages


def params() -> dict[str, Any]:
    return {
        "model": MODEL,
        "max_tokens": 64,
        "system": "You are a benchmark.",
        "messages": conversation(),
        "cache_control": {"type": "ephemeral"},
    }


def sequential(url: str, n: int, *, stream: bool) -> float:
    body = params()
    with anthropic.Anthropic(api_key="bench", base_url=url, max_retries=0) as client:
        client.messages.create(**body)  # warm up connection and cache
        start = time.perf_counter()
        for _ in range(n):
            if stream:
                with client.messages.stream(**body) as s:
                    s.get_final_message()
            else:
                client.messages.create(**body)
        return n / (time.perf_counter() - start)


async def concurrent(url: str, n: int, concurrency: int) -> float:
    body = params()
    limit = asyncio.Semaphore(concurrency)
    async with anthropic.AsyncAnthropic(api_key="bench", base_url=url, max_retries=0) as client:
        await client.messages.create(**body)

        async def one() -> None:
            async with limit:
                await client.messages.create(**body)

        start = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(n)))
        return n / (time.perf_counter() - start)


def run(quick: bool = False, requests: int = 300, concurrency: int = 8) -> dict[str, float]:
    """Requests per second in each mode, against a fresh emulator on a loopback socket."""
    n = 30 if quick else requests
    with BackgroundServer() as server:
        return {
            "sequential": sequential(server.url, n, stream=False),
            "streaming": sequential(server.url, n, stream=True),
            "concurrent": asyncio.run(concurrent(server.url, n, concurrency)),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    with BackgroundServer() as server:
        usage = None
        with anthropic.Anthropic(api_key="bench", base_url=server.url, max_retries=0) as client:
            client.messages.create(**params())
            usage = client.messages.create(**params()).usage
        print(f"emulator at {server.url}, {MODEL}, 50-message prompt, automatic caching")
        print(f"  prompt: {usage.cache_read_input_tokens + usage.input_tokens} input tokens")
        rate = sequential(server.url, args.requests, stream=False)
        print(f"  sequential, non-streaming: {rate:7.1f} requests/s")
        rate = sequential(server.url, args.requests, stream=True)
        print(f"  sequential, streaming:     {rate:7.1f} requests/s")
        rate = asyncio.run(concurrent(server.url, args.requests, args.concurrency))
        print(f"  {args.concurrency} concurrent, non-streaming: {rate:7.1f} requests/s")
        print(f"  requests logged: {len(server.state.requests())}")


if __name__ == "__main__":
    main()
