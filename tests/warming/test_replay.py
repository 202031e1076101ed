"""The trace replay: the same usage as the emulator over the official SDK, the client model
(pings, cancellation, bookkeeping), the fast path, and block alignment."""

from __future__ import annotations

import math
import random
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

import anthropic
import httpx2
import pytest
from sessiongen.cache import TTL, CacheEntry, CacheStore, cost
from sessiongen.emulator import EmulatorState, create_app
from sessiongen.warming import policies
from sessiongen.warming.policies import Decision, History
from sessiongen.warming.policies.trace_replay import (
    ReplayResult,
    prepare,
    replay,
    replay_through_client,
)
from sessiongen.warming.traces import Trace, TraceRequest
from sessiongen.warming.traces.mooncake import align_to_prompts

MODEL = "claude-sonnet-4-6"  # minimum cacheable prompt 1,024 tokens


class Table:
    """A test policy: one decision per trace index."""

    online = False

    def __init__(self, decisions: Sequence[Decision], *, rewrite: bool) -> None:
        self.name = "table_rewrite" if rewrite else "table"
        self.ping_may_rewrite = rewrite
        self._decisions = tuple(decisions)

    def reset(self) -> None:
        pass

    def observe(self, request: TraceRequest, history: History) -> None:
        pass

    def decide(self, request: TraceRequest, history: History) -> Decision:
        return self._decisions[history.index]


TOKENS = {1: 400, 2: 400, 3: 400, 4: 300, 5: 250, 6: 350, 7: 200, 10: 400, 11: 400}
TOKENS |= {12: 400, 20: 100, 30: 600, 31: 500, 32: 100, 40: 1200, 41: 800}
TOKENS |= {100 + k: 10 for k in range(25)}  # 25 small blocks: more than the lookback window


def _request(session: str, at: float, blocks: Sequence[int], output: int) -> TraceRequest:
    return TraceRequest(session, at, tuple(blocks), tuple(TOKENS[b] for b in blocks), output)


def hand_trace() -> tuple[Trace, list[Decision]]:
    """20 requests in 5 sessions, gaps around 5 minutes, meant to exercise every path."""
    five: TTL = "5m"
    hour: TTL = "1h"
    rows: list[tuple[TraceRequest, Decision]] = [
        # a: a ping keeps it alive; the next request cancels the rest of the series.
        (_request("a", 0, [1, 2, 3], 40), Decision(five, (295, 590, 885))),
        (_request("a", 500, [1, 2, 3, 4], 30), Decision(five, (295,))),
        # refreshed at 795, dead at 1095 < 1100: written again, as 1h.
        (_request("a", 1100, [1, 2, 3, 4, 5], 20), Decision(hour)),
        (_request("a", 2500, [1, 2, 3, 4, 5, 6], 10), Decision(five, (300, 600))),
        (_request("a", 3350, [1, 2, 3, 4, 5, 6, 7], 15), Decision(five)),
        # b: a's first prompt verbatim, read in full; pings exactly at the (inclusive) expiry.
        (_request("b", 10, [1, 2, 3], 25), Decision(five, (300, 600))),
        (_request("b", 700, [1, 2, 3, 6], 25), Decision(five, (250,))),
        (_request("b", 1010, [1, 2, 3, 6, 7], 5), Decision(None)),
        (_request("b", 1400, [1, 2, 3, 6, 7, 4], 5), Decision(five)),
        # c: 25 new blocks push the earlier prompt's end out of the lookback window.
        (_request("c", 20, [10, 11, 12], 50), Decision(five, (200,))),
        (_request("c", 200, [10, 11, 12, *range(100, 125)], 60), Decision(five)),
        (_request("c", 260, [10, 11, 12, *range(100, 125), 20], 0), Decision(five)),
        # d: the ping comes after the entry expired: dropped, or a rewrite if allowed.
        (_request("d", 30, [30, 31], 12), Decision(five, (400, 650))),
        (_request("d", 800, [30, 31, 32], 12), Decision(hour, (3000,))),
        (_request("d", 4500, [30, 31, 32, 20], 12), Decision(five)),
        # e: no breakpoint reads nothing even when the prefix is cached; f: below the minimum.
        (_request("e", 40, [40, 41], 70), Decision(hour)),
        (_request("e", 330, [40, 41, 20], 70), Decision(None)),
        (_request("e", 600, [40, 41, 20, 32], 70), Decision(hour, (1000,))),
        (_request("f", 50, [20], 9), Decision(five, (100,))),
        (_request("f", 320, [20, 32], 9), Decision(hour)),
    ]
    rows.sort(key=lambda row: row[0].at)
    return Trace("hand", tuple(r for r, _ in rows)), [d for _, d in rows]


@dataclass
class Emulator:
    client: anthropic.AsyncAnthropic
    admin: httpx2.AsyncClient

    async def set_clock(self, now: float) -> None:
        (await self.admin.post("/_emulator/clock", json={"now": now})).raise_for_status()

    async def set_ttft(self, seconds: float) -> None:
        (await self.admin.post("/_emulator/config", json={"ttft": seconds})).raise_for_status()

    async def script_output(self, tokens: int) -> None:
        body = {"responses": [{"text": "ok", "output_tokens": tokens}]}
        (await self.admin.post("/_emulator/script", json=body)).raise_for_status()

    async def both(
        self, trace: Trace, policy: policies.Policy
    ) -> tuple[ReplayResult, ReplayResult]:
        """The in-memory replay and the same replay sent through the SDK to this emulator,
        usage kept."""
        fast = replay(trace, policy, model=MODEL, keep_usage=True)
        sdk = await replay_through_client(
            trace,
            policy,
            self.client,
            set_clock=self.set_clock,
            script_output=self.script_output,
            model=MODEL,
            set_ttft=self.set_ttft,
        )
        return fast, sdk


@pytest.fixture
async def emulator() -> AsyncIterator[Emulator]:
    # The replay's traces are sized in the bare byte-based count: no framing, no tool prompt.
    app = create_app(EmulatorState(tool_prompt=False, framing=False))
    url = "http://emulator"
    sdk_http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url=url)
    admin = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url=url)
    client = anthropic.AsyncAnthropic(
        api_key="test", base_url=url, http_client=sdk_http, max_retries=0
    )
    async with client, admin:
        yield Emulator(client, admin)


@pytest.mark.parametrize("rewrite", [False, True])
async def test_replay_matches_the_emulator_over_the_sdk(emulator: Emulator, rewrite: bool) -> None:
    trace, decisions = hand_trace()
    policy = Table(decisions, rewrite=rewrite)
    fast, sdk = await emulator.both(trace, policy)
    assert fast.usages is not None and sdk.usages is not None
    assert len(fast.usages) == len(trace.requests) == 20
    for i, (mine, theirs) in enumerate(zip(fast.usages, sdk.usages, strict=True)):
        assert mine == theirs, (i, trace.requests[i])
    assert fast.ping_usages == sdk.ping_usages
    assert fast == sdk  # totals, counts, cost split, total cost
    by_request = sum(cost(u.to_api(out), MODEL) for u, out in sdk.usages)
    by_ping = sum(cost(u, MODEL) for _, _, u in sdk.ping_usages or ())
    assert math.isclose(sdk.total_cost, by_request + by_ping, rel_tol=1e-12)

    # The trace is not vacuous: every kind of token, ping outcome and path occurs.
    tokens = fast.tokens
    assert min(tokens.input, tokens.cache_write_5m, tokens.cache_write_1h, tokens.cache_read) > 0
    assert fast.pings >= 6 and fast.pings_cancelled >= 3
    if rewrite:
        assert fast.pings_dropped == 0 and fast.ping_tokens.cache_write_5m > 0
    else:
        assert fast.pings_dropped >= 1 and fast.ping_tokens.cache_write_5m == 0
    usages = [u for u, _ in fast.usages]
    first_b = next(i for i, r in enumerate(trace.requests) if r.session == "b")
    assert usages[first_b].cache_read_input_tokens == 1200  # a's prompt, read in full
    long_c = next(i for i, r in enumerate(trace.requests) if len(r.blocks) == 28)
    assert usages[long_c].cache_read_input_tokens == 0  # beyond the lookback window
    plain = [i for i, d in enumerate(decisions) if d.ttl is None]
    assert all(usages[i].input_tokens == trace.requests[i].input_tokens for i in plain)


@pytest.mark.parametrize("name", ["aider_3", "learned", "selective_1h"])
async def test_policies_see_the_same_usage_over_the_sdk(emulator: Emulator, name: str) -> None:
    """A policy reads only usage, so over the SDK it makes the same decisions."""
    trace, _ = hand_trace()
    policy = {p.name: p for p in policies.reference_policies(MODEL)}[name]
    fast, sdk = await emulator.both(trace, policy)
    assert fast == sdk


def random_trace(seed: int, sessions: int = 6, turns: int = 8) -> Trace:
    """Sessions that grow turn by turn with gaps around the TTLs, some sharing a system
    prompt, some short."""
    rng = random.Random(seed)
    requests: list[TraceRequest] = []
    next_id = 1000
    for s in range(sessions):
        blocks = [1] if s % 2 else []
        tokens = [700] if s % 2 else []
        at = rng.uniform(0, 600)
        for _ in range(rng.randint(1, turns)):
            for _ in range(rng.choice([1, 1, 2, 3, 22])):
                blocks.append(next_id)
                tokens.append(rng.choice([30, 200, 400, 900]))
                next_id += 1
            requests.append(
                TraceRequest(f"s{s}", at, tuple(blocks), tuple(tokens), rng.randint(0, 300))
            )
            at += rng.choice([5.0, 60.0, 240.0, 299.0, 300.0, 301.0, 700.0, 2000.0, 4000.0])
    return Trace.ordered(f"random-{seed}", requests)


def all_policies(trace: Trace) -> list[policies.Policy]:
    return [
        *policies.reference_policies(MODEL),
        policies.GapOracle(trace, model=MODEL),
        policies.GapOracle(trace, must_write=False, model=MODEL),
    ]


@pytest.mark.parametrize("seed", range(6))
def test_the_fast_path_changes_nothing(seed: int) -> None:
    trace = random_trace(seed)
    prepared = prepare(trace)
    for policy in all_policies(trace):
        fast = replay(prepared, policy, model=MODEL, keep_usage=True)
        slow = replay(prepared, policy, model=MODEL, keep_usage=True, fast_path=False)
        assert fast == slow, policy.name


def _one_session(*times: float, blocks: int = 3) -> Trace:
    grow = [
        TraceRequest("s", at, tuple(range(blocks + k)), (500,) * (blocks + k), 10)
        for k, at in enumerate(times)
    ]
    return Trace("one", tuple(grow))


def test_a_ping_at_the_next_request_time_is_cancelled() -> None:
    trace = _one_session(0.0, 300.0)
    decisions = [Decision("5m", (300.0,)), Decision("5m")]
    result = replay(trace, Table(decisions, rewrite=False), model=MODEL)
    assert (result.pings, result.pings_cancelled) == (0, 1)


def test_a_ping_at_the_expiry_reads_and_refreshes() -> None:
    trace = _one_session(0.0, 599.0)
    result = replay(
        trace, Table([Decision("5m", (300.0,)), Decision("5m")], rewrite=False), model=MODEL
    )
    assert result.pings == 1
    assert result.ping_tokens.cache_read == 1500  # the whole prompt, alive at 300 inclusive
    assert result.tokens.cache_read == 1500 + 1500  # and the second request read it


def test_a_ping_after_the_expiry_is_dropped_unless_it_may_rewrite() -> None:
    trace = _one_session(0.0, 550.0)
    decisions = [Decision("5m", (301.0,)), Decision("5m")]
    kept = replay(trace, Table(decisions, rewrite=False), model=MODEL)
    assert (kept.pings, kept.pings_dropped, kept.tokens.cache_read) == (0, 1, 0)
    rewritten = replay(trace, Table(decisions, rewrite=True), model=MODEL)
    assert rewritten.pings == 1 and rewritten.ping_tokens.cache_write_5m == 1500
    assert rewritten.tokens.cache_read == 1500  # the rewrite lived until the next request


def test_a_prompt_below_the_minimum_schedules_no_pings() -> None:
    trace = Trace("short", (TraceRequest("s", 0.0, (1,), (1000,), 1),))
    result = replay(trace, Table([Decision("5m", (100.0,))], rewrite=True), model=MODEL)
    assert (result.pings, result.pings_cancelled, result.pings_dropped) == (0, 0, 0)
    assert result.tokens.input == 1000


def test_no_cache_reads_and_writes_nothing() -> None:
    trace = random_trace(3)
    result = replay(trace, policies.no_cache(), model=MODEL)
    assert result.tokens.input == sum(r.input_tokens for r in trace.requests)
    assert result.tokens.cache_read == result.tokens.cache_write_5m == 0
    assert result.cost.total == pytest.approx(result.cost.input + result.cost.output)


def test_prepare_interns_whole_prefixes() -> None:
    trace = Trace(
        "t",
        (
            TraceRequest("a", 0, (1, 2, 3), (1, 1, 1), 0),
            TraceRequest("b", 1, (1, 2, 4), (1, 1, 1), 0),
            TraceRequest("c", 2, (9, 2, 3), (1, 1, 1), 0),
            TraceRequest("a", 3, (1, 2, 3, 5), (1, 1, 1, 1), 0),
        ),
    )
    h = prepare(trace).hashes
    assert h[0][:2] == h[1][:2] and h[0][2] != h[1][2]
    assert not set(h[2]) & set(h[0])  # same ids after another first block: other prefixes
    assert h[3][:3] == h[0]
    assert prepare(trace).extends == (False, False, False, True)


def test_prepare_sees_the_lookback_window() -> None:
    near = _one_session(0.0, 1.0)
    assert prepare(near).extends == (False, True)
    far = Trace(
        "far",
        (
            TraceRequest("s", 0.0, (1,), (2000,), 0),
            TraceRequest("s", 1.0, tuple(range(1, 21)), (2000,) + (1,) * 19, 0),
            TraceRequest("s", 2.0, tuple(range(1, 41)), (2000,) + (1,) * 39, 0),
        ),
    )
    # 19 new blocks after the previous prompt's end still reach it, 20 do not: the store's
    # breakpoint looks at itself and the 19 positions before it.
    assert prepare(far).extends == (False, True, False)
    usages = replay(far, policies.five_minutes(), model=MODEL, keep_usage=True).usages
    assert usages is not None
    assert [u.cache_read_input_tokens for u, _ in usages] == [0, 2000, 0]


def test_align_to_prompts_splits_the_partial_chunk() -> None:
    chunks = Trace(
        "chunks",
        (
            TraceRequest("s0", 0.0, (0, 1, 2), (512, 512, 176), 50),
            TraceRequest("s1", 1.0, (0, 3), (512, 300), 5),
            TraceRequest("s0", 3.0, (0, 1, 7, 8), (512, 512, 512, 364), 60),
            TraceRequest("s0", 6.0, (0, 1, 7, 13), (512, 512, 512, 164), 40),
            TraceRequest("s0", 9.0, (0, 1, 7, 16, 14), (512, 512, 512, 512, 10), 40),
        ),
    )
    aligned = align_to_prompts(chunks).requests
    assert aligned[0] == chunks.requests[0] and aligned[1] == chunks.requests[1]
    assert aligned[2].blocks == (0, 1, 2, 17, 8)  # 7 split after the previous prompt's 176
    assert aligned[2].block_tokens == (512, 512, 176, 336, 364)
    # A retry of the last message shares only the full chunks before it.
    assert aligned[3].blocks == (0, 1, 2, 17, 13)
    assert aligned[4].blocks == (0, 1, 2, 17, 13, 18, 14)
    assert aligned[4].block_tokens == (512, 512, 176, 336, 164, 348, 10)
    for before, after in zip(chunks.requests, aligned, strict=True):
        assert (before.session, before.at, before.output_tokens) == (
            after.session,
            after.at,
            after.output_tokens,
        )
        assert before.input_tokens == after.input_tokens
    # And now the continuation reads its previous prompt back.
    result = replay(align_to_prompts(chunks), policies.five_minutes(), model=MODEL)
    raw = replay(chunks, policies.five_minutes(), model=MODEL)
    assert raw.tokens.cache_read == 0 < result.tokens.cache_read


# --- CacheStore.apply: work independent of the stored entries (lazy expiry) ---------------


class _Counter:
    """Counts `CacheEntry.alive` calls: every entry the store looks at costs one (`usable`
    calls it too), so the count is the number of entries an apply touches."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        original = CacheEntry.alive

        def alive(entry: CacheEntry, now: float) -> bool:
            self.calls += 1
            return original(entry, now)

        monkeypatch.setattr(CacheEntry, "alive", alive)


def _prompt(tag: str, n: int = 26, ttl: TTL = "5m") -> list[tuple[str, int, TTL | None]]:
    blocks: list[tuple[str, int, TTL | None]] = [(f"{tag}/{k}", 100, None) for k in range(n - 1)]
    return [*blocks, (f"{tag}/{n - 1}", 100, ttl)]


def _filled(entries: int) -> CacheStore:
    store = CacheStore()
    for k in range(entries):
        store.apply([(f"live{k}", 2000, "1h")], model=MODEL, now=0.0, min_tokens=1024)
    return store


def _touched(store: CacheStore, monkeypatch: pytest.MonkeyPatch) -> int:
    """Entries touched by 40 applies: new prompts (misses, writes) and repeats (hits)."""
    counter = _Counter(monkeypatch)
    for k in range(20):
        store.apply(_prompt(f"p{k}"), model=MODEL, now=10.0 + k, min_tokens=1024)
        store.apply(_prompt(f"p{k}"), model=MODEL, now=10.5 + k, min_tokens=1024)
    monkeypatch.undo()
    return counter.calls


def test_apply_touches_no_entry_of_other_prompts(monkeypatch: pytest.MonkeyPatch) -> None:
    few, many = _filled(10), _filled(20_000)
    assert len(many.entries()) == 20_000
    touched = _touched(few, monkeypatch)
    assert touched == _touched(many, monkeypatch)
    assert touched <= 40 * 3  # each apply looks at its own breakpoint's entry, not the rest


def test_total_work_and_memory_stay_linear(monkeypatch: pytest.MonkeyPatch) -> None:
    """3,000 writes a second with a 5m TTL: about 300 live entries at a time. Dead ones leave
    as they die (expiry is on a heap), so the store never holds more than the live entries
    and the total work stays within a constant per apply."""
    store = CacheStore()
    counter = _Counter(monkeypatch)
    largest = 0
    for k in range(3000):
        store.apply([(f"e{k}", 2000, "5m")], model=MODEL, now=float(k), min_tokens=1024)
        largest = max(largest, len(store._entries))
    monkeypatch.undo()
    assert len(store.entries()) == 301  # written at 2699..2999, alive at 2999
    assert largest <= 301
    assert counter.calls <= 4 * 3000


def test_an_entry_dead_at_a_later_apply_stays_dead_when_the_clock_moves_back() -> None:
    """The eager rule dropped every entry dead at each apply's time; moving the clock back
    (emulator reset or set) must not revive one."""
    store = CacheStore()
    prompt = _prompt("p")
    store.apply(prompt, model=MODEL, now=0.0, min_tokens=1024)
    store.apply(_prompt("other"), model=MODEL, now=1000.0, min_tokens=1024)
    again = store.apply(prompt, model=MODEL, now=100.0, min_tokens=1024)
    assert again.usage.cache_read_input_tokens == 0 and again.breakpoints[0].written
    # Without the later apply it was alive at 100 and is read.
    fresh = CacheStore()
    fresh.apply(prompt, model=MODEL, now=0.0, min_tokens=1024)
    assert fresh.apply(
        prompt, model=MODEL, now=100.0, min_tokens=1024
    ).usage.cache_read_input_tokens


def test_a_rewritten_dead_entry_is_the_newest() -> None:
    store = CacheStore()
    store.apply(_prompt("a"), model=MODEL, now=0.0, min_tokens=1024)
    store.apply(_prompt("b", ttl="1h"), model=MODEL, now=1.0, min_tokens=1024)
    store.apply(_prompt("a"), model=MODEL, now=400.0, min_tokens=1024)  # a died at 300
    assert [e.prefix_hash for e in store.entries()] == ["b/25", "a/25"]
    assert [e.hits for e in store.entries()] == [0, 0]


def marked_trace() -> tuple[Trace, list[Decision]]:
    """Two sessions of one agent: both mark their shared 2,000-token system block (block 0)
    as well as the tail, as Claude Code marks tools + system and the last message."""
    system = 2000
    rows: list[tuple[TraceRequest, Decision]] = []
    for session, start, own in (("x", 0.0, 500), ("y", 120.0, 600)):
        blocks: list[int] = [0]
        tokens: list[int] = [system]
        for turn in range(3):
            blocks.append(hash((session, turn)) % 10_000 + 1)
            tokens.append(own + 100 * turn)
            request = TraceRequest(
                session, start + 200.0 * turn, tuple(blocks), tuple(tokens), 20, breakpoints=(0,)
            )
            rows.append((request, Decision("5m", (295.0,) if turn == 2 else ())))
    rows.sort(key=lambda row: row[0].at)
    return Trace("marked", tuple(r for r, _ in rows)), [d for _, d in rows]


@pytest.mark.clause("SG-REPLAY-1")
async def test_client_breakpoints_replay_as_the_emulator_bills_them(emulator: Emulator) -> None:
    """Every mark of a request is a breakpoint on the wire: the second session's first
    request reads the system block the first session wrote, the emulator agrees request by
    request, and a last-block-only replay reads nothing there."""
    trace, decisions = marked_trace()
    policy = Table(decisions, rewrite=False)
    fast, sdk = await emulator.both(trace, policy)
    assert fast == sdk
    assert fast.usages is not None
    first_y = next(i for i, r in enumerate(trace.requests) if r.session == "y")
    assert fast.usages[first_y][0].cache_read_input_tokens == 2000
    single = replay(prepare(trace).single(), policy, model=MODEL, keep_usage=True)
    assert single.usages is not None
    assert single.usages[first_y][0].cache_read_input_tokens == 0
    logged = (await emulator.admin.get("/_emulator/requests")).json()["requests"]
    marks = [
        [
            k
            for k, block in enumerate(entry["body"]["messages"][0]["content"])
            if "cache_control" in block
        ]
        for entry in logged
    ]
    assert marks[first_y] == [0, 1]


@pytest.mark.parametrize("seed", range(4))
def test_the_fast_path_changes_nothing_with_client_breakpoints(seed: int) -> None:
    """The shared system block (1) made cacheable on its own and marked: a ping must
    refresh its entry too, which a one-block ping would not."""
    base = random_trace(seed, sessions=8)
    trace = Trace(
        base.name,
        tuple(
            TraceRequest(
                r.session,
                r.at,
                r.blocks,
                tuple(1500 if b == 1 else n for b, n in zip(r.blocks, r.block_tokens, strict=True)),
                r.output_tokens,
                breakpoints=(0,) if len(r.blocks) > 1 else (),
            )
            for r in base.requests
        ),
    )
    prepared = prepare(trace)
    assert prepared.marked
    for policy in all_policies(trace):
        fast = replay(prepared, policy, model=MODEL, keep_usage=True)
        slow = replay(prepared, policy, model=MODEL, keep_usage=True, fast_path=False)
        assert fast == slow, policy.name


def test_the_optimum_replays_its_schedule_with_the_client_breakpoints() -> None:
    """The optimum plans with one breakpoint per request and its row is that schedule
    replayed with the client's marks: here the second session's first request reads the
    system block the first one wrote, so the row is cheaper than the plan."""
    from sessiongen.warming.study.offline_optimum import optimum

    trace, _ = marked_trace()
    best = optimum(trace, model=MODEL)
    single = optimum(prepare(trace).single(), model=MODEL)
    assert best.decisions == single.decisions
    assert best.result.tokens.cache_read > single.result.tokens.cache_read
    assert best.total_cost < single.total_cost


@pytest.mark.clause("SG-REPLAY-1")
async def test_a_real_log_replays_as_the_emulator_bills_it(emulator: Emulator) -> None:
    """A real Claude Code log (d-kimuson/claude-code-viewer @ f299e8f8, reduced fixture) as
    recorded, with its client breakpoints, shared prefixes and a prefix cached before the
    log: the in-memory replay and the emulator over the SDK agree request by request."""
    from pathlib import Path

    from sessiongen.warming.traces.formats import load_trace

    real = Path(__file__).parent / "fixtures" / "real" / "claude-code" / "v1.0-in-file-subagents"
    trace = load_trace(real, "claude-code")
    assert trace.warm and prepare(trace).marked
    policy = policies.AsRecorded()
    fast, sdk = await emulator.both(trace, policy)
    assert fast == sdk


def warm_trace() -> Trace:
    """x's first request reads a 2,500-token prefix (system 1,500 + tools 1,000, marked on
    block 1) cached 1h before the trace; y sends the same prefix 10 minutes later."""
    from sessiongen.warming.traces import WarmEntry

    x = TraceRequest("x", 0.0, (0, 1, 2), (1500, 1000, 500), 20, breakpoints=(1,))
    y = TraceRequest("y", 600.0, (0, 1, 3), (1500, 1000, 600), 20, breakpoints=(1,))
    return Trace("warm", (x, y), (WarmEntry(0, 1, "1h"),))


@pytest.mark.clause("SG-REPLAY-1")
async def test_a_warm_entry_is_its_whole_prefix_with_its_ttl(emulator: Emulator) -> None:
    """A warm entry caches the request's prompt up to its block (every block before it
    too), unbilled, with the entry's TTL: x reads all 2,500 tokens, y reads them 10 minutes
    on (a 1h entry, not 5m), the same over the SDK."""
    trace = warm_trace()
    policy = Table([Decision("5m"), Decision("5m")], rewrite=False)
    fast, sdk = await emulator.both(trace, policy)
    assert fast.usages is not None
    assert [u.cache_read_input_tokens for u, _ in fast.usages] == [2500, 2500]
    assert fast.tokens.cache_write_1h == 0  # the warm entry is never billed
    assert fast == sdk


def test_a_warm_entry_goes_in_before_its_request_only() -> None:
    """The warm prefix is put in the cache just before its request, not again at that
    request's pings: a ping 10 minutes on, after the 5m warm entry expired, writes the
    whole prompt again. The optimum's planning model (`single()`) keeps the warm entries."""
    from sessiongen.warming.traces import WarmEntry

    x = TraceRequest("x", 0.0, (0, 1), (1500, 500), 20)
    trace = Trace("warm_ping", (x,), (WarmEntry(0, 0, "5m"),))
    policy = Table([Decision("5m", (600.0,))], rewrite=True)
    result = replay(trace, policy, model=MODEL, keep_usage=True)
    assert result.usages is not None and result.ping_usages is not None
    assert result.usages[0][0].cache_read_input_tokens == 1500
    [(_, _, ping)] = result.ping_usages
    assert (ping.cache_read_input_tokens, ping.cache_creation_input_tokens) == (0, 2000)
    prepared = prepare(trace)
    assert not prepared.marked and prepared.warm
    assert prepared.single().warm == prepared.warm


def test_the_optimum_plans_with_the_warm_prefixes() -> None:
    """A trace with no client breakpoints but a warm prefix: the optimum plans with it (x's
    first request reads it, its next one reads x's first prompt), so the row is that plan
    and costs less than the plan without the warm prefix, replayed with it."""
    from sessiongen.warming.study.offline_optimum import integer_cost, optimum
    from sessiongen.warming.traces import WarmEntry

    first = TraceRequest("x", 0.0, (0, 1), (1500, 500), 20)
    second = TraceRequest("x", 60.0, (0, 1, 2), (1500, 500, 300), 20)
    trace = Trace("warm_plain", (first, second), (WarmEntry(0, 1, "5m"),))
    assert not prepare(trace).marked
    best = optimum(trace, model=MODEL)
    cold = optimum(Trace("cold", trace.requests), model=MODEL)
    assert best.result.tokens.cache_read == 4000
    assert best.planned_cost == integer_cost(best.result, MODEL) < cold.planned_cost
    assert best.caveats == ()
