"""The demo: three durable turns (one with tool calls) and one session.generate, on the
embedded emulator through a provider's official SDK (Anthropic by default; Bedrock, OpenAI or
Gemini with `provider`), with SQLite as the store, and the cache usage of every request the
emulator received, read in that provider's usage shape."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .lab import PROVIDER_MODELS, SDKS, LoggedUsage, Provider, emulator_lab
from .sample import SAMPLE_AGENT

TURNS = (
    "What does src/app.py do, and is anything left to do in the code?",
    "Does mean() handle an empty list?",
    "Summarise the risks you found in one sentence.",
)


_WRITES = (
    "\nTurn one writes the prefix (tools, system, history); every later request reads it"
    "\nback and writes only what is new. The generate call reads the whole session prefix"
    "\nand leaves the session unchanged."
)
NOTES: dict[Provider, str] = {
    "anthropic": _WRITES,
    "bedrock": _WRITES + "\nClaude on Bedrock caches as on Anthropic: at cachePoint blocks.",
    "openai": (
        "\nOpenAI caches automatically, with no writes: every later request reads back the"
        "\nprefix an earlier one sent, rounded down to a multiple of 128 tokens (from 1,024)."
        "\nThe generate call reads the session prefix and leaves the session unchanged."
    ),
    "gemini": (
        "\nGemini caches implicitly, with no writes: every later request reads back the"
        "\nprefix an earlier one sent (from 1,024 tokens on gemini-3-flash-preview). The"
        "\ngenerate call reads the whole session prefix and leaves the session unchanged."
    ),
}
"""What each provider's table shows, printed under it."""


@dataclass(frozen=True)
class Row:
    request: int
    operation: str
    at: float
    usage: LoggedUsage


async def run_demo(
    database: Path | str = ":memory:", provider: Provider = "anthropic"
) -> list[Row]:
    """Run the demo in a temporary workspace (removed after) through `provider`'s official
    SDK and return one row per request the emulator logged."""
    async with emulator_lab(database=database, provider=provider) as lab:
        session = lab.engine.create_session(SAMPLE_AGENT.name, workspace=lab.workspace)
        operations: list[str] = []
        lab.script(
            {
                "text": "Let me look at the code.",
                "tool_calls": [
                    {"name": "read_file", "input": {"path": "src/app.py"}},
                    {"name": "grep", "input": {"pattern": "TODO"}},
                ],
            },
            {"text": "app.py defines add() and mean(); util.py still has a TODO."},
        )
        for number, text in enumerate(TURNS, start=1):
            result = await lab.engine.run(session.id, text)
            operations += [f"turn {number} step {s}" for s in range(1, result.steps + 1)]
            lab.advance_by(60)
        await lab.engine.generate(session.id, "Give this session a five-word title.")
        operations.append("generate")
        logged = lab.requests()
    return [
        Row(i, op, float(entry["started_at"]), LoggedUsage.of(entry))
        for i, (op, entry) in enumerate(zip(operations, logged, strict=True), start=1)
    ]


def format_table(rows: list[Row]) -> str:
    header = (
        f"{'#':>2}  {'request':<16}{'t (s)':>7}{'uncached':>10}{'write 5m':>10}"
        f"{'write 1h':>10}{'read':>8}{'output':>8}"
    )
    lines = [header, "-" * len(header)]
    for r in rows:
        u = r.usage
        lines.append(
            f"{r.request:>2}  {r.operation:<16}{r.at:>7.0f}{u.uncached:>10}{u.write_5m:>10}"
            f"{u.write_1h:>10}{u.read:>8}{u.output:>8}"
        )
    return "\n".join(lines)


async def print_demo(provider: Provider = "anthropic") -> None:
    print(
        f"sessiongen demo: {provider} ({PROVIDER_MODELS[provider]}) via the official "
        f"{SDKS[provider]} -> embedded emulator (virtual clock), SQLite"
    )
    print(format_table(await run_demo(provider=provider)))
    print(NOTES[provider])
