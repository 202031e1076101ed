"""The warming keeper: keeps chosen Sessions' prompt caches warm between durable turns with
`session.generate(warming=True)` pings, on an injectable clock, and books every ping in a
ledger kept outside the Session store (so a ping never changes a Session: SG-INV-1).

After a durable turn the keeper reads the TTL the provider honoured from that turn's usage
(1h writes mean 1h; otherwise 5m), asks its policy when to ping next, and pings when due,
unless a durable turn of that session is in flight. A new turn cancels the pending schedule
and starts a new one. The policy decides when to stop.

The policies are the replay's (`warming.policies`), run through `FromPolicy`: after each
turn the policy sees the turn as a trace request and decides how many pings the idle gap
is worth; the keeper spaces them by the honoured TTL. The default, `default_policy()`, is
`Tracking` (`warming.policies.DEFAULT_POLICY`): it follows whichever of its expert policies
(`Learned` among them) has cost least on the turns it has watched, starting from a prior of
generated coding-agent turns; `sessiongen serve --warming-policy FILE` runs one fitted on
your own trace instead.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol

from ..cache import TTL, TTL_SECONDS
from ..cache.pricing import cost, price
from ..catalog import get_model, is_known_model
from ..errors import SessiongenError, SessionNotFound
from ..llm.types import Usage
from ..model import AssistantMessage
from ..session.engine import SessionEngine
from .policies import PING_MARGIN, History, Policy, Tracking
from .traces import TraceRequest
from .traces.generator import SessionMix, generate_sessions

if TYPE_CHECKING:
    import httpx

KEEPALIVE_PROMPT = "Keep-alive: no answer is needed."
WARMING_TAG = "warming"

logger = logging.getLogger("sessiongen.warming")


class Clock(Protocol):
    """Where the keeper reads the time, in seconds (any origin, never going back): one
    method, `now()`. `MonotonicClock` when served against a real provider; the emulator's
    virtual clock in tests and notebooks (the lab's `lab.emulator.clock`), or, for an
    emulator served as a process, `EmulatorClock(url)`, which reads it over HTTP."""

    def now(self) -> float: ...


class SettableClock(Clock, Protocol):
    """A clock the keeper can also move (`advance_by`, `advance_to`): `set(now)` jumps to
    the absolute time `now` and returns it. Only a virtual clock is one."""

    def set(self, now: float) -> float: ...


class EmulatorClock:
    """The virtual clock of an emulator served over HTTP (`sessiongen emulator`, a
    `BackgroundServer`), read and moved through its admin API, so a keeper's pings and the
    emulator's cache lifetimes run on one time:

    - `now()`: `GET {base_url}/_emulator/clock`, answered `{"now": seconds}`;
    - `set(t)`: `POST {base_url}/_emulator/clock` with `{"now": t}` (or `{"advance": s}`
      for a pause), answered `{"now": seconds}` after the move.

    `token` is the emulator's admin token (`--token`, `SESSIONGEN_EMULATOR_TOKEN`), sent as
    `Authorization: Bearer <token>`; an emulator on loopback without one needs none. Each
    call blocks for one loopback request. Close it (`close()`, or `with`) when done."""

    def __init__(self, base_url: str, *, token: str | None = None, timeout: float = 10.0) -> None:
        import httpx  # startup: loaded with the first clock, not with sessiongen.warming

        headers = {} if token is None else {"authorization": f"Bearer {token}"}
        self._http = httpx.Client(base_url=base_url, headers=headers, timeout=timeout)

    def _answer(self, response: httpx.Response) -> float:
        response.raise_for_status()
        now: float = response.json()["now"]
        return now

    def now(self) -> float:
        return self._answer(self._http.get("/_emulator/clock"))

    def set(self, now: float) -> float:
        return self._answer(self._http.post("/_emulator/clock", json={"now": now}))

    def advance(self, seconds: float) -> float:
        """A pause of `seconds` (>= 0) on the emulator's clock; returns the new time."""
        return self._answer(self._http.post("/_emulator/clock", json={"advance": seconds}))

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> EmulatorClock:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


class MonotonicClock:
    """Real time, in seconds since the clock was made."""

    def __init__(self) -> None:
        self._start = time.monotonic()

    def now(self) -> float:
        return time.monotonic() - self._start


@dataclass(frozen=True)
class IdleSession:
    """What a keeper policy knows about one watched session since its last durable turn."""

    session_id: str
    model: str
    ttl: TTL
    turn_at: float
    """When the last durable turn finished."""
    refreshed_at: float
    """When the cached prefix was last written or read (the turn, then each ping)."""
    prefix_tokens: int
    """Tokens the last turn left cached (read plus written): what a ping reads."""
    pings: int = 0
    ping_cost_usd: float = 0.0
    read_tokens: int = 0
    """Tokens the last turn read from the cache."""

    @property
    def expires_at(self) -> float:
        """The provider keeps an entry at least its TTL from its last use; no longer is
        assumed."""
        return self.refreshed_at + TTL_SECONDS[self.ttl]

    @property
    def ping_cost_estimate_usd(self) -> float:
        """What one warming ping costs: a cache read of the prefix."""
        return self.prefix_tokens * price(self.model).cache_read / 1_000_000

    @property
    def rewrite_premium_usd(self) -> float:
        """What letting the entry expire costs the next turn: writing the prefix again
        instead of reading it."""
        p = price(self.model)
        write = p.cache_write_1h if self.ttl == "1h" else p.cache_write_5m
        return self.prefix_tokens * (write - p.cache_read) / 1_000_000


class KeeperPolicy(Protocol):
    """When to ping an idle session next, or None to stop keeping it warm."""

    @property
    def name(self) -> str: ...

    def next_ping(self, idle: IdleSession) -> float | None: ...


@dataclass(frozen=True)
class TtlSkiRental:
    """Ping `margin` seconds before the entry would expire, and stop once the pings of this
    idle gap would cost more than the rewrite they save (the ski-rental rule: rent until the
    rent paid equals the price of buying)."""

    margin: float = 30.0
    name: str = "ttl_ski_rental"

    def next_ping(self, idle: IdleSession) -> float | None:
        spent_after_next = idle.ping_cost_usd + idle.ping_cost_estimate_usd
        if spent_after_next > idle.rewrite_premium_usd:
            return None
        return max(idle.refreshed_at, idle.expires_at - self.margin)


class FromPolicy:
    """A replay policy (`warming.policies.Policy`) as the keeper's: the same object decides
    in a replay and live.

    After each durable turn the policy observes the turn as a trace request (its session,
    time, cached prompt tokens; turn depth and gap as this keeper saw them) and decides how
    many pings the idle gap is worth. The agent's cache policy, not the keeper, chose the
    TTL, so a policy that can plan for a given TTL (`decide_for(ttl, request, history)`,
    as `Learned` does) is asked for the honoured one; another policy's decision keeps its
    ping count (none without a breakpoint). The pings are spaced by the honoured TTL, each
    `margin` seconds before the entry would expire; after the last one the keeper stops:
    the policy's stop rule.
    """

    def __init__(self, policy: Policy, *, margin: float = PING_MARGIN) -> None:
        self.policy = policy
        self.name = policy.name
        self.margin = margin  # the policy is used as given: reset() would drop a fitted prior
        self._turns: dict[str, tuple[int, float, int]] = {}  # session -> turns, last at, tokens
        self._planned: dict[str, tuple[float, int]] = {}  # session -> (turn at, pings)

    def _decide(self, idle: IdleSession) -> int:
        turns, last_at, last_tokens = self._turns.get(idle.session_id, (0, 0.0, 0))
        gap = idle.turn_at - last_at if turns else None
        request = TraceRequest(
            idle.session_id, idle.turn_at, (0,), (max(idle.prefix_tokens, 1),), 0
        )
        history = History(-1, turns, gap, last_tokens, idle.read_tokens)
        self.policy.observe(request, history)
        self._turns[idle.session_id] = (turns + 1, idle.turn_at, idle.prefix_tokens)
        decide_for = getattr(self.policy, "decide_for", None)
        if decide_for is not None:
            return len(decide_for(idle.ttl, request, history).ping_offsets)
        decision = self.policy.decide(request, history)
        return len(decision.ping_offsets) if decision.ttl is not None else 0

    def next_ping(self, idle: IdleSession) -> float | None:
        planned = self._planned.get(idle.session_id)
        if planned is None or planned[0] != idle.turn_at:
            planned = (idle.turn_at, self._decide(idle))
            self._planned[idle.session_id] = planned
        if idle.pings >= planned[1]:
            return None
        return max(idle.refreshed_at, idle.expires_at - self.margin)


PRIOR_SESSIONS = 1000
"""Generated sessions in the default policy's prior."""


def default_policy() -> FromPolicy:
    """The keeper's default (`warming.policies.DEFAULT_POLICY`): `Tracking`, which follows
    whichever of its expert policies has cost least on the turns it has seen, fitted on a
    prior of the human gaps of `PRIOR_SESSIONS` generated coding-agent sessions (seed 0,
    tool loops left out: the keeper decides after turns, never between Steps), so it pings
    from the first turn and learns the watched workload from then on. A policy fitted on
    your own trace: `FromPolicy(load_policy(path))` (`warming.policies.saved`)."""
    turns_only = SessionMix(tool_step_p=0.0)
    prior = generate_sessions(PRIOR_SESSIONS, seed=0, mix=turns_only)
    return FromPolicy(Tracking().fit(prior))


@dataclass(frozen=True)
class LedgerEntry:
    """One warming ping: when, for which session and revision, what it read and cost."""

    session_id: str
    at: float
    revision: int | None
    usage: Usage
    cost_usd: float
    error: str | None = None

    @property
    def hit(self) -> bool:
        return self.usage.cache_read_tokens > 0


@dataclass
class WarmingLedger:
    """Every ping's usage, outside the Session store."""

    entries: list[LedgerEntry] = field(default_factory=list)

    def record(self, entry: LedgerEntry) -> None:
        self.entries.append(entry)

    def for_session(self, session_id: str) -> list[LedgerEntry]:
        return [e for e in self.entries if e.session_id == session_id]

    def total_cost_usd(self, session_id: str | None = None) -> float:
        return sum(
            e.cost_usd for e in self.entries if session_id is None or e.session_id == session_id
        )


class WarmingKeeper:
    """Keeps watched Sessions warm between durable turns.

    Call `turn_finished(session_id)` after each durable turn of a watched session (the
    server and `run_turn` do). `tick()` sends every ping that is due now; `run()` does so in
    real time until cancelled; on a settable (virtual) clock, `advance_by(seconds)` (a pause)
    and `advance_to(t)` (an absolute reading of the clock) step it through every due ping.
    """

    def __init__(
        self,
        engine: SessionEngine,
        *,
        clock: Clock,
        policy: KeeperPolicy | None = None,
        ledger: WarmingLedger | None = None,
        prompt: str = KEEPALIVE_PROMPT,
        tag: str = WARMING_TAG,
    ) -> None:
        self.engine = engine
        self.clock = clock
        self.policy: KeeperPolicy = policy or default_policy()
        self.ledger = ledger or WarmingLedger()
        self.prompt = prompt
        self.tag = tag
        self._watched: set[str] = set()
        self._idle: dict[str, IdleSession] = {}
        self._due: dict[str, float] = {}
        self._stopped: dict[str, str] = {}  # session -> why no ping is scheduled

    # --- which sessions -------------------------------------------------------------------

    def watch(self, session_id: str) -> None:
        """Keep the session warm from its latest settled turn on (raises SessionNotFound)."""
        self.engine.store.read(session_id)
        self._watched.add(session_id)
        self.turn_finished(session_id)

    def unwatch(self, session_id: str) -> None:
        self._watched.discard(session_id)
        self._idle.pop(session_id, None)
        self._due.pop(session_id, None)
        self._stopped.pop(session_id, None)

    @property
    def watched(self) -> frozenset[str]:
        return frozenset(self._watched)

    def schedule(self, session_id: str) -> float | None:
        """When the session's next ping is due, if one is (else `why_not_pinging` says why)."""
        return self._due.get(session_id)

    def why_not_pinging(self, session_id: str) -> str | None:
        """Why no ping of the session is scheduled, in one sentence; None when one is. The
        reasons: it is not watched; no durable turn has settled; the last turn cached
        nothing (its prompt under the model's minimum cacheable length, or no breakpoint);
        the policy stopped; a ping failed; a turn is running. Each is also logged (INFO, on
        the `sessiongen.warming` logger) when it happens."""
        if session_id in self._due:
            return None
        if session_id not in self._watched:
            return "the session is not watched"
        return self._stopped.get(session_id, "no durable turn has settled yet")

    def _stop(self, session_id: str, why: str) -> None:
        """No ping of the session until its next turn, for the reason `why`."""
        self._due.pop(session_id, None)
        self._stopped[session_id] = why
        logger.info("no warming ping scheduled for %s: %s", session_id, why)

    # --- turns ----------------------------------------------------------------------------

    def turn_finished(self, session_id: str) -> None:
        """A durable turn settled now: restart the session's schedule from its usage."""
        if session_id not in self._watched:
            return
        self._due.pop(session_id, None)
        idle = self._idle_after_turn(session_id)
        if isinstance(idle, str):
            self._idle.pop(session_id, None)
            self._stop(session_id, idle)
            return
        self._idle[session_id] = idle
        self._plan(idle)

    async def run_turn(self, session_id: str, text: str) -> None:
        """A durable turn through the engine, then `turn_finished`."""
        self._due.pop(session_id, None)  # no ping may fall inside the turn
        try:
            await self.engine.run(session_id, text)
        finally:
            self.turn_finished(session_id)

    def _idle_after_turn(self, session_id: str) -> IdleSession | str:
        """The session as idle after its last turn, or why there is nothing to keep warm."""
        record = self.engine.store.read(session_id)
        last = next(
            (
                m
                for m in reversed(record.messages)
                if isinstance(m, AssistantMessage) and m.completed
            ),
            None,
        )
        if last is None:
            return "no durable turn has settled yet"
        usage = last.usage
        cached = usage.cache_read_tokens + usage.cache_write_tokens
        if cached == 0:
            tokens = usage.total_input_tokens
            if is_known_model(last.model) and get_model(last.model).below_cache_minimum(tokens):
                minimum = get_model(last.model).min_cacheable_tokens
                return (
                    f"the last turn's prompt ({tokens:,} tokens) is under {last.model}'s minimum "
                    f"cacheable length ({minimum:,} tokens): nothing of it is cached, so there "
                    "is nothing to keep warm"
                )
            return "the last turn cached nothing (no cache breakpoint), so nothing to keep warm"
        agent = self.engine.agents[record.session.agent]
        ttl: TTL = "1h" if usage.cache_write_1h_tokens > 0 else "5m"
        if usage.cache_write_tokens == 0:
            ttl = agent.cache_ttl  # a pure read refreshes the entry with its own TTL
        now = self.clock.now()
        return IdleSession(
            session_id, last.model, ttl, now, now, cached, read_tokens=usage.cache_read_tokens
        )

    def _plan(self, idle: IdleSession) -> None:
        due = self.policy.next_ping(idle)
        if due is None:
            self._stop(
                idle.session_id,
                f"the policy {self.policy.name!r} judged another ping not worth its cost "
                f"after {idle.pings} ping{'' if idle.pings == 1 else 's'} in this idle gap",
            )
        else:
            self._due[idle.session_id] = due

    # --- pings ----------------------------------------------------------------------------

    def next_due(self) -> float | None:
        return min(self._due.values(), default=None)

    async def tick(self) -> list[LedgerEntry]:
        """Send every ping due now (skipping sessions whose Drain is in flight)."""
        now = self.clock.now()
        sent = []
        for session_id, due in sorted(self._due.items(), key=lambda item: item[1]):
            if due > now:
                continue
            if self.engine.drain_in_flight(session_id):
                # Never ping into a running turn; when it settles, it restarts the schedule.
                self._stop(session_id, "a durable turn is running; its end restarts the pings")
                continue
            entry = await self._ping(session_id, now)
            if entry is not None:
                sent.append(entry)
        return sent

    async def _ping(self, session_id: str, now: float) -> LedgerEntry | None:
        idle = self._idle[session_id]
        try:
            result = await self.engine.generate(session_id, self.prompt, warming=True, tag=self.tag)
        except SessionNotFound:
            self.unwatch(session_id)  # deleted: nothing left to keep warm
            return None
        except SessiongenError as error:  # a provider fault, a context that no longer fits...
            entry = LedgerEntry(session_id, now, None, Usage(), 0.0, error=str(error))
            self.ledger.record(entry)
            # A failed ping ends this idle gap's schedule.
            self._stop(session_id, f"the last ping failed ({error}); the next turn restarts them")
            return entry
        spent = cost(result.usage, idle.model)
        entry = LedgerEntry(session_id, now, result.revision, result.usage, spent)
        self.ledger.record(entry)
        idle = replace(
            idle, refreshed_at=now, pings=idle.pings + 1, ping_cost_usd=idle.ping_cost_usd + spent
        )
        self._idle[session_id] = idle
        self._plan(idle)
        return entry

    async def advance_by(self, seconds: float) -> list[LedgerEntry]:
        """A pause of `seconds` from the clock's present: `advance_to(now + seconds)`."""
        if seconds < 0:
            raise ValueError(f"a pause cannot be negative, got {seconds}")
        return await self.advance_to(self.clock.now() + seconds)

    async def advance_to(self, until: float) -> list[LedgerEntry]:
        """Step a settable clock through every ping due up to the absolute time `until` (the
        clock's reading, not a pause: see `advance_by`), then to `until`."""
        clock = self.clock
        if not hasattr(clock, "set"):
            raise TypeError("advance_to needs a settable clock (e.g. the emulator's)")
        settable: SettableClock = clock  # type: ignore[assignment]
        sent: list[LedgerEntry] = []
        previous: float | None = None
        while (due := self.next_due()) is not None and due <= until:
            if due == previous:
                raise RuntimeError(f"policy {self.policy.name!r} scheduled a ping in the past")
            settable.set(max(due, settable.now()))
            sent += await self.tick()
            previous = due
        settable.set(until)
        return sent

    async def run(self, *, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        """Ping in real time until cancelled."""
        while True:
            due = self.next_due()
            wait = 1.0 if due is None else min(1.0, max(0.0, due - self.clock.now()))
            await sleep(wait)
            await self.tick()
