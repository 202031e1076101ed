"""What recorded `sessiongen agents run` folders show: the share of side calls, what each
reads and writes, what it would cost shaped as the contract's `session.generate`, whether a
history reload keeps the prefix, and what idle gaps do to the next turn.

A folder holds one run per `<client>/<scenario>/` (the run's `run.json` and `report.csv`);
notebook 07 reads the runs committed in `notebooks/data/agents/`.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..cache.pricing import cost
from ..llm.types import Usage
from .run import REPORT_COLUMNS, CallRow

MAX_REPORT_BYTES = 16 * 1024 * 1024


class RecordingError(ValueError):
    """A run folder that cannot be read (no run.json, or not the report's columns)."""


@dataclass(frozen=True)
class RecordedRun:
    client: str
    version: str
    scenario: str
    completed: bool
    rows: tuple[CallRow, ...]

    @property
    def main_model(self) -> str:
        """The model of the session's own turns."""
        return next((r.model for r in self.rows if r.kind == "turn"), "")


def load_runs(folder: Path) -> list[RecordedRun]:
    """Every run under `folder` (`<client>/<scenario>/run.json` and `report.csv`), in
    client then scenario order."""
    runs = [_load_run(path.parent) for path in sorted(folder.glob("*/*/run.json"))]
    if not runs:
        raise RecordingError(f"{folder}: no recorded run (<client>/<scenario>/run.json)")
    return runs


def _load_run(folder: Path) -> RecordedRun:
    try:
        summary = json.loads((folder / "run.json").read_text(encoding="utf-8"))
        report = folder / "report.csv"
        if report.stat().st_size > MAX_REPORT_BYTES:
            raise RecordingError(f"{report}: over {MAX_REPORT_BYTES} bytes")
        with open(report, encoding="utf-8", newline="") as handle:
            reader = csv.DictReader(handle)
            # A report written before `miss_cause` was added has every column but that one.
            if tuple(reader.fieldnames or ()) not in (REPORT_COLUMNS, REPORT_COLUMNS[:-1]):
                raise RecordingError(f"{report}: columns are not {', '.join(REPORT_COLUMNS)}")
            rows = tuple(_row(line) for line in reader)
        return RecordedRun(
            client=str(summary["client"]),
            version=str(summary["version"]),
            scenario=str(summary["scenario"]),
            completed=bool(summary["completed"]),
            rows=rows,
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        if isinstance(exc, RecordingError):
            raise
        raise RecordingError(f"{folder}: {exc}") from None


def _row(line: dict[str, str]) -> CallRow:
    text = {"kind", "model", "miss_cause"}
    values = {k: (v if k in text else int(v)) for k, v in line.items()}
    return CallRow(**values)  # type: ignore[arg-type]


@dataclass(frozen=True)
class KindShare:
    client: str
    calls: int
    turns: int
    side_calls: int
    kinds: dict[str, int]

    @property
    def share(self) -> float:
        return self.side_calls / self.calls if self.calls else 0.0


def side_call_shares(runs: Sequence[RecordedRun]) -> list[KindShare]:
    """Per client, over all its runs: calls, turns, and the calls that are not turns."""
    shares: dict[str, KindShare] = {}
    for run in runs:
        kinds = dict(shares[run.client].kinds) if run.client in shares else {}
        for row in run.rows:
            kinds[row.kind] = kinds.get(row.kind, 0) + 1
        calls = sum(kinds.values())
        turns = kinds.get("turn", 0)
        shares[run.client] = KindShare(run.client, calls, turns, calls - turns, kinds)
    return list(shares.values())


@dataclass(frozen=True)
class SideCallCost:
    """One side call as the client made it, and shaped as `session.generate` under tools
    policy A: the session's own model, tools, system and history (the previous turn's
    prompt, read from the cache it wrote), with the side call's own tokens appended
    uncached and no breakpoint of its own."""

    client: str
    scenario: str
    call: int
    kind: str
    model: str
    prompt_tokens: int
    read: int
    written: int
    uncached: int
    shared_prefix_tokens: int
    cost_as_run: float
    session_prefix_tokens: int
    """The previous turn's prompt: what the generate-shaped call reads."""
    cost_as_generate: float


def side_call_costs(runs: Sequence[RecordedRun]) -> list[SideCallCost]:
    found: list[SideCallCost] = []
    for run in runs:
        previous: CallRow | None = None
        for row in run.rows:
            if row.kind == "turn":
                previous = row
                continue
            if row.status != 200:
                continue
            prefix = previous.prompt_tokens if previous else 0
            own = row.prompt_tokens - row.shared_prefix_tokens
            shaped = Usage(
                input_tokens=own, cache_read_tokens=prefix, output_tokens=row.output_tokens
            )
            found.append(
                SideCallCost(
                    client=run.client,
                    scenario=run.scenario,
                    call=row.call,
                    kind=row.kind,
                    model=row.model,
                    prompt_tokens=row.prompt_tokens,
                    read=row.read,
                    written=row.written_5m + row.written_1h,
                    uncached=row.uncached,
                    shared_prefix_tokens=row.shared_prefix_tokens,
                    cost_as_run=cost(row.usage, row.model),
                    session_prefix_tokens=prefix,
                    cost_as_generate=cost(shaped, run.main_model),
                )
            )
    return found


RELOADS = {"history-reload": "resume", "session-fork": "fork"}
"""The scenarios whose second turn rebuilds the session from the client's store: by
resuming it, or in a fork of it."""


@dataclass(frozen=True)
class Reload:
    """The first request of a turn run by a fresh client process against the previous
    turn's last request: the history reloaded from the client's own store, resumed or
    forked."""

    client: str
    how: str
    turn: int
    previous_prompt_tokens: int
    shared_prefix_tokens: int
    read: int

    @property
    def kept(self) -> bool:
        """The previous prompt came back byte for byte (whether the cache served it is
        `read`: a fork under another cache key keeps the bytes and reads nothing)."""
        return self.shared_prefix_tokens >= self.previous_prompt_tokens


def history_reloads(runs: Sequence[RecordedRun]) -> list[Reload]:
    found: list[Reload] = []
    for run in (r for r in runs if r.scenario in RELOADS):
        previous: CallRow | None = None
        for row in run.rows:
            if row.kind != "turn":
                continue
            if previous is not None and row.turn != previous.turn:
                found.append(
                    Reload(
                        run.client,
                        RELOADS[run.scenario],
                        row.turn,
                        previous.prompt_tokens,
                        row.shared_prefix_tokens,
                        row.read,
                    )
                )
            previous = row
    return found


@dataclass(frozen=True)
class GapOutcome:
    client: str
    turn: int
    idle_seconds: float
    prompt_tokens: int
    read: int
    written: int
    uncached: int


def gap_outcomes(runs: Sequence[RecordedRun], idle: Sequence[float]) -> list[GapOutcome]:
    """The first turn request after each idle gap of the `idle-gaps` scenario (`idle`: the
    scenario's `idle_before` per turn)."""
    found: list[GapOutcome] = []
    for run in (r for r in runs if r.scenario == "idle-gaps"):
        seen: set[int] = set()
        for row in run.rows:
            if row.kind != "turn" or row.turn in seen or row.turn < 2:
                continue
            seen.add(row.turn)
            found.append(
                GapOutcome(
                    run.client,
                    row.turn,
                    idle[row.turn - 1],
                    row.prompt_tokens,
                    row.read,
                    row.written_5m + row.written_1h,
                    row.uncached,
                )
            )
    return found
