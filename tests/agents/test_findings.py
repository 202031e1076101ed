"""SG-AGENTS-1 and SG-AGENTS-2 on the committed runs of the real clients
(`notebooks/data/agents/`, recorded with `sessiongen agents run`; the live runs are in
test_real_agents.py): what the clients' side calls read of the session's cache, and whether a
history reload keeps the prefix."""

from __future__ import annotations

import json
import lzma
from pathlib import Path

import pytest
from sessiongen.agents import CLIENTS
from sessiongen.agents.findings import (
    RecordingError,
    history_reloads,
    load_runs,
    side_call_costs,
    side_call_shares,
)
from sessiongen.agents.run import report_rows
from sessiongen.agents.wire import read_call

RUNS = Path(__file__).resolve().parents[2] / "notebooks" / "data" / "agents"


@pytest.fixture(scope="module")
def runs() -> list:  # type: ignore[type-arg]
    return load_runs(RUNS)


def test_every_recorded_run_completed_on_its_clients_default_model(runs: list) -> None:  # type: ignore[type-arg]
    assert {r.client for r in runs} == {"opencode", "claude-code", "codex", "gemini-cli"}
    assert all(r.completed for r in runs), [(r.client, r.scenario) for r in runs if not r.completed]
    assert all(row.status == 200 for r in runs for row in r.rows)


@pytest.mark.clause("SG-AGENTS-1")
def test_side_calls_that_need_the_session_read_its_prefix_and_the_others_share_nothing(
    runs: list,  # type: ignore[type-arg]
) -> None:
    """Claude Code's fork and compaction, and Codex's fork, read (nearly) the whole prompt of
    the session's previous turn: they are already shaped as session.generate. opencode's
    title and Gemini CLI's router share nothing with the session and cost less as run than
    shaped as a generate call on the session's model; a fresh Claude Code subagent costs
    more as run."""
    costs = side_call_costs(runs)

    def one(client: str, scenario: str, kind: str):  # type: ignore[no-untyped-def]
        found = [c for c in costs if (c.client, c.scenario, c.kind) == (client, scenario, kind)]
        assert found, (client, scenario, kind)
        return found[0]

    for shaped in (
        one("claude-code", "fork", "subagent"),
        one("claude-code", "compaction", "compaction"),
        one("codex", "fork", "subagent"),
        one("codex", "compaction", "compaction"),
    ):
        assert shaped.read >= 0.98 * shaped.session_prefix_tokens, shaped
    for blind in (one("opencode", "coding", "title"), one("gemini-cli", "coding", "side call")):
        assert blind.shared_prefix_tokens == 0 and blind.read == 0
        assert blind.cost_as_run < blind.cost_as_generate
    # opencode's compaction re-sends the history as text, with no tools: it reads nothing.
    summary = one("opencode", "compaction", "compaction")
    assert summary.read == 0 and summary.shared_prefix_tokens == 0
    fresh = one("claude-code", "subagent", "subagent")
    assert fresh.read == 0 and fresh.cost_as_generate < fresh.cost_as_run
    shares = {s.client: s for s in side_call_shares(runs)}
    assert shares["gemini-cli"].share > shares["opencode"].share > shares["codex"].share > 0


@pytest.mark.clause("SG-AGENTS-2")
def test_a_history_reload_keeps_the_prefix_except_gemini_clis(runs: list) -> None:  # type: ignore[type-arg]
    """Claude Code, Codex and opencode rebuild the previous turn's prompt byte for byte after
    a restart; Gemini CLI 0.61.0 re-renders the project's file tree in its first message."""
    reloads = history_reloads(runs)
    kept = {r.client: r.kept for r in reloads if r.how == "resume"}
    assert kept == {"claude-code": True, "codex": True, "opencode": True, "gemini-cli": False}
    # A fork: Claude Code reads the parent's cache; Codex keeps the bytes under a new cache
    # key and reads nothing; opencode offers the fork one more tool.
    forks = {r.client: r for r in reloads if r.how == "fork"}
    fork = forks["claude-code"]
    assert fork.kept and fork.read == fork.previous_prompt_tokens
    assert forks["codex"].kept and forks["codex"].read == 0
    assert not forks["opencode"].kept and forks["opencode"].read == 0


def test_a_folder_without_runs_or_with_a_foreign_report_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(RecordingError, match="no recorded run"):
        load_runs(tmp_path)
    run = tmp_path / "codex" / "coding"
    run.mkdir(parents=True)
    (run / "run.json").write_text(
        '{"client": "codex", "version": "0", "scenario": "coding", "completed": true}'
    )
    (run / "report.csv").write_text("a,b\n1,2\n")
    with pytest.raises(RecordingError, match="columns are not call, turn, kind"):
        load_runs(tmp_path)
    (run / "run.json").write_text("{")
    with pytest.raises(RecordingError, match="run.json|Expecting"):
        load_runs(tmp_path)


def test_each_committed_report_is_what_its_requests_say(runs: list) -> None:  # type: ignore[type-arg]
    """`report.csv` re-derived from the run's committed requests with today's wire reader and
    classifier equals the committed one (each call's turn taken from it): a change to either
    that would change a recorded figure fails here until the runs are recorded again."""
    for run in runs:
        folder = RUNS / run.client / run.scenario
        with lzma.open(folder / "requests.jsonl.xz", "rt", encoding="utf-8") as handle:
            calls = [read_call(json.loads(line)) for line in handle]
        again = report_rows(CLIENTS[run.client](), calls, [row.turn for row in run.rows])
        assert tuple(again) == run.rows, (run.client, run.scenario)
