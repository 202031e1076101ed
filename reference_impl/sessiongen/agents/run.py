"""`sessiongen agents run`: one real client, one scenario, an emulator of its own.

The run starts the emulator on a loopback port, makes a throwaway HOME and project (the
scenario's files, a git repository), and for each turn queues the scenario's steps on the
script queue, each matched to the client's agent-loop requests (`ScriptMatch`), so the
client's own side calls (titles, routing, summaries) pass them by and get the unscripted
reply. The client then runs one non-interactive turn as a subprocess (a fresh process each
turn: its history is reloaded from its own store). Idle time between turns is virtual: the
emulator's clock moves, nothing sleeps.

It writes to `--out`:
- `requests.jsonl`: each request as the emulator logged it, with its usage;
- `trace.events.jsonl`: the events format (docs/traces.md), one line per served request,
  blocks as the emulator's cache hashed and counted them and the client's own breakpoints,
  replayable by `sessiongen experiment warming --format events`;
- `report.csv`: one row per call (`REPORT_COLUMNS`);
- `run.json`: the client, its version, the scenario and each turn's outcome;
- `logs/`: each turn's stdout and stderr.
"""

from __future__ import annotations

import csv
import json
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..cache import TTL, get_model, is_known_model, is_miss, miss_cause
from ..emulator import BackgroundServer, EmulatorState, ScriptedResponse, ScriptMatch
from ..llm.types import Usage
from .clients import (
    CLIENTS,
    AgentClient,
    CallKind,
    ClientName,
    Continuation,
    UnsupportedIntent,
    agents_dir,
)
from .process import LOG_BYTES, Workspace, run_process
from .scenario import Scenario, Turn
from .wire import WireCall, call_shape, left_cached, read_call, shared_prefix_tokens

REPORT_COLUMNS = (
    "call",
    "turn",
    "kind",
    "model",
    "status",
    "prompt_tokens",
    "uncached",
    "written_5m",
    "written_1h",
    "read",
    "output_tokens",
    "shared_prefix_tokens",
    "miss_cause",
)
"""`report.csv`'s columns. `shared_prefix_tokens`: the longest prefix the call shares with
the session's previous turn request (whole positions, as the cache hashes them).
`miss_cause`: why the call read less than the previous call of its kind left cached
(`cache.miss_cause`: `cold_start`, `ttl_expired_5m`, `tools_changed`, ...), empty when it
did not miss; the agent loop and compaction are one session, each other kind its own."""

TURN_TIMEOUT = 180.0


@dataclass(frozen=True)
class TurnOutcome:
    turn: int
    exit_code: int | None
    """None: the turn ran past its time limit and was killed."""
    requests: int
    unused_steps: int
    """Scripted steps no agent-loop request took (the client stopped early, or its loop
    offered other tools than the client's mapping expects)."""


@dataclass(frozen=True)
class CallRow:
    call: int
    turn: int
    kind: CallKind
    model: str
    status: int
    prompt_tokens: int
    uncached: int
    written_5m: int
    written_1h: int
    read: int
    output_tokens: int
    shared_prefix_tokens: int
    miss_cause: str = ""

    @property
    def usage(self) -> Usage:
        """The call's billed counts as the LLM layer's `Usage` (what prices it)."""
        return Usage(
            input_tokens=self.uncached,
            output_tokens=self.output_tokens,
            cache_read_tokens=self.read,
            cache_write_5m_tokens=self.written_5m,
            cache_write_1h_tokens=self.written_1h,
        )


@dataclass(frozen=True)
class AgentRun:
    client: ClientName
    version: str
    scenario: str
    model: str | None
    turns: tuple[TurnOutcome, ...]
    rows: tuple[CallRow, ...]
    out: Path

    @property
    def completed(self) -> bool:
        """Every turn exited 0 and used every scripted step."""
        return all(t.exit_code == 0 and t.unused_steps == 0 for t in self.turns)


def run_scenario(
    client_name: ClientName,
    scenario: Scenario,
    out: Path,
    *,
    root: Path | None = None,
    model: str | None = None,
    timeout: float = TURN_TIMEOUT,
) -> AgentRun:
    """Run `scenario` with the installed client (`root`: where `sessiongen agents install`
    put it) and write the run's files into `out`. Raises ClientNotInstalled."""
    client = CLIENTS[client_name]()
    for turn in scenario.turns:
        if turn.fork_session and not client.can_fork_session:
            raise UnsupportedIntent(f"{client.name} cannot continue in a fork of the session")
        if turn.command == "compact" and not client.can_compact:
            raise UnsupportedIntent(
                f"{client.name} has no compaction command when run non-interactively"
            )
        for step in turn.steps:
            for intent in step.calls:
                client.check(intent)
    binary = client.require(root if root is not None else agents_dir())
    out.mkdir(parents=True, exist_ok=True)
    (out / "logs").mkdir(exist_ok=True)
    outcomes: list[TurnOutcome] = []
    turn_of: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix=f"sessiongen-{client.name}-") as work:
        home, project = Path(work) / "home", Path(work) / "project"
        _make_project(project, scenario.files)
        state = EmulatorState()
        with BackgroundServer(state) as server:
            env = client.prepare(home, project, server.url)
            workspace = Workspace(binary, project, env, timeout)
            for index, turn in enumerate(scenario.turns):
                state.clock.advance(turn.idle_before)
                state.queue_responses(_script(client, turn, project, model))
                before = {entry["id"] for entry in state.requests()}
                log = out / "logs" / f"turn-{index + 1}"
                if turn.command == "compact":
                    code = client.compact(workspace, log, model)
                else:
                    argv = client.turn(
                        binary, turn.prompt, model=model, session=_continuation(index, turn)
                    )
                    code = run_process(argv, workspace, log)
                client.remember(
                    _read_log(log.with_suffix(".stdout")), _read_log(log.with_suffix(".stderr"))
                )
                new = [e["id"] for e in state.requests() if e["id"] not in before]
                turn_of.update((request_id, index + 1) for request_id in new)
                outcomes.append(TurnOutcome(index + 1, code, len(new), state.clear_script()))
            entries = state.requests()
    calls = [read_call(entry) for entry in entries]
    rows = report_rows(client, calls, [turn_of.get(c.id, 0) for c in calls])
    run = AgentRun(
        client.name, client.version, scenario.name, model, tuple(outcomes), tuple(rows), out
    )
    _write(run, client, entries, calls)
    return run


def _continuation(index: int, turn: Turn) -> Continuation:
    if index == 0 or turn.new_session:
        return "new"
    return "fork" if turn.fork_session else "resume"


def _script(
    client: AgentClient, turn: Turn, project: Path, model: str | None
) -> list[ScriptedResponse]:
    """The turn's steps for the agent loop's requests, each subagent's reply after the
    loop's steps that start it. While a turn delegates, the two kinds of request are told
    apart by the client's subagent header, else by a tool only the parent is offered, else
    (a subagent offered the parent's very tools) served in order."""
    delegates = any(c.tool == "subagent" for step in turn.steps for c in step.calls)
    forks = any(c.fork for step in turn.steps for c in step.calls)
    loop_tool = client.loop_tool(model)
    loop: ScriptMatch | None = ScriptMatch(tools=[loop_tool])
    child = ScriptMatch(tools=[loop_tool])
    if turn.command is not None:
        loop = None  # a command's request (a compaction) need not offer the loop's tools
    elif delegates and client.subagent_header:
        header = [client.subagent_header]
        loop = ScriptMatch(tools=[loop_tool], without_headers=header)
        child = ScriptMatch(tools=[loop_tool], headers=header)
    elif delegates and client.parent_only_tool and not forks:
        apart = [client.parent_only_tool]
        loop = ScriptMatch(tools=[loop_tool, *apart])
        child = ScriptMatch(tools=[loop_tool], without=apart)
    script: list[ScriptedResponse] = []
    for step in turn.steps:
        calls = [client.call(c, project, model) for c in step.calls]
        script.append(
            ScriptedResponse(match=loop, text=step.say, thinking=step.think, tool_calls=calls)
        )
        for intent in (c for c in step.calls if c.tool == "subagent"):
            script += [
                ScriptedResponse(match=loop, tool_calls=[call])
                for call in client.after_spawn(intent)
            ]
            script.append(client.subagent_reply(intent).model_copy(update={"match": child}))
    return script


def _make_project(project: Path, files: Mapping[str, str]) -> None:
    project.mkdir(parents=True)
    for relative, text in files.items():
        path = project / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    # Clients look for the repository root (Codex refuses to run outside one by default).
    git = ["git", "-c", "user.name=sessiongen", "-c", "user.email=agents@sessiongen.invalid"]
    for command in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "scenario", "--allow-empty"]):
        subprocess.run([*git, *command], cwd=project, capture_output=True, timeout=60, check=False)


def _read_log(path: Path) -> str:
    return path.read_bytes()[:LOG_BYTES].decode("utf-8", errors="replace")


def report_rows(
    client: AgentClient, calls: Sequence[WireCall], turns: Sequence[int]
) -> list[CallRow]:
    """One row per call: its kind, its usage by kind and the prefix it shares with the
    previous agent-loop request of the session."""
    main = next((c.model for c in calls if client.turn_tool in c.tool_names()), None)
    if main is None:
        main = next((c.model for c in calls if c.tool_names()), "")
    rows: list[CallRow] = []
    previous: WireCall | None = None
    # per session (the loop with compaction, else the kind): its last call and that call's TTL
    last: dict[str, tuple[WireCall, TTL | None]] = {}
    for number, (call, turn) in enumerate(zip(calls, turns, strict=True), start=1):
        kind = client.classify(call, call.model == main)
        usage = call.usage
        shared = shared_prefix_tokens(call.blocks, previous.blocks) if previous else 0
        cause = ""
        if call.status == 200 and call.blocks:
            session = "turn" if kind in ("turn", "compaction") else kind
            before = last.get(session)
            ttl: TTL | None = (
                "1h"
                if usage.cache_write_1h_tokens
                else "5m"
                if usage.cache_write_5m_tokens
                else (before[1] if before is not None else None)
            )
            left = left_cached(before[0]) if before is not None else 0
            if is_miss(usage.cache_read_tokens, left, before is None):
                cause = miss_cause(
                    call_shape(call, ttl),
                    call_shape(*before) if before is not None else None,
                    min_tokens=_min_tokens(call.model),
                )
            last[session] = (call, ttl)
        rows.append(
            CallRow(
                call=number,
                turn=turn,
                kind=kind,
                model=call.model,
                status=call.status,
                prompt_tokens=call.prompt_tokens,
                uncached=usage.input_tokens,
                written_5m=usage.cache_write_5m_tokens,
                written_1h=usage.cache_write_1h_tokens,
                read=usage.cache_read_tokens,
                output_tokens=usage.output_tokens,
                shared_prefix_tokens=shared,
                miss_cause=cause,
            )
        )
        if kind == "turn" and call.status == 200:
            previous = call
    return rows


def _min_tokens(model: str) -> int:
    """The model's minimum cacheable prompt; 0 for one the catalog does not know."""
    return get_model(model).min_cacheable_tokens if is_known_model(model) else 0


def _event_lines(
    calls: Sequence[WireCall], rows: Sequence[CallRow], client: str
) -> Iterator[dict[str, Any]]:
    """The events format: the session's loop as one session, each other kind of call as a
    session of its own (its prefix is shared where its block ids are)."""
    for call, row in zip(calls, rows, strict=True):
        blocks = [b for b in call.blocks if b.tokens > 0]
        if call.status != 200 or not blocks:
            continue
        usage = call.usage
        line: dict[str, Any] = {
            "session": client if row.kind in ("turn", "compaction") else f"{client}:{row.kind}",
            "timestamp": call.started_at,
            "output_tokens": usage.output_tokens,
            "blocks": [
                {"id": b.prefix_hash[:20], "tokens": b.tokens}
                | ({"breakpoint": True} if b.breakpoint is not None else {})
                for b in blocks
            ],
        }
        billed = (
            usage.input_tokens
            + usage.cache_read_tokens
            + usage.cache_write_5m_tokens
            + usage.cache_write_1h_tokens
        )
        if billed == sum(b.tokens for b in blocks):
            line["usage"] = {
                "input_tokens": usage.input_tokens,
                "cache_read_tokens": usage.cache_read_tokens,
                "cache_write_5m_tokens": usage.cache_write_5m_tokens,
                "cache_write_1h_tokens": usage.cache_write_1h_tokens,
            }
        yield line


def _write(
    run: AgentRun,
    client: AgentClient,
    entries: Sequence[Mapping[str, Any]],
    calls: Sequence[WireCall],
) -> None:
    label = f"{client.name} {client.version}"
    with open(run.out / "requests.jsonl", "w", encoding="utf-8") as handle:
        for entry in entries:
            kept = {k: v for k, v in entry.items() if k != "raw_body"}
            handle.write(json.dumps({"client": label, **kept}, separators=(",", ":")) + "\n")
    with open(run.out / "trace.events.jsonl", "w", encoding="utf-8") as handle:
        for line in _event_lines(calls, run.rows, client.name):
            handle.write(json.dumps(line, separators=(",", ":")) + "\n")
    with open(run.out / "report.csv", "w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=REPORT_COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(asdict(row) for row in run.rows)
    summary = {
        "client": client.name,
        "version": client.version,
        "scenario": run.scenario,
        "model": run.model,
        "completed": run.completed,
        "turns": [asdict(t) for t in run.turns],
    }
    (run.out / "run.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
