"""More of `Tracking`'s rules, each pinned where a replay shows it: the shadow replay's client
model on the cases the generated traces never hit (a ping due after expiry, a prompt that does
not extend its session's previous one, two requests at one instant), when `min_history` is
reached, when a session may change expert, `decide_for` without a planning leader, what `fit`
carries into later replays, and the checks on a saved policy's state."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sessiongen.cache import TTL
from sessiongen.warming.policies import (
    Decision,
    Fixed,
    GapOracle,
    History,
    Learned,
    Policy,
    Tracking,
    aider,
    five_minutes,
    one_hour,
)
from sessiongen.warming.policies.saved import PolicyFileError, load_policy, policy_document
from sessiongen.warming.policies.trace_replay import replay
from sessiongen.warming.study.report import prompt_cost
from sessiongen.warming.traces import Trace, TraceRequest
from sessiongen.warming.traces.generator import generate_sessions


def _request(session: str, at: float, counts: tuple[int, ...], first: int = 0) -> TraceRequest:
    """A request of blocks `first`, `first + 1`, ... of `counts` tokens each: requests with
    the same `first` share the prefix their counts share."""
    return TraceRequest(session, at, tuple(range(first, first + len(counts))), counts, 0)


def _written(trace: Trace, policy: Policy) -> list[str]:
    """Per request, the TTL the replay wrote it with ("5m", "1h") or "-" for no write."""
    result = replay(trace, policy, keep_usage=True)
    assert result.usages is not None
    return [
        "1h" if u.ephemeral_1h_input_tokens else "5m" if u.ephemeral_5m_input_tokens else "-"
        for u, _ in result.usages
    ]


# --- the shadow replay ------------------------------------------------------------------


def _odd_sessions() -> Trace:
    """Sessions that share no block: one whose second prompt does not extend its first (so
    nothing is read), one with two requests at the same instant, and ordinary ones, with gaps
    past the 5m TTL and past `Tracking`'s quiet time."""
    requests = [
        _request("fresh", 0.0, (3000, 3000), 10),
        _request("fresh", 60.0, (3000, 3000), 20),  # a new prompt: not a prefix continuation
        _request("fresh", 1000.0, (3000, 3000, 3000), 20),
        _request("twice", 10.0, (4000,), 30),
        _request("twice", 10.0, (4000, 1000), 30),  # at the same instant
        _request("slow", 20.0, (3000,), 40),
        _request("slow", 420.0, (3000, 2000), 40),
        _request("slow", 2000.0, (3000, 2000, 2000), 40),
        _request("late", 3000.0, (2000,), 50),
    ]
    return Trace.ordered("odd", requests)


def _shadow_experts() -> list[Policy]:
    # "late" pings once inside the 5m entry's life and twice after it: the replay drops those
    return [
        five_minutes(),
        one_hour(),
        aider(3),
        Fixed("late", "5m", (200.0, 560.0, 700.0)),
    ]


def test_shadow_costs_match_the_replay_on_odd_sessions() -> None:
    """Each expert's shadow cost is what the replay charges it run alone, on the cases the
    generated traces do not have: no read of a prompt the next one does not extend, no ping
    once the entry has expired, and a session's remaining pings charged once even when two of
    its requests share an instant."""
    trace = _odd_sessions()
    tracking = Tracking(experts=_shadow_experts()).fit(trace)
    for expert in _shadow_experts():
        assert tracking.costs()[expert.name] == pytest.approx(
            prompt_cost(replay(trace, expert)), rel=1e-9
        ), expert.name


def test_with_one_expert_it_is_that_expert_on_odd_sessions() -> None:
    for make in (five_minutes, one_hour, lambda: Fixed("late", "5m", (200.0, 560.0, 700.0))):
        alone = replay(_odd_sessions(), make())
        tracked = replay(_odd_sessions(), Tracking(experts=[make()], min_history=0))
        assert (tracked.tokens, tracked.pings) == (alone.tokens, alone.pings)


def test_quiet_pings_are_charged_only_once_the_session_is_quiet() -> None:
    """A session still active is not charged its schedule early: "a" keeps sending every
    100 s under a pinging first expert, which then costs exactly what 5m does; so "b",
    starting at 750 s (by when "a"'s request at 100 s is 600 s old, but "a" is not quiet),
    still follows the first expert and pings."""
    pinger = Fixed("pinger", "5m", tuple(295.0 * k for k in range(1, 7)))
    requests = [_request("a", 100.0 * k, (5000,) + (1,) * k) for k in range(11)]
    requests.append(_request("b", 750.0, (5000,), 500))
    trace = Trace.ordered("busy", requests)
    tracking = Tracking(experts=[pinger, five_minutes()], min_history=0, margin=0.0)
    result = replay(trace, tracking)
    assert result.pings == replay(trace, pinger).pings > 0


def test_a_caller_that_does_not_say_extends_has_prompts_read_their_predecessor() -> None:
    """The live keeper builds each `History` without `extends`: a session's prompt then
    counts as extending the previous one, so the shadow reads it as the replay does."""
    trace = Trace.ordered(
        "keeper-like", [_request("k", 60.0 * t, (3000,) * (t + 1)) for t in range(4)]
    )
    tracking = Tracking(experts=[five_minutes(), one_hour()], min_history=0)
    previous: TraceRequest | None = None
    for turn, request in enumerate(trace.requests):
        before = 0 if previous is None else previous.input_tokens
        gap = None if previous is None else request.at - previous.at
        history = History(-1, turn, gap, before, before)
        tracking.observe(request, history)
        tracking.decide_for("5m", request, history)
        previous = request
    for expert in (five_minutes(), one_hour()):
        assert tracking.costs()[expert.name] == pytest.approx(
            prompt_cost(replay(trace, expert)), rel=1e-9
        )


# --- min_history, stickiness, decide_for -------------------------------------------------


def _one_hour_wins(then: list[TraceRequest]) -> Trace:
    """Session "w" comes back after 20 minutes with a prompt one token longer, which makes
    1h clearly cheaper than 5m so far; the requests `then` follow."""
    first = [_request("w", 0.0, (20_000,)), _request("w", 1200.0, (20_000, 1))]
    return Trace.ordered("one-hour-wins", first + then)


def test_min_history_counts_the_request_being_decided() -> None:
    """With `min_history` 3, the third request ("b", new) follows the leader (1h); with 4
    it still follows the first expert."""
    trace = _one_hour_wins([_request("b", 1300.0, (5000,), 7)])
    for min_history, ttl in ((3, "1h"), (4, "5m")):
        tracking = Tracking(experts=[five_minutes(), one_hour()], min_history=min_history)
        assert _written(trace, tracking)[-1] == ttl, min_history


def test_a_cold_session_keeps_its_expert_until_it_has_been_quiet() -> None:
    """Session "s" starts on 5m (the leader then); after 1h takes the lead, its cache goes
    cold over a 400 s gap, shorter than the quiet time: it stays on 5m. After a gap of
    700 s it follows the leader, 1h."""
    s = [_request("s", 100.0 + 250.0 * k, (2000,) + (1,) * k, 10) for k in range(5)]
    s.append(_request("s", 1500.0, (2000,) + (1,) * 5, 10))  # 400 s after 1100
    s.append(_request("s", 2200.0, (2000,) + (1,) * 6, 10))  # 700 s later
    trace = _one_hour_wins(s)
    tracking = Tracking(experts=[five_minutes(), one_hour()], min_history=0, margin=0.0)
    written = dict(zip((r.at for r in trace.requests), _written(trace, tracking), strict=True))
    assert written[1200.0] == "1h"  # the leader has changed by then
    assert written[1500.0] == "5m" and written[2200.0] == "1h"


class _Planner(Fixed):
    """A fixed policy that also answers the keeper's question, with a marked schedule."""

    def __init__(self, name: str, ping_offsets: tuple[float, ...], mark: float) -> None:
        super().__init__(name, "5m", ping_offsets)
        self._mark = mark

    def decide_for(self, ttl: TTL, request: TraceRequest, history: History) -> Decision:
        return Decision(ttl, (self._mark,))


def _keeper_question() -> tuple[TraceRequest, History]:
    return TraceRequest("new", 0.0, (999,), (20_000,), 0), History(-1, 1, 1200.0, 20_000, 0)


def test_decide_for_asks_the_cheapest_planner() -> None:
    """The 1h leader's TTL is not the keeper's choice; of the two experts that plan, the one
    that has cost less (no pings, on sessions that never come back) answers."""
    trace = Trace.ordered("ends", [_request(f"s{k}", 10.0 * k, (20_000,), k) for k in range(40)])
    cheap = _Planner("cheap", (), 111.0)
    dear = _Planner("dear", tuple(295.0 * k for k in range(1, 6)), 222.0)
    tracking = Tracking(experts=[one_hour(), dear, cheap], min_history=0, margin=0.99).fit(trace)
    assert tracking.costs()["cheap"] < tracking.costs()["dear"]
    assert tracking.leader == "1h"
    assert tracking.decide_for("5m", *_keeper_question()) == Decision("5m", (111.0,))


def test_decide_for_without_a_planner_is_the_ttl_alone() -> None:
    tracking = Tracking(experts=[one_hour(), five_minutes()], min_history=0)
    assert tracking.decide_for("5m", *_keeper_question()) == Decision("5m")
    assert tracking.decide_for("1h", *_keeper_question()) == Decision("1h")


def test_fit_carries_the_history_seen_into_later_replays() -> None:
    """Fitted on 480 requests where 1h wins, a replay of a fresh 2-request session follows 1h
    from its first request, though `min_history` (30) is more than that replay's length."""
    fit = Trace.ordered(
        "fit",
        [
            _request(f"g{s}", 10.0 * s + 1200.0 * k, (20_000,) * (k + 1), s * 99)
            for s in range(60)
            for k in range(8)
        ],
    )
    tracking = Tracking(experts=[five_minutes(), one_hour()], min_history=30).fit(fit)
    assert tracking.leader == "1h"
    fresh = Trace.ordered(
        "fresh", [_request("x", 0.0, (20_000,), 1), _request("x", 1200.0, (20_000,) * 2, 1)]
    )
    assert _written(fresh, tracking) == ["1h", "1h"]


def test_tracking_follows_only_online_experts_with_a_margin_below_one() -> None:
    with pytest.raises(ValueError, match="online"):
        Tracking(experts=[five_minutes(), GapOracle(_odd_sessions())])
    with pytest.raises(ValueError, match="online"):
        Tracking(experts=[])
    for margin in (1.0, -0.1):
        with pytest.raises(ValueError, match="margin"):
            Tracking(margin=margin)


# --- Learned's gap split -------------------------------------------------------------------


def test_learned_gap_keeps_first_requests_apart_from_quick_follow_ups() -> None:
    """Sessions open, come back after 15 minutes, then once more 30 s later and end. Fitted
    on them, `learned_gap` pings a session's first request across the 15 minutes and leaves
    a quick follow-up's entry to expire: first requests are their own group, not lumped
    with the quick follow-ups (of which none came back)."""

    def sessions(name: str, count: int, start: float = 0.0) -> list[TraceRequest]:
        return [
            _request(f"{name}{s}", start + 20.0 * s + at, (8000,) * (k + 1), s * 9)
            for s in range(count)
            for k, at in enumerate((0.0, 900.0, 930.0))
        ]

    fitted = Learned(split="gap").fit(Trace.ordered("fit", sessions("f", 60)))
    held = Trace.ordered("held", sessions("h", 1))
    result = replay(held, fitted)
    # 3 pings bridge the 15 minutes; the slow return's entry is read 30 s later; the quick
    # follow-up, last of its session, gets none.
    assert (result.pings, result.tokens.cache_read) == (3, 8000 * (1 + 3) + 16_000)


def test_learned_gap_state_rows_are_first_quick_and_slow() -> None:
    """The saved state's rows (`warming.policies.saved`): a session's first request, a follow-up
    under 60 s, one of 60 s or more."""
    base = Learned(split="gap").state()["done"]
    trace = Trace.ordered(
        "three",
        [_request("a", 0.0, (2000,), 1), _request("a", 59.0, (2000,) * 2, 1)]
        + [_request("b", 0.0, (2000,), 5), _request("b", 60.0, (2000,) * 2, 5)]
        + [_request("c", 0.0, (2000,), 9), _request("c", 30.0, (2000,) * 2, 9)],
    )
    done = Learned(split="gap").fit(trace).state()["done"]
    added = [sum(row) - sum(old) for row, old in zip(done, base, strict=True)]
    assert added == [3, 0, 0]  # every first request came back, no follow-up did
    closed = Learned(split="gap").fit(trace).state()["closed"]
    base_closed = Learned(split="gap").state()["closed"]
    ended = [sum(row) - sum(old) for row, old in zip(closed, base_closed, strict=True)]
    assert ended == [0, 2, 1]  # two quick follow-ups (30 s, 59 s), one slow (60 s)


# --- saved state checks ---------------------------------------------------------------------


def _document() -> dict[str, Any]:
    return policy_document(Tracking(min_history=7, margin=0.05).fit(generate_sessions(4, seed=1)))


def test_a_saved_tracking_keeps_its_min_history_and_margin(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    document = _document()
    path.write_text(json.dumps(document))
    loaded = load_policy(path)
    assert policy_document(loaded) == document
    assert (document["state"]["min_history"], document["state"]["margin"]) == (7, 0.05)


def _learned_table(rows: int = 2, counts: int = 16, value: object = 0) -> list[list[object]]:
    return [[value] * counts for _ in range(rows)]


@pytest.mark.parametrize(
    ("change", "says"),
    [
        # NaN and Infinity are not JSON: refused as the file is read (bounded_json)
        (lambda s: {**s, "costs": [math.nan] * len(s["costs"])}, "NaN is not a JSON number"),
        (lambda s: {**s, "costs": [math.inf] * len(s["costs"])}, "Infinity is not a JSON number"),
        (lambda s: {**s, "costs": [-1.0] * len(s["costs"])}, "tracking.costs"),
        (lambda s: {**s, "costs": s["costs"][:-1]}, "tracking.costs: expected"),
        (lambda s: {**s, "seen": -1}, "tracking.seen"),
        (lambda s: {**s, "seen": 2.5}, "tracking.seen"),
        (lambda s: {k: v for k, v in s.items() if k != "seen"}, "state: missing 'seen'"),
        (lambda s: "not a mapping", "state: "),
        (lambda s: {**s, "costs": 5}, "state: "),
        (
            lambda s: {
                **s,
                "fitted": {**s["fitted"], "learned": {"done": _learned_table(), "closed": 1}},
            },
            "state: ",
        ),
        (
            lambda s: {
                **s,
                "fitted": {
                    **s["fitted"],
                    "learned": {"done": _learned_table(counts=15), "closed": _learned_table()},
                },
            },
            "learned.done: expected 2 rows of 16 counts",
        ),
        (
            lambda s: {
                **s,
                "fitted": {
                    **s["fitted"],
                    "learned": {"done": _learned_table(value=1.5), "closed": _learned_table()},
                },
            },
            "learned.done: counts must be whole numbers",
        ),
        (
            lambda s: {
                **s,
                "fitted": {
                    **s["fitted"],
                    "learned": {"done": _learned_table(), "closed": _learned_table(value=-1)},
                },
            },
            "learned.closed: counts must be whole numbers",
        ),
    ],
)
def test_a_bad_saved_state_is_a_policy_file_error(
    change: Callable[[Any], object], says: str, tmp_path: Path
) -> None:
    document = _document()
    document["state"] = change(document["state"])
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(document))
    with pytest.raises(PolicyFileError) as raised:
        load_policy(path)
    assert str(raised.value).startswith(f"{path}: ") and says in str(raised.value), raised.value


@pytest.mark.parametrize(
    "change",
    [{"margin": 5}, {"min_history": -1}, {"min_history": True}, {"seen": 2.5}],
    ids=["margin", "min_history<0", "min_history bool", "seen float"],
)
def test_a_refused_state_loads_nothing(change: dict[str, object]) -> None:
    """`load_state` is all or nothing: a state refused for any field leaves the policy, its
    `Learned` experts included, as it was."""
    policy = Tracking().fit(generate_sessions(6, seed=2))
    before = policy.state()
    other = Tracking().fit(generate_sessions(6, seed=9)).state()
    with pytest.raises(ValueError):
        policy.load_state({**other, **change})
    assert policy.state() == before
