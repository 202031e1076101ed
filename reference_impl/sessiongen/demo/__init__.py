"""The demo: three durable turns (one with tool calls) and one session.generate, on the
embedded emulator through the official SDK, with SQLite as the store, and the cache usage
of every request the emulator received."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from ..emulator import create_app
from ..engine import SessionEngine
from ..llm.anthropic import AnthropicLLMClient
from ..model import Agent, ModelRef
from ..store import SessionStore

SYSTEM_PROMPT = (Path(__file__).parent / "system_prompt.md").read_text(encoding="utf-8")
EMULATOR_URL = "http://emulator.local"

DEMO_AGENT = Agent(
    name="forge",
    model=ModelRef(id="claude-sonnet-4-6"),
    system=SYSTEM_PROMPT,
    tools=("read_file", "list_files", "grep"),
    steps=6,
    max_output_tokens=512,
)

WORKSPACE_FILES = {
    "AGENTS.md": "Run `pytest` before you report. Keep functions under 20 lines.\n",
    "src/app.py": "def add(a, b):\n    return a + b\n\n\ndef mean(xs):\n    return sum(xs) / len(xs)\n",
    "src/util.py": "TODO = 'remove me'\n",
    "tests/test_app.py": "from src.app import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
}

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
    uncached: int
    write_5m: int
    write_1h: int
    read: int
    output: int


def _row(index: int, operation: str, logged: dict[str, Any]) -> Row:
    usage = logged["usage"] or {}
    creation = usage.get("cache_creation") or {}
    return Row(
        request=index,
        operation=operation,
        at=float(logged["started_at"]),
        uncached=usage.get("input_tokens", 0),
        write_5m=creation.get("ephemeral_5m_input_tokens", 0),
        write_1h=creation.get("ephemeral_1h_input_tokens", 0),
        read=usage.get("cache_read_input_tokens", 0),
        output=usage.get("output_tokens", 0),
    )


async def run_demo(workspace: Path, database: Path | str = ":memory:") -> list[Row]:
    """Run the demo and return one row per request the emulator logged."""
    for name, text in WORKSPACE_FILES.items():
        (workspace / name).parent.mkdir(parents=True, exist_ok=True)
        (workspace / name).write_text(text, encoding="utf-8")
    app = create_app()
    transport = httpx.ASGITransport(app=app)
    async with (
        httpx.AsyncClient(transport=transport, base_url=EMULATOR_URL) as admin,
        AnthropicLLMClient(
            api_key="demo",
            http_client=httpx.AsyncClient(transport=transport, base_url=EMULATOR_URL),
        ) as llm,
    ):
        store = SessionStore(database)
        engine = SessionEngine(store, llm, [DEMO_AGENT])
        session = engine.create_session("forge", workspace=workspace)
        operations: list[str] = []
        await admin.post(
            "/_emulator/script",
            json={
                "responses": [
                    {
                        "text": "Let me look at the code.",
                        "tool_calls": [
                            {"name": "read_file", "input": {"path": "src/app.py"}},
                            {"name": "grep", "input": {"pattern": "TODO"}},
                        ],
                    },
                    {"text": "app.py defines add() and mean(); util.py still has a TODO."},
                ]
            },
        )
        for number, text in enumerate(TURNS, start=1):
            result = await engine.run(session.id, text)
            operations += [f"turn {number} step {s}" for s in range(1, result.steps + 1)]
            await admin.post("/_emulator/clock", json={"advance": 60})
        await engine.generate(session.id, "Give this session a five-word title.")
        operations.append("generate")
        logged = (await admin.get("/_emulator/requests")).json()["requests"]
        store.close()
    return [
        _row(i, op, entry) for i, (op, entry) in enumerate(zip(operations, logged, strict=True), 1)
    ]


def format_table(rows: list[Row]) -> str:
    header = f"{'#':>2}  {'request':<16}{'t (s)':>7}{'uncached':>10}{'write 5m':>10}{'write 1h':>10}{'read':>8}{'output':>8}"
    lines = [header, "-" * len(header)]
    lines += [
        f"{r.request:>2}  {r.operation:<16}{r.at:>7.0f}{r.uncached:>10}{r.write_5m:>10}{r.write_1h:>10}{r.read:>8}{r.output:>8}"
        for r in rows
    ]
    return "\n".join(lines)


async def print_demo() -> None:
    print(
        "sessiongen demo: official anthropic SDK -> embedded emulator (virtual clock), SQLite store"
    )
    with tempfile.TemporaryDirectory(prefix="sessiongen-demo-") as scratch:
        rows = await run_demo(Path(scratch))
    print(format_table(rows))
    print(
        "\nTurn one writes the prefix (tools, system, history); every later request reads it back"
        "\nand writes only what is new. The generate call reads the whole session prefix and"
        "\nleaves the session unchanged."
    )
