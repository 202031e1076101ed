"""The real clients, installed from npm at their pinned versions, run the coding scenario on
the emulator with their default models: every turn ends, every scripted step is used, no
request is answered 4xx (a real provider serves each of them), and each agent-loop request
reads the whole prompt of the one before it from the cache.

A client that is not installed skips, saying how to install it, except where
SESSIONGEN_REQUIRE_AGENTS=1 (CI, whose `.ci/run` installs all four): there it fails."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pytest
from sessiongen.agents import CLIENTS, agents_dir, load_scenario, run_scenario
from sessiongen.agents.clients import ClientName
from sessiongen.warming.traces.events import load_events

REQUIRED = os.environ.get("SESSIONGEN_REQUIRE_AGENTS") == "1"
SESSION_HEADERS = {
    "claude-code": "x-claude-code-session-id",
    "codex": "session-id",
    "opencode": "x-session-id",
}
"""The header each client names its session in (seen in `notebooks/data/agents/`)."""


def _installed(name: ClientName) -> None:
    client = CLIENTS[name]()
    if client.binary(agents_dir()) is None:
        reason = (
            f"{client.spec} is not installed under {agents_dir()}: "
            f"uv run sessiongen agents install --client {name}"
        )
        if REQUIRED:
            pytest.fail(reason + " (SESSIONGEN_REQUIRE_AGENTS=1)")
        pytest.skip(reason)


@pytest.mark.parametrize("name", sorted(CLIENTS))
def test_the_client_completes_the_coding_scenario(name: ClientName, tmp_path: Path) -> None:
    _installed(name)
    run = run_scenario(name, load_scenario("coding"), tmp_path)
    logs = {p.name: p.read_text(errors="replace")[-2000:] for p in (tmp_path / "logs").iterdir()}
    assert run.completed, (run.turns, logs)
    refused = [(row.call, row.model, row.status) for row in run.rows if row.status >= 400]
    assert refused == [], refused
    loop = [row for row in run.rows if row.kind == "turn"]
    assert len(loop) >= sum(len(turn.steps) for turn in load_scenario("coding").turns)
    # Within a turn the loop only appends: each request shares the previous one's whole prompt.
    for before, after in zip(loop, loop[1:], strict=False):
        if before.turn == after.turn:
            assert after.shared_prefix_tokens == before.prompt_tokens, (before, after)
    # The files: the report has a row per logged request, the trace loads as events.
    requests = (tmp_path / "requests.jsonl").read_text().splitlines()
    assert len(requests) == len(run.rows)
    assert json.loads(requests[0])["client"] == f"{name} {CLIENTS[name]().version}"
    with open(tmp_path / "report.csv", newline="") as handle:
        assert len(list(csv.DictReader(handle))) == len(run.rows)
    trace = load_events(tmp_path / "trace.events.jsonl")
    assert len(trace.requests) == sum(1 for row in run.rows if row.status == 200)


@pytest.mark.parametrize("name", sorted(CLIENTS))
def test_the_client_delegates_to_a_subagent(name: ClientName, tmp_path: Path) -> None:
    """Each client's spawn tool starts a subagent whose request the report tells apart from
    the loop's, and the loop goes on after it answers."""
    _installed(name)
    run = run_scenario(name, load_scenario("subagent"), tmp_path)
    assert run.completed, run.turns
    kinds = [row.kind for row in run.rows]
    assert kinds.count("subagent") == 1, kinds
    assert kinds[-1] == "turn"


@pytest.mark.clause("SG-AGENTS-1")
@pytest.mark.parametrize("name", ["claude-code", "codex"])
def test_a_fork_reads_the_sessions_cached_prefix(name: ClientName, tmp_path: Path) -> None:
    """A fork (Claude Code's `fork` agent, Codex's `fork_turns: "all"`) sends the session's
    tools, system and history: it reads the previous turn's prompt from the cache, as a
    session.generate call does, and writes almost nothing of its own."""
    _installed(name)
    run = run_scenario(name, load_scenario("fork"), tmp_path)
    assert run.completed, run.turns
    fork = next(row for row in run.rows if row.kind == "subagent")
    before = [row for row in run.rows if row.kind == "turn" and row.call < fork.call][-1]
    assert fork.read >= 0.98 * before.prompt_tokens, (fork, before)


@pytest.mark.parametrize("name", sorted(CLIENTS))
def test_the_clients_compaction_is_a_call_of_its_own(name: ClientName, tmp_path: Path) -> None:
    """Each client's own compaction runs (Claude Code's /compact, Gemini CLI's /compress,
    Codex's auto-compaction, opencode's summarize route) and the report names it."""
    _installed(name)
    run = run_scenario(name, load_scenario("compaction"), tmp_path)
    assert run.completed, run.turns
    compactions = [row for row in run.rows if row.kind == "compaction"]
    assert compactions and all(row.turn == 2 for row in compactions)
    assert run.rows[-1].kind == "turn" and run.rows[-1].turn == 3


@pytest.mark.clause("SG-AGENTS-2")
@pytest.mark.parametrize("name", ["opencode", "claude-code", "codex"])
def test_a_session_fork_starts_from_the_parents_history(name: ClientName, tmp_path: Path) -> None:
    """The fork's first request carries the parent's history (it shares at least the tools
    and system); whether the cache serves it is the finding of SG-AGENTS-2."""
    _installed(name)
    run = run_scenario(name, load_scenario("session-fork"), tmp_path)
    assert run.completed, run.turns
    parent = [row for row in run.rows if row.kind == "turn" and row.turn == 1][-1]
    fork = next(row for row in run.rows if row.kind == "turn" and row.turn == 2)
    assert fork.shared_prefix_tokens > 0 and fork.prompt_tokens > parent.prompt_tokens
    # A new session, not the parent resumed: its session header (as each client sends it,
    # seen in the recorded runs) changes between the turns.
    entries = [json.loads(line) for line in (tmp_path / "requests.jsonl").read_text().splitlines()]
    sessions = [
        e["headers"].get(SESSION_HEADERS[name])
        for e in entries
        if "tools" in e["body"] or "input" in e["body"]
    ]
    assert sessions[0] is not None and sessions[-1] is not None
    assert sessions[-1] != sessions[0], sessions
