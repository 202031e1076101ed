"""Shared fixtures: a small workspace, agents, and engines on test doubles."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from sessiongen import Agent, ModelRef, SessionEngine, SessionStore
from sessiongen.testing import RecordingLLMClient, ScriptedLLMClient

TOOLS = ("read_file", "list_files", "grep")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "workspace"
    (root / "src").mkdir(parents=True)
    (root / "AGENTS.md").write_text("Prefer small functions. Run the tests before finishing.\n")
    (root / "src" / "app.py").write_text("def add(a, b):\n    return a + b\n")
    (root / "src" / "util.py").write_text("TODO = 'remove me'\n")
    return root


@pytest.fixture
def agent() -> Agent:
    return Agent(
        name="build",
        model=ModelRef(id="claude-sonnet-4-6"),
        system="You are a careful coding agent working in a repository.",
        tools=TOOLS,
        steps=4,
        instructions=("Answer in English.",),
    )


EngineFactory = Callable[..., tuple[SessionEngine, ScriptedLLMClient, RecordingLLMClient]]


@pytest.fixture
def make_engine(agent: Agent) -> EngineFactory:
    """An engine on a ScriptedLLMClient (test double) behind a RecordingLLMClient."""

    def build(
        *, store: SessionStore | None = None, agents: list[Agent] | None = None, **kwargs: object
    ) -> tuple[SessionEngine, ScriptedLLMClient, RecordingLLMClient]:
        scripted = ScriptedLLMClient()
        recording = RecordingLLMClient(scripted)
        engine = SessionEngine(
            store or SessionStore(),
            recording,
            agents or [agent],
            **kwargs,  # type: ignore[arg-type]
        )
        return engine, scripted, recording

    return build
