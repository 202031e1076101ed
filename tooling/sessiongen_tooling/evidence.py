"""The measurements behind the contract's decisions, shared by notebooks and tests.

Each function runs a fixed scenario in a fresh lab (emulator, virtual clock, scripted
responses) and returns plain rows, so a notebook shows them and a test asserts on them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sessiongen import ToolsPolicy
from sessiongen.agents.findings import (
    RecordedRun,
    SideCallCost,
    history_reloads,
    load_runs,
    side_call_costs,
    side_call_shares,
)
from sessiongen.cache.pricing import cost
from sessiongen.errors import ProviderError
from sessiongen.lab import (
    PROVIDER_MODELS,
    PROVIDERS,
    EmulatorLab,
    Provider,
    emulator_lab,
    logged_usage,
)
from sessiongen.llm.types import Usage
from sessiongen.model import TextPart, UserMessage
from sessiongen.parity import WireRequest, diff
from sessiongen.sample import SAMPLE_AGENT
from sessiongen.warming.study.calibration import (
    Calibration,
    TtlBoundary,
    agreement,
    calibrate,
    gap_outcomes,
    ttl_boundary,
)
from sessiongen.warming.study.report import compare_held_back, compare_policies, sweep_intervals
from sessiongen.warming.traces import Trace
from sessiongen.warming.traces.formats import TraceFormat, load_trace
from sessiongen.warming.traces.generator import generate_sessions
from sessiongen.warming.traces.mooncake import shared_mooncake_dir

FIRST_TURN_SCRIPT: tuple[dict[str, Any], ...] = (
    {
        "text": "Let me read it.",
        "tool_calls": [
            {"name": "read_file", "input": {"path": "src/app.py"}},
            {"name": "grep", "input": {"pattern": "TODO"}},
        ],
    },
    {"text": "src/app.py defines add() and mean(); src/util.py has a TODO."},
)
RECAP_PROMPT = "Recap this session in one sentence."
NEXT_PROMPT = "Does mean() handle an empty list?"


async def first_turn(lab: EmulatorLab) -> str:
    """One durable turn with two tool calls; returns the session id."""
    session = lab.engine.create_session(SAMPLE_AGENT.name, workspace=lab.workspace)
    lab.script(*FIRST_TURN_SCRIPT)
    await lab.engine.run(session.id, "What is in src/app.py, and is anything left to do?")
    return session.id


@dataclass(frozen=True)
class PolicyRow:
    """What one tools policy costs and breaks, for a generate right after a durable turn."""

    policy: str
    tools_on_wire: int
    tool_choice: str
    prefix_written: int
    read: int
    written: int
    uncached: int
    parity_violations: int
    tools_executed: int
    cost_usd: float

    @property
    def prefix_hit(self) -> float:
        return self.read / self.prefix_written if self.prefix_written else 0.0


LATER_TURN = "Explain, in two paragraphs, what you would test next and why."
LATER_ANSWER = (
    "I would test mean() on an empty list, on one element and on floats, because division "
    "by len(xs) fails on an empty list and rounding matters for floats. "
) * 6


async def measure_tools_policy(
    workspace: Path, policy: ToolsPolicy, *, later_turns: int = 0
) -> PolicyRow:
    """A turn with tool calls and `later_turns` plain turns, then one generate."""
    async with emulator_lab(workspace) as lab:
        sid = await first_turn(lab)
        for _ in range(later_turns):
            lab.script({"text": LATER_ANSWER})
            await lab.engine.run(sid, LATER_TURN)
        turn = lab.last_usage()
        written_by_turn = (
            turn.cache_read_tokens + turn.cache_write_5m_tokens + turn.cache_write_1h_tokens
        )
        snapshot = lab.engine.select(sid)
        step = lab.engine.preparation.prepare(
            snapshot,
            operation="step",
            step=1,
            transient=(UserMessage(id="next", parts=(TextPart(text=RECAP_PROMPT),)),),
        )
        # The model answers the recap with a tool call, so D has something to execute.
        lab.script({"text": "", "tool_calls": [{"name": "list_files", "input": {}}]})
        result = await lab.engine.generate(sid, RECAP_PROMPT, tools_policy=policy)
        logged = lab.requests()[-1]
        body = logged["body"]
        # The body as the emulator received it; headers and cache key as generate set them.
        sent = lab.engine.prepare_generate(sid, RECAP_PROMPT, tools_policy=policy).request
        wire_step = WireRequest.of(step)
        wire_generate = WireRequest(
            {k: v for k, v in body.items() if k != "stream"}, sent.headers, sent.prompt_cache_key
        )
        usage = logged_usage(logged)
        return PolicyRow(
            policy=policy.letter,
            tools_on_wire=len(body.get("tools", [])),
            tool_choice=str(
                body.get("tool_choice", {}).get(
                    "type", "auto (omitted)" if body.get("tools") else "— (no tools)"
                )
            ),
            prefix_written=written_by_turn,
            read=usage.cache_read_tokens,
            written=usage.cache_write_5m_tokens + usage.cache_write_1h_tokens,
            uncached=usage.input_tokens,
            parity_violations=len(diff(wire_step, wire_generate).violations),
            tools_executed=len(result.tool_results),
            cost_usd=cost(logged["usage"], body["model"]),
        )


async def measure_tools_policies(root: Path, *, later_turns: int = 0) -> list[PolicyRow]:
    return [
        await measure_tools_policy(root / p.value, p, later_turns=later_turns) for p in ToolsPolicy
    ]


# --- the tools policy on every provider (notebook 01, SG-TOOLS-3) ---------------------------

WANTS_A_TOOL: dict[str, Any] = {"text": "", "tool_calls": [{"name": "list_files", "input": {}}]}
"""The scripted model answers the generate with a tool call and no text: the case the tools
policy decides. Where the request rules calls out, the emulator answers in text instead."""
KEEP_ALIVE = "This is a keep-alive request. Reply with exactly: OK"
PING_AT, NEXT_AT = 240.0, 420.0
"""The keep-alive scenario: a ping 4 minutes after the turn, the next turn at 7 minutes, so
with a 5-minute cache only a ping that refreshes the turn's own prefix keeps it warm."""


@dataclass(frozen=True)
class ProviderPolicyRow:
    """One tools policy on one provider, measured at the wire through the official SDK.

    `step_read` is what a durable Step at the same point reads (the same session built in a
    fresh lab, then a real turn); `read` what the generate read. `violations` are the paths
    the parity diff flags between the two logged requests. `next_read` is what the next real
    turn reads after a keep-alive ping sent with the same policy, `next_read_without_ping`
    what it reads after the same idle time with no ping."""

    provider: str
    policy: str
    accepted: bool
    rejection: str
    tools_on_wire: int
    tool_choice: str
    step_read: int
    read: int
    violations: tuple[str, ...]
    tool_calls_returned: int
    text_empty: bool
    tools_executed: int
    cost_usd: float
    ping_cost_usd: float | None
    next_read: int
    next_read_without_ping: int = 0

    @property
    def prefix_hit(self) -> float:
        return self.read / self.step_read if self.step_read else 0.0


async def _build_session(lab: EmulatorLab, later_turns: int) -> str:
    sid = await first_turn(lab)
    for _ in range(later_turns):
        lab.script({"text": LATER_ANSWER})
        await lab.engine.run(sid, LATER_TURN)
    return sid


def _cost(lab: EmulatorLab, logged: dict[str, Any]) -> float:
    return cost(logged_usage(logged), PROVIDER_MODELS[lab.provider])


async def step_at_the_wire(
    workspace: Path, provider: Provider, *, later_turns: int = 2
) -> tuple[WireRequest, int]:
    """The durable Step's first request for `RECAP_PROMPT`, as logged, and what it read."""
    async with emulator_lab(workspace, provider=provider) as lab:
        sid = await _build_session(lab, later_turns)
        before = len(lab.requests())
        lab.script({"text": "A recap."})
        await lab.engine.run(sid, RECAP_PROMPT)
        logged = lab.requests()[before]
        key = lab.engine.prepare_generate(sid, RECAP_PROMPT).request.prompt_cache_key
        return WireRequest.logged(logged, key), logged_usage(logged).cache_read_tokens


async def measure_provider_policy(
    workspace: Path,
    provider: Provider,
    policy: ToolsPolicy,
    step: tuple[WireRequest, int],
    *,
    later_turns: int = 2,
) -> ProviderPolicyRow:
    """A session (a turn with two tool calls, `later_turns` plain turns), a generate with
    `policy` that the model answers with a tool call, then a keep-alive ping with `policy`
    at `PING_AT` and the next real turn at `NEXT_AT`."""
    step_wire, step_read = step
    async with emulator_lab(workspace, provider=provider) as lab:
        sid = await _build_session(lab, later_turns)
        before = len(lab.requests())
        lab.script(WANTS_A_TOOL)
        rejection, result = "", None
        try:
            result = await lab.engine.generate(sid, RECAP_PROMPT, tools_policy=policy)
        except ProviderError as exc:
            rejection = type(exc).__name__
            lab.emulator.pop_response()  # a rejected request leaves its script queued
        logged = lab.requests()[before]
        key = lab.engine.prepare_generate(sid, RECAP_PROMPT, tools_policy=policy).request
        wire = WireRequest.logged(logged, key.prompt_cache_key)
        view = wire.view()
        lab.advance_by(PING_AT)
        ping_cost: float | None = None
        try:
            await lab.engine.generate(sid, KEEP_ALIVE, warming=True, tools_policy=policy)
            ping_cost = _cost(lab, lab.requests()[-1])
        except ProviderError:
            pass
        lab.advance_by(NEXT_AT - PING_AT)
        lab.script({"text": "No: mean([]) divides by zero."})
        before_next = len(lab.requests())
        await lab.engine.run(sid, NEXT_PROMPT)
        nxt = logged_usage(lab.requests()[before_next])
        if len(lab.requests()) != before_next + 1 or lab.emulator.pop_response() is not None:
            # The script went astray (e.g. a rejected request left its reply queued).
            raise RuntimeError(f"{provider} {policy.value}: the next turn's reply was not its own")
        return ProviderPolicyRow(
            provider=provider,
            policy=policy.letter,
            accepted=result is not None,
            rejection=rejection,
            tools_on_wire=view.tools,
            tool_choice=view.tool_choice,
            step_read=step_read,
            read=logged_usage(logged).cache_read_tokens,
            violations=tuple(d.path for d in diff(step_wire, wire).violations),
            tool_calls_returned=len(result.tool_calls) if result else 0,
            text_empty=result is not None and not result.text,
            tools_executed=len(result.tool_results) if result else 0,
            cost_usd=_cost(lab, logged),
            ping_cost_usd=ping_cost,
            next_read=nxt.cache_read_tokens,
        )


async def next_turn_without_ping(
    workspace: Path, provider: Provider, *, later_turns: int = 2
) -> int:
    """What the next real turn at `NEXT_AT` reads when no keep-alive ping was sent."""
    async with emulator_lab(workspace, provider=provider) as lab:
        sid = await _build_session(lab, later_turns)
        lab.advance_by(NEXT_AT)
        lab.script({"text": "No: mean([]) divides by zero."})
        before = len(lab.requests())
        await lab.engine.run(sid, NEXT_PROMPT)
        return logged_usage(lab.requests()[before]).cache_read_tokens


async def measure_tools_policy_matrix(
    root: Path, providers: Sequence[Provider] = PROVIDERS
) -> list[ProviderPolicyRow]:
    """Every tools policy on every provider: notebook 01's rows and SG-TOOLS-3's table."""
    rows = []
    for provider in providers:
        step = await step_at_the_wire(root / provider / "step", provider)
        unpinged = await next_turn_without_ping(root / provider / "no-ping", provider)
        for policy in ToolsPolicy:
            row = await measure_provider_policy(
                root / provider / policy.value, provider, policy, step
            )
            rows.append(dataclasses.replace(row, next_read_without_ping=unpinged))
    return rows


@dataclass(frozen=True)
class WarmingRow:
    """One keep-alive ping placement, and what the next real turn then paid."""

    placement: str
    ping_read: int
    ping_written: int
    ping_output: int
    ping_cost_usd: float
    next_read: int
    next_written: int
    next_cost_usd: float

    @property
    def total_cost_usd(self) -> float:
        return self.ping_cost_usd + self.next_cost_usd


PLACEMENTS = ("no ping", "ping: breakpoint on prompt", "ping: warming shape")


async def measure_warming(
    workspace: Path, placement: str, *, ping_at: float = 240.0, next_at: float = 420.0
) -> WarmingRow:
    """A turn at t=0, an optional ping at `ping_at`, the next turn at `next_at` (seconds)."""
    async with emulator_lab(workspace) as lab:
        sid = await first_turn(lab)
        ping = Usage()
        ping_cost = 0.0
        if placement != "no ping":
            lab.advance_by(ping_at)
            await lab.engine.generate(
                sid,
                "This is a keep-alive request. Reply with exactly: OK",
                warming=placement == "ping: warming shape",
            )
            logged = lab.requests()[-1]
            ping, ping_cost = logged_usage(logged), cost(logged["usage"], logged["body"]["model"])
            lab.advance_by(next_at - ping_at)
        else:
            lab.advance_by(next_at)
        lab.script({"text": "No: mean([]) divides by zero."})
        await lab.engine.run(sid, NEXT_PROMPT)
        logged = lab.requests()[-1]
        nxt = logged_usage(logged)
        return WarmingRow(
            placement=placement,
            ping_read=ping.cache_read_tokens,
            ping_written=ping.cache_write_5m_tokens + ping.cache_write_1h_tokens,
            ping_output=ping.output_tokens,
            ping_cost_usd=ping_cost,
            next_read=nxt.cache_read_tokens,
            next_written=nxt.cache_write_5m_tokens + nxt.cache_write_1h_tokens,
            next_cost_usd=cost(logged["usage"], logged["body"]["model"]),
        )


async def measure_warming_placements(root: Path) -> list[WarmingRow]:
    return [await measure_warming(root / f"w{i}", p) for i, p in enumerate(PLACEMENTS)]


# --- the contract's measured tables ---------------------------------------------------------

EVIDENCE_DIR = Path("contract") / "evidence"
"""Where the contract's generated tables live (relative to the repository root); the contract
includes them, and a test regenerates them and fails when a committed one differs."""


def _micro_usd(value: float) -> str:
    return f"{value * 1e6:,.1f} µ$"


def tools_policy_table(rows: list[PolicyRow]) -> str:
    """SG-TOOLS-2's table, as markdown, from `measure_tools_policies(later_turns=2)`."""
    names = {p.letter: p.value for p in ToolsPolicy}
    lines = [
        "| policy | tools on the wire | tool choice | prefix written by the turn "
        "| read by generate | prefix hit | parity violations | tools executed | cost |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r.policy} `{names[r.policy]}` | {r.tools_on_wire} | {r.tool_choice} "
            f"| {r.prefix_written:,} | {r.read:,} | {r.prefix_hit:.0%} | {r.parity_violations} "
            f"| {r.tools_executed} | {_micro_usd(r.cost_usd)} |"
        )
    return "\n".join(lines) + "\n"


def warming_table(rows: list[WarmingRow]) -> str:
    """SG-WARM-1's table, as markdown, from `measure_warming_placements`."""
    lines = [
        "| placement | ping read / written / output | next turn read / written | total cost |",
        "|---|---|---|---|",
    ]
    for r in rows:
        ping = (
            "—"
            if r.placement == "no ping"
            else f"{r.ping_read:,} / {r.ping_written:,} / {r.ping_output:,}"
        )
        lines.append(
            f"| {r.placement} | {ping} | {r.next_read:,} / {r.next_written:,} "
            f"| {_micro_usd(r.total_cost_usd)} |"
        )
    return "\n".join(lines) + "\n"


def wants_a_tool(r: ProviderPolicyRow) -> str:
    """What came back when the model wanted a tool, in words, for tables."""
    if not r.accepted:
        return "—"
    if r.tools_executed:
        return f"{r.tools_executed} call executed (on an isolated view)"
    if r.tool_calls_returned:
        text = "empty text" if r.text_empty else "with text"
        return f"{r.tool_calls_returned} call returned, {text}"
    return "answers in text"


def tools_policy_matrix_table(rows: list[ProviderPolicyRow]) -> str:
    """SG-TOOLS-3's matrix, as markdown, from `measure_tools_policy_matrix`."""
    names = {p.letter: p.value for p in ToolsPolicy}
    lines = [
        "| provider | policy | accepted | tools on the wire | tool choice as sent "
        "| parity violations | read of the Step's prefix | a model that wants a tool "
        "| keep-alive ping | next turn reads (with no ping) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        accepted = "yes" if r.accepted else f"no: {r.rejection}"
        violations = ", ".join(f"`{v}`" for v in r.violations) or "0"
        ping = "rejected" if r.ping_cost_usd is None else _micro_usd(r.ping_cost_usd)
        read = f"{r.prefix_hit:.0%}" if r.accepted else "—"
        lines.append(
            f"| {r.provider} | {r.policy} `{names[r.policy]}` | {accepted} | {r.tools_on_wire} "
            f"| {r.tool_choice} | {violations} | {read} | {wants_a_tool(r)} | {ping} "
            f"| {r.next_read:,} ({r.next_read_without_ping:,}) |"
        )
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class ProviderDecision:
    """What the matrix decides for one provider."""

    provider: str
    default: str  # the policy generate uses
    default_read: float
    text_only: str  # the cheapest policy that rules tool calls out, or "none"
    text_only_read: float
    choice_none: str  # what `choice_none` sends there, in words
    no_tools: str  # what `no_tools` does there, in words
    next_read: int  # the next turn's read after a ping with the default
    next_read_without_ping: int


def decide_tools_policy(rows: list[ProviderPolicyRow]) -> list[ProviderDecision]:
    """Per provider: the default is the accepted policy with no parity violation, no tool
    executed and the highest read of the Step's prefix (ties: the earlier letter); the
    text-only choice is the accepted policy that rules tool calls out with the highest read."""
    decisions = []
    for provider in dict.fromkeys(r.provider for r in rows):
        mine = {r.policy: r for r in rows if r.provider == provider}
        candidates = [
            r for r in mine.values() if r.accepted and not r.violations and not r.tools_executed
        ]
        if not candidates:
            raise ValueError(f"{provider}: no accepted policy keeps parity without executing tools")
        default = max(candidates, key=lambda r: (r.prefix_hit, -ord(r.policy)))
        text_only = [
            r
            for r in mine.values()
            if r.accepted and r.tools_on_wire and r.tool_choice.lower() == "none"
        ] + [r for r in mine.values() if r.accepted and not r.tools_on_wire]
        best = max(text_only, key=lambda r: r.prefix_hit, default=None)
        c, b = mine["C"], mine["B"]
        if c.tool_choice == mine["A"].tool_choice:
            choice_none = f"cannot be spelled: sent as A ({c.tool_choice}), a call may come back"
        else:
            choice_none = f"`{c.tool_choice}`, tools and history kept, reads {c.prefix_hit:.0%}"
        no_tools = f"rejected ({b.rejection})" if not b.accepted else f"reads {b.prefix_hit:.0%}"
        decisions.append(
            ProviderDecision(
                provider=provider,
                default=default.policy,
                default_read=default.prefix_hit,
                text_only=best.policy if best else "none",
                text_only_read=best.prefix_hit if best else 0.0,
                choice_none=choice_none,
                no_tools=no_tools,
                next_read=default.next_read,
                next_read_without_ping=default.next_read_without_ping,
            )
        )
    return decisions


def tools_policy_decision_table(decisions: list[ProviderDecision]) -> str:
    """The decision table the contract cites (SG-TOOLS-3), as markdown."""
    names = {p.letter: p.value for p in ToolsPolicy}
    lines = [
        "| provider | default | read of the Step's prefix | `choice_none` there "
        "| `no_tools` there | to force a text answer "
        "| next turn reads after a default ping (with no ping) |",
        "|---|---|---|---|---|---|---|",
    ]
    for d in decisions:
        text_only = (
            "not possible without `no_tools`"
            if d.text_only == "none"
            else f"{d.text_only} `{names[d.text_only]}` (reads {d.text_only_read:.0%})"
        )
        lines.append(
            f"| {d.provider} | {d.default} `{names[d.default]}` | {d.default_read:.0%} "
            f"| {d.choice_none} | {d.no_tools} | {text_only} "
            f"| {d.next_read:,} ({d.next_read_without_ping:,}) |"
        )
    return "\n".join(lines) + "\n"


THIN_REQUESTS = 100
THIN_SESSIONS = 5
"""Thin evidence, defined once: a figure that rests on fewer requests or fewer sessions than
these is marked `THIN_MARK` where the tables show it, and the table says what the mark means
(`THIN_LEGEND`). A reader takes such a figure as an example, not as a measurement."""
THIN_MARK = "⚠ thin"
THIN_LEGEND = (
    f"{THIN_MARK}: rests on fewer than {THIN_REQUESTS} requests or {THIN_SESSIONS} sessions; "
    "an example, not a measurement."
)


def thin(requests: int, sessions: int) -> str:
    """` ⚠ thin` after a figure resting on `requests` requests of `sessions` sessions, when
    either is under its threshold; "" otherwise."""
    return f" {THIN_MARK}" if requests < THIN_REQUESTS or sessions < THIN_SESSIONS else ""


def _with_legend(lines: list[str]) -> str:
    """A table's lines, then the thin-evidence legend when a line carries the mark."""
    if any(THIN_MARK in line for line in lines):
        lines = [*lines, "", THIN_LEGEND]
    return "\n".join(lines) + "\n"


GENERATED_SESSIONS = 30
"""Sessions of the generated trace (seed 1) in the warming tables: the optimum's cost grows
with each session's tool loop, and 30 keeps the table a few seconds' work."""


SWEEP_INTERVALS = (60.0, 120.0, 240.0, 295.0)
"""Ping intervals (seconds) of the warming clauses' sweep: blind 5m pings for half an hour."""


def warming_policy_table(traces: list[Trace]) -> str:
    """The warming clauses' tables, as markdown, one column per trace: each policy's prompt
    cost as a ratio to the offline optimum (`warming.study.report.compare_policies`), then blind
    5m pings every N seconds for 30 minutes after each request (`sweep_intervals`)."""
    tables = [compare_policies(trace) for trace in traces]
    head = " | ".join(
        f"{t.trace} ({t.requests:,} requests){thin(t.requests, len(trace.sessions()))}"
        for t, trace in zip(tables, traces, strict=True)
    )
    rule = "|---|" + "---|" * len(tables)
    lines = [f"| policy | online | {head} |", "|---" + rule]
    for row in tables[0].rows:
        online = "yes" if row.online else "no"
        cells = " | ".join(f"{t.row(row.policy).ratio_to_optimum:.3f}" for t in tables)
        lines.append(f"| {row.policy} | {online} | {cells} |")
    sweeps = [
        sweep_intervals(trace, "5m", intervals=SWEEP_INTERVALS, optimum_cost=t.row("optimum").cost)
        for trace, t in zip(traces, tables, strict=True)
    ]
    lines += ["", f"| 5m pings for 30 min, every | {head} |", rule]
    lines.append(
        "| no pings (5m) | "
        + " | ".join(f"{t.row('5m').ratio_to_optimum:.3f}" for t in tables)
        + " |"
    )
    for k, interval in enumerate(SWEEP_INTERVALS):
        cells = " | ".join(f"{sweep[k].ratio_to_optimum:.3f}" for sweep in sweeps)
        lines.append(f"| {interval:g} s | {cells} |")
    return _with_legend(lines)


def held_back_table(traces: list[Trace]) -> str:
    """SG-KEEP-4's table, as markdown, one column per trace: each policy's prompt cost on the
    part of the trace held back from fitting, as a ratio to that part's optimum
    (`warming.study.report.compare_held_back`, the first half of the requests fitted), the keeper's
    default marked; then, per trace, the default against the best online policy and plain
    5m, in words generated from the same figures."""
    tables = [compare_held_back(trace) for trace in traces]
    head = " | ".join(
        f"{t.trace} ({t.requests:,} requests; fitted on {t.fitted_sessions:,} "
        f"session{'' if t.fitted_sessions == 1 else 's'}){thin(t.requests, t.fitted_sessions)}"
        for t in tables
    )
    lines = [f"| policy | online | {head} |", "|---|---|" + "---|" * len(tables)]
    for row in tables[0].rows:
        name = f"**{row.policy}** (default)" if row.default else row.policy
        online = "yes" if row.online else "no"
        cells = " | ".join(f"{t.row(row.policy).ratio_to_optimum:.3f}" for t in tables)
        lines.append(f"| {name} | {online} | {cells} |")
    lines.append("")
    for t in tables:
        default = t.default_row()
        assert default is not None
        others = [r for r in t.rows if r.online and not r.default]
        best = min(others, key=lambda r: r.cost)
        lines.append(
            f"- {t.trace}: the default costs {default.cost / best.cost:.3f}× the best other "
            f"online policy ({best.policy}) and {default.cost / t.row('5m').cost:.3f}× plain 5m."
        )
    return _with_legend(lines)


def warming_tables(root: Path) -> dict[str, str]:
    """The warming clauses' tables: the generated trace and the largest committed real log
    (under `root`) always, the Mooncake traces when `../shared/data/mooncake` is present
    (file name -> markdown; a file missing here means its data is absent on this
    machine)."""
    generated = generate_sessions(GENERATED_SESSIONS, seed=1)
    real = load_trace(root / REAL_CODING_LOG, "claude-code", name="real-claude-code")
    tables = {
        "warming-policies-generated.md": warming_policy_table([generated]),
        "warming-held-back-generated.md": held_back_table([generated, real]),
    }
    mooncake = shared_mooncake_dir()
    files = [mooncake / f"{n}.jsonl" for n in ("conversation_trace_first_half", "synthetic_trace")]
    if all(f.exists() for f in files):
        traces = [load_trace(f, "mooncake") for f in files]
        tables["warming-policies-mooncake.md"] = warming_policy_table(traces)
        tables["warming-held-back-mooncake.md"] = held_back_table(traces)
    return tables


REAL_LOGS = Path("tests/warming/fixtures/real")
REAL_CODING_LOG = REAL_LOGS / "claude-code" / "v1.0-in-file-subagents"
"""The largest committed real coding-agent log, one of the held-back table's traces."""
"""Real agent logs committed as fixtures (their README names each one's source), one
directory per log under a directory per format, from the repository's root."""


def real_logs(root: Path) -> list[tuple[str, Path, TraceFormat]]:
    """Each committed real log: its name, its path and its format, formats then names in
    order."""
    logs: list[tuple[str, Path, TraceFormat]] = []
    formats: tuple[TraceFormat, ...] = ("claude-code", "opencode")
    for format in formats:
        base = root / REAL_LOGS / format
        for path in sorted(p for p in base.iterdir() if p.is_dir()):
            logs.append((path.name, path, format))
    return logs


@dataclass(frozen=True)
class LogCalibration:
    """One real log replayed as recorded, against what the provider billed it."""

    log: str
    format: str
    requests: int
    sessions: int
    warm: int
    """Prefixes the record shows cached where the log's own calls cannot have kept them
    (`Trace.warm`: before the log began, by other sessions of the account, just past a TTL
    by the log's clock, by calls missing from the log): the replay
    takes these reads from the record, so they are not predictions."""
    calibration: Calibration
    boundary: TtlBoundary


def calibrate_real_logs(root: Path) -> list[LogCalibration]:
    """Every committed real log's calibration and the TTL boundary its gaps show."""
    rows = []
    for name, path, format in real_logs(root):
        trace = load_trace(path, format)
        rows.append(
            LogCalibration(
                name,
                format,
                len(trace.requests),
                len(trace.sessions()),
                len(trace.warm),
                calibrate(trace),
                ttl_boundary(gap_outcomes(trace), "5m"),
            )
        )
    return rows


def _ratio_cell(value: float) -> str:
    return "n/a (real 0)" if value == float("inf") else f"{value:.3f}"


def calibration_table(rows: list[LogCalibration]) -> str:
    """SG-REPLAY-1's table, as markdown: per real log and in total, the replay as recorded
    against the provider's bill (predicted / real), and how many prefixes the record shows
    cached outside the log (their reads are taken from the record, not predicted)."""
    lines = [
        "| log | format | requests | sessions | warm outside the log | cache reads "
        "| cache writes | prompt cost | median error, reads | median error, writes |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        t = row.calibration.total
        lines.append(
            f"| {row.log}{thin(row.requests, row.sessions)} | {row.format} | {row.requests:,} "
            f"| {row.sessions:,} | {row.warm} "
            f"| {_ratio_cell(t.read_ratio)} | {_ratio_cell(t.write_ratio)} "
            f"| {_ratio_cell(t.cost_ratio)} | {t.read_error:.1%} | {t.write_error:.1%} |"
        )
    every = [r for row in rows for r in row.calibration.rows]
    if every:
        total = agreement("all", every, rows[0].calibration.model)
        lines.append(
            f"| **all** | | {sum(r.requests for r in rows):,} | {sum(r.sessions for r in rows):,} "
            f"| {sum(r.warm for r in rows)} "
            f"| {_ratio_cell(total.read_ratio)} | {_ratio_cell(total.write_ratio)} "
            f"| {_ratio_cell(total.cost_ratio)} | {total.read_error:.1%} "
            f"| {total.write_error:.1%} |"
        )
    return _with_legend(lines)


def ttl_boundary_table(rows: list[LogCalibration]) -> str:
    """What the real logs' gaps show of the 5m TTL, as markdown: per log, gaps after a 5m
    write or read, the longest that still read everything, the shortest that did not."""

    def seconds(value: float | None) -> str:
        return "—" if value is None else f"{value:,.0f} s"

    lines = [
        "| log | gaps | hits | misses | longest hit | shortest miss | hits past 300 s "
        "| misses within 300 s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        b = row.boundary
        if not b.gaps:
            continue
        lines.append(
            f"| {row.log}{thin(row.requests, row.sessions)} | {b.gaps} | {b.hits} | {b.misses} "
            f"| {seconds(b.longest_hit)} | {seconds(b.shortest_miss)} | {b.hits_past_ttl} "
            f"| {b.misses_within_ttl} |"
        )
    return _with_legend(lines)


def _tools_policy_providers(rows: list[ProviderPolicyRow]) -> str:
    return (
        tools_policy_matrix_table(rows)
        + "\n"
        + tools_policy_decision_table(decide_tools_policy(rows))
    )


async def _real_log_tables(scratch: Path, root: Path) -> dict[str, str]:
    logs = calibrate_real_logs(root)
    return {
        "calibration-real-logs.md": calibration_table(logs),
        "ttl-boundary-real-logs.md": ttl_boundary_table(logs),
    }


async def _warming_tables(scratch: Path, root: Path) -> dict[str, str]:
    return warming_tables(root)


async def _tools_policy_tables(scratch: Path, root: Path) -> dict[str, str]:
    rows = await measure_tools_policies(scratch / "policies", later_turns=2)
    return {"tools-policy.md": tools_policy_table(rows)}


async def _tools_policy_provider_tables(scratch: Path, root: Path) -> dict[str, str]:
    rows = await measure_tools_policy_matrix(scratch / "matrix")
    return {"tools-policy-providers.md": _tools_policy_providers(rows)}


async def _warming_placement_tables(scratch: Path, root: Path) -> dict[str, str]:
    rows = await measure_warming_placements(scratch / "warming")
    return {"warming-placement.md": warming_table(rows)}


AGENT_RUNS = Path("notebooks") / "data" / "agents"
"""The recorded runs of the real agent clients (notebook 07, SG-AGENTS-1)."""


def _usd(value: float) -> str:
    return f"${value:.4f}"


def agent_side_call_table(runs: Sequence[RecordedRun]) -> str:
    """Per client: its calls, the share that are side calls, and what its side calls cost
    as run and shaped as `session.generate` (policy A, same prefix), as markdown."""
    costs = side_call_costs(runs)
    lines = [
        "| client | version | calls | side calls | share | side-call kinds "
        "| cost as run | shaped as session.generate |",
        "|---|---|---|---|---|---|---|---|",
    ]
    versions = {r.client: r.version for r in runs}
    for share in side_call_shares(runs):
        mine = [c for c in costs if c.client == share.client]
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(share.kinds.items()) if k != "turn")
        lines.append(
            f"| {share.client} | {versions[share.client]} | {share.calls} | {share.side_calls} "
            f"| {share.share:.0%} | {kinds} | {_usd(sum(c.cost_as_run for c in mine))} "
            f"| {_usd(sum(c.cost_as_generate for c in mine))} |"
        )
    return "\n".join(lines) + "\n"


def agent_side_call_kind_table(runs: Sequence[RecordedRun]) -> str:
    """Per client and kind of side call: what one reads, writes and costs as run, and shaped
    as `session.generate`, as markdown (means over the recorded calls)."""
    groups: dict[tuple[str, str, str], list[SideCallCost]] = {}
    for c in side_call_costs(runs):
        key = (c.client, c.kind if c.scenario != "fork" else "fork", c.model)
        groups.setdefault(key, []).append(c)
    lines = [
        "| client | kind | model | calls | prompt | read | written | shares with the session "
        "| cost as run | as session.generate |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (client, kind, model), rows in groups.items():
        n = len(rows)

        def mean(values: Sequence[float]) -> float:
            return sum(values) / len(values)

        lines.append(
            f"| {client} | {kind} | {model} | {n} | {mean([r.prompt_tokens for r in rows]):,.0f} "
            f"| {mean([r.read for r in rows]):,.0f} | {mean([r.written for r in rows]):,.0f} "
            f"| {mean([r.shared_prefix_tokens for r in rows]):,.0f} "
            f"| {_usd(mean([r.cost_as_run for r in rows]))} "
            f"| {_usd(mean([r.cost_as_generate for r in rows]))} |"
        )
    return "\n".join(lines) + "\n"


def agent_reload_table(runs: Sequence[RecordedRun]) -> str:
    """Per client: does the first request after a restart on the same session (resume) or
    in a fork of it keep the previous turn's prompt byte for byte, and does the cache serve
    it, as markdown."""
    lines = [
        "| client | how | previous turn's prompt | shared after the reload | prefix kept "
        "| read from the cache |",
        "|---|---|---|---|---|---|",
    ]
    for r in sorted(history_reloads(runs), key=lambda r: (r.how != "resume", r.client)):
        lost = r.previous_prompt_tokens - r.shared_prefix_tokens
        kept = "yes" if r.kept else f"**no**: {lost:,} lost"
        share = r.read / r.previous_prompt_tokens if r.previous_prompt_tokens else 0.0
        lines.append(
            f"| {r.client} | {r.how} | {r.previous_prompt_tokens:,} | {r.shared_prefix_tokens:,} "
            f"| {kept} | {r.read:,} ({share:.0%}) |"
        )
    return "\n".join(lines) + "\n"


async def _agent_tables(scratch: Path, root: Path) -> dict[str, str]:
    runs = load_runs(root / AGENT_RUNS)
    return {
        "agents-side-calls.md": agent_side_call_table(runs)
        + "\n"
        + agent_side_call_kind_table(runs),
        "agents-history-reload.md": agent_reload_table(runs),
    }


TABLE_GROUPS: dict[str, Callable[[Path, Path], Awaitable[dict[str, str]]]] = {
    "warming": _warming_tables,
    "real-logs": _real_log_tables,
    "tools-policy": _tools_policy_tables,
    "tools-policy-providers": _tools_policy_provider_tables,
    "warming-placement": _warming_placement_tables,
    "agents": _agent_tables,
}
"""The contract's tables in independent groups, each `(scratch, root) -> {file name:
markdown}`: `sessiongen workbench` measures the groups in parallel processes."""


async def table_group(name: str, scratch: Path, root: Path) -> dict[str, str]:
    """One group of `TABLE_GROUPS` (each works in its own directories under `scratch`)."""
    return await TABLE_GROUPS[name](scratch, root)


async def contract_tables(scratch: Path, root: Path) -> dict[str, str]:
    """Every generated table of the contract: file name -> markdown (`root`: the
    repository, for its committed real logs)."""
    tables: dict[str, str] = {}
    for name in TABLE_GROUPS:
        tables.update(await table_group(name, scratch, root))
    return tables


async def write_contract_tables(root: Path, scratch: Path) -> list[Path]:
    """Measure and write the contract's tables under `root / EVIDENCE_DIR`."""
    out = root / EVIDENCE_DIR
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in (await contract_tables(scratch, root)).items():
        (out / name).write_text(text, encoding="utf-8")
        written.append(out / name)
    return written


async def _main() -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        for path in await write_contract_tables(Path.cwd(), Path(scratch)):
            print(f"wrote {path}")


if __name__ == "__main__":
    import asyncio

    asyncio.run(_main())
