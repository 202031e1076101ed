"""The warming routes drive the app's WarmingKeeper: start, ledger, restart after a turn,
stop; and the keeper runs as a background task in the app's lifespan."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import pytest
from sessiongen.lab import EmulatorLab
from sessiongen.server import create_app
from sessiongen.warming import policies
from sessiongen.warming.keeper import FromPolicy, IdleSession, MonotonicClock, WarmingKeeper

from .conftest import asgi_client, assert_problem, create


@pytest.mark.clause("SG-KEEP-1")
async def test_start_ping_restart_and_stop(lab: EmulatorLab) -> None:
    # A ping 5 s before each 5m expiry for half an hour, on the emulator's virtual clock.
    policy = FromPolicy(policies.ttl_aware("5m", 1800.0))
    keeper = WarmingKeeper(lab.engine, clock=lab.emulator.clock, policy=policy)
    app = create_app(lab.engine, keeper=keeper, workspace=lab.workspace)
    async with asgi_client(app) as client:
        sid = await create(client)
        cold = await client.post(f"/api/session/{sid}/warming")
        assert cold.status_code == 200
        assert cold.json()["watched"] and cold.json()["next_ping_at"] is None  # nothing cached
        assert cold.json()["why_not_pinging"] == "no durable turn has settled yet"
        turn = await client.post(f"/api/session/{sid}/prompt", json={"prompt": "Hello"})
        assert turn.status_code == 200
        watched = (await client.get(f"/api/session/{sid}/warming")).json()
        assert watched["watched"] and watched["entries"] == []
        assert watched["now"] == 0 and watched["next_ping_at"] == 295  # 5 s before the TTL
        assert watched["why_not_pinging"] is None

        before = lab.engine.store.dump()
        await keeper.advance_to(296)
        ledger = (await client.get(f"/api/session/{sid}/warming")).json()
        assert len(ledger["entries"]) == 1
        entry = ledger["entries"][0]
        assert entry["hit"] and entry["error"] is None
        assert entry["revision"] == turn.json()["revision"]
        assert entry["usage"]["cache_read_tokens"] > 1024
        assert ledger["total_cost_usd"] == pytest.approx(entry["cost_usd"])
        assert lab.engine.store.dump() == before  # pings are booked outside the store
        assert lab.requests()[-1]["body"]["max_tokens"] == 0

        lab.advance_by(10)
        await client.post(f"/api/session/{sid}/prompt", json={"prompt": "Again"})
        restarted = (await client.get(f"/api/session/{sid}/warming")).json()
        assert restarted["next_ping_at"] == 306 + 295  # from the new turn

        stop = await client.delete(f"/api/session/{sid}/warming")
        assert stop.status_code == 204
        stopped = (await client.get(f"/api/session/{sid}/warming")).json()
        assert not stopped["watched"] and stopped["next_ping_at"] is None
        assert stopped["why_not_pinging"] == "the session is not watched"
        assert len(stopped["entries"]) == 1  # the ledger stays
        assert await keeper.advance_to(3600) == []


async def test_deleting_a_watched_session_stops_its_warming(lab: EmulatorLab) -> None:
    keeper = WarmingKeeper(lab.engine, clock=lab.emulator.clock)
    app = create_app(lab.engine, keeper=keeper)
    async with asgi_client(app) as client:
        sid = await create(client)
        await client.post(f"/api/session/{sid}/prompt", json={"prompt": "Hello"})
        await client.post(f"/api/session/{sid}/warming")
        assert keeper.watched == {sid}
        assert (await client.delete(f"/api/session/{sid}")).status_code == 204
        assert keeper.watched == frozenset()
        assert_problem(await client.get(f"/api/session/{sid}/warming"), 404, "session-not-found")


@dataclass(frozen=True)
class PingNow:
    """Ping once, at once: makes the lifespan's real-time loop observable in a test."""

    name: str = "ping_now"

    def next_ping(self, idle: IdleSession) -> float | None:
        return idle.refreshed_at if idle.pings == 0 else None


async def test_the_keeper_runs_in_the_apps_lifespan(lab: EmulatorLab) -> None:
    keeper = WarmingKeeper(lab.engine, clock=MonotonicClock(), policy=PingNow())
    app = create_app(lab.engine, keeper=keeper)
    async with app.router.lifespan_context(app), asgi_client(app) as client:
        sid = await create(client)
        await client.post(f"/api/session/{sid}/prompt", json={"prompt": "Hello"})
        await client.post(f"/api/session/{sid}/warming")
        deadline = time.monotonic() + 60  # a guard against a hang, not a timing check
        while not (await client.get(f"/api/session/{sid}/warming")).json()["entries"]:
            assert time.monotonic() < deadline, "the lifespan's keeper never pinged"
            await asyncio.sleep(0.02)
    entries = keeper.ledger.for_session(sid)
    assert len(entries) == 1 and entries[0].hit
