"""`Tracking`, the keeper's default policy: it runs every expert policy in a shadow replay of
the history it has seen and follows the cheapest. Checked against the replay itself (the one
implementation of the cache rules): with one expert it is that expert, and on sessions that
share nothing its shadow costs are the replay's costs of each expert run alone."""

from __future__ import annotations

import json
import pickle
import random
from collections.abc import Callable
from pathlib import Path

import pytest
from sessiongen.warming.policies import (
    History,
    Learned,
    Policy,
    Selective1h,
    Tracking,
    aider,
    default_experts,
    five_minutes,
    one_hour,
    ttl_aware,
)
from sessiongen.warming.policies.saved import (
    PolicyFileError,
    load_policy,
    policy_document,
    save_policy,
)
from sessiongen.warming.policies.trace_replay import replay
from sessiongen.warming.study.report import prompt_cost
from sessiongen.warming.traces import Trace, TraceRequest
from sessiongen.warming.traces.generator import generate_sessions

GENERATED = generate_sessions(8, seed=3)


def _lonely(seed: int, sessions: int = 40, gaps: tuple[float, ...] = (20, 200, 400, 1500)) -> Trace:
    """Sessions that share no block (so nothing is read across sessions), each a few requests
    growing by one block, with gaps drawn from `gaps`, some prompts below the minimum."""
    rng = random.Random(seed)
    requests = []
    block = 0
    for s in range(sessions):
        at = rng.uniform(0, 3000)
        blocks: list[int] = []
        counts: list[int] = []
        for _ in range(rng.randint(1, 5)):
            blocks.append(block := block + 1)
            counts.append(rng.choice([300, 2000, 6000]))
            requests.append(TraceRequest(f"s{s}", at, tuple(blocks), tuple(counts), 50))
            at += rng.choice(gaps)
    return Trace.ordered(f"lonely-{seed}", requests)


def _experts() -> list[Policy]:
    return [five_minutes(), one_hour(), aider(1), aider(3), ttl_aware("1h", 7200.0)]


@pytest.mark.parametrize("make", [five_minutes, one_hour, lambda: aider(3), Learned, Selective1h])
@pytest.mark.parametrize("trace", [GENERATED, _lonely(1)], ids=["generated", "lonely"])
def test_with_one_expert_it_is_that_expert(make: type[Policy], trace: Trace) -> None:
    alone = replay(trace, make())
    tracked = replay(trace, Tracking(experts=[make()], min_history=0))
    assert (tracked.tokens, tracked.pings) == (alone.tokens, alone.pings)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_shadow_costs_are_each_experts_replay_cost_where_sessions_share_nothing(
    seed: int,
) -> None:
    """The shadow replay charges each expert what running it alone costs: its writes and
    reads by its own TTL and pings (cancelled, dropped once expired, the pings after a
    session's last request too), to the rounding of float sums."""
    trace = _lonely(seed)
    tracking = Tracking(experts=_experts()).fit(trace)
    for expert in _experts():
        assert tracking.costs()[expert.name] == pytest.approx(
            prompt_cost(replay(trace, expert)), rel=1e-9
        ), expert.name


def _gapped(gap: float, sessions: int = 60, length: int = 3) -> Trace:
    """Sessions of `length` prompts growing by 20,000 tokens, `gap` seconds apart, 10 s
    between sessions."""
    requests = [
        TraceRequest(
            f"g{s}",
            10.0 * s + gap * k,
            tuple(range(s * 99, s * 99 + k + 1)),
            (20_000,) * (k + 1),
            0,
        )
        for s in range(sessions)
        for k in range(length)
    ]
    return Trace.ordered(f"gapped-{gap:g}", requests)


def test_it_follows_an_expert_that_is_clearly_cheaper() -> None:
    """20-minute gaps: a 5m entry never survives one, a 1h entry always does. After
    `min_history` requests on plain 5m, new sessions follow 1h."""
    trace = _gapped(1200.0, length=8)
    costs = {p.name: prompt_cost(replay(trace, p)) for p in (five_minutes(), one_hour())}
    assert costs["1h"] < 0.6 * costs["5m"]
    tracking = Tracking(experts=[five_minutes(), one_hour()], min_history=30)
    cost = prompt_cost(replay(trace, tracking))
    assert tracking.leader == "1h"
    # Each session switches at its first cold request (writing it whole at 1h): the price
    # of learning, paid once a session.
    assert costs["1h"] < cost < costs["1h"] + (costs["5m"] - costs["1h"]) * 0.4


def test_it_stays_with_the_first_expert_unless_beaten_by_the_margin() -> None:
    """Two-minute gaps: both TTLs survive and 1h pays its premium for nothing, so 5m is
    cheaper by a known share; the first expert (1h here) is kept while that share is under
    the margin."""
    trace = _gapped(120.0)
    costs = {p.name: prompt_cost(replay(trace, p)) for p in (five_minutes(), one_hour())}
    share = 1 - costs["5m"] / costs["1h"]
    assert 0.1 < share < 0.5
    for margin, leader in ((share - 0.02, "5m"), (share + 0.02, "1h")):
        tracking = Tracking(experts=[one_hour(), five_minutes()], min_history=0, margin=margin)
        replay(trace, tracking)
        assert tracking.leader == leader, margin


def test_before_min_history_it_is_the_first_expert() -> None:
    trace = _gapped(1200.0, sessions=5)  # 15 requests
    tracked = replay(trace, Tracking(experts=[five_minutes(), one_hour()], min_history=16))
    assert tracked.tokens == replay(trace, five_minutes()).tokens


def test_a_session_keeps_its_expert_while_its_cache_is_warm() -> None:
    """One long session of 2-minute gaps, then 20-minute ones: the leader changes to 1h
    during the session, but a warm session switches only once its cache went cold, so the
    requests after the change still match 5m's until the first cold request."""
    requests = [
        TraceRequest("one", 120.0 * k, tuple(range(k + 1)), (5000,) * (k + 1), 0) for k in range(10)
    ]
    requests += [
        TraceRequest("one", 1080.0 + 1200.0 * k, tuple(range(k + 11)), (5000,) * (k + 11), 0)
        for k in range(10)
    ]
    trace = Trace("long", tuple(requests))
    tracking = Tracking(experts=[five_minutes(), one_hour()], min_history=0, margin=0.0)
    replay(trace, tracking)
    assert tracking.leader == "1h"
    assert tracking._following == {"one": 1}  # switched at a cold request


def test_fit_survives_reset_and_changes_the_replay() -> None:
    """What `fit` learnt is where every replay starts: two replays agree, and they differ
    from the unfitted policy's (Learned and Tracking alike)."""
    fit, held = generate_sessions(16, seed=5).split(0.5)
    for make in (Learned, Tracking):
        fitted = make().fit(fit)
        first, again = replay(held, fitted), replay(held, fitted)
        assert first == again
        assert replay(held, make()).tokens != first.tokens, make.__name__


def test_decide_for_plans_pings_for_the_given_ttl() -> None:
    """The keeper's question: pings for a TTL the agent chose. A 1h-writing leader's TTL is
    not the keeper's to choose, so the pings come from an expert that plans for a TTL."""
    trace = _gapped(1200.0)
    tracking = Tracking(experts=[one_hour(), Learned()], min_history=0, margin=0.99).fit(trace)
    assert tracking.leader == "1h"
    request = TraceRequest("new", 0.0, (999,), (20_000,), 0)
    history = History(-1, 1, 1200.0, 20_000, 0)
    decision = tracking.decide_for("5m", request, history)
    assert decision.ttl == "5m" and decision.ping_offsets
    learned = tracking.experts[1]
    assert isinstance(learned, Learned)
    assert decision == learned.decide_for("5m", request, history)


# --- saved policies ---------------------------------------------------------------------


@pytest.mark.parametrize("make", [Tracking, Learned, lambda: Learned(split="gap")])
def test_a_saved_policy_loads_to_the_same_replay(make: type[Policy], tmp_path: Path) -> None:
    fit, held = generate_sessions(12, seed=7).split(0.5)
    policy = make().fit(fit)  # type: ignore[attr-defined]
    loaded = load_policy(save_policy(policy, tmp_path / "p.json"))
    assert policy_document(loaded) == policy_document(policy)
    assert replay(held, loaded) == replay(held, policy)


def _document() -> dict[str, object]:
    return policy_document(Tracking().fit(generate_sessions(4, seed=1)))


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda d: "{not json", "not JSON"),
        (lambda d: [], "not a saved warming policy"),
        (lambda d: {**d, "format": "other"}, "not a saved warming policy"),
        (lambda d: {**d, "version": 9}, "saved by format version 9; this reads 1"),
        (lambda d: {**d, "policy": "oracle"}, "policy: 'oracle' is not a saved kind"),
        (lambda d: {**d, "model": 3}, "model: a model name is required"),
        (lambda d: {**d, "model": "no-such-model"}, "state:"),
        (lambda d: {**d, "state": {**d["state"], "experts": ["5m"]}}, "saved for ['5m']"),
        (lambda d: {**d, "state": {**d["state"], "costs": [-1.0] * 8}}, "costs >= 0"),
        (lambda d: {**d, "state": {**d["state"], "margin": 2}}, "tracking.margin"),
        (lambda d: {k: v for k, v in d.items() if k != "state"}, "state"),
        (
            lambda d: {
                **d,
                "state": {**d["state"], "fitted": {"learned": {"done": [[-1]], "closed": []}}},
            },
            "learned.done",
        ),
    ],
)
def test_a_bad_policy_file_is_a_typed_error_naming_the_file(
    change: Callable[[dict[str, object]], object], says: str, tmp_path: Path
) -> None:
    path = tmp_path / "bad.json"
    changed = change(_document())
    path.write_text(changed if isinstance(changed, str) else json.dumps(changed))
    with pytest.raises(PolicyFileError) as raised:
        load_policy(path)
    assert str(raised.value).startswith(f"{path}: ") and says in str(raised.value)
    copy = pickle.loads(pickle.dumps(raised.value))
    assert (copy.path, copy.problem, str(copy)) == (
        raised.value.path,
        raised.value.problem,
        str(raised.value),
    )


def test_default_experts_include_both_learned_splits_first() -> None:
    names = [e.name for e in default_experts()]
    assert names[:2] == ["learned", "learned_gap"] and len(set(names)) == len(names)
