"""A prototype on sessiongen: your own tool, a durable turn and its text, session.generate,
and the warming keeper, all against an emulator served on a socket (docs/prototype.md).

    uv run python docs/examples/prototype.py                         # serves its own emulator
    uv run python docs/examples/prototype.py http://127.0.0.1:8765   # a `sessiongen emulator`

tests/docs/test_prototype.py runs it, and tests/test_typing.py checks it with mypy --strict.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

import httpx
from pydantic import Field
from sessiongen import (
    Agent,
    AnthropicLLMClient,
    ModelRef,
    SessionEngine,
    SessionStore,
    Tool,
    ToolArgs,
    ToolCallPart,
    ToolCallScope,
    ToolNotRegistered,
    ToolRegistry,
)
from sessiongen.emulator import BackgroundServer
from sessiongen.sample import SYSTEM_PROMPT
from sessiongen.tools import BUILTIN_TOOLS
from sessiongen.warming import EmulatorClock, WarmingKeeper


# --8<-- [start:tool]
class WordCountArgs(ToolArgs):
    """What the model must give: the JSON schema on the wire comes from these fields."""

    path: str = Field(description="File path relative to the workspace root.")


def word_count(scope: ToolCallScope, args: WordCountArgs) -> str:
    """Runs in a thread under the registry's limits; the path stays inside the workspace."""
    text = scope.read_text(scope.resolve(args.path), max_bytes=1 << 20)
    return f"{len(text.split())} words"


WORD_COUNT = Tool("word_count", "Count the words of a workspace file.", WordCountArgs, word_count)
TOOLS = ToolRegistry([*BUILTIN_TOOLS.values(), WORD_COUNT])  # the built-in tools, and yours
# --8<-- [end:tool]

AGENT = Agent(
    name="counter",
    model=ModelRef(id="claude-sonnet-4-6"),
    system=SYSTEM_PROMPT,  # long enough to cache: over the model's 1,024-token minimum
    tools=("read_file", "word_count"),
)


def script(base_url: str, *replies: dict[str, object]) -> None:
    """What the emulator's model answers next (`POST /_emulator/script`): a real model
    would choose these itself."""
    httpx.post(f"{base_url}/_emulator/script", json={"responses": list(replies)}).raise_for_status()


async def main(base_url: str, workspace: Path) -> list[str]:
    lines: list[str] = []
    async with AnthropicLLMClient(base_url=base_url, api_key="any-key") as llm:
        # --8<-- [start:unregistered]
        misspelt = AGENT.model_copy(update={"tools": ("read_file", "word_cuont")})
        try:
            SessionEngine(SessionStore(), llm, [misspelt], tools=TOOLS)
        except ToolNotRegistered as error:  # refused when the engine is built
            lines.append(f"{type(error).__name__}: {error}")
        # --8<-- [end:unregistered]

        # --8<-- [start:turn]
        engine = SessionEngine(SessionStore(), llm, [AGENT], tools=TOOLS)
        session = engine.create_session("counter", workspace=workspace)
        script(
            base_url,
            {"tool_calls": [{"name": "word_count", "input": {"path": "notes.md"}}]},
            {"text": "notes.md has 9 words."},
        )
        turn = await engine.run(session.id, "How many words are in notes.md?")
        lines.append(f"turn: {turn.text!r} in {turn.steps} steps")
        for message in turn.messages:  # each Step's AssistantMessage, as it settled
            for part in message.parts:
                if isinstance(part, ToolCallPart):
                    lines.append(f"  {part.name}({part.input}) -> {part.result!r}")
        lines.append(f"below the cache minimum: {turn.below_cache_minimum}")
        # --8<-- [end:turn]

        # --8<-- [start:generate]
        script(base_url, {"text": "Counting notes"})
        result = await engine.generate(session.id, "Title this session.")
        lines.append(f"generate: {result.text!r}, read {result.usage.cache_read_tokens} cached")
        lines.append(f"the session moved: {result.revision != turn.revision}")
        # --8<-- [end:generate]

        # --8<-- [start:keeper]
        with EmulatorClock(base_url) as clock:  # the served emulator's virtual clock
            keeper = WarmingKeeper(engine, clock=clock)
            keeper.watch(session.id)  # after each turn: keeper.turn_finished(session.id)
            pings = await keeper.advance_by(20 * 60)  # twenty virtual minutes, every ping sent
            lines.append(f"{len(pings)} pings, all hits: {all(p.hit for p in pings)}")
            lines.append(f"then: {keeper.why_not_pinging(session.id)}")
        # --8<-- [end:keeper]
    return lines


def run(base_url: str | None = None) -> list[str]:
    """`main` in a fresh workspace, on the emulator at `base_url` or on one served here."""
    with tempfile.TemporaryDirectory() as directory:
        workspace = Path(directory)
        (workspace / "notes.md").write_text("Ship the keeper. Count the words. Write the page.\n")
        if base_url is not None:
            return asyncio.run(main(base_url, workspace))
        with BackgroundServer() as server:
            return asyncio.run(main(server.url, workspace))


if __name__ == "__main__":
    print(*run(sys.argv[1] if len(sys.argv) > 1 else None), sep="\n")
