"""Warming policies: what TTL a client writes each prompt with and when it pings to keep the
entry alive: objects meant to drive both the trace replay (`warming.replay`) and a live
keeper.

A policy sees a request when it arrives (`observe`, then `decide`) with the client-side
`History` of its session, and answers with a `Decision`: the TTL of the one breakpoint on the
prompt's last block (None: no breakpoint, nothing read or written) and the offsets, in
seconds after the request's start, of keep-alive pings. A ping resends the same prefix with
`max_tokens: 0`; it is cancelled when the session's next request arrives first, and unless
the policy sets `ping_may_rewrite` it is not sent once the client's own bookkeeping says the
entry has expired. Anthropic keeps an entry *at least* its TTL, so every schedule here
assumes exactly the TTL and never more.

Online policies (`online=True`) use only arrivals seen so far; offline ones (the gap oracle,
a fixed schedule) read the trace they are given and exist as yardsticks.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from ...cache import TTL, TTL_SECONDS, get_model
from ..traces import Trace, TraceRequest
from .decision import (
    _TTLS as _TTLS,
)
from .decision import (
    DEFAULT_MODEL as DEFAULT_MODEL,
)
from .decision import (
    PING_MARGIN as PING_MARGIN,
)
from .decision import (
    Decision as Decision,
)
from .decision import (
    Fixed as Fixed,
)
from .decision import (
    History as History,
)
from .decision import (
    Policy as Policy,
)
from .decision import (
    PolicyBase as PolicyBase,
)
from .decision import (
    _just_before_expiry as _just_before_expiry,
)
from .decision import (
    _Rates as _Rates,
)
from .trace_replay import replay


def no_cache() -> Fixed:
    """No breakpoint at all: every prompt is plain input."""
    return Fixed("no_cache", None)


def five_minutes() -> Fixed:
    """A 5m breakpoint on every prompt, no pings."""
    return Fixed("5m", "5m")


def one_hour() -> Fixed:
    """A 1h breakpoint on every prompt, no pings."""
    return Fixed("1h", "1h")


def aider(pings: int = 3, interval: float = 295.0) -> Fixed:
    """aider-like: 5m, then a ping every `interval` seconds, at most `pings` of them."""
    return Fixed(f"aider_{pings}", "5m", tuple(interval * k for k in range(1, pings + 1)))


def opencode(interval: float = 240.0, duration: float = 1800.0) -> Fixed:
    """opencode-like: 5m, then a ping every `interval` seconds for `duration` seconds."""
    offsets = tuple(interval * k for k in range(1, int(duration // interval) + 1))
    return Fixed("opencode", "5m", offsets)


def ttl_aware(ttl: TTL = "5m", horizon: float = 1800.0, margin: float = PING_MARGIN) -> Fixed:
    """Pings timed from the TTL, each `margin` before the entry would expire, for `horizon`
    seconds after the request."""
    name = f"ttl_aware_{ttl}_{horizon / 60:g}min"
    return Fixed(name, ttl, _just_before_expiry(ttl, horizon, margin))


class SkiRental(PolicyBase):
    """Ski rental: ping just before each expiry while the pings' cumulative cost stays below
    the cost of one rewrite of the prompt, then stop. The deterministic rent-or-buy rule: on
    any single gap it pays at most about twice what knowing the gap would have cost."""

    def __init__(self, ttl: TTL = "5m", model: str = DEFAULT_MODEL) -> None:
        self.name = f"ski_rental_{ttl}"
        rates = _Rates(model)
        # Every ping reads the whole prompt, every rewrite writes it: the prompt size cancels.
        pings = math.ceil(rates.write[ttl] / rates.read) - 1
        interval = TTL_SECONDS[ttl] - PING_MARGIN
        self._decision = Decision(ttl, tuple(interval * k for k in range(1, pings + 1)))

    def decide(self, request: TraceRequest, history: History) -> Decision:
        return self._decision


class Selective1h(PolicyBase):
    """5m, or 1h when the 1h premium on what this request writes is below `pings` pings of
    the whole prompt (what a 5m entry would spend to survive the same gap). No pings."""

    def __init__(self, pings: float = 1.0, model: str = DEFAULT_MODEL) -> None:
        self.name = "selective_1h" if pings == 1.0 else f"selective_1h_{pings:g}"
        self._pings = pings
        self._rates = _Rates(model)

    def decide(self, request: TraceRequest, history: History) -> Decision:
        n = request.input_tokens
        written = n - history.readable_tokens
        premium = (self._rates.write["1h"] - self._rates.write["5m"]) * written
        return Decision("1h" if premium < self._pings * self._rates.read * n else "5m")


class GapOracle(PolicyBase):
    """Offline yardstick: knows when each session's next request comes and picks, for every
    prompt on its own, the cheapest of 5m or 1h with just enough pings at each expiry, or
    letting the entry expire (and, unless `must_write`, no breakpoint at all). It writes
    every prompt when `must_write`, as an online client does."""

    online = False

    def __init__(self, trace: Trace, must_write: bool = True, model: str = DEFAULT_MODEL) -> None:
        self.name = "gap_oracle" if must_write else "gap_oracle_free"
        self._must_write = must_write
        self._rates = _Rates(model)
        last: dict[str, int] = {}
        self._next_at: list[float | None] = [None] * len(trace.requests)
        for i, request in enumerate(trace.requests):
            if request.session in last:
                self._next_at[last[request.session]] = request.at
            last[request.session] = i

    def decide(self, request: TraceRequest, history: History) -> Decision:
        r = self._rates
        n = request.input_tokens
        a = history.readable_tokens
        next_at = self._next_at[history.index]
        gap = None if next_at is None else next_at - request.at
        best: tuple[float, Decision] | None = None
        if not self._must_write:
            # Nothing read now; the next request writes this prefix again.
            later = 0.0 if gap is None else r.write["5m"] * n
            best = (r.input * n + later, Decision(None))
        for ttl in _TTLS:
            now = r.read * a + r.write[ttl] * (n - a)
            life = TTL_SECONDS[ttl]
            # Let it expire: the next request, if any, writes this prefix again.
            options: list[tuple[float, tuple[float, ...]]] = [
                (0.0 if gap is None else r.write["5m"] * n, ())
            ]
            if gap is not None:
                k = max(0, math.ceil(gap / life) - 1)  # pings exactly at each expiry
                pings = tuple(life * j for j in range(1, k + 1) if life * j < gap)
                options.append((r.read * n * (len(pings) + 1), pings))
            for later, pings in options:
                cost = now + later
                if best is None or cost < best[0]:
                    best = (cost, Decision(ttl, pings))
        assert best is not None
        return best[1]


class Scheduled(PolicyBase):
    """Offline: replays fixed decisions, one per trace request (the optimum's schedule). Its
    pings may rewrite, so they are sent exactly as scheduled."""

    online = False
    ping_may_rewrite = True

    def __init__(self, name: str, decisions: Sequence[Decision]) -> None:
        self.name = name
        self._decisions = tuple(decisions)

    def decide(self, request: TraceRequest, history: History) -> Decision:
        return self._decisions[history.index]


class AsRecorded(PolicyBase):
    """The policy the client really ran, read off each request's recorded usage
    (`TraceRequest.recorded`): the TTL it wrote with (1h where any write was 1h, else 5m); for
    a request that wrote nothing but read, the session's TTL so far (5m before any); no
    breakpoint where the usage shows neither a read nor a write. No pings: a log records
    the calls the client made, and a ping would be one of them. A request without recorded
    usage gets 5m. Replayed with the trace's breakpoints, it is the calibration row: its
    prediction set beside what the provider billed."""

    def __init__(self) -> None:
        self.name = "as_recorded"
        self._ttl: dict[str, TTL] = {}

    def reset(self) -> None:
        self._ttl = {}

    def decide(self, request: TraceRequest, history: History) -> Decision:
        recorded = request.recorded
        if recorded is not None and not recorded.cache_read_tokens and recorded.ttl is None:
            return Decision(None)
        ttl = recorded.ttl if recorded is not None else None
        if ttl is None:
            ttl = self._ttl.get(request.session, "5m")
        self._ttl[request.session] = ttl
        return Decision(ttl)


# The life table's interval ends, in seconds of gap since the session's previous request.
_GRID: tuple[float, ...] = (30, 60, 120, 180, 240, 300, 450, 600, 900, 1200, 1800, 2700, 3600)
_GRID += (5400.0, 7200.0)
_DEPTHS = 2  # a session's first request and its later ones get separate tables
_QUICK_GAP = 60.0
"""Seconds: a follow-up faster than this is a tool loop or a retry, not a person reading."""
Split = Literal["depth", "gap"]
"""How `Learned` groups requests into life tables: by turn depth (a session's first request,
its later ones), or by the gap before it (first, a quick follow-up, a slow one)."""
# (Tuned on the Mooncake first half: 2 tables gave 1.197 of the optimum, 4 gave 1.204; the
# synthetic and generated traces moved by under 0.004 either way.)
_REFRESH_SECONDS = 30.0  # how stale a depth's table may get before it is recomputed


MAX_COUNT = 2**53
"""The largest count a saved policy may hold: every count up to it is exact as a float, which
the life tables compute in; a larger one is no count of requests (10**400 overflowed them)."""


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT


class Learned(PolicyBase):
    """Online expected-cost policy. For each turn depth (`_DEPTHS` groups: a session's first
    request, and its later ones) it keeps a life table of the gap from
    a request to its session's next one, built only from arrivals seen so far: sessions that
    continued give a gap, sessions still open count as censored at their current age, and a
    session that never continues stays censored, which is how the estimate learns that many
    sessions end. For each request it then picks the TTL and the number of just-before-expiry
    pings minimizing expected cost: this request's read and write, each ping weighted by the
    probability the session has not continued before it, and the next request's read of this
    prefix if the entry is still alive then or its rewrite if not. No breakpoint is chosen
    only when there is nothing to read and a continuation is too unlikely to repay a write.

    Each table starts from `prior` pseudo-sessions that came back within 30 s and as many
    that never came back, so an empty table means "write 5m, no pings" (plain 5m caching)
    rather than "no one ever comes back", and a few dozen real sessions outweigh it.
    """

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        max_pings: int = 12,
        prior: int = 2,
        split: Split = "depth",
    ) -> None:
        if prior < 0:
            raise ValueError(f"prior must be >= 0 pseudo-sessions, got {prior}")
        if split not in ("depth", "gap"):
            raise ValueError(f"split must be 'depth' or 'gap', got {split!r}")
        self.name = "learned" if split == "depth" else "learned_gap"
        self.split: Split = split
        groups = _DEPTHS if split == "depth" else 3
        self._groups = groups
        self.model = model
        self._rates = _Rates(model)
        self._max_pings = max_pings
        self._prior = prior
        bins = len(_GRID) + 1
        # What `reset` starts from: the prior, then whatever `fit` learnt. Completed gaps per
        # depth and life-table bin (the last bin is "beyond the grid"), and sessions of a
        # fitted trace still open at its end, censored at their age then (the prior's
        # never-returning ones beyond the grid).
        self._fitted_done = [[prior] + [0] * (bins - 1) for _ in range(groups)]
        self._fitted_closed = [[0] * (bins - 1) + [prior] for _ in range(groups)]
        self.reset()

    shardable = False

    def reset(self) -> None:
        """Back to the prior and what `fit` learnt: a replay starts here."""
        self._done = [list(row) for row in self._fitted_done]
        self._closed = [list(row) for row in self._fitted_closed]
        self._open: list[list[float]] = [
            [] for _ in range(self._groups)
        ]  # open sessions' last times
        self._last: dict[str, tuple[float, int]] = {}  # session -> (last arrival, its depth)
        self._tables: list[tuple[float, tuple[float, ...]] | None] = [None] * self._groups
        self._plans: list[tuple[float, float, dict[TTL, tuple[float, Decision]]] | None]
        self._plans = [None] * self._groups

    def observe(self, request: TraceRequest, history: History) -> None:
        previous = self._last.get(request.session)
        if previous is not None:
            at, depth = previous
            opened = self._open[depth]
            del opened[bisect.bisect_left(opened, at)]
            self._done[depth][bisect.bisect_left(_GRID, request.at - at)] += 1
        depth = self._group(history)
        bisect.insort(self._open[depth], request.at)
        self._last[request.session] = (request.at, depth)

    def fit(self, trace: Trace) -> Learned:
        """Learn from a whole earlier trace (a prior): its gaps are completed, and its
        sessions still open at its end count as censored at their age then, so the live
        clock, which starts afresh, never meets the trace's times. Returns self."""
        turns: dict[str, int] = {}
        previous: dict[str, TraceRequest] = {}
        for request in trace.requests:
            before = previous.get(request.session)
            turn = turns.get(request.session, 0)
            gap = None if before is None else request.at - before.at
            tokens = 0 if before is None else before.input_tokens
            self.observe(request, History(-1, turn, gap, tokens, 0))
            turns[request.session] = turn + 1
            previous[request.session] = request
        end = max((r.at for r in trace.requests), default=0.0)
        for at, depth in self._last.values():
            self._closed[depth][bisect.bisect_left(_GRID, end - at)] += 1
        self._fitted_done = [list(row) for row in self._done]
        self._fitted_closed = [list(row) for row in self._closed]
        self.reset()
        return self

    def state(self) -> dict[str, Any]:
        """What `fit` learnt, as JSON-ready data (`warming.policies.saved`)."""
        return {"done": self._fitted_done, "closed": self._fitted_closed}

    def load_state(self, state: dict[str, Any]) -> Learned:
        """Restore what `state` says was learnt (the inverse of `state`); returns self."""
        shape = (self._groups, len(_GRID) + 1)
        for key in ("done", "closed"):
            table = state[key]
            if len(table) != shape[0] or any(len(row) != shape[1] for row in table):
                raise ValueError(f"learned.{key}: expected {shape[0]} rows of {shape[1]} counts")
            if any(not _is_count(v) for row in table for v in row):
                raise ValueError(f"learned.{key}: counts must be whole numbers, 0 to 2**53")
        self._fitted_done = [list(row) for row in state["done"]]
        self._fitted_closed = [list(row) for row in state["closed"]]
        self.reset()
        return self

    def _group(self, history: History) -> int:
        """The life table a request belongs to (`split`)."""
        if self.split == "depth":
            return min(history.turn, _DEPTHS - 1)
        if history.gap is None:
            return 0
        return 1 if history.gap < _QUICK_GAP else 2

    def _survival(self, depth: int, now: float) -> tuple[float, ...]:
        """S at each grid point: P(no next request within that gap), actuarial life table."""
        cached = self._tables[depth]
        if cached is not None and now - cached[0] < _REFRESH_SECONDS:
            return cached[1]
        done = self._done[depth]
        closed = self._closed[depth]
        opened = self._open[depth]
        # Open sessions censored in each bin: ages (now - last) between grid points.
        older = [bisect.bisect_right(opened, now - x) for x in _GRID]  # age >= x
        at_risk = sum(done) + len(opened) + sum(closed)
        survival: list[float] = []
        s = 1.0
        lower_older = len(opened)
        for k in range(len(_GRID)):
            censored = lower_older - older[k] + closed[k]
            exposed = at_risk - censored / 2
            if exposed > 0:
                s *= 1.0 - done[k] / exposed
            survival.append(s)
            at_risk -= done[k] + censored
            lower_older = older[k]
        table = tuple(survival)
        self._tables[depth] = (now, table)
        return table

    @staticmethod
    def _at(survival: tuple[float, ...], x: float) -> float:
        """S(x), linear between grid points, 1 at 0, flat after the last point."""
        k = bisect.bisect_left(_GRID, x)
        if k >= len(_GRID):
            return survival[-1]
        x0, s0 = (0.0, 1.0) if k == 0 else (_GRID[k - 1], survival[k - 1])
        return s0 + (survival[k] - s0) * (x - x0) / (_GRID[k] - x0)

    def _plan(self, depth: int, now: float) -> tuple[float, dict[TTL, tuple[float, Decision]]]:
        """Expected cost per prompt token beyond this request's own read and write: with no
        breakpoint, and for each TTL with its best number of pings (the prompt size and the
        readable part scale every option alike, so the best count does not depend on them).
        Recomputed with the life table."""
        cached = self._plans[depth]
        if cached is not None and now - cached[0] < _REFRESH_SECONDS:
            return cached[1], cached[2]
        r = self._rates
        s = self._survival(depth, now)
        never = s[-1]  # beyond the grid counts as a session that has ended
        none = r.input + (1.0 - never) * r.write["5m"]  # the next request writes it again
        best: dict[TTL, tuple[float, Decision]] = {}
        for ttl in _TTLS:
            life = TTL_SECONDS[ttl]
            interval = life - PING_MARGIN
            pings = 0.0
            for k in range(self._max_pings + 1 if ttl == "5m" else 3):
                if k:
                    pings += r.read * self._at(s, interval * k)  # sent unless it came back
                still = self._at(s, interval * k + life)  # not back while the entry lives
                later = pings + (1.0 - still) * r.read + (still - never) * r.write["5m"]
                if ttl not in best or later < best[ttl][0]:
                    offsets = tuple(interval * j for j in range(1, k + 1))
                    best[ttl] = (later, Decision(ttl, offsets))
        self._plans[depth] = (now, none, best)
        return none, best

    def decide_for(self, ttl: TTL, request: TraceRequest, history: History) -> Decision:
        """The best pings for an entry someone else gave `ttl` (a live keeper: the agent's
        cache policy chose the TTL, the keeper only pings)."""
        return self._plan(self._group(history), request.at)[1][ttl][1]

    def decide(self, request: TraceRequest, history: History) -> Decision:
        r = self._rates
        n = request.input_tokens
        a = history.readable_tokens
        none, best = self._plan(self._group(history), request.at)
        # No breakpoint would throw away a live prefix, so it is an option only with none.
        choice = (none * n, Decision(None)) if a == 0 else None
        for ttl in _TTLS:
            later, decision = best[ttl]
            cost = r.read * a + r.write[ttl] * (n - a) + later * n
            if choice is None or cost < choice[0]:
                choice = (cost, decision)
        assert choice is not None
        return choice[1]


_QUIET = 600.0
"""Seconds of silence after which `Tracking` charges a session's remaining pings as if it had
ended (and settles exactly if the session comes back)."""


@dataclass(slots=True)
class _Shadow:
    """One expert's client state for one session in `Tracking`'s shadow replay: what its
    latest decision cached (prompt tokens, TTL, expiry) and the pings still scheduled."""

    at: float
    tokens: int
    ttl: TTL | None
    expires: float
    offsets: tuple[float, ...]
    provisional: float = 0.0  # ping cost charged in advance by the quiet sweep


def default_experts(model: str = DEFAULT_MODEL) -> list[Policy]:
    """The experts `Tracking` follows: the fixed reference policies that cache, and the
    adaptive ones, `Learned` with both of its splits among them."""
    return [
        Learned(model),
        Learned(model, split="gap"),
        five_minutes(),
        one_hour(),
        aider(1),
        aider(3),
        ttl_aware("1h", 7200.0),
        Selective1h(1.0, model),
    ]


class Tracking(PolicyBase):
    """Online: runs every expert policy (`default_experts`) in a shadow replay of the
    session history seen so far, and follows the one that has cost least (follow the
    leader). Each expert decides every request from its own shadow client state (what it
    would have cached, pinged and read had it run alone), so its running cost is the cost
    of running it, scored online; the request is then sent as the leader decided.

    The shadow replay is the replay's client model per session: a prompt reads the previous
    one if it extends it and the expert's entry is still alive, and writes the rest at the
    expert's TTL; a ping reads the prompt and refreshes it, is cancelled by the session's next
    request and dropped once the entry has expired. (Prefixes shared across sessions are left
    out: the shadow is per session. The real replay and its cache rules decide what the
    chosen decisions cost.) A session quiet for `_QUIET` seconds is charged every ping its
    schedule still holds, as if it had ended, so an expert that pings sessions that never
    come back is seen to pay for it without waiting hours; the charge is settled exactly if
    the session comes back.

    With less than `min_history` requests seen, including a fitted trace, it follows the
    first expert (plain 5m). `fit(trace)` learns from an earlier trace; `reset()` returns to
    what was fitted.
    """

    shardable = False

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        experts: Sequence[Policy] | None = None,
        min_history: int = 50,
        margin: float = 0.02,
    ) -> None:
        self.name = "tracking"
        self.model = model
        self._rates = _Rates(model)
        self._min_tokens = get_model(model).min_cacheable_tokens
        self._min_history = min_history
        self.experts = list(experts) if experts is not None else default_experts(model)
        if not self.experts or any(not e.online for e in self.experts):
            raise ValueError("Tracking follows one or more online policies")
        if not 0.0 <= margin < 1.0:
            raise ValueError(f"margin must be in [0, 1), got {margin!r}")
        self._margin = margin
        self._fitted_costs = [0.0] * len(self.experts)
        self._fitted_seen = 0
        self.reset()

    @property
    def expert_names(self) -> tuple[str, ...]:
        return tuple(e.name for e in self.experts)

    @property
    def leader(self) -> str:
        """The expert followed now."""
        return self.experts[self._lead()].name

    def costs(self) -> dict[str, float]:
        """Each expert's shadow cost so far (USD), fitted trace included."""
        return dict(zip(self.expert_names, self._costs, strict=True))

    def reset(self) -> None:
        """Back to what `fit` learnt (nothing, unfitted); the experts likewise."""
        for expert in self.experts:
            expert.reset()
        self._costs = list(self._fitted_costs)
        self._seen = self._fitted_seen
        self._shadows: list[dict[str, _Shadow]] = [{} for _ in self.experts]
        self._latest: dict[str, float] = {}  # session -> its latest request's time
        self._quiet: list[tuple[float, str]] = []  # (time, session) in time order
        self._quiet_from = 0
        self._decisions: tuple[Decision, ...] = ()
        self._observed: TraceRequest | None = None  # the request `_decisions` are for
        self._following: dict[str, int] = {}  # session -> the expert it follows

    # --- the shadow replay ----------------------------------------------------------------

    def _pings(self, shadow: _Shadow, until: float) -> float:
        """The cost of the shadow's pings before `until`, applied to it (expiry refreshed)."""
        if shadow.ttl is None or not shadow.offsets:
            return 0.0
        life = TTL_SECONDS[shadow.ttl]
        cost = 0.0
        sent = 0
        for offset in shadow.offsets:
            when = shadow.at + offset
            if when >= until or when > shadow.expires:
                break  # cancelled by the next request, or dropped once expired
            cost += self._rates.read * shadow.tokens
            shadow.expires = when + life
            sent += 1
        shadow.offsets = shadow.offsets[sent:]
        return cost

    def _sweep(self, now: float) -> None:
        """Charge, in advance, the remaining pings of sessions quiet for `_QUIET` seconds."""
        quiet = self._quiet
        k = self._quiet_from
        while k < len(quiet) and quiet[k][0] + _QUIET < now:
            at, session = quiet[k]
            if self._latest.get(session) == at:
                for e, shadows in enumerate(self._shadows):
                    shadow = shadows.get(session)
                    if shadow is not None and shadow.offsets and not shadow.provisional:
                        # On a copy: the session may still come back and its real gap
                        # then settles the charge against the shadow as it is now.
                        shadow.provisional = self._pings(replace(shadow), float("inf"))
                        self._costs[e] += shadow.provisional
            k += 1
        if k > 4096 and k * 2 > len(quiet):  # drop the swept head now and then
            del quiet[:k]
            k = 0
        self._quiet_from = k

    def observe(self, request: TraceRequest, history: History) -> None:
        for expert in self.experts:
            expert.observe(request, history)
        self._sweep(request.at)
        self._seen += 1
        session, at, n = request.session, request.at, request.input_tokens
        rates = self._rates
        decisions: list[Decision] = []
        for e, expert in enumerate(self.experts):
            shadows = self._shadows[e]
            shadow = shadows.get(session)
            cost = 0.0
            readable = 0
            if shadow is not None:
                cost -= shadow.provisional
                cost += self._pings(shadow, at)
                if shadow.ttl is not None and shadow.expires >= at and history.extends:
                    readable = min(shadow.tokens, n)
            own = History(
                history.index,
                history.turn,
                history.gap,
                history.previous_tokens,
                readable,
                history.extends,
            )
            decision = expert.decide(request, own)
            decisions.append(decision)
            ttl = decision.ttl
            if ttl is None or n < self._min_tokens:
                cost += rates.input * n
                shadows[session] = _Shadow(at, n, None, float("-inf"), ())
            else:
                cost += rates.read * readable + rates.write[ttl] * (n - readable)
                life = TTL_SECONDS[ttl]
                shadows[session] = _Shadow(at, n, ttl, at + life, decision.ping_offsets)
            self._costs[e] += cost
        self._latest[session] = at
        self._quiet.append((at, session))
        self._decisions = tuple(decisions)
        self._observed = request

    # --- deciding -------------------------------------------------------------------------

    def _lead(self) -> int:
        """The expert new sessions follow: the cheapest so far if it beats the first expert
        (the default) by `margin` of that one's cost, else the first; the first, too, before
        `min_history` requests. The margin keeps near-ties, which a few sessions decide by
        chance, on the default."""
        if self._seen < self._min_history:
            return 0
        costs = self._costs
        best = min(range(len(costs)), key=costs.__getitem__)
        return best if costs[best] < costs[0] * (1.0 - self._margin) else 0

    def decide(self, request: TraceRequest, history: History) -> Decision:
        """The decision, on this request (observed just before), of the expert the session
        follows: the leader when the session started, or when its cache went cold (nothing
        readable after a gap of `_QUIET` seconds or more). Switching experts within a warm
        session would mix schedules that only pay as a whole (a 1h entry pays over several
        gaps), so a session keeps its expert while its cache is warm."""
        if self._observed is not request:  # asked without `observe`: see it first
            self.observe(request, history)
        session = request.session
        expert = self._following.get(session)
        if expert is None or (
            history.readable_tokens == 0 and (history.gap is None or history.gap >= _QUIET)
        ):
            expert = self._following[session] = self._lead()
        return self._decisions[expert]

    def decide_for(self, ttl: TTL, request: TraceRequest, history: History) -> Decision:
        """The pings for an entry someone else gave `ttl` (the live keeper: the agent's cache
        policy chose the TTL, so what is left to choose is the pings): the leader's own
        `decide_for` where it has one; the leader's pings where it chose `ttl` itself; else
        (a leader such as `selective_1h` wins by a TTL choice that is not the keeper's to
        make) the `decide_for` of the cheapest expert that has one."""
        if self._observed is not request:
            self.observe(request, history)
        lead = self._lead()
        planner = getattr(self.experts[lead], "decide_for", None)
        if planner is None and self._decisions[lead].ttl == ttl:
            return self._decisions[lead]
        if planner is None:
            planners = [k for k, e in enumerate(self.experts) if hasattr(e, "decide_for")]
            if not planners:
                return Decision(ttl)
            planner = self.experts[min(planners, key=self._costs.__getitem__)].decide_for  # type: ignore[attr-defined]
        decision: Decision = planner(ttl, request, history)
        return decision

    # --- fitting and saving ---------------------------------------------------------------

    def fit(self, trace: Trace) -> Tracking:
        """Learn from a whole earlier trace: every expert that fits (`Learned`) fits on it,
        then the trace is replayed under this policy, each expert's shadow cost summed (the
        pings of sessions open at its end charged as if they had ended). `reset` then starts
        from here. Returns self."""

        # The experts that fit do so first, so their shadow costs are measured on the trace
        # they fitted: a bias towards `Learned`, and a deliberate one. Scored as it learns
        # online from its prior instead, it looks worse than it then does on later data
        # (fitted on the whole earlier trace), and the held-back parts of the generated
        # traces cost up to 12% more for following another expert.
        for expert in self.experts:
            fit = getattr(expert, "fit", None)
            if fit is not None:
                fit(trace)
        replay(trace, self, model=self.model)
        self._sweep(float("inf"))
        self._fitted_costs = list(self._costs)
        self._fitted_seen = self._seen
        self.reset()
        return self

    def state(self) -> dict[str, Any]:
        """What `fit` learnt, as JSON-ready data (`warming.policies.saved`)."""
        return {
            "experts": list(self.expert_names),
            "min_history": self._min_history,
            "margin": self._margin,
            "seen": self._fitted_seen,
            "costs": list(self._fitted_costs),
            "fitted": {e.name: e.state() for e in self.experts if isinstance(e, Learned)},
        }

    def load_state(self, state: dict[str, Any]) -> Tracking:
        """Restore what `state` says was learnt (the inverse of `state`); returns self."""
        if list(state["experts"]) != list(self.expert_names):
            raise ValueError(
                f"tracking.experts: saved for {state['experts']}, this policy follows "
                f"{list(self.expert_names)}"
            )
        costs = [float(v) for v in state["costs"]]
        if len(costs) != len(self.experts) or any(not math.isfinite(c) or c < 0 for c in costs):
            raise ValueError(f"tracking.costs: expected {len(self.experts)} costs >= 0")
        seen, min_history = state["seen"], state["min_history"]
        for key, value in (("seen", seen), ("min_history", min_history)):
            if not _is_count(value):
                raise ValueError(f"tracking.{key}: a whole number, 0 to 2**53, got {value!r}")
        margin = float(state["margin"])
        if not 0.0 <= margin < 1.0:
            raise ValueError(f"tracking.margin: in [0, 1), got {margin!r}")
        fitted = state["fitted"]
        learned = [e for e in self.experts if isinstance(e, Learned)]
        for expert in learned:  # every part checked before any is loaded: all or nothing
            Learned(self.model, split=expert.split).load_state(fitted[expert.name])
        for expert in learned:
            expert.load_state(fitted[expert.name])
        self._min_history = min_history
        self._margin = margin
        self._fitted_costs = costs
        self._fitted_seen = seen
        self.reset()
        return self


DEFAULT_POLICY = "tracking"
"""The keeper's default policy (`warming.keeper.default_policy`), marked in every policy
table: `Tracking`, which follows whichever of its experts has cost least on the workload."""


def reference_policies(model: str = DEFAULT_MODEL) -> list[Policy]:
    """The online policies compared in the warming report, reference rows first."""
    return [
        no_cache(),
        five_minutes(),
        one_hour(),
        aider(1),
        aider(3),
        opencode(),
        ttl_aware("5m", 1800.0),
        ttl_aware("1h", 7200.0),
        SkiRental("5m", model),
        Selective1h(1.0, model),
        Learned(model),
        Tracking(model),
    ]
