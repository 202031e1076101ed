"""The warming keeper against the emulator on its virtual clock: it holds a cache across an
idle gap, never pings a 1h cache needlessly, stops by its cost rule, and every ping leaves
cached exactly the prefix the next turn reads, without touching the Session store."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sessiongen.lab import EmulatorLab, emulator_lab
from sessiongen.sample import SAMPLE_AGENT
from sessiongen.warming.keeper import IdleSession, TtlSkiRental, WarmingKeeper

ANSWER = {"text": "src/app.py defines add() and mean()."}


@pytest.fixture
async def lab() -> AsyncIterator[EmulatorLab]:
    hourly = SAMPLE_AGENT.model_copy(update={"name": "hourly", "cache_ttl": "1h"})
    async with emulator_lab(agents=(SAMPLE_AGENT, hourly)) as lab:
        yield lab


async def _turn(lab: EmulatorLab, keeper: WarmingKeeper, sid: str, text: str) -> None:
    lab.script(ANSWER)
    await keeper.run_turn(sid, text)


def _keeper(lab: EmulatorLab) -> WarmingKeeper:
    return WarmingKeeper(lab.engine, clock=lab.emulator.clock)


async def test_the_keeper_holds_a_5m_cache_across_a_20_minute_gap(lab: EmulatorLab) -> None:
    keeper = _keeper(lab)
    sid = lab.engine.create_session("forge", workspace=lab.workspace).id
    keeper.watch(sid)
    await _turn(lab, keeper, sid, "What is in src/app.py?")
    written = lab.last_usage()
    before = lab.engine.store.dump()

    pings = await keeper.advance_to(20 * 60)
    assert lab.engine.store.dump() == before  # SG-INV-1: pings change no Session table
    assert len(pings) == 4 and all(p.hit for p in pings)
    assert [p.at for p in pings] == [270.0, 540.0, 810.0, 1080.0]
    assert pings[0].usage.cache_read_tokens == written.read + written.write_5m

    await _turn(lab, keeper, sid, "And src/util.py?")
    turn = lab.last_usage()
    last = pings[-1].usage
    assert turn.read == last.cache_read_tokens + last.cache_write_tokens > 0


async def test_without_the_keeper_the_same_gap_misses(lab: EmulatorLab) -> None:
    sid = lab.engine.create_session("forge", workspace=lab.workspace).id
    lab.script(ANSWER, ANSWER)
    await lab.engine.run(sid, "What is in src/app.py?")
    lab.advance(20 * 60)
    await lab.engine.run(sid, "And src/util.py?")
    assert lab.last_usage().read == 0


async def test_no_pings_at_1h_for_gaps_under_an_hour(lab: EmulatorLab) -> None:
    keeper = _keeper(lab)
    sid = lab.engine.create_session("hourly", workspace=lab.workspace).id
    keeper.watch(sid)
    await _turn(lab, keeper, sid, "What is in src/app.py?")
    assert lab.last_usage().write_1h > 0
    assert await keeper.advance_to(55 * 60) == []
    await _turn(lab, keeper, sid, "And src/util.py?")
    assert lab.last_usage().read > 0
    assert keeper.ledger.entries == []


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


def test_the_default_policy_pings_before_expiry_and_respects_the_premium() -> None:
    policy = TtlSkiRental(margin=30)
    idle = IdleSession("s", "claude-sonnet-4-6", "5m", 0.0, 100.0, 10_000)
    assert policy.next_ping(idle) == 370.0
    spent = IdleSession("s", "claude-sonnet-4-6", "5m", 0.0, 100.0, 10_000, 11, 11 * 0.003)
    assert policy.next_ping(spent) is None


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
