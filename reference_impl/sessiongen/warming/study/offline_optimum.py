"""The offline optimum of a trace's warming, and a lower bound under it.

Both know every future request. They answer "how cheap could this trace have been?", so
that a policy's cost reads as a ratio to the best possible.

**The optimum** (`optimum`) is the cheapest schedule in the client model the replay runs
(`warming.replay`), the space every policy picks from: for each request, the TTL of the one
breakpoint on its prompt's last block, or none; and keep-alive pings of that prompt before
the session's next request. It is computed on the cache rules themselves, so their
couplings are in it: a request reads only the longest live entry among the prompts its
breakpoint's 20-block lookback reaches, a prompt below the model's minimum is neither read
nor written, an entry lives its TTL from its last read or write and a read refreshes it with
its own TTL, and a request without a breakpoint reads nothing even when its prefix is
cached. A dynamic program runs over each group of requests whose entries can interact (a
session, or sessions sharing a cacheable prompt) in time order. Its state is the set of live
entries a later request can still read, with expiry and TTL, plus the pings already
scheduled. Two exact rules drop entries: an entry no later request can read, and an entry
shadowed by a longer one that lives at least as long and that every later reader of it can
reach (the longest live match wins, so it is never read, and without pings of its own never
refreshed, again). States merge when equal, and a state is dropped when another with the same
pings costs no more and dominates it (`_dominates`, with its proof): each of its entries is
covered by one of the other's, as long-lived, with as long a TTL, readable by every later
reader; and what the other has beyond it cannot make it read a longer entry in a way that
loses a refresh (no later request writes a prefix of it, its shorter TTL never replaces a
longer one). This keeps the optimum exact (the tests compare it with the program without
pruning) and the states few: on generated coding-agent sessions, whose tool loops made the
unpruned program's states grow into the thousands, at most a few dozen.

Groups are independent, so each becomes a self-contained problem (`_Group`) and
`optimum(..., executor=...)` solves them on any `concurrent.futures.Executor` (a
`ProcessPoolExecutor` for cores), in batches of about equal requests; the program is
deterministic, so the result is the same as in process.

Pings take a canonical form: a request's pings keep its entry alive until the start of one
chosen later request that can read it (a retry or another session after the session's next
request counts: the pings stop there, the entry lives on), each at the moment the entry would
otherwise expire. For a chosen target that is the fewest pings, and it leaves the entry alive
longest. Pings that write (sent after the entry died) are outside the model, as is anything
else a client could do (more breakpoints, pings of other prefixes). Because a request reads
the longest live entry, keeping one alive longer can in principle cost elsewhere, so the
canonical form is checked rather than assumed: the tests compare the optimum with every
schedule of a richer family (other ping times, every TTL, pings that do write discarded),
each replayed through the cache store.

**Warm prefixes.** A trace may carry prefixes cached before it began (`Trace.warm`): a
replay puts each in the cache, unbilled, just before its request. The program plans with
them as requests of their own (`_with_warm_requests`: the TTL given, no cost, no pings), so
the rules decide what they read, refresh and write exactly as for a request. A warm prefix
that many later prompts reach (a system prompt) defeats the pruning; past `_WARM_STATES`
states the program plans without the warm prefixes, and the optimum says so (`caveats`).

**Client breakpoints.** A trace may carry breakpoints before each prompt's last block (a
client marking its system prompt: `TraceRequest.breakpoints`). The program plans in the
one-breakpoint model above (`PreparedTrace.single`); the schedule it finds is then replayed
with the client's breakpoints, as every policy is, and that replay is the `optimum` row. It
is a schedule a client could run, so an upper bound on the best one with those breakpoints,
not a proof of it: a policy can come in under it (a ratio below 1; `Optimum.caveats` says
why the plan is simpler than the replay), and the lower bound stays a bound for every
schedule, any breakpoints and warm prefixes included.

`optimum(..., must_write=True)` is the calibration variant: every prompt carries a
breakpoint, as an online client that cannot know the prompt is never reused does.

Costs are exact integers (tokens times prices scaled to whole numbers), so equal schedules
compare equal. The schedule is then replayed through `CacheStore.apply`, the one
implementation of the rules; that replay is the optimum's cost of record, and it must agree
with the planner to the last token or `optimum` raises.

**The lower bound** (`lower_bound`) relaxes the schedule block by block. Cost is additive
over block positions (three-point billing charges each position of a request as read, 1h
write, 5m write or input), so any schedule induces, for each block, touches at the times of
the requests that contain it and of any pings: read (only while alive), write (5m or 1h)
or input, each at the model's own price (`_Prices`, from `price(model)`: Anthropic's reads
are 0.1x, 0.05x or 0.025x by model version, writes 1.25x and 2x). Each block is then optimized alone by a dynamic program
over its use times: uncached, write 5m or 1h, read while alive, keep alive through a gap with
pings (each a read, at the expiry) or let it expire and pay again; a write between uses
is never better than the same write at the next use. Two relaxations make it a bound for
every schedule, any breakpoints and extra requests included, not only for the client model:
lookback and breakpoint placement are ignored, and a read leaves the block alive for an hour
whatever entry it came from. Being alive longer never costs a lone block, so allowing that
only lowers the bound; and it is needed, because the request that reads the block can write
its own entry covering it with a 1h breakpoint, the premium falling on the new blocks: a
block written 5m at 0, read at 200 by a request that writes 1h and read again at 3,000 costs
1.25 + 0.1 + 0.1 in reality, while a block whose TTL were fixed at its write would pay at
least 2.1 (multiples of input at 0.1x reads). A request below the minimum pays input on
every block; a block of a warm prefix can be read at its request whatever came before (it
was cached outside the trace). The per-block optimum is not a schedule in general (the
blocks of one prompt may want different TTLs, pings or reads, while a request reads one
prefix and writes the rest at one TTL), which is why the optimum above is computed on the
rules and this is only its bound.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from decimal import Decimal

from ...cache import LOOKBACK_WINDOW, TTL, TTL_SECONDS, get_model, price
from ..policies import DEFAULT_MODEL, Decision, Scheduled
from ..policies.trace_replay import PreparedTrace, ReplayResult, prepare, priced_model, replay
from ..traces import Trace, TraceRequest
from ._grouping import connected

_TTLS: tuple[TTL, ...] = ("5m", "1h")
_BATCHES = 16  # tasks an executor gets: a few per worker, for balance
_WARM_STATES = 256
"""The most states the program keeps for a trace with warm prefixes before it plans without
them: a prefix cached before the trace that many later prompts reach (a system prompt) keeps
the dominance rule from pruning, and the states grow without bound (past 400 by the 20th
request of the committed 2.1 logs, where the rest plan in at most a few dozen)."""


class _Prices:
    """A model's prices as integers per token: the smallest power of ten that makes every
    price in USD per million tokens whole, so sums and comparisons are exact."""

    def __init__(self, model: str) -> None:
        p = price(model)
        values = [Decimal(str(v)) for v in (p.input, p.cache_write_5m, p.cache_write_1h)]
        values += [Decimal(str(p.cache_read)), Decimal(str(p.output))]
        scale = 1
        while any((v * scale) % 1 for v in values):
            scale *= 10
        self.scale = scale  # integer cost / scale = USD per million tokens
        self.input, w5, w1, self.read, self.output = (int(v * scale) for v in values)
        self.write = {"5m": w5, "1h": w1}

    def usd(self, cost: int) -> float:
        return cost / self.scale / 1e6


@dataclass(frozen=True)
class Optimum:
    """The cheapest schedule and its replay. `planned_cost` is the planner's integer cost
    (USD = planned_cost / scale / 1e6); the replay's cost is the cost of record."""

    decisions: tuple[Decision, ...]
    result: ReplayResult
    planned_cost: int
    scale: int
    caveats: tuple[str, ...] = ()
    """How the schedule was planned in a simpler model than the one policies replay in
    (the client's extra breakpoints, warm prefixes left out, one model's prices): then it
    is the best schedule of that model replayed as the client runs, and a policy may cost
    less. Empty: no schedule of the client model costs less."""

    @property
    def total_cost(self) -> float:
        return self.result.total_cost

    def policy(self) -> Scheduled:
        """The schedule as an (offline) policy, for `replay`."""
        return Scheduled(self.result.policy, self.decisions)


@dataclass
class _Plan:
    """Per-trace facts the optimum's program needs."""

    prepared: PreparedTrace
    min_tokens: int
    key: list[str | None]  # the entry each request writes (its last hash), None below minimum
    cands: list[list[str]]  # entries a request's breakpoint can read, longest first
    tokens_of: dict[str, int]  # entry -> prefix tokens
    targets: list[list[float]]  # later readers' times a request's pings may aim for
    next_at: list[float]  # the session's next request time (inf for the last)
    last_use: dict[str, int]  # entry -> last request index that can read it (-1: none)
    readers: dict[str, list[int]]  # entry -> requests that can read it, in order
    chain: dict[str, frozenset[str]]  # entry -> every prefix hash of its prompt
    forced: dict[int, TTL] = field(default_factory=dict)
    """Requests that stand for a warm entry (`_with_warm_requests`): their TTL is given,
    they cost nothing and send no pings."""


def _plan(prepared: PreparedTrace, min_tokens: int, forced: dict[int, TTL] | None = None) -> _Plan:
    requests = prepared.trace.requests
    n = len(requests)
    key: list[str | None] = []
    cands: list[list[str]] = []
    tokens_of: dict[str, int] = {}
    owners: dict[str, list[int]] = {}
    last_use: dict[str, int] = {}
    for i, hashes in enumerate(prepared.hashes):
        total = prepared.tokens[i]
        mine: list[str] = []
        if total >= min_tokens:
            for pos in range(len(hashes) - 1, max(len(hashes) - 1 - LOOKBACK_WINDOW, -1), -1):
                if hashes[pos] in tokens_of:
                    mine.append(hashes[pos])
                    last_use[hashes[pos]] = i
        cands.append(mine)
        if total >= min_tokens:
            key.append(hashes[-1])
            tokens_of[hashes[-1]] = total
            last_use.setdefault(hashes[-1], -1)
            owners.setdefault(hashes[-1], []).append(i)
        else:
            key.append(None)
    next_at = [math.inf] * n
    seen: dict[str, int] = {}
    for i in range(n - 1, -1, -1):
        session = requests[i].session
        if session in seen:
            next_at[i] = requests[seen[session]].at
        seen[session] = i
    # Pings stop at the session's next request, but the entry they keep alive may serve a
    # reader after it (a retry, another session), so every later reader is a target.
    forced = forced or {}
    targets: list[list[float]] = [[] for _ in range(n)]
    for r in range(n):
        for k in cands[r]:
            for q in owners[k]:
                if q < r and requests[q].at < requests[r].at and q not in forced:
                    targets[q].append(requests[r].at)
    targets = [sorted(set(t)) for t in targets]
    readers: dict[str, list[int]] = {k: [] for k in tokens_of}
    for r in range(n):
        for k in cands[r]:
            readers[k].append(r)
    chain = {prepared.hashes[q][-1]: frozenset(prepared.hashes[q]) for q in range(n)}
    return _Plan(
        prepared,
        min_tokens,
        key,
        cands,
        tokens_of,
        targets,
        next_at,
        last_use,
        readers,
        chain,
        forced,
    )


def _components(plan: _Plan) -> list[list[int]]:
    """Requests grouped so that no entry is written or read across groups."""
    return connected(
        [
            [*plan.cands[i], *([k] if (k := plan.key[i]) is not None else [])]
            for i in range(len(plan.key))
        ]
    )


@dataclass
class _Group:
    """One group's program input (`_components`), self-contained so that a worker process
    gets only its own requests. Indices are local to the group, in trace order."""

    index: list[int]  # local -> trace index
    at: list[float]
    session: list[str]
    tokens: list[int]
    output: list[int]
    key: list[str | None]
    cands: list[list[str]]
    targets: list[list[float]]
    next_at: list[float]
    tokens_of: dict[str, int]
    last_use: dict[str, int]  # entry -> last local reader (-1: none)
    readers: dict[str, list[int]]
    chain: dict[str, frozenset[str]]  # entry -> the group's entries among its prefixes
    last_writer: dict[str, int]  # entry -> last local request whose key is it or a prefix of it
    shadows_memo: dict[tuple[str, str, int], bool]
    forced: dict[int, TTL] = field(default_factory=dict)  # local index -> a warm entry's TTL

    def shadows(self, longer: str, shorter: str, q: int) -> bool:
        """Whether `longer` extends `shorter` and every request after q that can read
        `shorter` can read `longer` (so it reads `longer`, or longer still, while that is
        alive)."""
        memo = (longer, shorter, q)
        found = self.shadows_memo.get(memo)
        if found is None:
            found = shorter in self.chain[longer] and all(
                longer in self.cands[r] for r in self.readers[shorter] if r > q
            )
            self.shadows_memo[memo] = found
        return found


def _group(plan: _Plan, members: list[int]) -> _Group:
    requests = plan.prepared.trace.requests
    local = {q: i for i, q in enumerate(members)}
    entries = {e for q in members for e in (*plan.cands[q], plan.key[q]) if e is not None}
    chain = {
        e: frozenset(x for x in plan.chain[e] if x in entries) for e in entries if e in plan.chain
    }
    key = [plan.key[q] for q in members]
    last_key: dict[str, int] = {}
    for i, k in enumerate(key):
        if k is not None:
            last_key[k] = i
    last_writer = {e: max((last_key.get(x, -1) for x in chain[e]), default=-1) for e in chain}
    return _Group(
        index=list(members),
        at=[requests[q].at for q in members],
        session=[requests[q].session for q in members],
        tokens=[plan.prepared.tokens[q] for q in members],
        output=[requests[q].output_tokens for q in members],
        key=key,
        cands=[list(plan.cands[q]) for q in members],
        targets=[list(plan.targets[q]) for q in members],
        next_at=[plan.next_at[q] for q in members],
        tokens_of={e: plan.tokens_of[e] for e in entries},
        last_use={e: local[plan.last_use[e]] if plan.last_use[e] >= 0 else -1 for e in entries},
        readers={e: [local[r] for r in plan.readers[e]] for e in entries},
        chain=chain,
        last_writer=last_writer,
        shadows_memo={},
        forced={local[q]: ttl for q, ttl in plan.forced.items() if q in local},
    )


# A state: live entries (entry, expires_at, ttl) sorted, and scheduled pings
# (session, ping times, entry) sorted. Costs are integers.
_Entries = tuple[tuple[str, float, TTL], ...]
_Pings = tuple[tuple[str, tuple[float, ...], str], ...]
_State = tuple[_Entries, _Pings]
_Live = dict[str, tuple[float, float]]  # entry -> (expiry, TTL in seconds)
# Back-pointers: (decision of this request, the chain before it).
_Chain = tuple[tuple[int, Decision], "_Chain | None"]


def _relevant(
    live: dict[str, tuple[float, TTL]],
    scheduled: list[tuple[str, tuple[float, ...], str]],
    q: int,
    g: _Group,
) -> _Entries:
    """The live entries that can still change a cost after request q. Dropped (exactly):
    an entry no later request can read, and an entry shadowed by a longer one that lives at
    least as long and that every later reader of it can read too. The shadowed one is never
    read again (the longest live match wins), and with no ping of its own never refreshed,
    so it stays shadowed until it dies."""
    pinged = {entry for _, _, entry in scheduled}
    kept: list[tuple[str, float, TTL]] = []
    for entry, (expires, ttl) in live.items():
        if g.last_use[entry] <= q:
            continue
        if entry not in pinged and any(
            other != entry and until >= expires and g.shadows(other, entry, q)
            for other, (until, _) in live.items()
        ):
            continue
        kept.append((entry, expires, ttl))
    return tuple(sorted(kept))


def _dominates(in_a: _Live, in_b: _Live, pinged: frozenset[str], q: int, g: _Group) -> bool:
    """Whether state A (entries `in_a`: entry -> expiry, TTL in seconds) can do anything state
    B (`in_b`) can, at no more cost, after request q: with A no dearer, B is dropped. Both have the same pings (on the
    entries `pinged`). x(e) is an entry's expiry, L(e) its TTL; f covers e when f is e, or
    extends e and every later reader of e can read f (`shadows`).

    1. Cover: each entry e of B has an entry f of A that covers it with x_A(f) >= x_B(e)
       and L_A(f) >= L_B(e); a pinged e is its own cover.
    2. Ahead: an entry h of A that B lacks, or has dying earlier or with a shorter TTL, is
       "ahead". No later request writes h or a prefix of h; no pinged entry is a proper
       prefix of h; and each proper prefix e of h that B holds is unpinged, covered by h,
       and L_A(h) >= L_B(e).

    Proof that A's best future costs no more than B's: A makes B's every decision, and the
    rules keep holding. At a request, a live entry of B has a live cover in A (1), which the
    request can read too, so A reads a prefix at least as long: its step costs no more. If
    A reads h and B reads a shorter e, h is not alive in B, so it is ahead, and by 2 the
    refreshed h covers the refreshed e (same or longer TTL, from the same moment); if both
    read the same entry, its cover was itself, with L_A >= L_B. The request's own entry is
    the same in both (a later writer's entry, or any prefix of it, is never ahead), so
    both may schedule the same pings at the same cost; a ping refreshes a pinged entry in
    both, and 2 keeps A from reading past one. Refreshes never shorten a life, and no new
    entry becomes ahead except one that already was. `_relevant`'s drops keep this: an A
    entry dropped as unreadable covers only B entries no one can read; one dropped as
    shadowed by a longer g hands its cover to g, which, if ahead, has L_A(g) >= L_B(e) by
    2, and if not, lives in B at least as long and shadows e there, so B never reads e.
    An exchange argument for dominance, so the optimum is kept exactly."""
    for e, (x, life) in in_b.items():
        if e in pinged:
            mine = in_a.get(e)
            if mine is None or mine[0] < x or mine[1] < life:
                return False
            continue
        if not any(
            y >= x and span >= life and (f == e or g.shadows(f, e, q))
            for f, (y, span) in in_a.items()
        ):
            return False
    for h, (y, span) in in_a.items():
        theirs = in_b.get(h)
        if theirs is not None and theirs[0] >= y and theirs[1] >= span:
            continue  # not ahead
        if g.last_writer[h] > q:
            return False
        prefixes = g.chain[h]
        if any(e != h and e in prefixes for e in pinged):
            return False
        for e, (_, life) in in_b.items():
            if e != h and e in prefixes and (life > span or not g.shadows(h, e, q)):
                return False
    return True


def _prune(
    fresh: dict[_State, tuple[int, _Chain | None]], q: int, g: _Group
) -> dict[_State, tuple[int, _Chain | None]]:
    """`fresh` without the states another one dominates (`_dominates`). States are compared
    only with the same pings, cheapest first (ties in insertion order, so the result is
    deterministic); a state is dropped when a kept one dominates it."""
    by_pings: dict[_Pings, list[tuple[int, _State]]] = {}
    for state, (cost, _) in fresh.items():
        by_pings.setdefault(state[1], []).append((cost, state))
    kept: dict[_State, tuple[int, _Chain | None]] = {}
    for pings, members in by_pings.items():
        pinged = frozenset(entry for _, _, entry in pings)
        members.sort(key=lambda m: m[0])
        chosen: list[_Live] = []
        for _, state in members:
            mine = {e: (x, TTL_SECONDS[ttl]) for e, x, ttl in state[0]}
            if any(_dominates(other, mine, pinged, q, g) for other in chosen):
                continue
            chosen.append(mine)
            kept[state] = fresh[state]
    return kept


class _TooManyStates(Exception):
    """The program's states passed `_solve`'s limit."""


def _solve(
    g: _Group, prices: _Prices, must_write: bool, limit: int | None = None
) -> tuple[int, dict[int, Decision]]:
    """The group's cheapest schedule: its integer cost, and a decision per trace index.
    Raises _TooManyStates when more than `limit` states survive a step."""
    choices: tuple[TTL | None, ...] = _TTLS if must_write else (None, *_TTLS)
    states: dict[_State, tuple[int, _Chain | None]] = {((), ()): (0, None)}
    for q in range(len(g.index)):
        t = g.at[q]
        total = g.tokens[q]
        key = g.key[q]
        warm = g.forced.get(q)  # a warm entry: written as the cache rules say, never billed
        fresh: dict[_State, tuple[int, _Chain | None]] = {}
        for (entries, pings), (cost, chain) in states.items():
            # Pings before t run first (the replay's order); the session's later ones are
            # cancelled by this request.
            live = {e: (x, ttl) for e, x, ttl in entries}
            due: list[tuple[float, str]] = []
            kept: list[tuple[str, tuple[float, ...], str]] = []
            for session, planned, entry in pings:
                now = [p for p in planned if p < t]
                due += [(p, entry) for p in now]
                later = planned[len(now) :]
                if later and session != g.session[q]:
                    kept.append((session, later, entry))
            # A ping's cost was counted when it was scheduled: it always runs (before its
            # target, so before the session's next request) and always reads.
            for p, entry in sorted(due):
                if entry in live:
                    live[entry] = (p + TTL_SECONDS[live[entry][1]], live[entry][1])
            live = {e: v for e, v in live.items() if v[0] >= t}
            for ttl in choices if warm is None else (warm,):
                after = dict(live)
                if ttl is None or key is None:
                    step = prices.input * total
                else:
                    read = next((e for e in g.cands[q] if e in after), None)
                    a = g.tokens_of[read] if read is not None else 0
                    step = prices.read * a + prices.write[ttl] * (total - a)
                    if read is not None:
                        own = after[read][1]
                        after[read] = (t + TTL_SECONDS[own], own)
                    if key not in after:
                        after[key] = (t + TTL_SECONDS[ttl], ttl)
                step += prices.output * g.output[q]
                if warm is not None:
                    step = 0
                options: list[tuple[float, ...]] = [()]
                if ttl is not None and key is not None and key in after and warm is None:
                    expires, own = after[key]
                    life = TTL_SECONDS[own]
                    for target in g.targets[q]:
                        series: list[float] = []
                        p = expires  # the expiry so far; the next ping goes there
                        while p < target and p < g.next_at[q]:
                            series.append(p)
                            p += life
                        if series and p >= target and tuple(series) not in options:
                            options.append(tuple(series))
                for times in options:
                    scheduled = list(kept)
                    ping_cost = 0
                    if times:
                        assert key is not None
                        scheduled.append((g.session[q], times, key))
                        ping_cost = prices.read * g.tokens_of[key] * len(times)
                    state = (_relevant(after, scheduled, q, g), tuple(sorted(scheduled)))
                    decision = Decision(ttl, tuple(p - t for p in times))
                    candidate = cost + step + ping_cost
                    best = fresh.get(state)
                    if best is None or candidate < best[0]:
                        fresh[state] = (candidate, ((q, decision), chain))
        states = _prune(fresh, q, g)
        if limit is not None and len(states) > limit:
            raise _TooManyStates
    cost, chain = min(states.values(), key=lambda v: v[0])
    decisions: dict[int, Decision] = {}
    while chain is not None:
        (q, decision), chain = chain
        decisions[g.index[q]] = decision
    return cost, decisions


def _solve_all(
    groups: list[_Group], prices: _Prices, must_write: bool, limit: int | None = None
) -> list[tuple[int, dict[int, Decision]]]:
    """A batch of groups, solved in order: one task of `optimum`'s executor."""
    return [_solve(g, prices, must_write, limit) for g in groups]


def _batches(groups: list[_Group], count: int) -> list[list[_Group]]:
    """Groups in `count` batches of about equal requests (largest first onto the lightest
    batch), each batch in trace order; empty batches are left out."""
    loads = [0] * count
    batches: list[list[tuple[int, _Group]]] = [[] for _ in range(count)]
    order = sorted(range(len(groups)), key=lambda i: -len(groups[i].index))
    for i in order:
        lightest = loads.index(min(loads))
        loads[lightest] += len(groups[i].index)
        batches[lightest].append((i, groups[i]))
    return [[g for _, g in sorted(b, key=lambda m: m[0])] for b in batches if b]


def optimum(
    trace: Trace | PreparedTrace,
    *,
    model: str = DEFAULT_MODEL,
    must_write: bool = False,
    executor: Executor | None = None,
) -> Optimum:
    """The cheapest client schedule of `trace` (see the module docstring), replayed.
    `executor` (e.g. a `ProcessPoolExecutor`) solves the independent groups in parallel;
    the result is the same as without it."""
    prepared = PreparedTrace.of(trace)
    info = get_model(model)
    prices = _Prices(info.id)
    single = prepared.single()
    try:
        limit = _WARM_STATES if single.warm else None
        schedule, planned = _schedule(
            single, prices, info.min_cacheable_tokens, must_write, executor, limit
        )
    except _TooManyStates:
        single = prepare(Trace(single.trace.name, single.trace.requests), client_breakpoints=False)
        schedule, planned = _schedule(
            single, prices, info.min_cacheable_tokens, must_write, executor
        )
    name = "optimum_must_write" if must_write else "optimum"
    policy = Scheduled(name, schedule)
    result = replay(single, policy, model=info.id)
    replayed = _integer_cost(result, prices)
    if replayed != planned:
        raise RuntimeError(
            f"the optimum's planner and the cache rules disagree: {planned} vs {replayed}"
        )
    if single is not prepared:
        # The schedule as policies run: the client's marks, warm entries left out of the
        # plan, each request at its own model (planned at `model`'s prices) and time to
        # first token.
        result = replay(prepared, policy, model=info.id)
    return Optimum(schedule, result, planned, prices.scale, _caveats(prepared, single, info.id))


def _schedule(
    single: PreparedTrace,
    prices: _Prices,
    min_tokens: int,
    must_write: bool,
    executor: Executor | None,
    limit: int | None = None,
) -> tuple[tuple[Decision, ...], int]:
    """The program over every group of `single` (one breakpoint per request, its warm
    entries planned as `_with_warm_requests` says): a decision per request, and the cost."""
    planning, forced, origin = _with_warm_requests(single)
    plan = _plan(planning, min_tokens, forced)
    groups = [_group(plan, members) for members in _components(plan)]
    if executor is None:
        solved = _solve_all(groups, prices, must_write, limit)
    else:
        # A few batches per worker balance the load; each batch is pickled once.
        batches = _batches(groups, _BATCHES)
        futures = [executor.submit(_solve_all, b, prices, must_write, limit) for b in batches]
        solved = [result for future in futures for result in future.result()]
    decisions: list[Decision | None] = [None] * len(single.trace.requests)
    planned = 0
    for cost, chosen in solved:
        planned += cost
        for q, decision in chosen.items():
            index = origin[q]
            if index is not None:
                decisions[index] = decision
    assert all(d is not None for d in decisions)
    return tuple(d for d in decisions if d is not None), planned


def _caveats(prepared: PreparedTrace, single: PreparedTrace, model: str) -> tuple[str, ...]:
    """How the planning model differs from the way policies replay `prepared`; empty when
    the optimum is planned in that very model (then no schedule of the family costs less)."""
    found = []
    if prepared.marked:
        found.append("one breakpoint per request (not the client's others)")
    if prepared.warm and not single.warm:
        found.append(
            f"without the {len(prepared.warm):,} prefixes cached before the trace (with "
            f"them the program's states passed {_WARM_STATES:,})"
        )
    if any(priced_model(r.model, model)[0] != model for r in prepared.trace.requests):
        found.append(f"at {model}'s prices (each request replayed at its own model's)")
    if any(r.ttft for r in prepared.trace.requests):
        found.append("every write readable at once (no time to first token)")
    return tuple(found)


def _with_warm_requests(
    prepared: PreparedTrace,
) -> tuple[PreparedTrace, dict[int, TTL], list[int | None]]:
    """The planning trace: `prepared` (one breakpoint per request) with each warm entry as a
    request of its own just before the request it is warm for, in a session of its own: its
    prompt up to the entry's block, its TTL forced, its cost nothing (a replay puts it in
    the cache unbilled, through the same rules a request's write follows). Returns the
    trace, the warm requests' TTLs by index, and each index's request in `prepared` (None
    for a warm one)."""
    if not prepared.warm:
        return prepared, {}, list(range(len(prepared.trace.requests)))
    by_request: dict[int, list[tuple[int, TTL]]] = {}
    for entry in prepared.trace.warm:
        by_request.setdefault(entry.request, []).append((entry.block, entry.ttl))
    requests: list[TraceRequest] = []
    forced: dict[int, TTL] = {}
    origin: list[int | None] = []
    for i, request in enumerate(prepared.trace.requests):
        for block, ttl in by_request.get(i, ()):
            forced[len(requests)] = ttl
            origin.append(None)
            requests.append(
                TraceRequest(
                    f"warm {len(forced)} before request {i}",
                    request.at,
                    request.blocks[: block + 1],
                    request.block_tokens[: block + 1],
                    0,
                )
            )
        origin.append(i)
        requests.append(request)
    planning = prepare(Trace(prepared.trace.name, tuple(requests)), client_breakpoints=False)
    return planning, forced, origin


def _integer_cost(result: ReplayResult, prices: _Prices) -> int:
    t = result.tokens
    return (
        prices.input * t.input
        + prices.write["5m"] * t.cache_write_5m
        + prices.write["1h"] * t.cache_write_1h
        + prices.read * t.cache_read
        + prices.output * t.output
    )


def integer_cost(result: ReplayResult, model: str = DEFAULT_MODEL) -> int:
    """A replay's cost as the optimum's exact integer (tokens times scaled prices)."""
    return _integer_cost(result, _Prices(get_model(model).id))


def _block_cost(
    uses: Sequence[tuple[float, bool] | tuple[float, bool, bool]],
    prices: _Prices,
    hour: float,
    five: float,
) -> int:
    """Per-token cost of one block over its uses (time, cacheable[, warm]), in time order:
    states are "dead" and "alive until e"; a read or a ping leaves it alive for an hour. A
    warm use finds the block cached whatever came before (a prefix cached outside the
    trace, unbilled), so it can always be read."""
    dead = 0
    alive: dict[float, int] = {}  # expiry -> cost
    r, w5, w1, inp = prices.read, prices.write["5m"], prices.write["1h"], prices.input
    for at, cacheable, *warm in uses:
        if not cacheable:
            dead += inp
            alive = {e: c + inp for e, c in alive.items()}
            continue
        best_dead = dead
        best_read = min([dead, *alive.values()]) + r if warm and warm[0] else math.inf
        for expires, cost in alive.items():
            if expires >= at:
                best_read = min(best_read, cost + r)
            else:
                best_dead = min(best_dead, cost)  # let it expire
                bridge = math.ceil((at - expires) / hour)  # pings, each good for an hour
                best_read = min(best_read, cost + r * bridge + r)
        dead = best_dead + inp
        alive = {}
        for expires, cost in ((at + five, best_dead + w5), (at + hour, best_dead + w1)):
            alive[expires] = min(alive.get(expires, cost), cost)
        if best_read < math.inf:
            alive[at + hour] = min(alive[at + hour], int(best_read))
    return min([dead, *alive.values()])


def lower_bound_cost(
    trace: Trace | PreparedTrace,
    *,
    model: str = DEFAULT_MODEL,
    requests: Sequence[int] | None = None,
) -> int:
    """The per-block relaxation's cost as an exact integer (see the module docstring), over
    the trace's `requests` (indexes; default all). A block of a prefix cached before the
    trace (`Trace.warm`) is free to read at its request."""
    prepared = PreparedTrace.of(trace)
    info = get_model(model)
    prices = _Prices(info.id)
    hour, five = TTL_SECONDS["1h"], TTL_SECONDS["5m"]
    warm: dict[int, int] = {}  # request -> its last warm block
    for entry in prepared.trace.warm:
        warm[entry.request] = max(warm.get(entry.request, -1), entry.block)
    uses: dict[str, list[tuple[float, bool, bool]]] = {}
    weight: dict[str, int] = {}
    output = 0
    for i in range(len(prepared.hashes)) if requests is None else requests:
        request = prepared.trace.requests[i]
        cacheable = prepared.tokens[i] >= info.min_cacheable_tokens
        last_warm = warm.get(i, -1)
        for k, (h, n) in enumerate(zip(prepared.hashes[i], request.block_tokens, strict=True)):
            uses.setdefault(h, []).append((request.at, cacheable, k <= last_warm))
            weight[h] = n
        output += request.output_tokens
    # Blocks with the same uses share one program run.
    by_uses: dict[tuple[tuple[float, bool, bool], ...], int] = {}
    for h, u in uses.items():
        by_uses[tuple(u)] = by_uses.get(tuple(u), 0) + weight[h]
    total = prices.output * output
    for times, w in by_uses.items():
        total += w * _block_cost(times, prices, hour, five)
    return total


def lower_bound(trace: Trace | PreparedTrace, *, model: str = DEFAULT_MODEL) -> float:
    """The per-block relaxation in USD: no schedule of `trace` costs less. A trace whose
    requests name their models is bounded per model (caches are per model, so the requests
    of one model share no entry with another's) and the bounds summed, each at its model's
    prices (`priced_model`)."""
    prepared = PreparedTrace.of(trace)
    requests = prepared.trace.requests
    if all(r.model is None for r in requests):
        return _Prices(get_model(model).id).usd(lower_bound_cost(prepared, model=model))
    groups: dict[str, list[int]] = {}
    for i, request in enumerate(requests):
        groups.setdefault(priced_model(request.model, model)[0], []).append(i)
    return sum(
        _Prices(name).usd(lower_bound_cost(prepared, model=name, requests=group))
        for name, group in groups.items()
    )
