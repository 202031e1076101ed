"""The keeper's ski-rental price of a 1h entry and the idle gap it shows its policy.

What letting a 1h entry expire costs is writing the prefix again at the catalog's 1h write
price, not the 5m one, so the ski-rental rule keeps a 1h session warm for as long as that
dearer rewrite pays for. And the gap a replay policy sees after a turn is the time since the
session's previous turn, on a clock that did not start at the first turn.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sessiongen.cache.pricing import cost, price
from sessiongen.lab import EmulatorLab, emulator_lab
from sessiongen.llm.types import Usage
from sessiongen.model import AssistantMessage
from sessiongen.sample import SAMPLE_AGENT
from sessiongen.warming.keeper import FromPolicy, IdleSession, TtlSkiRental, WarmingKeeper

from .test_keeper import _keeper, _Recorder, _turn

MODEL = "claude-sonnet-4-6"


@pytest.fixture
async def lab() -> AsyncIterator[EmulatorLab]:
    hourly = SAMPLE_AGENT.model_copy(update={"name": "hourly", "cache_ttl": "1h"})
    async with emulator_lab(agents=(SAMPLE_AGENT, hourly)) as lab:
        yield lab


def _rewrite_instead_of_read(tokens: int, ttl: str, model: str) -> float:
    """What the next turn pays extra, by the catalog's prices, when it writes `tokens` again
    at `ttl` instead of reading them from the cache."""
    write = (
        Usage(cache_write_1h_tokens=tokens) if ttl == "1h" else Usage(cache_write_5m_tokens=tokens)
    )
    return cost(write, model) - cost(Usage(cache_read_tokens=tokens), model)


def _model_of_last_turn(lab: EmulatorLab, sid: str) -> str:
    last = lab.engine.store.read(sid).messages[-1]
    assert isinstance(last, AssistantMessage)
    return last.model


def test_a_1h_entry_expiring_costs_a_rewrite_at_the_1h_write_price() -> None:
    catalog = price(MODEL)
    assert catalog.cache_write_1h > catalog.cache_write_5m  # else the TTL could not matter
    tokens = 10_000
    hourly = IdleSession("s", MODEL, "1h", 0.0, 0.0, tokens)
    five = IdleSession("s", MODEL, "5m", 0.0, 0.0, tokens)
    assert hourly.rewrite_premium_usd == pytest.approx(
        _rewrite_instead_of_read(tokens, "1h", MODEL)
    )
    assert five.rewrite_premium_usd == pytest.approx(_rewrite_instead_of_read(tokens, "5m", MODEL))
    assert hourly.rewrite_premium_usd > five.rewrite_premium_usd


@pytest.mark.clause("SG-KEEP-4")
async def test_ski_rental_keeps_a_1h_session_warm_until_its_1h_rewrite_is_paid_for(
    lab: EmulatorLab,
) -> None:
    """The hourly agent writes 1h: the keeper pings 30 s before each hour runs out and stops
    once one more ping would cost more than rewriting the prefix at the 1h price, which is
    past where the cheaper 5m rewrite would have stopped it."""
    keeper = _keeper(lab, TtlSkiRental())
    sid = lab.engine.create_session("hourly", workspace=lab.workspace).id
    keeper.watch(sid)
    await _turn(lab, keeper, sid, "What is in src/app.py?")
    written = lab.last_usage()
    assert written.cache_write_1h_tokens > 0
    model = _model_of_last_turn(lab, sid)

    pings = await keeper.advance_to(48 * 3600)
    assert keeper.next_due() is None and pings and all(p.hit for p in pings)
    assert [p.at for p in pings] == [3570.0 * k for k in range(1, len(pings) + 1)]
    prefix = pings[0].usage.cache_read_tokens
    premium = _rewrite_instead_of_read(prefix, "1h", model)
    spent = keeper.ledger.total_cost_usd(sid)
    one_more = cost(Usage(cache_read_tokens=prefix), model)  # what one more ping reads
    # It rented (pinged) while the pings cost no more than the 1h rewrite they save...
    assert spent <= premium < spent + one_more * 1.5
    # ...which is beyond what the 5m rewrite would have allowed.
    assert spent > _rewrite_instead_of_read(prefix, "5m", model)


async def test_the_policy_sees_the_time_since_the_previous_turn_as_the_gap(
    lab: EmulatorLab,
) -> None:
    """The session's turns fall at 600, 720 and 1020 s of the virtual clock: the policy
    sees no gap after the first, then 120 s and 300 s."""
    recorder = _Recorder()
    keeper = WarmingKeeper(lab.engine, clock=lab.emulator.clock, policy=FromPolicy(recorder))
    sid = lab.engine.create_session("forge", workspace=lab.workspace).id
    keeper.watch(sid)
    lab.advance_by(600)
    await _turn(lab, keeper, sid, "What is in src/app.py?")
    lab.advance_by(120)
    await _turn(lab, keeper, sid, "And src/util.py?")
    lab.advance_by(300)
    await _turn(lab, keeper, sid, "And the tests?")
    assert [r.at for r, _ in recorder.seen] == [600.0, 720.0, 1020.0]
    assert [(h.turn, h.gap) for _, h in recorder.seen] == [(0, None), (1, 120.0), (2, 300.0)]
