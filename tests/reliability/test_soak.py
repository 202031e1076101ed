"""Soak: one session through many durable turns with the warming keeper active, on the
emulator's virtual clock, through the official SDK. Nothing may pile up: Python memory
(tracemalloc, not wall time) grows by at most `GROWTH_PER_TURN` per turn once warm, the
emulator's request log stays within its capacity, its prompt cache within a few entries, and
the keeper's ledger equals, ping for ping, what the emulator billed for warming pings.

`TURNS` turns by default (the suite's budget); SESSIONGEN_LONG=1 runs `TURNS_LONG` (1,000).
The model's context window is shrunk (`override_model`) so compaction keeps the history
bounded, as it would in a long session on a real window: without it each turn re-sends the
whole history and the run measures quadratic work, not accumulation.

Memory is traced from the end of `WARMUP` untraced turns (imports, lazy caches, the first
compaction cycle) to the end; the growth is measured between a checkpoint a quarter of the
way through the traced turns and the end, after collecting garbage and letting the event
loop finalise closed streams.
"""

from __future__ import annotations

import asyncio
import gc
import hashlib
import os
import sqlite3
import tracemalloc
from pathlib import Path
from typing import Any

import httpx2
from sessiongen import SessionEngine, SessionStore
from sessiongen.cache import override_model
from sessiongen.emulator import EmulatorState, create_app
from sessiongen.lab import logged_usage, write_workspace
from sessiongen.llm.types import Usage
from sessiongen.model import AssistantMessage
from sessiongen.providers.anthropic.adapter import AnthropicLLMClient
from sessiongen.sample import SAMPLE_AGENT
from sessiongen.warming.keeper import KEEPALIVE_PROMPT, WarmingKeeper, default_policy

from . import _figures

LONG = os.environ.get("SESSIONGEN_LONG") == "1"
TURNS_LONG = 1000
TURNS = TURNS_LONG if LONG else 120
WARMUP = 30  # untraced turns first
LOG_CAPACITY = 16
TURNOVER_TURNS = 12  # traced turns before the log holds only entries made while traced
MAX_OUTPUT_TOKENS = 64
CONTEXT_WINDOW = 3000  # tokens: with MAX_OUTPUT_TOKENS, a compaction every ~25 turns
GAPS = (30.0, 400.0, 1000.0, 90.0)
"""Virtual seconds idle after each turn, in turn: shorter than the first ping, one ping,
several pings (as the policy decides), none."""
GROWTH_PER_TURN = 8 * 1024  # bytes of Python memory a turn may leave behind
"""Measured about 4.5-5 KiB: the store's snapshot of the session (`SessionStore` keeps each
of its last 128 sessions' records, the whole transcript, compacted turns included: about
3.4 KiB a turn) and the keeper's ledger (one entry per ping, kept by design). A leaked
request or response would cost 20-100 KiB a turn."""
MAX_CACHE_ENTRIES = 16


class PingTally:
    """What the emulator billed for warming pings, read from the log as it goes (so the
    capacity drops nothing unread), folded into a count, a usage sum and a digest of the
    sequence: constant memory, unlike a list of entries."""

    def __init__(self) -> None:
        self.count = 0
        self.usage = Usage()
        self.digest = hashlib.sha256()
        self.requests = 0
        self.statuses: set[int] = set()
        self.seen = 0  # the arrival number of the last request read

    def read(self, state: EmulatorState) -> None:
        for logged in state.requests(since=self.seen):
            self.seen = int(logged["id"].rsplit("_", 1)[1])
            self.requests += 1
            self.statuses.add(logged["status"])
            if _is_ping(logged["body"]):
                usage = logged_usage(logged)
                self.count += 1
                self.usage = self.usage + usage
                self.digest.update(_usage_key(usage))


def _is_ping(body: dict[str, Any]) -> bool:
    last = body["messages"][-1]
    content = last["content"]
    text = content if isinstance(content, str) else " ".join(b.get("text", "") for b in content)
    return last["role"] == "user" and KEEPALIVE_PROMPT in text


def _usage_key(usage: Usage) -> bytes:
    return repr(usage.model_dump(mode="json")).encode()


async def _settle_memory() -> int:
    """Traced bytes after collecting garbage and letting the loop run the finalisers of
    async generators the collection found (closed SDK streams)."""
    for _ in range(3):
        gc.collect()
        for _ in range(5):
            await asyncio.sleep(0)
    return tracemalloc.get_traced_memory()[0]


async def test_soak_with_warming(tmp_path: Path) -> None:
    workspace = write_workspace(_dir(tmp_path / "workspace"))
    state = EmulatorState(log_capacity=LOG_CAPACITY)
    transport = httpx2.ASGITransport(app=create_app(state))
    http = httpx2.AsyncClient(transport=transport, base_url="http://emulator.lab")
    store = SessionStore(tmp_path / "soak.db")
    agent = SAMPLE_AGENT.model_copy(update={"max_output_tokens": MAX_OUTPUT_TOKENS})
    tally = PingTally()
    database = tmp_path / "soak.db"
    checkpoint_at = WARMUP + TURNOVER_TURNS
    phases: list[tuple[int, int]] = []  # (turn, traced bytes) right after each compaction
    compactions = 0
    try:
        with override_model(SAMPLE_AGENT.model.id, context_window=CONTEXT_WINDOW):
            async with AnthropicLLMClient(api_key="soak", http_client=http) as llm:
                engine = SessionEngine(store, llm, [agent])
                session = engine.create_session(SAMPLE_AGENT.name, workspace=workspace)
                keeper = WarmingKeeper(engine, clock=state.clock, policy=default_policy())
                keeper.watch(session.id)
                for turn in range(TURNS):
                    if turn == WARMUP:
                        await _settle_memory()
                        tracemalloc.start()
                    await keeper.run_turn(session.id, f"turn {turn}: look at src/app.py again")
                    await keeper.advance_to(state.clock.now() + GAPS[turn % len(GAPS)])
                    tally.read(state)
                    done = _compactions(database, session.id)
                    if done > compactions and turn >= checkpoint_at:
                        # the same phase of the compaction cycle: the history is short again
                        phases.append((turn, await _settle_memory()))
                    compactions = done
                    logged = state.log_status()["logged"]
                    assert logged is not None and logged <= LOG_CAPACITY
                    assert len(state.cache.entries()) <= MAX_CACHE_ENTRIES
                top = tracemalloc.take_snapshot().statistics("lineno")[:8]
                tracemalloc.stop()

                record = store.read(session.id)
                ledger = keeper.ledger.entries
    finally:
        if tracemalloc.is_tracing():
            tracemalloc.stop()
        store.close()
        await http.aclose()

    # Every turn settled: one completed step per turn, none interrupted.
    steps = [m for m in record.messages if isinstance(m, AssistantMessage)]
    assert all(m.completed and not m.interrupted for m in steps)
    revisions = [revision for revision, _ in store_events(tmp_path / "soak.db", session.id)]
    assert revisions == list(range(1, record.session.revision + 1))
    # The log stayed bounded; every request it saw succeeded and none went unread.
    status = state.log_status()
    assert status == {
        "logged": LOG_CAPACITY,
        "dropped": tally.requests - LOG_CAPACITY,
        "capacity": LOG_CAPACITY,
    }
    assert tally.statuses == {200}
    # The ledger is exactly what the emulator billed for pings, in order.
    assert all(entry.error is None for entry in ledger)
    assert len(ledger) == tally.count >= TURNS // 4
    assert sum((entry.usage for entry in ledger), Usage()) == tally.usage
    digest = hashlib.sha256()
    for entry in ledger:
        digest.update(_usage_key(entry.usage))
    assert digest.hexdigest() == tally.digest.hexdigest()
    assert any(entry.hit for entry in ledger)
    # Memory: what the turns between the first and the last measured compaction left.
    assert len(phases) >= 2, phases
    (first_turn, checkpoint), (last_turn, end) = phases[0], phases[-1]
    traced_turns = last_turn - first_turn
    growth = end - checkpoint
    print(
        f"soak: {TURNS} turns, {len(steps)} steps, {tally.requests} requests, {len(ledger)} "
        f"pings ({sum(e.hit for e in ledger)} hits), log {status}, memory {checkpoint} -> "
        f"{end} B over turns {first_turn}-{last_turn}: {growth / traced_turns:.0f} B/turn"
    )
    assert growth <= GROWTH_PER_TURN * traced_turns, (
        f"{growth / traced_turns:.0f} B/turn over {traced_turns} turns; top allocations:\n"
        + "\n".join(str(stat) for stat in top)
    )
    _figures.record(  # `record` here is the session's
        "soak",
        {
            "turns": TURNS,
            "steps": len(steps),
            "requests": tally.requests,
            "pings": len(ledger),
            "ping_cache_hits": sum(e.hit for e in ledger),
            "memory_growth_kib_per_turn": round(growth / traced_turns / 1024, 2),
            "memory_turns_measured": [first_turn, last_turn],
            "log_kept": status["logged"],
            "log_dropped": status["dropped"],
            "log_capacity": LOG_CAPACITY,
            "ledger_equals_billed_pings": True,  # count, usage sum and digest asserted above
        },
    )


def _compactions(database: Path, session_id: str) -> int:
    """Compactions the session has been through, read with SQL (reading the session would
    parse its whole history every turn)."""
    with sqlite3.connect(database) as db:
        query = "SELECT COUNT(*) FROM events WHERE session_id = ? AND type = ?"
        count: int = db.execute(query, (session_id, "compaction_completed")).fetchone()[0]
    return count


def store_events(database: Path, session_id: str) -> list[tuple[int, Any]]:
    store = SessionStore(database)
    try:
        return store.events(session_id)
    finally:
        store.close()


def _dir(path: Path) -> Path:
    path.mkdir(parents=True)
    return path
