"""The demo: three durable turns (one with tool calls) and one session.generate, on the
embedded emulator through a provider's official SDK (Anthropic by default; Bedrock, OpenAI or
Gemini with `provider`), with SQLite as the store, and the cache usage of every request the
emulator received, read in that provider's usage shape."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .lab import emulator_lab, logged_usage
from .llm.types import Usage
from .providers import PROVIDERS
from .sample import SAMPLE_AGENT

TURNS = (
    "What does src/app.py do, and is anything left to do in the code?",
    "Does mean() handle an empty list?",
    "Summarise the risks you found in one sentence.",
)


@dataclass(frozen=True)
class Row:
    request: int
    operation: str
    at: float
    usage: Usage


async def run_demo(database: Path | str = ":memory:", provider: str = "anthropic") -> list[Row]:
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
        Row(i, op, float(entry["started_at"]), logged_usage(entry))
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
            f"{r.request:>2}  {r.operation:<16}{r.at:>7.0f}{u.input_tokens:>10}"
            f"{u.cache_write_5m_tokens:>10}{u.cache_write_1h_tokens:>10}"
            f"{u.cache_read_tokens:>8}{u.output_tokens:>8}"
        )
    return "\n".join(lines)


async def print_demo(provider: str = "anthropic") -> None:
    """Run the demo, then print it; a failure (a provider SDK not installed: `MissingExtra`)
    is raised before anything is printed."""
    entry = PROVIDERS[provider]
    rows = await run_demo(provider=provider)
    print(
        f"sessiongen demo: {provider} ({entry.lab_model}) via the official "
        f"{entry.sdk_label} -> embedded emulator (virtual clock), SQLite"
    )
    print(format_table(rows))
    print(entry.cache_note)
