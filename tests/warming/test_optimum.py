"""The offline optimum and the per-block lower bound: exactly the minimum over every schedule
of a finite family (by brute force, each schedule replayed through the cache store), never
above a policy, never below the bound."""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Sequence

import pytest
from sessiongen.cache import TTL_SECONDS
from sessiongen.warming import policies
from sessiongen.warming.optimum import (
    _block_cost,
    _Prices,
    integer_cost,
    lower_bound,
    lower_bound_cost,
    optimum,
)
from sessiongen.warming.policies import Decision
from sessiongen.warming.replay import prepare, replay
from sessiongen.warming.traces import Trace, TraceRequest

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
    ttls = ("5m", "1h") if must_write else (None, "5m", "1h")
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
