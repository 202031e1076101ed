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
from sessiongen.warming.events import load_events

REQUIRED = os.environ.get("SESSIONGEN_REQUIRE_AGENTS") == "1"


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
