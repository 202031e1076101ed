"""The offline optimum and the per-block lower bound: exactly the minimum over every schedule
of a finite family (by brute force, each schedule replayed through the cache store), never
above a policy, never below the bound."""

from __future__ import annotations

import itertools
import math
import os
import random
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import pytest
from sessiongen.cache import TTL, TTL_SECONDS, get_model
from sessiongen.warming import policies
from sessiongen.warming.policies import Decision
from sessiongen.warming.policies.trace_replay import prepare, replay
from sessiongen.warming.study.offline_optimum import (
    _block_cost,
    _components,
    _group,
    _Plan,
    _plan,
    _Prices,
    _solve,
    _with_warm_requests,
    integer_cost,
    lower_bound,
    lower_bound_cost,
    optimum,
)
from sessiongen.warming.traces import Trace, TraceRequest, WarmEntry
from sessiongen.warming.traces.generator import generate_sessions

from .test_replay import MODEL, Table, random_trace

PRICES = _Prices(MODEL)


def _trace(*rows: tuple[str, float, Sequence[int], Sequence[int]]) -> Trace:
    return Trace.ordered(
        "hand", [TraceRequest(s, at, tuple(b), tuple(t), 7) for s, at, b, t in rows]
    )


# Small traces, each aimed at one coupling of the rules.
HAND = {
    # One conversation, gaps on both sides of 5 minutes and of an hour.
    "gaps": _trace(
        ("a", 0, [1, 2], [900, 300]),
        ("a", 100, [1, 2, 3], [900, 300, 200]),
        ("a", 700, [1, 2, 3, 4], [900, 300, 200, 100]),
        ("a", 2900, [1, 2, 3, 4, 5], [900, 300, 200, 100, 50]),
    ),
    # Two sessions: b opens with a's first prompt verbatim, then both extend it.
    "shared": _trace(
        ("a", 0, [1, 2], [800, 400]),
        ("b", 250, [1, 2], [800, 400]),
        ("a", 500, [1, 2, 3], [800, 400, 100]),
        ("b", 650, [1, 2, 4], [800, 400, 900]),
    ),
    # 21 new blocks put the previous prompt out of the lookback: only an older one is reached
    # when the newest was not written.
    "lookback": _trace(
        ("a", 0, [1], [1500]),
        ("a", 60, [1, *range(10, 25)], [1500] + [20] * 15),
        ("a", 120, [1, *range(10, 31)], [1500] + [20] * 21),
        ("a", 400, [1, *range(10, 32)], [1500] + [20] * 22),
    ),
    # A retry: the session goes back to a shorter prompt, then to one a below-minimum
    # request cannot keep alive. The first prompt's pings must outlast the session's next
    # request to serve the one after it.
    "retry": _trace(
        ("a", 0, [1, 2, 3], [600, 500, 700]),
        ("a", 310, [1, 2], [600, 500]),
        ("a", 4010, [1], [600]),
        ("a", 4610, [1, 2, 3], [600, 500, 700]),
    ),
    # A shorter entry that outlives a longer one: a's first prompt dies at 300, b's shorter
    # prompt (written at 60) is still alive when a comes back at 310, and is what a reads.
    "outlived": _trace(
        ("a", 0, [1, 2], [8000, 500]),
        ("b", 60, [1], [8000]),
        ("a", 310, [1, 2, 4], [8000, 500, 20]),
    ),
    # Below the minimum: a short prompt cannot be written, a longer one can.
    "minimum": _trace(
        ("a", 0, [1], [600]),
        ("a", 30, [1, 2], [600, 300]),
        ("a", 60, [1, 2, 3], [600, 300, 400]),
        ("a", 1000, [1, 2, 3, 4], [600, 300, 400, 100]),
    ),
}


def _family(trace: Trace, must_write: bool) -> list[list[Decision]]:
    """Per request, the decisions the brute force tries: every TTL (or none), and for a TTL
    no pings, series of pings at each expiry (for either TTL's lifetime) up to any later
    request's start, and two others (an early ping, one just after a 5m expiry). Pings after
    the session's next request are cancelled, so longer series are cut there."""
    ttls: tuple[TTL | None, ...] = ("5m", "1h") if must_write else (None, "5m", "1h")
    family = []
    for i, request in enumerate(trace.requests):
        series: set[tuple[float, ...]] = {(150.0,), (301.0,)}
        for later in trace.requests[i + 1 :]:
            gap = later.at - request.at
            for life in TTL_SECONDS.values():
                series.add(tuple(life * k for k in range(1, math.ceil(gap / life))))
        options = [Decision(ttl) for ttl in ttls]
        options += [Decision(ttl, p) for ttl in ttls if ttl for p in sorted(series) if p]
        family.append(options)
    return family


def _brute_force(trace: Trace, must_write: bool) -> int:
    """The cheapest keep-alive schedule of the family: every schedule is replayed, and one
    whose pings ever write (a ping after its entry died) is outside the model."""
    prepared = prepare(trace)
    best = math.inf
    for decisions in itertools.product(*_family(trace, must_write)):
        result = replay(prepared, Table(decisions, rewrite=True), model=MODEL)
        if result.ping_tokens.cache_write_5m or result.ping_tokens.cache_write_1h:
            continue
        best = min(best, integer_cost(result, MODEL))
    assert best < math.inf
    return int(best)


@pytest.mark.parametrize("must_write", [False, True])
@pytest.mark.parametrize("name", sorted(HAND))
def test_the_optimum_is_the_brute_force_minimum(name: str, must_write: bool) -> None:
    trace = HAND[name]
    best = optimum(trace, model=MODEL, must_write=must_write)
    assert best.planned_cost == integer_cost(best.result, MODEL)  # planner == cache rules
    assert replay(trace, best.policy(), model=MODEL) == best.result
    assert best.result.ping_tokens.cache_write_5m == best.result.ping_tokens.cache_write_1h == 0
    if must_write:
        assert all(d.ttl is not None for d in best.decisions)
    # The optimum's own schedule is in the family, so equality is a real minimum over it.
    family = _family(trace, must_write)
    assert all(d in options for d, options in zip(best.decisions, family, strict=True))
    assert best.planned_cost == _brute_force(trace, must_write)


# Warm prefixes (cached before the trace, unbilled): a system block several sessions open
# with, one read after its first request's entry died, and a prefix whose own entry is
# alive with another TTL when it is put in again.
WARM = {
    "system": Trace(
        "warm_system",
        _trace(
            ("a", 0, [1, 2], [1500, 300]),
            ("b", 200, [1, 3], [1500, 200]),
            ("a", 400, [1, 2, 4], [1500, 300, 100]),
            ("c", 3000, [1, 5], [1500, 700]),
        ).requests,
        (WarmEntry(0, 0, "5m"), WarmEntry(3, 0, "1h")),
    ),
    "again": Trace(
        "warm_again",
        _trace(
            ("a", 0, [1, 2], [1200, 900]),
            ("a", 250, [1, 2, 3], [1200, 900, 40]),
            ("b", 500, [1, 2, 6], [1200, 900, 50]),
        ).requests,
        (WarmEntry(0, 1, "1h"), WarmEntry(2, 1, "5m")),
    ),
}


@pytest.mark.parametrize("must_write", [False, True])
@pytest.mark.parametrize("name", sorted(WARM))
def test_the_optimum_plans_with_warm_prefixes(name: str, must_write: bool) -> None:
    """With prefixes cached before the trace, the optimum is still the brute-force minimum
    of the family, every schedule replayed with the warm prefixes; nothing is caveated."""
    trace = WARM[name]
    best = optimum(trace, model=MODEL, must_write=must_write)
    assert best.caveats == ()
    assert best.planned_cost == integer_cost(best.result, MODEL)
    assert best.planned_cost == _brute_force(trace, must_write)
    assert lower_bound_cost(trace, model=MODEL) <= best.planned_cost


def test_too_many_states_plan_without_the_warm_prefixes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the state limit the program plans without the warm prefixes, replays that
    schedule with them, and says so: a schedule, not the minimum."""
    from sessiongen.warming.study import offline_optimum

    trace = WARM["system"]
    exact = optimum(trace, model=MODEL)
    monkeypatch.setattr(offline_optimum, "_WARM_STATES", 0)
    fallback = optimum(trace, model=MODEL)
    assert [c for c in fallback.caveats if "prefixes cached before the trace" in c]
    assert integer_cost(fallback.result, MODEL) >= exact.planned_cost
    assert integer_cost(fallback.result, MODEL) >= lower_bound_cost(trace, model=MODEL)


def test_a_warm_block_is_free_to_read_in_the_bound() -> None:
    """The bound's per-block program lets a warm use read the block whatever came before:
    one read (no write) for a block used once, warm."""
    hour, five = TTL_SECONDS["1h"], TTL_SECONDS["5m"]
    assert _block_cost([(0.0, True, True)], PRICES, hour, five) == PRICES.read
    assert _block_cost([(0.0, True, False)], PRICES, hour, five) == PRICES.input


class Recording:
    """Wraps a policy and records whether it ever left a prompt without a breakpoint."""

    def __init__(self, policy: policies.Policy) -> None:
        self.policy = policy
        self.name = policy.name
        self.online = policy.online
        self.ping_may_rewrite = policy.ping_may_rewrite
        self.skipped = False

    def reset(self) -> None:
        self.policy.reset()

    def observe(self, request: TraceRequest, history: policies.History) -> None:
        self.policy.observe(request, history)

    def decide(self, request: TraceRequest, history: policies.History) -> Decision:
        decision = self.policy.decide(request, history)
        self.skipped |= decision.ttl is None
        return decision


@pytest.mark.parametrize("seed", range(5))
def test_policies_cost_at_least_the_optimum_and_it_at_least_the_bound(seed: int) -> None:
    trace = random_trace(seed)
    prepared = prepare(trace)
    best = optimum(prepared, model=MODEL)
    must = optimum(prepared, model=MODEL, must_write=True)
    bound = lower_bound_cost(prepared, model=MODEL)
    assert bound <= best.planned_cost <= must.planned_cost
    candidates = [
        *policies.reference_policies(MODEL),
        policies.GapOracle(trace, model=MODEL),
        policies.GapOracle(trace, must_write=False, model=MODEL),
    ]
    for policy in candidates:
        recorded = Recording(policy)
        cost = integer_cost(replay(prepared, recorded, model=MODEL), MODEL)
        assert cost >= best.planned_cost, policy.name
        if not recorded.skipped:  # a policy that writes every prompt: the variant bounds it
            assert cost >= must.planned_cost, policy.name
    assert math.isclose(lower_bound(prepared, model=MODEL), PRICES.usd(bound))


@pytest.mark.parametrize("seed", range(3))
def test_tiny_random_traces_against_brute_force(seed: int) -> None:
    rng = random.Random(seed)
    rows = []
    blocks = [1]
    tokens = [rng.choice([500, 1200])]
    at = 0.0
    for k in range(4):
        session = "a" if k != 2 else "b"
        blocks = [*blocks, 10 + k]
        tokens = [*tokens, rng.choice([100, 400])]
        rows.append((session, at, list(blocks), list(tokens)))
        at += rng.choice([120.0, 300.0, 450.0, 1900.0])
    trace = _trace(*rows)
    assert optimum(trace, model=MODEL).planned_cost == _brute_force(trace, False)


def test_the_bound_lets_a_read_keep_a_block_for_an_hour() -> None:
    """Block 1 written 5m at 0, read at 200 by a request that writes 1h, read again at 3000
    from that 1h entry: 5m write + 2 reads per token in reality. A per-block program that
    fixed a block's TTL at its write could only reach 1h write + 2 reads, 5m write + read +
    input, or three inputs, and so would not be a lower bound."""
    trace = _trace(
        ("a", 0, [1], [2000]),
        ("a", 200, [1, 2], [2000, 10]),
        ("a", 3000, [1, 2, 3], [2000, 10, 10]),
    )
    decisions = [Decision("5m"), Decision("1h"), Decision("5m")]
    usages = replay(trace, Table(decisions, rewrite=False), model=MODEL, keep_usage=True).usages
    assert usages is not None
    assert [u.cache_read_input_tokens for u, _ in usages] == [0, 2000, 2010]
    p = PRICES
    real = p.write["5m"] + 2 * p.read
    fixed_ttl = min(p.write["1h"] + 2 * p.read, p.write["5m"] + p.read + p.input, 3 * p.input)
    assert real < fixed_ttl
    result = replay(trace, Table(decisions, rewrite=False), model=MODEL)
    assert lower_bound_cost(trace, model=MODEL) <= integer_cost(result, MODEL)


def _block_brute_force(uses: Sequence[tuple[float, bool]], step: float) -> int:
    """One block's cheapest touch sequence with pings allowed at any multiple of `step`:
    input, write 5m / 1h, or read while alive (a read or ping leaves it alive for an hour)."""
    hour, five = TTL_SECONDS["1h"], TTL_SECONDS["5m"]
    p = PRICES
    horizon = uses[-1][0]
    grid = [k * step for k in range(int(horizon // step) + 1)]
    # Uses in order (two may share a time), each followed by the chance of a ping.
    events = sorted([(t, 0, k) for k, (t, _) in enumerate(uses)] + [(g, 1, -1) for g in grid])
    best: dict[float, int] = {-math.inf: 0}  # expiry -> cost

    def put(states: dict[float, int], expiry: float, cost: int) -> None:
        states[expiry] = min(states.get(expiry, cost), cost)

    for t, kind, k in events:
        nxt: dict[float, int] = {}
        for expiry, cost in best.items():
            alive = expiry >= t
            if kind == 1:  # a possible ping
                put(nxt, expiry, cost)
                if alive:
                    put(nxt, t + hour, cost + p.read)
                continue
            if not uses[k][1]:
                put(nxt, expiry, cost + p.input)
                continue
            if alive:
                put(nxt, t + hour, cost + p.read)
            else:
                put(nxt, expiry, cost + p.input)
                put(nxt, t + five, cost + p.write["5m"])
                put(nxt, t + hour, cost + p.write["1h"])
        best = nxt
    return min(best.values())


@pytest.mark.parametrize("seed", range(40))
def test_the_per_block_program_is_exact(seed: int) -> None:
    rng = random.Random(seed)
    t = 0.0
    uses = []
    for _ in range(rng.randint(1, 6)):
        uses.append((t, rng.random() > 0.15))
        t += rng.choice([0, 100, 300, 400, 600, 1200, 3600, 3900, 4000, 7500, 9000])
    expected = _block_brute_force(uses, 100.0)
    assert _block_cost(uses, PRICES, TTL_SECONDS["1h"], TTL_SECONDS["5m"]) == expected


# The program as it was before dominance pruning (commit 64a33bf), kept verbatim but for
# names, as the reference the pruned one must match to the token: states merge only when
# equal, and are dropped only as unreadable or shadowed. Slow on long tool loops, so only
# for small traces.
_RefEntries = tuple[tuple[str, float, TTL], ...]
_RefState = tuple[_RefEntries, tuple[tuple[str, tuple[float, ...], str], ...]]
_RefChain = tuple[tuple[int, Decision], "_RefChain | None"]


def _reference_shadows(plan: _Plan, longer: str, shorter: str, q: int) -> bool:
    return shorter in plan.chain[longer] and all(
        longer in plan.cands[r] for r in plan.readers[shorter] if r > q
    )


def _reference_relevant(
    live: dict[str, tuple[float, TTL]],
    scheduled: list[tuple[str, tuple[float, ...], str]],
    q: int,
    plan: _Plan,
) -> _RefEntries:
    pinged = {entry for _, _, entry in scheduled}
    kept: list[tuple[str, float, TTL]] = []
    for entry, (expires, ttl) in live.items():
        if plan.last_use[entry] <= q:
            continue
        if entry not in pinged and any(
            other != entry and until >= expires and _reference_shadows(plan, other, entry, q)
            for other, (until, _) in live.items()
        ):
            continue
        kept.append((entry, expires, ttl))
    return tuple(sorted(kept))


def _reference_solve(plan: _Plan, group: list[int], prices: _Prices, must_write: bool) -> int:
    requests = plan.prepared.trace.requests
    tokens = plan.prepared.tokens
    choices: tuple[TTL | None, ...] = ("5m", "1h") if must_write else (None, "5m", "1h")
    states: dict[_RefState, tuple[int, _RefChain | None]] = {((), ()): (0, None)}
    for q in group:
        request = requests[q]
        t = request.at
        total = tokens[q]
        key = plan.key[q]
        warm = plan.forced.get(q)  # a warm entry: its TTL given, unbilled, no pings
        fresh: dict[_RefState, tuple[int, _RefChain | None]] = {}
        for (entries, pings), (cost, chain) in states.items():
            live = {e: (x, ttl) for e, x, ttl in entries}
            due: list[tuple[float, str]] = []
            kept: list[tuple[str, tuple[float, ...], str]] = []
            for session, planned, entry in pings:
                now = [p for p in planned if p < t]
                due += [(p, entry) for p in now]
                later = planned[len(now) :]
                if later and session != request.session:
                    kept.append((session, later, entry))
            for p, entry in sorted(due):
                if entry in live:
                    live[entry] = (p + TTL_SECONDS[live[entry][1]], live[entry][1])
            live = {e: v for e, v in live.items() if v[0] >= t}
            for ttl in choices if warm is None else (warm,):
                after = dict(live)
                if ttl is None or key is None:
                    step = prices.input * total
                else:
                    read = next((e for e in plan.cands[q] if e in after), None)
                    a = plan.tokens_of[read] if read is not None else 0
                    step = prices.read * a + prices.write[ttl] * (total - a)
                    if read is not None:
                        own = after[read][1]
                        after[read] = (t + TTL_SECONDS[own], own)
                    if key not in after:
                        after[key] = (t + TTL_SECONDS[ttl], ttl)
                step += prices.output * request.output_tokens
                if warm is not None:
                    step = 0
                options: list[tuple[float, ...]] = [()]
                if ttl is not None and key is not None and key in after and warm is None:
                    expires, own = after[key]
                    life = TTL_SECONDS[own]
                    for target in plan.targets[q]:
                        series: list[float] = []
                        p = expires
                        while p < target and p < plan.next_at[q]:
                            series.append(p)
                            p += life
                        if series and p >= target and tuple(series) not in options:
                            options.append(tuple(series))
                for times in options:
                    scheduled = list(kept)
                    ping_cost = 0
                    if times:
                        assert key is not None
                        scheduled.append((request.session, times, key))
                        ping_cost = prices.read * plan.tokens_of[key] * len(times)
                    state = (
                        _reference_relevant(after, scheduled, q, plan),
                        tuple(sorted(scheduled)),
                    )
                    decision = Decision(ttl, tuple(p - t for p in times))
                    candidate = cost + step + ping_cost
                    best = fresh.get(state)
                    if best is None or candidate < best[0]:
                        fresh[state] = (candidate, ((q, decision), chain))
        states = fresh
    return min(cost for cost, _ in states.values())


def _both(trace: Trace, must_write: bool) -> tuple[int, int]:
    """The pruned program's cost and the reference's, summed over the groups (warm entries
    planned as `optimum` plans them, as forced requests)."""
    planning, forced, _ = _with_warm_requests(prepare(trace).single())
    info = get_model(MODEL)
    plan = _plan(planning, info.min_cacheable_tokens, forced)
    pruned = reference = 0
    for members in _components(plan):
        pruned += _solve(_group(plan, members), PRICES, must_write)[0]
        reference += _reference_solve(plan, members, PRICES, must_write)
    return pruned, reference


def _tangled_trace(seed: int) -> Trace:
    """One to three sessions of one to six requests that tangle entries: sessions opening on
    another's prompt, retries of an earlier prompt, forks from a shorter prefix, jumps past
    the lookback; gaps on both sides of each TTL; big and small blocks (a block id always
    has the same size)."""
    rng = random.Random(seed)
    size: dict[int, int] = {1: 1100, 2: 5000}
    rows: list[tuple[str, float, list[int], list[int]]] = []
    prompts: list[list[int]] = []

    def grow(blocks: list[int], n: int) -> list[int]:
        for _ in range(n):
            size[len(size) + 1] = rng.choice([30, 30, 2000, 8000])
            blocks = [*blocks, len(size)]
        return blocks

    for s in range(rng.choice([1, 1, 2, 2, 3])):
        at = rng.choice([0.0, 5.0, 100.0, 250.0, 320.0, 3000.0])
        blocks = (
            list(rng.choice(prompts)) if prompts and rng.random() < 0.5 else [rng.choice([1, 2])]
        )
        mine = [blocks]
        for _ in range(rng.randint(1, 5)):
            rows.append((f"s{s}", at, blocks, [size[b] for b in blocks]))
            prompts.append(blocks)
            mine.append(blocks)
            at += rng.choice([0, 10, 190, 200, 290, 300, 310, 500, 3400, 3600, 3610, 3700, 7000])
            r = rng.random()
            if r < 0.2:
                blocks = rng.choice(mine)
            elif r < 0.3 and len(blocks) > 1:
                blocks = grow(blocks[: rng.randint(1, len(blocks) - 1)], 1)
            elif r < 0.35:
                blocks = rng.choice(prompts)
            else:
                blocks = grow(blocks, rng.choice([1, 1, 2, 21]))
    return _trace(*rows)


# The old program is slow on tool loops: 6 small generated traces and 800 tangled ones by
# default; 21 of up to 8 sessions and 2,000 with SESSIONGEN_LONG=1.
LONG = os.environ.get("SESSIONGEN_LONG") == "1"


@pytest.mark.parametrize("must_write", [False, True])
@pytest.mark.parametrize("seed", range(21) if LONG else (0, 1, 2, 3, 5, 6))
def test_pruning_keeps_the_optimum_on_generated_sessions(seed: int, must_write: bool) -> None:
    trace = generate_sessions(3 + seed % (6 if LONG else 3), seed=seed)
    pruned, reference = _both(trace, must_write)
    assert pruned == reference


@pytest.mark.parametrize("seed", range(21))
def test_pruning_keeps_the_optimum_on_random_traces(seed: int) -> None:
    trace = random_trace(seed, sessions=3 + seed % 6)
    for must_write in (False, True):
        pruned, reference = _both(trace, must_write)
        assert pruned == reference, must_write


def _with_warm(trace: Trace, seed: int) -> Trace:
    """`trace` with a prefix of a few requests' prompts cached before it, 5m or 1h."""
    rng = random.Random(seed)
    warm = []
    for i, request in enumerate(trace.requests):
        if rng.random() < 0.3:
            block = rng.randrange(len(request.blocks))
            warm.append(WarmEntry(i, block, rng.choice(("5m", "1h"))))
    return Trace(trace.name, trace.requests, tuple(warm))


@pytest.mark.parametrize("chunk", range(4) if LONG else range(1))
def test_pruning_keeps_the_optimum_with_warm_prefixes(chunk: int) -> None:
    """Warm entries are requests of the program that the dominance rule must not cut
    wrongly either: tangled traces with prefixes cached before them, the pruned program
    against the reference."""
    for seed in range(200 * chunk, 200 * chunk + 200):
        trace = _with_warm(_tangled_trace(seed), seed)
        for must_write in (False, True):
            pruned, reference = _both(trace, must_write)
            assert pruned == reference, (seed, must_write)


@pytest.mark.parametrize("chunk", range(10) if LONG else range(4))
def test_pruning_keeps_the_optimum_on_tangled_traces(chunk: int) -> None:
    for seed in range(200 * chunk, 200 * chunk + 200):
        trace = _tangled_trace(seed)
        for must_write in (False, True):
            pruned, reference = _both(trace, must_write)
            assert pruned == reference, (seed, must_write)


def test_an_executor_gives_the_same_optimum() -> None:
    trace = generate_sessions(12, seed=3)
    alone = optimum(trace, model=MODEL)
    with ThreadPoolExecutor(2) as threads:
        assert optimum(trace, model=MODEL, executor=threads) == alone
    with ProcessPoolExecutor(2) as processes:
        shared = optimum(trace, model=MODEL, executor=processes)
        must = optimum(trace, model=MODEL, must_write=True, executor=processes)
    assert shared.decisions == alone.decisions
    assert shared.planned_cost == alone.planned_cost
    assert shared == alone
    assert must == optimum(trace, model=MODEL, must_write=True)
