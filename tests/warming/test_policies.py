"""Warming policies: the schedules they produce, the cost rules behind them, and that the
online ones never read the future."""

from __future__ import annotations

from dataclasses import replace

import pytest
from sessiongen.cache import TTL_SECONDS, price
from sessiongen.warming import policies
from sessiongen.warming.policies import Decision, History, Learned
from sessiongen.warming.policies.trace_replay import replay
from sessiongen.warming.traces import Trace, TraceRequest

from .test_replay import MODEL, random_trace


class Recording:
    """Wraps a policy and records each decision by trace index."""

    def __init__(self, policy: policies.Policy) -> None:
        self.policy = policy
        self.name = policy.name
        self.online = policy.online
        self.ping_may_rewrite = policy.ping_may_rewrite
        self.decisions: dict[int, Decision] = {}

    def reset(self) -> None:
        self.policy.reset()
        self.decisions = {}

    def observe(self, request: TraceRequest, history: History) -> None:
        self.policy.observe(request, history)

    def decide(self, request: TraceRequest, history: History) -> Decision:
        decision = self.policy.decide(request, history)
        self.decisions[history.index] = decision
        return decision


def _decisions(trace: Trace, policy: policies.Policy) -> dict[int, Decision]:
    recorded = Recording(policy)
    replay(trace, recorded, model=MODEL)
    return recorded.decisions


def _first(readable: int = 0) -> History:
    """A session's first request (so `readable` is only set to probe a rule)."""
    return History(0, 0, None, 0, readable)


def test_reference_rows_have_their_names() -> None:
    names = [p.name for p in policies.reference_policies(MODEL)]
    assert names[:3] == ["no_cache", "5m", "1h"]
    assert len(set(names)) == len(names)
    assert all(p.online for p in policies.reference_policies(MODEL))
    assert not policies.GapOracle(random_trace(0)).online


def test_decisions_are_checked() -> None:
    with pytest.raises(ValueError, match="breakpoint"):
        Decision(None, (10.0,))
    with pytest.raises(ValueError, match="increasing"):
        Decision("5m", (300.0, 300.0))
    with pytest.raises(ValueError, match="positive"):
        Decision("5m", (0.0,))


def test_fixed_schedules() -> None:
    request = TraceRequest("s", 0.0, (1,), (5000,), 0)

    def decide(policy: policies.Policy) -> Decision:
        return policy.decide(request, _first())

    assert decide(policies.no_cache()) == Decision(None)
    assert decide(policies.five_minutes()) == Decision("5m")
    assert decide(policies.one_hour()) == Decision("1h")
    assert decide(policies.aider(3)) == Decision("5m", (295.0, 590.0, 885.0))
    assert decide(policies.opencode()).ping_offsets == tuple(240.0 * k for k in range(1, 8))
    five = decide(policies.ttl_aware("5m", 1800.0))
    assert five.ping_offsets == tuple(295.0 * k for k in range(1, 7))  # each 5 s before expiry
    assert decide(policies.ttl_aware("1h", 7200.0)) == Decision("1h", (3595.0, 7190.0))


@pytest.mark.parametrize("model", [MODEL, "claude-haiku-4-5", "claude-opus-4-1"])
def test_ski_rental_stops_before_its_pings_cost_a_rewrite(model: str) -> None:
    p = price(model)
    decision = policies.SkiRental("5m", model).decide(
        TraceRequest("s", 0.0, (1,), (8000,), 0), _first()
    )
    pings = len(decision.ping_offsets)
    # Each ping reads the whole prompt; a rewrite writes it: the prompt size cancels.
    assert pings * p.cache_read < p.cache_write_5m <= (pings + 1) * p.cache_read
    assert decision.ping_offsets == tuple(295.0 * k for k in range(1, pings + 1))


def test_selective_1h_weighs_the_premium_against_one_ping() -> None:
    policy = policies.Selective1h(1.0, MODEL)
    p = price(MODEL)
    n = 10_000
    request = TraceRequest("s", 0.0, (1,), (n,), 0)
    # Writing `even` tokens, the 1h premium is about one ping of the whole prompt.
    even = round(n * p.cache_read / (p.cache_write_1h - p.cache_write_5m))
    assert policy.decide(request, _first(readable=n - even + 2)).ttl == "1h"
    assert policy.decide(request, _first(readable=n - even - 2)).ttl == "5m"
    assert policy.decide(request, _first()).ttl == "5m"
    assert policies.Selective1h(3.0, MODEL).decide(request, _first(readable=n - 2 * even)).ttl == (
        "1h"
    )


def test_the_gap_oracle_bridges_exactly_the_gap() -> None:
    rows = (
        TraceRequest("a", 0.0, (1,), (4000,), 0),
        TraceRequest("a", 700.0, (1, 2), (4000, 100), 0),  # 2 pings (300, 600) < a rewrite
        TraceRequest("a", 3000.0, (1, 2, 3), (4000, 100, 100), 0),  # 1h beats 7 pings
        TraceRequest("b", 3100.0, (7,), (4000,), 0),  # never continued
        TraceRequest("a", 5000.0, (1, 2, 3, 4), (4000, 100, 100, 100), 0),  # the last
    )
    trace = Trace("t", rows)
    decisions = _decisions(trace, policies.GapOracle(trace, model=MODEL))
    assert decisions[0] == Decision("5m", (300.0, 600.0))
    assert decisions[1] == Decision("1h")
    assert decisions[3] == decisions[4] == Decision("5m")  # must write: the cheaper write
    free = _decisions(trace, policies.GapOracle(trace, must_write=False, model=MODEL))
    assert free[3].ttl is None  # nobody reads it: plain input is cheaper than a write
    assert free[4] == Decision("5m")  # reads its live prefix
    assert [free[i] for i in range(3)] == [decisions[i] for i in range(3)]


def _workload(sessions: int, continues_every: int, gap: float, spacing: float = 10.0) -> Trace:
    """`sessions` sessions `spacing` seconds apart, one request each; every
    `continues_every`-th also sends a second one `gap` seconds later."""
    requests = []
    for k in range(sessions):
        at = spacing * k
        requests.append(TraceRequest(f"s{k}", at, (k,), (5000,), 10))
        if k % continues_every == 0:
            requests.append(TraceRequest(f"s{k}", at + gap, (k, 10**6 + k), (5000, 200), 10))
    return Trace.ordered("workload", requests)


def test_the_learned_policy_pings_when_sessions_come_back_after_the_ttl() -> None:
    trace = _workload(400, 1, 400.0)
    learned = _decisions(trace, policies.Learned(MODEL))
    late_firsts = [i for i, r in enumerate(trace.requests) if r.at > 2500 and len(r.blocks) == 1]
    assert late_firsts
    for i in late_firsts:
        assert learned[i] == Decision("5m", (295.0,))  # one ping reaches 595 > 400
    assert replay(trace, policies.Learned(MODEL), model=MODEL).total_cost < min(
        replay(trace, p, model=MODEL).total_cost
        for p in (policies.five_minutes(), policies.one_hour(), policies.no_cache())
    )


def test_the_learned_policy_learns_that_most_sessions_end() -> None:
    """One session in ten comes back (100 s later); the others never do. Sessions not back
    yet count as censored, not as gone: writing a first prompt then costs more than it
    saves, so it is sent without a breakpoint."""
    trace = _workload(400, 10, 100.0)
    learned = _decisions(trace, policies.Learned(MODEL))
    late_firsts = [i for i, r in enumerate(trace.requests) if r.at > 2500 and len(r.blocks) == 1]
    assert late_firsts and all(learned[i].ttl is None for i in late_firsts)


def test_the_learned_policy_counts_open_sessions_as_censored() -> None:
    """Every session comes back after 1,500 s. Late in the trace most sessions are younger
    than that: they are still open, which says nothing yet about whether they come back.
    Counted as censored, the estimate is that nearly all sessions return, so a first prompt
    is written and pinged through the gap; counted as sessions that ended, it would not be."""
    trace = _workload(300, 1, 1500.0)
    learned = _decisions(trace, policies.Learned(MODEL))
    late_firsts = [i for i, r in enumerate(trace.requests) if r.at > 2500 and len(r.blocks) == 1]
    assert late_firsts
    for i in late_firsts:
        decision = learned[i]
        assert decision.ttl == "5m" and len(decision.ping_offsets) >= 5, decision
        assert decision.ping_offsets[-1] + TTL_SECONDS["5m"] >= 1500.0  # alive when it returns


def test_the_learned_policy_always_reads_a_live_prefix() -> None:
    policy = policies.Learned(MODEL, prior=0)
    request = TraceRequest("s", 5.0, (1, 2), (5000, 10), 0)
    assert policy.decide(request, _first()).ttl is None  # no data: no write pays back
    assert policy.decide(request, History(0, 1, 5.0, 5000, 5000)).ttl is not None


def test_the_learned_policys_prior_is_plain_5m_caching() -> None:
    """Before any data, the prior (half back within 30 s, half never) writes 5m, no pings."""
    request = TraceRequest("s", 5.0, (1, 2), (5000, 10), 0)
    assert policies.Learned(MODEL).decide(request, _first()) == Decision("5m")
    with pytest.raises(ValueError, match="prior"):
        policies.Learned(MODEL, prior=-1)


@pytest.mark.parametrize("seed", range(4))
def test_online_policies_never_read_the_future(seed: int) -> None:
    """Each online policy decides request i the same whatever comes after it."""
    trace = random_trace(seed)
    cut = len(trace.requests) // 2
    later = [
        replace(
            r,
            at=r.at + 500.0,
            output_tokens=1,
            blocks=(*r.blocks, 99_999),
            block_tokens=(*r.block_tokens, 3000),
        )
        for r in trace.requests[cut:]
    ]
    other = Trace("other future", trace.requests[:cut] + tuple(later))
    for policy in policies.reference_policies(MODEL):
        assert policy.online
        mine = _decisions(trace, policy)
        theirs = _decisions(other, policy)
        assert [mine[i] for i in range(cut)] == [theirs[i] for i in range(cut)], policy.name


def test_a_replay_resets_the_policy() -> None:
    trace = random_trace(1)
    policy = policies.Learned(MODEL)
    assert replay(trace, policy, model=MODEL) == replay(trace, policy, model=MODEL)


def test_ping_offsets_respect_the_ttl() -> None:
    """No reference policy counts on an entry living past its TTL: consecutive pings (and
    the first after the request) are at most one TTL apart."""
    request = TraceRequest("s", 0.0, (1,), (5000,), 0)
    for policy in policies.reference_policies(MODEL):
        decision = policy.decide(request, _first())
        if decision.ttl is None:
            continue
        times = (0.0, *decision.ping_offsets)
        gaps = [b - a for a, b in zip(times[:-1], times[1:], strict=True)]
        assert all(g <= TTL_SECONDS[decision.ttl] for g in gaps), policy.name


def _pairs(gap: float | None, sessions: int = 50) -> Trace:
    """Sessions of one 20,000-token request, each followed `gap` seconds later by a second
    (none when gap is None), 10 s apart."""
    requests = []
    for k in range(sessions):
        requests.append(TraceRequest(f"p{k}", 10.0 * k, (2 * k,), (20_000,), 0))
        if gap is not None:
            requests.append(
                TraceRequest(f"p{k}", 10.0 * k + gap, (2 * k, 2 * k + 1), (20_000, 100), 0)
            )
    return Trace.ordered("pairs", requests)


def test_learned_fit_is_a_prior_the_live_clock_never_meets() -> None:
    first = History(-1, 0, None, 0, 0)
    fresh = TraceRequest("live", 5.0, (999,), (20_000,), 0)
    # Everyone comes back after 200 s: write 5m, no ping needed.
    back = Learned().fit(_pairs(200.0))
    assert back.decide(fresh, first) == Decision("5m")
    # Everyone comes back after 400 s: one ping just before the 5m expiry pays.
    later = Learned().fit(_pairs(400.0))
    assert later.decide(fresh, first) == Decision("5m", (295.0,))
    # Nobody comes back: its sessions, open at the trace's end, are censored there, and a
    # write with nothing to read does not pay.
    never = Learned().fit(_pairs(None, sessions=50))
    assert never.decide(fresh, first) == Decision(None)
    # The live clock starts afresh: the prior's open sessions do not count as open now.
    assert all(not opened for opened in never._open)
