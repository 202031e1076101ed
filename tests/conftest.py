"""Shared fixtures: a small workspace, agents, and engines on test doubles."""

from __future__ import annotations

import os
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


SLOW = (
    "notebooks/",  # nbval: each notebook in a kernel
    "tests/reliability/",  # crash runs, soak, concurrency across processes, fuzzing
    "tests/docs/test_site.py",  # the site build and the browser
    "tests/client/test_end_to_end.py",  # real server and emulator processes
    "tests/server/test_serve.py",  # `sessiongen serve` as a process
    "tests/test_probe.py",  # probes against emulators on sockets
    "tests/test_probe_hostile.py",  # probes against hostile servers, in processes
    "tests/test_workbench.py",  # notebooks and site builds
    "tests/test_jupyterlab.py",  # JupyterLab as a process
    "tests/test_typing.py",  # mypy over a prototype
    "tests/test_quality.py::test_mypy_strict_is_clean",
    "tests/generate/test_evidence.py::test_the_contracts_tables_are_the_fresh_measurement",
    "tests/providers/test_tools_policy_matrix.py",  # every policy on every provider's SDK
    "tests/warming/test_experiment_cli.py",  # the experiment on the Mooncake traces
    "tests/warming/test_notebook_parameters.py",  # notebook 03 through papermill
    "tests/agents/test_real_agents.py",  # the real agent clients as processes
    "tests/agents/test_conform.py",  # `sessiongen serve` and broken servers on sockets
    "tests/agents/test_agents_cli.py",  # the command as a process
)
"""Where the slow tests are, by module (or test): `-m "not slow"` leaves them out. One list,
so a new slow module is one line here."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.nodeid.startswith(SLOW):
            item.add_marker(pytest.mark.slow)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the long external commands whose tests were collected (mypy, the docs build) on
    the other core now, instead of one after another when their tests come up."""
    from . import _background

    if os.environ.get("PYTEST_XDIST_WORKER"):
        return  # under xdist the workers are the parallelism: each job starts where it is needed
    ids = [item.nodeid for item in session.items]
    if any(i.startswith("tests/test_quality.py::test_mypy_strict_is_clean") for i in ids):
        _background.start("mypy", _background.MYPY)
    if any(i.startswith("tests/docs/test_site.py") for i in ids):
        _background.start("site", _background.SITE_BUILD, env=_background.SITE_ENV)


def pytest_sessionfinish(session: pytest.Session) -> None:
    from . import _background

    _background.stop_all()
