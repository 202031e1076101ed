"""The built-in `warming` plugin: the keeper, made from the plugin context, keeps a session
warm on the emulator's virtual clock, restarts from each settled turn, never pings into a
turn in flight, and holds no write path."""

from __future__ import annotations

import asyncio

import pytest
from sessiongen.lab import EmulatorLab
from sessiongen.plugins import KeeperEngine, WarmingPlugin, load_plugins
from sessiongen.warming import policies
from sessiongen.warming.keeper import FromPolicy, TtlSkiRental

from .conftest import ANSWER, host_on, turn

# The replay's TTL-aware policy: a ping 5 s before each 5m expiry for half an hour.
HALF_HOUR = policies.ttl_aware("5m", 1800.0)


@pytest.mark.clause("SG-KEEP-1")
@pytest.mark.clause("SG-KEEP-3")
async def test_the_plugin_keeps_a_session_warm_on_the_virtual_clock(lab: EmulatorLab) -> None:
    warming = WarmingPlugin(policy=FromPolicy(HALF_HOUR))
    engine, host = host_on(lab, ("warming", warming))
    sid = engine.create_session("forge", workspace=lab.workspace).id
    warming.watch(sid)
    await turn(lab, engine, host, sid)
    written = lab.last_usage()
    before = engine.store.dump()

    pings = await warming.keeper.advance_to(20 * 60)
    assert engine.store.dump() == before  # booked in the ledger, never in the store
    assert [p.at for p in pings] == [295.0, 590.0, 885.0, 1180.0] and all(p.hit for p in pings)
    assert (
        pings[0].usage.cache_read_tokens
        == written.cache_read_tokens + written.cache_write_5m_tokens
    )
    assert [r["body"]["max_tokens"] for r in lab.requests()[1:]] == [0] * 4
    assert warming.keeper.ledger.entries == pings

    await turn(lab, engine, host, sid)  # turn_settled restarts the schedule from this turn
    last = pings[-1].usage
    assert (
        lab.last_usage().cache_read_tokens == last.cache_read_tokens + last.cache_write_tokens > 0
    )
    assert warming.keeper.schedule(sid) == 1200 + 295


@pytest.mark.clause("SG-KEEP-4")
async def test_no_ping_while_a_durable_turn_is_in_flight(lab: EmulatorLab) -> None:
    """The keeper asks `ctx.session.in_flight`: a turn held mid provider call gets no ping."""
    warming = WarmingPlugin(policy=TtlSkiRental())
    engine, host = host_on(lab, ("warming", warming))
    sid = engine.create_session("forge", workspace=lab.workspace).id
    warming.watch(sid)
    await turn(lab, engine, host, sid)
    (await lab.admin.post("/_emulator/hold", json={"count": 1})).raise_for_status()
    lab.script(ANSWER)
    running = asyncio.create_task(engine.run(sid, "And src/util.py?"))
    while (await lab.admin.get("/_emulator/hold")).json()["waiting"] < 1:
        await asyncio.sleep(0.01)
    assert await warming.keeper.advance_to(1000) == []
    (await lab.admin.post("/_emulator/release")).raise_for_status()
    await running
    assert warming.keeper.schedule(sid) == 1000 + 270
    assert len(lab.requests()) == 2


async def test_the_plugins_keeper_reads_and_generates_but_cannot_write(lab: EmulatorLab) -> None:
    warming = WarmingPlugin()
    engine, host = host_on(lab, ("warming", warming))
    keeper = warming.keeper
    assert isinstance(keeper.engine, KeeperEngine) and keeper.clock is lab.emulator.clock
    assert [n for n in dir(keeper.engine.store) if not n.startswith("_")] == ["read"]
    sid = engine.create_session("forge", workspace=lab.workspace).id
    before = engine.store.dump()
    with pytest.raises(TypeError, match="cannot run durable turns"):
        await keeper.run_turn(sid, "Hello")
    assert engine.store.dump() == before and lab.requests() == []


async def test_each_manager_gets_its_own_builtin_and_the_keeper_waits_for_startup() -> None:
    first = load_plugins(entry_points=False).get_plugin("warming")
    second = load_plugins(entry_points=False).get_plugin("warming")
    assert isinstance(first, WarmingPlugin) and isinstance(second, WarmingPlugin)
    assert first is not second
    with pytest.raises(RuntimeError, match="has not been started"):
        first.keeper  # noqa: B018
    first.unwatch("ses_000001")  # nothing to stop: no error
    assert first.watched() == frozenset()
