"""The measurements behind the contract's decisions, shared by notebooks and tests.

Each function runs a fixed scenario in a fresh lab (emulator, virtual clock, scripted
responses) and returns plain rows, so a notebook shows them and a test asserts on them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._generate import ToolsPolicy
from .cache.pricing import cost
from .lab import EmulatorLab, LoggedUsage, emulator_lab
from .model import TextPart, UserMessage
from .parity import WireRequest, diff
from .sample import SAMPLE_AGENT
from .warming.formats import load_trace
from .warming.generator import generate_sessions
from .warming.mooncake import shared_mooncake_dir
from .warming.report import compare_policies, sweep_intervals
from .warming.traces import Trace

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
        written_by_turn = turn.read + turn.write_5m + turn.write_1h
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
        sent = lab.engine.generator.prepare(sid, RECAP_PROMPT, tools_policy=policy).request
        wire_step = WireRequest.of(step)
        wire_generate = WireRequest(
            {k: v for k, v in body.items() if k != "stream"}, sent.headers, sent.prompt_cache_key
        )
        usage = LoggedUsage.of(logged)
        return PolicyRow(
            policy=policy.letter,
            tools_on_wire=len(body.get("tools", [])),
            tool_choice=str(
                body.get("tool_choice", {}).get(
                    "type", "auto (omitted)" if body.get("tools") else "— (no tools)"
                )
            ),
            prefix_written=written_by_turn,
            read=usage.read,
            written=usage.write_5m + usage.write_1h,
            uncached=usage.uncached,
            parity_violations=len(diff(wire_step, wire_generate).violations),
            tools_executed=len(result.tool_results),
            cost_usd=cost(logged["usage"], body["model"]),
        )


async def measure_tools_policies(root: Path, *, later_turns: int = 0) -> list[PolicyRow]:
    return [
        await measure_tools_policy(root / p.value, p, later_turns=later_turns) for p in ToolsPolicy
    ]


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
        ping = LoggedUsage(0, 0, 0, 0, 0)
        ping_cost = 0.0
        if placement != "no ping":
            lab.advance(ping_at)
            await lab.engine.generate(
                sid,
                "This is a keep-alive request. Reply with exactly: OK",
                warming=placement == "ping: warming shape",
            )
            logged = lab.requests()[-1]
            ping, ping_cost = LoggedUsage.of(logged), cost(logged["usage"], logged["body"]["model"])
            lab.advance(next_at - ping_at)
        else:
            lab.advance(next_at)
        lab.script({"text": "No: mean([]) divides by zero."})
        await lab.engine.run(sid, NEXT_PROMPT)
        logged = lab.requests()[-1]
        nxt = LoggedUsage.of(logged)
        return WarmingRow(
            placement=placement,
            ping_read=ping.read,
            ping_written=ping.write_5m + ping.write_1h,
            ping_output=ping.output,
            ping_cost_usd=ping_cost,
            next_read=nxt.read,
            next_written=nxt.write_5m + nxt.write_1h,
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


GENERATED_SESSIONS = 30
"""Sessions of the generated trace (seed 1) in the warming tables: the optimum's cost grows
with each session's tool loop, and 30 keeps the table a few seconds' work."""


SWEEP_INTERVALS = (60.0, 120.0, 240.0, 295.0)
"""Ping intervals (seconds) of the warming clauses' sweep: blind 5m pings for half an hour."""


def warming_policy_table(traces: list[Trace]) -> str:
    """The warming clauses' tables, as markdown, one column per trace: each policy's prompt
    cost as a ratio to the offline optimum (`warming.report.compare_policies`), then blind
    5m pings every N seconds for 30 minutes after each request (`sweep_intervals`)."""
    tables = [compare_policies(trace) for trace in traces]
    head = " | ".join(f"{t.trace} ({t.requests:,} requests)" for t in tables)
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
    return "\n".join(lines) + "\n"


def warming_tables() -> dict[str, str]:
    """The warming clauses' tables: the generated trace always, the Mooncake traces when
    `../shared/data/mooncake` is present (file name -> markdown; a file missing here means
    its data is absent on this machine)."""
    tables = {
        "warming-policies-generated.md": warming_policy_table(
            [generate_sessions(GENERATED_SESSIONS, seed=1)]
        )
    }
    mooncake = shared_mooncake_dir()
    files = [mooncake / f"{n}.jsonl" for n in ("conversation_trace_first_half", "synthetic_trace")]
    if all(f.exists() for f in files):
        tables["warming-policies-mooncake.md"] = warming_policy_table(
            [load_trace(f, "mooncake") for f in files]
        )
    return tables


async def contract_tables(scratch: Path) -> dict[str, str]:
    """Every generated table of the contract: file name -> markdown."""
    return {
        **warming_tables(),
        "tools-policy.md": tools_policy_table(
            await measure_tools_policies(scratch / "policies", later_turns=2)
        ),
        "warming-placement.md": warming_table(
            await measure_warming_placements(scratch / "warming")
        ),
    }


async def write_contract_tables(root: Path, scratch: Path) -> list[Path]:
    """Measure and write the contract's tables under `root / EVIDENCE_DIR`."""
    out = root / EVIDENCE_DIR
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in (await contract_tables(scratch)).items():
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
