"""Replay a `Trace` under a warming policy through the one cache model.

Every request and every ping goes through `CacheStore.apply` (the rules live only in
`sessiongen.cache`); this module turns trace requests into flattened blocks, keeps the
client's bookkeeping, schedules pings and adds up usage and cost.

The client model: each request carries the breakpoints its client places
(`TraceRequest.marks`: the trace's `breakpoints` plus always the prompt's last block; only
the last block when the trace gives none), all with the TTL its policy chooses (or none:
nothing read or written). Claude Code, for example, marks its tools and system prompt as
well as the tail, so a session's first request can read the prefix another session wrote. After a request the policy may
schedule keep-alive pings: a ping resends the same blocks with `max_tokens: 0`, so it reads
what is alive and refreshes it, or writes it again if it has expired. A ping is cancelled
when the session's next request arrives at or before its time. A ping the policy does not let
rewrite is dropped when the client's bookkeeping says the entry has expired; the bookkeeping
uses only what a client sees, the usage of its own requests: a write is good for exactly its
TTL, a full read of an entry someone else wrote for the shorter TTL. Costs come from
`cache.pricing` applied to the summed token counts, which equals the sum of per-request costs.

One schedule, two transports: `_client` is the client (policy calls, bookkeeping, pings) as a
generator that yields each call it wants to make and receives that call's usage. `replay`
answers it with `CacheStore.apply` in memory; `replay_through_client` sends the same calls as
Messages requests through an Anthropic SDK client (the emulator, or anything speaking the API).

Block ids become prefix hashes by interning: position j's hash is a short id for the pair
(hash of position j-1, block id j), so two prompts share a hash exactly where they share the
whole prefix. `prepare` does this once per trace and replays reuse it.

Fast path: a ping the bookkeeping knows to be alive is applied as one block (the prompt's
last hash carrying all its tokens). The breakpoint's lookback checks its own position first,
so the full prompt would match there too: the same entry is refreshed and the usage (a read
of the whole prompt) is the same. Only a request whose one breakpoint is its last block takes
it: with more breakpoints, the full prompt also refreshes their entries. A request without a
breakpoint is likewise one block with no breakpoint: nothing is read or written either way.
"""

from __future__ import annotations

import heapq
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ...cache import (
    LOOKBACK_WINDOW,
    TTL,
    TTL_SECONDS,
    CacheStore,
    CacheUsage,
    CostBreakdown,
    cost_breakdown,
    get_model,
    is_known_model,
    list_models,
    token_counts,
)
from ...cache.store import CompiledBlocks, compile_blocks
from ...catalog import nearest_models
from ...tokens import text_of_tokens
from ..traces import Trace
from .decision import DEFAULT_MODEL, Decision, Fixed, History, Policy

FlatBlocks = tuple[tuple[str, int, TTL | None], ...]
_TTLS: tuple[TTL, ...] = ("5m", "1h")


@dataclass(frozen=True)
class PreparedTrace:
    """A trace with its prefix hashes and session links computed once, for fast replays.

    `blocks[ttl][i]`: request i's flattened blocks, a breakpoint of that TTL on each of its
    marks (`TraceRequest.marks`). `whole`: the same as one block per TTL (or None), the fast
    path's input, for a request marked on its last block only (else its full blocks).
    `previous[i]`: the index of the same session's previous request (-1 for a first one);
    `extends[i]`: whether that request's whole prompt is a prefix of request i's within the
    lookback window, so request i's last breakpoint can read its entry. `marked`: whether any
    request carries a breakpoint before its last block; `single()` is then the same trace
    marked on the last block only, the client model the offline optimum plans in.
    """

    trace: Trace
    hashes: tuple[tuple[str, ...], ...]
    blocks: dict[TTL, tuple[FlatBlocks, ...]]
    whole: dict[TTL | None, tuple[FlatBlocks, ...]]
    tokens: tuple[int, ...]
    previous: tuple[int, ...]
    turn: tuple[int, ...]
    extends: tuple[bool, ...]
    marked: bool = False
    warm: dict[int, tuple[FlatBlocks, ...]] = field(default_factory=dict)
    """Request index -> the prefixes the record shows cached before the trace began
    (`Trace.warm`), each as flattened blocks ending at its breakpoint; a replay puts them in
    the cache, unbilled, just before that request."""
    origin: tuple[int, ...] | None = None
    """For a part of a trace (`warming.study.shards`): each request's index in the whole trace,
    what `History.index` tells a policy, so an offline policy built on the whole trace reads
    its own rows. None: the indices are this trace's own."""
    _compiled: dict[tuple[TTL | None, bool], tuple[CompiledBlocks, ...]] = field(
        default_factory=dict, compare=False, repr=False
    )

    def compiled(self, ttl: TTL | None, fast: bool) -> tuple[CompiledBlocks, ...]:
        """`whole[ttl]` (`fast`, or no TTL) or `blocks[ttl]` checked once for the cache
        store (`compile_blocks`), per request; built on first use and kept, since every
        policy replayed on this trace sends the same prompts."""
        found = self._compiled.get((ttl, fast))
        if found is None:
            source = self.whole[ttl] if fast or ttl is None else self.blocks[ttl]
            found = self._compiled[(ttl, fast)] = tuple(map(compile_blocks, source))
        return found

    def single(self) -> PreparedTrace:
        """This trace with one breakpoint per request, on its last block, the same warm
        entries, every request at the replay's one model and readable as soon as written
        (itself when no request has more breakpoints, a model or a time to first token):
        the offline optimum's planning model."""
        if self.marked or self.named:
            plain = tuple(replace(r, model=None, ttft=0.0) for r in self.trace.requests)
            trace = Trace(self.trace.name, plain, self.trace.warm)
            return prepare(trace, client_breakpoints=False)
        return self

    @property
    def named(self) -> bool:
        """Whether any request names its model or a time to first token."""
        return any(r.model is not None or r.ttft for r in self.trace.requests)

    @classmethod
    def of(cls, trace: Trace | PreparedTrace) -> PreparedTrace:
        """`trace` prepared (`prepare`), or itself when it already is: what every function
        that takes either replays."""
        return trace if isinstance(trace, PreparedTrace) else prepare(trace)


def prepare(trace: Trace, *, client_breakpoints: bool = True) -> PreparedTrace:
    """Intern prefix hashes and link sessions; raises ValueError on a malformed trace.
    `client_breakpoints=False` marks every request on its last block only."""
    ids: dict[tuple[str, int], str] = {}
    hashes: list[tuple[str, ...]] = []
    blocks: dict[TTL, list[FlatBlocks]] = {ttl: [] for ttl in _TTLS}
    whole: dict[TTL | None, list[FlatBlocks]] = {None: [], "5m": [], "1h": []}
    tokens: list[int] = []
    previous: list[int] = []
    turn: list[int] = []
    extends: list[bool] = []
    marked = False
    last: dict[str, int] = {}
    turns: dict[str, int] = {}
    at = float("-inf")
    for i, request in enumerate(trace.requests):
        if request.at < at:
            raise ValueError(f"request {i} is earlier than the one before it")
        at = request.at
        if not request.blocks or len(request.blocks) != len(request.block_tokens):
            raise ValueError(f"request {i} needs at least one block and one count per block")
        h = ""
        chain: list[str] = []
        for block in request.blocks:
            key = (h, block)
            found = ids.get(key)
            if found is None:
                found = ids[key] = str(len(ids))
            h = found
            chain.append(h)
        hashes.append(tuple(chain))
        total = request.input_tokens
        early = request.marks[:-1] if client_breakpoints else ()
        marked = marked or bool(early)
        for ttl in _TTLS:
            flat: list[tuple[str, int, TTL | None]] = [
                (c, n, None) for c, n in zip(chain, request.block_tokens, strict=True)
            ]
            for k in (*early, len(chain) - 1):
                flat[k] = (chain[k], request.block_tokens[k], ttl)
            blocks[ttl].append(tuple(flat))
            whole[ttl].append(blocks[ttl][-1] if early else ((h, total, ttl),))
        whole[None].append(((h, total, None),))
        tokens.append(total)
        p = last.get(request.session, -1)
        previous.append(p)
        turn.append(turns.get(request.session, 0))
        turns[request.session] = turn[-1] + 1
        last[request.session] = i
        ok = False
        if p >= 0:
            j = len(hashes[p]) - 1  # the previous prompt's last position
            ok = (
                j < len(chain) and chain[j] == hashes[p][j] and len(chain) - 1 - j < LOOKBACK_WINDOW
            )
        extends.append(ok)
    warm: dict[int, list[FlatBlocks]] = {}
    for entry in trace.warm:
        positions = hashes[entry.request]
        counts = trace.requests[entry.request].block_tokens
        head: FlatBlocks = tuple(
            (c, n, None) for c, n in zip(positions[: entry.block], counts, strict=False)
        )
        warm.setdefault(entry.request, []).append(
            (*head, (positions[entry.block], counts[entry.block], entry.ttl))
        )
    return PreparedTrace(
        trace=trace,
        hashes=tuple(hashes),
        blocks={k: tuple(v) for k, v in blocks.items()},
        whole={k: tuple(v) for k, v in whole.items()},
        tokens=tuple(tokens),
        previous=tuple(previous),
        turn=tuple(turn),
        extends=tuple(extends),
        marked=marked,
        warm={i: tuple(v) for i, v in warm.items()},
    )


@dataclass(frozen=True)
class TokenTotals:
    """Billed tokens by kind, summed."""

    input: int = 0
    cache_write_5m: int = 0
    cache_write_1h: int = 0
    cache_read: int = 0
    output: int = 0

    def __add__(self, other: TokenTotals) -> TokenTotals:
        return TokenTotals(
            self.input + other.input,
            self.cache_write_5m + other.cache_write_5m,
            self.cache_write_1h + other.cache_write_1h,
            self.cache_read + other.cache_read,
            self.output + other.output,
        )

    def cost(self, model: str) -> CostBreakdown:
        usage = CacheUsage(self.input, self.cache_read, self.cache_write_5m, self.cache_write_1h)
        return cost_breakdown(usage.to_api(self.output), model)


@dataclass(frozen=True)
class ReplayResult:
    """One policy's replay of one trace: totals, the cost split, and ping counts.

    `tokens` and `cost` cover requests and pings; `ping_tokens` and `ping_cost` are the
    pings' share. `usages` (request usage and output tokens, in trace order) and
    `ping_usages` ((time, request index, usage)) are kept only when asked for.
    """

    policy: str
    trace: str
    model: str
    requests: int
    pings: int
    pings_cancelled: int
    pings_dropped: int
    tokens: TokenTotals
    ping_tokens: TokenTotals
    cost: CostBreakdown
    ping_cost: float
    usages: tuple[tuple[CacheUsage, int], ...] | None = None
    ping_usages: tuple[tuple[float, int, CacheUsage], ...] | None = None
    by_model: tuple[tuple[str, TokenTotals, TokenTotals], ...] = ()
    """Where requests name their models (`TraceRequest.model`): per priced model, its
    tokens (requests and pings) and its pings' tokens; `cost` is the sum of each priced at
    its own model. Empty: everything at `model`."""
    stand_ins: tuple[str, ...] = ()
    """Models the trace names that the catalog does not know, priced at `model` instead."""

    @property
    def total_cost(self) -> float:
        return self.cost.total


def priced_model(logged: str | None, default: str) -> tuple[str, bool]:
    """The catalog id a request naming `logged` is cached and priced at, and whether that is
    a stand-in: `logged` itself (or the catalog's id for an alias; a `provider/model` name
    by its model), else `default` (the replay's model), the documented stand-in for a model
    the catalog does not know."""
    if not logged:
        return get_model(default).id, False
    for name in (logged, logged.rsplit("/", 1)[-1]):
        if is_known_model(name):
            return get_model(name).id, False
    return get_model(default).id, True


def price_by_model(totals: Mapping[str, TokenTotals]) -> CostBreakdown:
    """The cost of tokens counted per model, each priced at its own model."""
    parts = [tokens.cost(model) for model, tokens in totals.items()]
    return CostBreakdown(*(sum(column) for column in zip(*map(_fields, parts), strict=True)))


def _fields(cost: CostBreakdown) -> tuple[float, float, float, float, float]:
    return (cost.input, cost.cache_write_5m, cost.cache_write_1h, cost.cache_read, cost.output)


# One call the client makes: (request index, TTL, start time, is a ping, known to be alive).
Call = tuple[int, TTL | None, float, bool, bool]


@dataclass
class _Counts:
    pings: int = 0
    cancelled: int = 0
    dropped: int = 0


class _Schedule:
    """The client side of a replay: policy calls, bookkeeping, pings. Both transports drive
    it the same way, in time order: before request i, while `heap[0][0] < at(i)`, `ping`
    pops the next due ping (None: cancelled or dropped) and `ping_done` takes its usage;
    then `request(i)` gives the request's call and `request_done` takes its usage; after
    the last request, the remaining pings (`at` = inf). Plain methods rather than a
    generator, so the in-memory replay pays no generator round-trip per call."""

    def __init__(
        self,
        prepared: PreparedTrace,
        policy: Policy,
        min_tokens: int,
        counts: _Counts,
        models: _Models | None = None,
    ) -> None:
        n = len(prepared.trace.requests)
        self.requests = prepared.trace.requests
        self.at = [r.at for r in self.requests]
        self.sessions = [r.session for r in self.requests]
        self.tokens = prepared.tokens
        self.previous = prepared.previous
        self.turn = prepared.turn
        self.extends = prepared.extends
        self.index = prepared.origin or range(n)  # what History.index says
        self.policy = policy
        self.may_rewrite = policy.ping_may_rewrite
        self.min_tokens = min_tokens
        self.mins = models.mins if models is not None and not models.single else None
        self.counts = counts
        policy.reset()
        # A Fixed policy's observe does nothing and its decide is one answer: the replay
        # then builds no History (about a third of a bare request's time).
        self.fixed = (
            policy.decide(self.requests[0], History(0, 0, None, 0, 0))
            if (type(policy) is Fixed and n)
            else None
        )
        self.latest: dict[str, int] = {}  # session -> its latest request; older pings are void
        self.believed = [float("-inf")] * n  # when the client expects each entry to expire
        self.life = [0.0] * n  # the TTL the client knows each entry has
        self.ttl_of: list[TTL | None] = [None] * n
        self.offsets_of: list[tuple[float, ...]] = [()] * n
        # Only each request's next ping waits in the heap, so a cancelled series costs one
        # pop; a policy that never pings never touches it.
        self.heap: list[tuple[float, int, int, int]] = []  # (time, sequence, request, ping k)
        self.seq = 0

    def _learn(self, i: int, when: float, usage: CacheUsage, ttl: TTL) -> None:
        if usage.cache_read_input_tokens == self.tokens[i]:
            life = self.life[i] = self.life[i] or TTL_SECONDS["5m"]  # read in full: live
        elif usage.ephemeral_5m_input_tokens or usage.ephemeral_1h_input_tokens:
            life = self.life[i] = TTL_SECONDS[ttl]  # written by this call
        else:
            return
        self.believed[i] = when + life

    def ping(self) -> Call | None:
        """Pop the earliest ping: its call, or None if it was cancelled or dropped."""
        when, _, i, k = heapq.heappop(self.heap)
        offsets = self.offsets_of[i]
        if self.latest[self.sessions[i]] != i:
            self.counts.cancelled += len(offsets) - k  # this ping and every later one
            return None
        if k + 1 < len(offsets):
            heapq.heappush(self.heap, (self.at[i] + offsets[k + 1], self.seq, i, k + 1))
            self.seq += 1
        alive = self.believed[i] >= when
        if not alive and not self.may_rewrite:
            self.counts.dropped += 1
            return None
        return (i, self.ttl_of[i], when, True, alive)

    def ping_done(self, call: Call, usage: CacheUsage) -> None:
        i, ttl, when, _, _ = call
        assert ttl is not None
        self.counts.pings += 1
        self._learn(i, when, usage, ttl)

    def request(self, i: int) -> tuple[Call, Decision]:
        """Request i's call (after every ping due before it) and the policy's decision."""
        at = self.at[i]
        self.latest[self.sessions[i]] = i
        decision = self.fixed
        if decision is None:
            p = self.previous[i]
            tokens = self.tokens
            history = History(
                index=self.index[i],
                turn=self.turn[i],
                gap=at - self.at[p] if p >= 0 else None,
                previous_tokens=tokens[p] if p >= 0 else 0,
                readable_tokens=(
                    tokens[p] if p >= 0 and self.extends[i] and self.believed[p] >= at else 0
                ),
                extends=self.extends[i],
            )
            request = self.requests[i]
            self.policy.observe(request, history)
            decision = self.policy.decide(request, history)
        self.ttl_of[i] = decision.ttl
        return (i, decision.ttl, at, False, False), decision

    def request_done(self, i: int, decision: Decision, usage: CacheUsage) -> None:
        ttl = decision.ttl
        least = self.min_tokens if self.mins is None else self.mins[i]
        if ttl is not None and self.tokens[i] >= least:
            at = self.at[i]
            self._learn(i, at, usage, ttl)
            if decision.ping_offsets:
                self.offsets_of[i] = decision.ping_offsets
                heapq.heappush(self.heap, (at + decision.ping_offsets[0], self.seq, i, 0))
                self.seq += 1


class _Models:
    """Each request's model, cache namespace and minimum, where the trace names models."""

    def __init__(self, prepared: PreparedTrace, model: str) -> None:
        info = get_model(model)
        self.default = info.id
        self.min_tokens = info.min_cacheable_tokens
        named = {r.model for r in prepared.trace.requests}
        self.single = named <= {None}
        ids: dict[str | None, str] = {}
        stand_ins: list[str] = []
        for name in named:
            ids[name], stand_in = priced_model(name, model)
            if stand_in and name:
                stand_ins.append(name)
        self.stand_ins = tuple(sorted(stand_ins))
        self.of = [ids[r.model] for r in prepared.trace.requests]
        self.mins = [get_model(m).min_cacheable_tokens for m in self.of]
        self.ttft = [r.ttft for r in prepared.trace.requests]


class _Ledger:
    """Sums the usage of requests and pings as a replay goes (per model where the trace
    names models)."""

    def __init__(self, keep: bool, models: _Models | None = None) -> None:
        self.requests = [0, 0, 0, 0, 0]  # input, 5m write, 1h write, read, output
        self.pings = [0, 0, 0, 0, 0]
        self.keep = keep
        self.usages: list[tuple[CacheUsage, int]] = []
        self.ping_usages: list[tuple[float, int, CacheUsage]] = []
        self.models = models if models is not None and not models.single else None
        self.split: dict[tuple[str, bool], list[int]] = {}

    def add(self, call: Call, usage: CacheUsage, output: int) -> None:
        i, _, when, ping, _ = call
        if self.models is not None:
            key = (self.models.of[i], ping)
            split = self.split.get(key)
            if split is None:
                split = self.split[key] = [0, 0, 0, 0, 0]
            split[0] += usage.input_tokens
            split[1] += usage.ephemeral_5m_input_tokens
            split[2] += usage.ephemeral_1h_input_tokens
            split[3] += usage.cache_read_input_tokens
            split[4] += output
        sums = self.pings if ping else self.requests
        sums[0] += usage.input_tokens
        sums[1] += usage.ephemeral_5m_input_tokens
        sums[2] += usage.ephemeral_1h_input_tokens
        sums[3] += usage.cache_read_input_tokens
        sums[4] += output
        if self.keep:
            if ping:
                self.ping_usages.append((when, i, usage))
            else:
                self.usages.append((usage, output))

    def result(
        self, prepared: PreparedTrace, policy: Policy, model: str, counts: _Counts
    ) -> ReplayResult:
        ping_tokens = TokenTotals(*self.pings)
        tokens = TokenTotals(*(a + b for a, b in zip(self.requests, self.pings, strict=True)))
        cost, ping_cost = tokens.cost(model), ping_tokens.cost(model).total
        by_model: tuple[tuple[str, TokenTotals, TokenTotals], ...] = ()
        stand_ins: tuple[str, ...] = ()
        if self.models is not None:
            stand_ins = self.models.stand_ins
            names = sorted({name for name, _ in self.split})
            zero = [0, 0, 0, 0, 0]
            rows = []
            for name in names:
                asked = self.split.get((name, False), zero)
                pinged = self.split.get((name, True), zero)
                both = TokenTotals(*(a + b for a, b in zip(asked, pinged, strict=True)))
                rows.append((name, both, TokenTotals(*pinged)))
            by_model = tuple(rows)
            cost = price_by_model({name: both for name, both, _ in by_model})
            ping_cost = price_by_model({name: pings for name, _, pings in by_model}).total
        return ReplayResult(
            policy=policy.name,
            trace=prepared.trace.name,
            model=model,
            requests=len(prepared.trace.requests),
            pings=counts.pings,
            pings_cancelled=counts.cancelled,
            pings_dropped=counts.dropped,
            tokens=tokens,
            ping_tokens=ping_tokens,
            cost=cost,
            ping_cost=ping_cost,
            usages=tuple(self.usages) if self.keep else None,
            ping_usages=tuple(self.ping_usages) if self.keep else None,
            by_model=by_model,
            stand_ins=stand_ins,
        )


def replay(
    trace: Trace | PreparedTrace,
    policy: Policy,
    *,
    model: str = DEFAULT_MODEL,
    keep_usage: bool = False,
    fast_path: bool = True,
    linger: float = 0.0,
) -> ReplayResult:
    """Replay `trace` under `policy` (reset first) on a fresh in-memory cache store whose
    entries live their TTL plus `linger` seconds (`CacheStore`); the client's bookkeeping
    still counts on exactly the TTL."""
    prepared = PreparedTrace.of(trace)
    models = _Models(prepared, model)
    model_id, min_tokens = models.default, models.min_tokens
    store = CacheStore(linger=linger)
    usage_of = store.usage
    apply = store.apply
    compiled = prepared.compiled
    outputs = [r.output_tokens for r in prepared.trace.requests]
    counts = _Counts()
    ledger = _Ledger(keep_usage, models)
    add = ledger.add
    schedule = _Schedule(prepared, policy, min_tokens, counts, models)
    heap, ping, ping_done = schedule.heap, schedule.ping, schedule.ping_done
    request, request_done, at_of = schedule.request, schedule.request_done, schedule.at
    warm = prepared.warm
    single = models.single and not any(models.ttft)
    model_of, mins, ttfts = models.of, models.mins, models.ttft

    def send(call: Call) -> CacheUsage:
        i, ttl, when, ping, alive = call
        # A request without a breakpoint, or a ping known to be alive, takes the fast path.
        flat = compiled(ttl, ttl is None or (fast_path and alive))[i]
        if single:
            return usage_of(flat, model=model_id, now=when, min_tokens=min_tokens)
        # Each request at its own model; what it writes is readable once its response began.
        return usage_of(
            flat, model=model_of[i], now=when, min_tokens=mins[i], ttft=0.0 if ping else ttfts[i]
        )

    for i in range(len(at_of)):
        at = at_of[i]
        while heap and heap[0][0] < at:
            call = ping()
            if call is not None:
                usage = send(call)
                add(call, usage, 0)
                ping_done(call, usage)
        call, decision = request(i)
        if i in warm:  # cached outside the log: in the store, never billed
            for entry in warm[i]:
                apply(entry, model=model_of[i], now=at, min_tokens=mins[i])
        usage = send(call)
        add(call, usage, outputs[i])
        request_done(i, decision, usage)
    while heap:
        call = ping()
        if call is not None:
            usage = send(call)
            add(call, usage, 0)
            ping_done(call, usage)
    return ledger.result(prepared, policy, model_id, counts)


def block_text(block: int, tokens: int) -> str:
    """A text of exactly `tokens` tokens that only block id `block` produces: the shared
    token counter makes it `tokens` tokens (`tokens.text_of_tokens`), and its hash its id."""
    try:
        return text_of_tokens(tokens, f"{block:x}")
    except ValueError:
        raise ValueError(f"block {block} of {tokens} tokens is too short to carry its id") from None


def messages_params(
    prepared: PreparedTrace, index: int, ttl: TTL | None, max_tokens: int, model: str
) -> dict[str, Any]:
    """The Messages request of trace request `index`: one user message, one text block per
    trace block, a breakpoint (if any TTL) on each block the replay marks (the same blocks as
    `prepared.blocks`)."""
    request = prepared.trace.requests[index]
    content: list[dict[str, Any]] = [
        {"type": "text", "text": block_text(b, n)}
        for b, n in zip(request.blocks, request.block_tokens, strict=True)
    ]
    if ttl is not None:
        for k, (_, _, mark) in enumerate(prepared.blocks[ttl][index]):
            if mark is not None:
                content[k]["cache_control"] = {"type": "ephemeral", "ttl": ttl}
    return {
        "model": model,
        "max_tokens": max_tokens,
        "messages": [{"role": "user", "content": content}],
    }


def _served(model: str) -> str:
    """The model a request of `model` is sent as: itself, or for a retired model (which the
    API, and the emulator, refuse) the nearest one served with the same cache minimum."""
    info = get_model(model)
    if info.retired is None:
        return info.id
    same = [
        name
        for name in nearest_models(info.id, info.provider, count=len(list_models()))
        if get_model(name).min_cacheable_tokens == info.min_cacheable_tokens
    ]
    return same[0] if same else info.id


def _warm_params(
    prepared: PreparedTrace, index: int, block: int, ttl: TTL, model: str
) -> dict[str, Any]:
    """The Messages request that caches trace request `index`'s prompt up to `block` (a warm
    entry), one output token."""
    request = prepared.trace.requests[index]
    content: list[dict[str, Any]] = [
        {"type": "text", "text": block_text(b, n)}
        for b, n in zip(request.blocks[: block + 1], request.block_tokens, strict=False)
    ]
    content[-1]["cache_control"] = {"type": "ephemeral", "ttl": ttl}
    return {"model": model, "max_tokens": 1, "messages": [{"role": "user", "content": content}]}


async def replay_through_client(
    trace: Trace | PreparedTrace,
    policy: Policy,
    client: Any,
    *,
    set_clock: Callable[[float], Awaitable[None]],
    script_output: Callable[[int], Awaitable[None]],
    model: str = DEFAULT_MODEL,
    set_ttft: Callable[[float], Awaitable[None]] | None = None,
) -> ReplayResult:
    """The same replay as `replay`, sent as Messages requests through `client` (an
    `anthropic.AsyncAnthropic`). `set_clock(t)` moves the server's clock to each call's start
    (the emulator's virtual clock); `script_output(n)` makes the next request answer with `n`
    output tokens; `set_ttft(s)`, where given, sets the server's time to first token before
    each call (each request's `ttft`, 0 for pings and warm entries). Each request names its
    own model (`priced_model`). Pings go with `max_tokens: 0`. Usage is kept."""
    prepared = PreparedTrace.of(trace)
    models = _Models(prepared, model)
    counts = _Counts()
    ledger = _Ledger(True, models)
    schedule = _Schedule(prepared, policy, models.min_tokens, counts, models)

    async def send(call: Call) -> CacheUsage:
        i, ttl, when, ping, _ = call
        output = 0 if ping else prepared.trace.requests[i].output_tokens
        name = _served(models.of[i])
        await set_clock(when)
        if set_ttft is not None:
            await set_ttft(0.0)
        for entry in prepared.trace.warm if not ping else ():
            if entry.request == i:  # cached outside the log: sent, never billed
                await script_output(1)
                await client.messages.create(
                    **_warm_params(prepared, i, entry.block, entry.ttl, name)
                )
        if not ping:
            await script_output(output)
            if set_ttft is not None:
                await set_ttft(models.ttft[i])
        # A request keeps at least one output token of room; its scripted count is exact.
        params = messages_params(prepared, i, ttl, 0 if ping else max(output, 1), name)
        message = await client.messages.create(**params)
        n = token_counts(message.usage)
        usage = CacheUsage(n["input"], n["cache_read"], n["cache_write_5m"], n["cache_write_1h"])
        ledger.add(call, usage, n["output"])
        return usage

    async def pings_before(at: float) -> None:
        while schedule.heap and schedule.heap[0][0] < at:
            call = schedule.ping()
            if call is not None:
                schedule.ping_done(call, await send(call))

    for i, at in enumerate(schedule.at):
        await pings_before(at)
        call, decision = schedule.request(i)
        schedule.request_done(i, decision, await send(call))
    await pings_before(float("inf"))
    return ledger.result(prepared, policy, models.default, counts)
