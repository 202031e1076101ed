"""The warming keeper against the emulator on its virtual clock: it holds a cache across an
idle gap, never pings a 1h cache needlessly, stops by its cost rule, and every ping leaves
cached exactly the prefix the next turn reads, without touching the Session store."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sessiongen import ContextOverflow, LLMRequest, RequestInfo
from sessiongen.lab import EmulatorLab, emulator_lab
from sessiongen.sample import SAMPLE_AGENT
from sessiongen.warming import policies
from sessiongen.warming.keeper import (
    FromPolicy,
    IdleSession,
    KeeperPolicy,
    TtlSkiRental,
    WarmingKeeper,
    default_policy,
)
from sessiongen.warming.policies import Decision, History, Learned, Tracking
from sessiongen.warming.policies.saved import load_policy, save_policy
from sessiongen.warming.traces import TraceRequest
from sessiongen.warming.traces.generator import SessionMix, generate_sessions

ANSWER = {"text": "src/app.py defines add() and mean()."}


@pytest.fixture
async def lab() -> AsyncIterator[EmulatorLab]:
    hourly = SAMPLE_AGENT.model_copy(update={"name": "hourly", "cache_ttl": "1h"})
    async with emulator_lab(agents=(SAMPLE_AGENT, hourly)) as lab:
        yield lab


async def _turn(lab: EmulatorLab, keeper: WarmingKeeper, sid: str, text: str) -> None:
    lab.script(ANSWER)
    await keeper.run_turn(sid, text)


def _keeper(lab: EmulatorLab, policy: KeeperPolicy | None = None) -> WarmingKeeper:
    return WarmingKeeper(lab.engine, clock=lab.emulator.clock, policy=policy or TtlSkiRental())


# The replay's TTL-aware policy: a ping 5 s before each 5m expiry for half an hour.
HALF_HOUR = policies.ttl_aware("5m", 1800.0)


@pytest.mark.clause("SG-KEEP-1")
@pytest.mark.clause("SG-KEEP-3")
async def test_the_keeper_holds_a_5m_cache_across_a_20_minute_gap(lab: EmulatorLab) -> None:
    keeper = _keeper(lab, FromPolicy(HALF_HOUR))
    sid = lab.engine.create_session("forge", workspace=lab.workspace).id
    keeper.watch(sid)
    await _turn(lab, keeper, sid, "What is in src/app.py?")
    written = lab.last_usage()
    before = lab.engine.store.dump()

    pings = await keeper.advance_to(20 * 60)
    assert lab.engine.store.dump() == before  # SG-INV-1: pings change no Session table
    assert len(pings) == 4 and all(p.hit for p in pings)
    assert [p.at for p in pings] == [295.0, 590.0, 885.0, 1180.0]
    assert (
        pings[0].usage.cache_read_tokens
        == written.cache_read_tokens + written.cache_write_5m_tokens
    )

    await _turn(lab, keeper, sid, "And src/util.py?")
    turn = lab.last_usage()
    last = pings[-1].usage
    assert turn.cache_read_tokens == last.cache_read_tokens + last.cache_write_tokens > 0


async def test_without_the_keeper_the_same_gap_misses(lab: EmulatorLab) -> None:
    sid = lab.engine.create_session("forge", workspace=lab.workspace).id
    lab.script(ANSWER, ANSWER)
    await lab.engine.run(sid, "What is in src/app.py?")
    lab.advance_by(20 * 60)
    await lab.engine.run(sid, "And src/util.py?")
    assert lab.last_usage().cache_read_tokens == 0


@pytest.mark.clause("SG-KEEP-2")
async def test_no_pings_at_1h_for_gaps_under_an_hour(lab: EmulatorLab) -> None:
    keeper = _keeper(lab)
    sid = lab.engine.create_session("hourly", workspace=lab.workspace).id
    keeper.watch(sid)
    await _turn(lab, keeper, sid, "What is in src/app.py?")
    assert lab.last_usage().cache_write_1h_tokens > 0
    assert await keeper.advance_to(55 * 60) == []
    await _turn(lab, keeper, sid, "And src/util.py?")
    assert lab.last_usage().cache_read_tokens > 0
    assert keeper.ledger.entries == []


@pytest.mark.clause("SG-KEEP-4")
async def test_the_keeper_stops_by_its_cost_rule(lab: EmulatorLab) -> None:
    keeper = _keeper(lab)
    sid = lab.engine.create_session("forge", workspace=lab.workspace).id
    keeper.watch(sid)
    await _turn(lab, keeper, sid, "What is in src/app.py?")
    pings = await keeper.advance_to(6 * 3600)
    assert keeper.schedule(sid) is None and keeper.next_due() is None
    spent = keeper.ledger.total_cost_usd(sid)
    idle = IdleSession(sid, "claude-sonnet-4-6", "5m", 0, 0, pings[0].usage.cache_read_tokens)
    # It rented (pinged) until one more ping would cost more than the rewrite it saves.
    assert spent <= idle.rewrite_premium_usd < spent + idle.ping_cost_estimate_usd * 1.5
    assert 5 <= len(pings) < 20
    assert len(lab.requests()) == 1 + len(pings)  # nothing after the stop


@pytest.mark.clause("SG-KEEP-4")
async def test_a_new_turn_restarts_the_schedule_and_deleted_sessions_stop(
    lab: EmulatorLab,
) -> None:
    keeper = _keeper(lab)
    sid = lab.engine.create_session("forge", workspace=lab.workspace).id
    keeper.watch(sid)
    await _turn(lab, keeper, sid, "What is in src/app.py?")
    await keeper.advance_to(100)
    lab.script(ANSWER)
    await lab.engine.run(sid, "And src/util.py?")  # a turn the keeper did not run
    keeper.turn_finished(sid)
    assert keeper.schedule(sid) == 100 + 270
    keeper.unwatch(sid)
    assert await keeper.advance_to(3600) == []


def test_ski_rental_pings_before_expiry_and_respects_the_premium() -> None:
    policy = TtlSkiRental(margin=30)
    idle = IdleSession("s", "claude-sonnet-4-6", "5m", 0.0, 100.0, 10_000)
    assert policy.next_ping(idle) == 370.0
    spent = IdleSession("s", "claude-sonnet-4-6", "5m", 0.0, 100.0, 10_000, 11, 11 * 0.003)
    assert policy.next_ping(spent) is None


@pytest.mark.clause("SG-KEEP-4")
async def test_no_ping_while_a_durable_turn_of_the_session_is_in_flight(
    lab: EmulatorLab,
) -> None:
    """A turn started outside the keeper is held mid provider call; pings that fall due meanwhile
    are not sent; when the turn settles, the schedule restarts from it."""
    import asyncio

    keeper = _keeper(lab)
    sid = lab.engine.create_session("forge", workspace=lab.workspace).id
    keeper.watch(sid)
    await _turn(lab, keeper, sid, "What is in src/app.py?")
    (await lab.admin.post("/_emulator/hold", json={"count": 1})).raise_for_status()
    lab.script(ANSWER)
    drain = asyncio.create_task(lab.engine.run(sid, "And src/util.py?"))
    while (await lab.admin.get("/_emulator/hold")).json()["waiting"] < 1:
        await asyncio.sleep(0.01)
    assert await keeper.advance_to(1000) == []
    (await lab.admin.post("/_emulator/release")).raise_for_status()
    await drain
    keeper.turn_finished(sid)
    assert keeper.schedule(sid) == 1000 + 270
    assert len(lab.requests()) == 2


@pytest.mark.clause("SG-KEEP-3")
@pytest.mark.clause("SG-KEEP-4")
async def test_a_replay_policy_decides_the_ping_count_and_stops_the_keeper(
    lab: EmulatorLab,
) -> None:
    """FromPolicy: the replay policy's decision after the turn is the number of pings; the
    keeper spaces them by the honoured TTL and sends nothing after the last."""
    keeper = _keeper(lab, FromPolicy(policies.aider(3)))
    sid = lab.engine.create_session("forge", workspace=lab.workspace).id
    keeper.watch(sid)
    await _turn(lab, keeper, sid, "What is in src/app.py?")
    pings = await keeper.advance_to(3 * 3600)
    assert [p.at for p in pings] == [295.0, 590.0, 885.0]
    assert keeper.next_due() is None and len(lab.requests()) == 4


@pytest.mark.clause("SG-KEEP-2")
@pytest.mark.clause("SG-KEEP-3")
async def test_the_interval_follows_the_ttl_the_provider_honoured(lab: EmulatorLab) -> None:
    """A policy that decides on 5m pings, keeping a session whose agent writes 1h: the ping
    count is the policy's, the spacing the honoured hour's."""
    keeper = _keeper(lab, FromPolicy(policies.aider(2)))
    sid = lab.engine.create_session("hourly", workspace=lab.workspace).id
    keeper.watch(sid)
    await _turn(lab, keeper, sid, "What is in src/app.py?")
    assert lab.last_usage().cache_write_1h_tokens > 0
    pings = await keeper.advance_to(3 * 3600)
    assert [p.at for p in pings] == [3595.0, 7190.0] and all(p.hit for p in pings)


class _Recorder:
    """A replay policy that records what the keeper shows it and decides one ping."""

    name = "recorder"
    online = True
    ping_may_rewrite = False

    def __init__(self) -> None:
        self.seen: list[tuple[TraceRequest, History]] = []

    def reset(self) -> None:
        self.seen.clear()

    def observe(self, request: TraceRequest, history: History) -> None:
        self.seen.append((request, history))

    def decide(self, request: TraceRequest, history: History) -> Decision:
        return Decision("5m", (295.0,))


async def test_the_policy_sees_each_turn_as_a_trace_request(lab: EmulatorLab) -> None:
    recorder = _Recorder()
    keeper = _keeper(lab, FromPolicy(recorder))
    sid = lab.engine.create_session("forge", workspace=lab.workspace).id
    keeper.watch(sid)
    await _turn(lab, keeper, sid, "What is in src/app.py?")
    first = lab.last_usage()
    lab.advance_by(120)
    await _turn(lab, keeper, sid, "And src/util.py?")
    second = lab.last_usage()
    (r1, h1), (r2, h2) = recorder.seen
    assert (h1.turn, h1.gap, h1.readable_tokens) == (0, None, 0)
    assert r1.input_tokens == first.cache_read_tokens + first.cache_write_5m_tokens
    assert (h2.turn, h2.gap, h2.readable_tokens) == (1, 120.0, second.cache_read_tokens)
    assert h2.previous_tokens == r1.input_tokens and r2.at == 120.0


@pytest.mark.clause("SG-KEEP-4")
async def test_the_default_is_tracking_and_stops_by_its_cost_rule(
    lab: EmulatorLab,
) -> None:
    """The default keeper policy is Tracking with a prior: it pings as many times as the
    plan of its expert for the honoured TTL says for the turn, then stops."""
    default = default_policy()
    assert isinstance(default.policy, Tracking) and default.name == policies.DEFAULT_POLICY
    keeper = WarmingKeeper(lab.engine, clock=lab.emulator.clock)
    assert keeper.policy.name == "tracking"
    sid = lab.engine.create_session("forge", workspace=lab.workspace).id
    keeper.watch(sid)
    await _turn(lab, keeper, sid, "What is in src/app.py?")
    written = lab.last_usage()
    twin = default_policy().policy
    assert isinstance(twin, Tracking)
    request = TraceRequest(
        sid, 0.0, (0,), (written.cache_read_tokens + written.cache_write_5m_tokens,), 0
    )
    history = History(-1, 0, None, 0, 0)
    twin.observe(request, history)
    planned = twin.decide_for("5m", request, history)
    pings = await keeper.advance_to(6 * 3600)
    assert len(pings) == len(planned.ping_offsets) >= 1
    assert [p.at for p in pings] == [295.0 * k for k in range(1, len(pings) + 1)]
    assert keeper.next_due() is None and len(lab.requests()) == 1 + len(pings)


@pytest.mark.clause("SG-KEEP-1")
async def test_every_ping_is_a_tagged_warming_generate(lab: EmulatorLab) -> None:
    """Hooks see each ping as `generate` with warming=True and the keeper's tag; on the wire
    it asks for no output."""
    seen: list[RequestInfo] = []

    def record(request: LLMRequest, info: RequestInfo) -> LLMRequest:
        seen.append(info)
        return request

    engine = lab.rebuild(hooks=[record])
    keeper = WarmingKeeper(engine, clock=lab.emulator.clock, policy=FromPolicy(HALF_HOUR))
    sid = engine.create_session("forge", workspace=lab.workspace).id
    keeper.watch(sid)
    lab.script(ANSWER)
    await keeper.run_turn(sid, "What is in src/app.py?")
    pings = await keeper.advance_to(600)
    assert len(pings) == 2
    assert [(i.operation, i.warming, i.tag) for i in seen] == [
        ("step", False, None),
        ("generate", True, "warming"),
        ("generate", True, "warming"),
    ]
    assert [r["body"]["max_tokens"] for r in lab.requests()[1:]] == [0, 0]
    assert [e.revision for e in keeper.ledger.entries] == [pings[0].revision] * 2


@pytest.mark.clause("SG-KEEP-2")
@pytest.mark.clause("SG-KEEP-4")
async def test_the_default_pings_after_a_turn_that_read_the_cache(lab: EmulatorLab) -> None:
    """A turn that reads most of its prompt would make Learned pick 1h for its own write (the
    premium falls on the few new tokens), but the agent writes 5m: the keeper asks for the
    best pings at the TTL the provider honoured, so the session still gets its pings."""
    keeper = WarmingKeeper(lab.engine, clock=lab.emulator.clock)
    sid = lab.engine.create_session("forge", workspace=lab.workspace).id
    keeper.watch(sid)
    await _turn(lab, keeper, sid, "What is in src/app.py?")
    first = await keeper.advance_to(120)
    assert first == []
    await _turn(lab, keeper, sid, "And src/util.py?")
    turn = lab.last_usage()
    assert turn.cache_read_tokens > 0 and turn.cache_write_1h_tokens == 0
    twin = default_policy().policy
    assert isinstance(twin, Tracking)
    request = TraceRequest(
        sid, 120.0, (0,), (turn.cache_read_tokens + turn.cache_write_5m_tokens,), 0
    )
    history = History(
        -1, 1, 120.0, first_prompt_tokens := turn.cache_read_tokens, turn.cache_read_tokens
    )
    twin.observe(
        TraceRequest(sid, 0.0, (0,), (first_prompt_tokens,), 0), History(-1, 0, None, 0, 0)
    )
    twin.observe(request, history)
    learned = next(e for e in twin.experts if e.name == twin.leader)
    assert isinstance(learned, Learned)  # the expert the default follows plans for a TTL
    assert learned.decide(request, history).ttl == "1h"  # what the bug kept the count of
    planned = twin.decide_for("5m", request, history)
    pings = await keeper.advance_to(120 + 6 * 3600)
    assert len(pings) == len(planned.ping_offsets) >= 1 and all(p.hit for p in pings)


@pytest.mark.clause("SG-KEEP-4")
async def test_a_failed_ping_is_booked_and_ends_the_gaps_schedule(
    lab: EmulatorLab, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Any sessiongen error of a ping (here a context that no longer fits) goes to the
    ledger and stops this idle gap's pings instead of killing the keeper's loop."""
    keeper = _keeper(lab, FromPolicy(HALF_HOUR))
    sid = lab.engine.create_session("forge", workspace=lab.workspace).id
    keeper.watch(sid)
    await _turn(lab, keeper, sid, "What is in src/app.py?")

    async def overflow(*args: object, **kwargs: object) -> None:
        raise ContextOverflow("the context no longer fits")

    monkeypatch.setattr(lab.engine, "generate", overflow)
    failed = await keeper.advance_to(3600)
    assert [e.error for e in failed] == ["the context no longer fits"]
    assert keeper.next_due() is None and keeper.ledger.entries == failed


async def test_the_keeper_runs_a_saved_fitted_policy_on_the_virtual_clock(
    lab: EmulatorLab, tmp_path: Path
) -> None:
    """A policy fitted on a trace and saved (what `experiment warming --save-policy` writes)
    drives a keeper after loading: its pings are the loaded policy's plan for the turn, at
    295 s steps of the emulator's virtual clock, and each reads the cached prefix."""
    turns = generate_sessions(40, seed=4, mix=SessionMix(tool_step_p=0.0))
    path = save_policy(Tracking().fit(turns), tmp_path / "p.json")
    keeper = WarmingKeeper(
        lab.engine, clock=lab.emulator.clock, policy=FromPolicy(load_policy(path))
    )
    sid = lab.engine.create_session("forge", workspace=lab.workspace).id
    keeper.watch(sid)
    await _turn(lab, keeper, sid, "What is in src/app.py?")
    written = lab.last_usage()
    twin = load_policy(path)
    request = TraceRequest(
        sid, 0.0, (0,), (written.cache_read_tokens + written.cache_write_5m_tokens,), 0
    )
    history = History(-1, 0, None, 0, 0)
    twin.observe(request, history)
    planned = twin.decide_for("5m", request, history)
    pings = await keeper.advance_to(6 * 3600)
    assert len(pings) == len(planned.ping_offsets) >= 1 and all(p.hit for p in pings)
    assert [p.at for p in pings] == [295.0 * k for k in range(1, len(pings) + 1)]


async def test_advance_by_is_a_pause_and_advance_to_a_reading_of_the_clock() -> None:
    async with emulator_lab() as lab:
        keeper = _keeper(lab)
        lab.advance_by(100)
        assert await keeper.advance_by(50) == [] and lab.emulator.clock.now() == 150
        assert await keeper.advance_to(160) == [] and lab.emulator.clock.now() == 160
        with pytest.raises(ValueError, match="cannot be negative"):
            await keeper.advance_by(-1)
