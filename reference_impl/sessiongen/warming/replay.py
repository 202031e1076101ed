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
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass, field
from typing import Any

from ..cache import (
    LOOKBACK_WINDOW,
    TTL,
    TTL_SECONDS,
    CacheStore,
    CacheUsage,
    CostBreakdown,
    cost_breakdown,
    get_model,
    token_counts,
)
from .policies import DEFAULT_MODEL, History, Policy
from .traces import Trace

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

    def single(self) -> PreparedTrace:
        """This trace with one breakpoint per request, on its last block, and nothing cached
        before it (itself when no request has more breakpoints and nothing is warm): the
        offline optimum's planning model."""
        if self.marked or self.warm:
            return prepare(self.trace, client_breakpoints=False)
        return self


def prepare(trace: Trace, *, client_breakpoints: bool = True) -> PreparedTrace:
    """Intern prefix hashes and link sessions; raises ValueError on a malformed trace.
    `client_breakpoints=False` marks every request on its last block only and leaves out
    the trace's warm entries."""
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
    for entry in trace.warm if client_breakpoints else ():
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

    @property
    def total_cost(self) -> float:
        return self.cost.total


# One call the client makes: (request index, TTL, start time, is a ping, known to be alive).
Call = tuple[int, TTL | None, float, bool, bool]


@dataclass
class _Counts:
    pings: int = 0
    cancelled: int = 0
    dropped: int = 0


def _client(
    prepared: PreparedTrace, policy: Policy, min_tokens: int, counts: _Counts
) -> Generator[Call, CacheUsage, None]:
    """The client side of a replay: yields each call in time order, receives its usage."""
    requests = prepared.trace.requests
    tokens_of = prepared.tokens
    previous_of = prepared.previous
    turn_of = prepared.turn
    extends = prepared.extends
    may_rewrite = policy.ping_may_rewrite
    policy.reset()
    latest: dict[str, int] = {}  # session -> its latest request; older ones' pings are void
    believed = [float("-inf")] * len(requests)  # when the client expects each entry to expire
    life = [0.0] * len(requests)  # the TTL the client knows each entry has
    ttl_of: list[TTL | None] = [None] * len(requests)
    offsets_of: list[tuple[float, ...]] = [()] * len(requests)
    # Only each request's next ping waits in the heap, so a cancelled series costs one pop.
    heap: list[tuple[float, int, int, int]] = []  # (time, sequence, request index, ping number)
    seq = 0

    def learn(i: int, when: float, usage: CacheUsage, ttl: TTL) -> None:
        if usage.cache_read_input_tokens == tokens_of[i]:
            life[i] = life[i] or TTL_SECONDS["5m"]  # read in full: someone's live entry
        elif usage.cache_creation_input_tokens:
            life[i] = TTL_SECONDS[ttl]  # written by this call
        else:
            return
        believed[i] = when + life[i]

    def pings_before(at: float) -> Generator[Call, CacheUsage, None]:
        nonlocal seq
        while heap and heap[0][0] < at:
            when, _, i, k = heapq.heappop(heap)
            offsets = offsets_of[i]
            if latest[requests[i].session] != i:
                counts.cancelled += len(offsets) - k  # this ping and every later one
                continue
            if k + 1 < len(offsets):
                heapq.heappush(heap, (requests[i].at + offsets[k + 1], seq, i, k + 1))
                seq += 1
            alive = believed[i] >= when
            if not alive and not may_rewrite:
                counts.dropped += 1
                continue
            ttl = ttl_of[i]
            assert ttl is not None
            usage = yield (i, ttl, when, True, alive)
            counts.pings += 1
            learn(i, when, usage, ttl)

    for i, request in enumerate(requests):
        at = request.at
        yield from pings_before(at)
        p = previous_of[i]
        latest[request.session] = i
        history = History(
            index=i,
            turn=turn_of[i],
            gap=at - requests[p].at if p >= 0 else None,
            previous_tokens=tokens_of[p] if p >= 0 else 0,
            readable_tokens=tokens_of[p] if p >= 0 and extends[i] and believed[p] >= at else 0,
            extends=extends[i],
        )
        policy.observe(request, history)
        decision = policy.decide(request, history)
        ttl = decision.ttl
        ttl_of[i] = ttl
        usage = yield (i, ttl, at, False, False)
        if ttl is not None and tokens_of[i] >= min_tokens:
            learn(i, at, usage, ttl)
            if decision.ping_offsets:
                offsets_of[i] = decision.ping_offsets
                heapq.heappush(heap, (at + decision.ping_offsets[0], seq, i, 0))
                seq += 1
    yield from pings_before(float("inf"))


class _Ledger:
    """Sums the usage of requests and pings as a replay goes."""

    def __init__(self, keep: bool) -> None:
        self.requests = [0, 0, 0, 0, 0]  # input, 5m write, 1h write, read, output
        self.pings = [0, 0, 0, 0, 0]
        self.keep = keep
        self.usages: list[tuple[CacheUsage, int]] = []
        self.ping_usages: list[tuple[float, int, CacheUsage]] = []

    def add(self, call: Call, usage: CacheUsage, output: int) -> None:
        i, _, when, ping, _ = call
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
            cost=tokens.cost(model),
            ping_cost=ping_tokens.cost(model).total,
            usages=tuple(self.usages) if self.keep else None,
            ping_usages=tuple(self.ping_usages) if self.keep else None,
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
    prepared = trace if isinstance(trace, PreparedTrace) else prepare(trace)
    info = get_model(model)
    model_id, min_tokens = info.id, info.min_cacheable_tokens
    apply = CacheStore(linger=linger).apply
    blocks, whole = prepared.blocks, prepared.whole
    outputs = [r.output_tokens for r in prepared.trace.requests]
    counts = _Counts()
    ledger = _Ledger(keep_usage)
    add = ledger.add
    client = _client(prepared, policy, min_tokens, counts)
    call = next(client, None)
    warm = prepared.warm
    while call is not None:
        i, ttl, when, ping, alive = call
        if not ping and i in warm:  # cached before the trace: in the store, never billed
            for entry in warm[i]:
                apply(entry, model=model_id, now=when, min_tokens=min_tokens)
        if ttl is None or (fast_path and alive):
            flat = whole[ttl][i]
        else:
            flat = blocks[ttl][i]
        usage = apply(flat, model=model_id, now=when, min_tokens=min_tokens).usage
        add(call, usage, 0 if ping else outputs[i])
        try:
            call = client.send(usage)
        except StopIteration:
            call = None
    return ledger.result(prepared, policy, model_id, counts)


def block_text(block: int, tokens: int) -> str:
    """A text of exactly `tokens` tokens (4 ASCII bytes each) that only block id `block`
    produces: the shared token counter makes it `tokens` tokens, and its hash its id."""
    tag = f"{block:x}|"
    if len(tag) > 4 * tokens:
        raise ValueError(f"block {block} of {tokens} tokens is too short to carry its id")
    return tag + "." * (4 * tokens - len(tag))


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
) -> ReplayResult:
    """The same replay as `replay`, sent as Messages requests through `client` (an
    `anthropic.AsyncAnthropic`). `set_clock(t)` moves the server's clock to each call's start
    (the emulator's virtual clock); `script_output(n)` makes the next request answer with `n`
    output tokens. Pings go with `max_tokens: 0`. Usage is kept."""
    prepared = trace if isinstance(trace, PreparedTrace) else prepare(trace)
    info = get_model(model)
    counts = _Counts()
    ledger = _Ledger(True)
    driver = _client(prepared, policy, info.min_cacheable_tokens, counts)
    call = next(driver, None)
    while call is not None:
        i, ttl, when, ping, _ = call
        output = 0 if ping else prepared.trace.requests[i].output_tokens
        await set_clock(when)
        for entry in prepared.trace.warm if not ping else ():
            if entry.request == i:  # cached before the trace: sent, never billed
                await script_output(1)
                await client.messages.create(
                    **_warm_params(prepared, i, entry.block, entry.ttl, model)
                )
        if not ping:
            await script_output(output)
        # A request keeps at least one output token of room; its scripted count is exact.
        params = messages_params(prepared, i, ttl, 0 if ping else max(output, 1), model)
        message = await client.messages.create(**params)
        n = token_counts(message.usage)
        usage = CacheUsage(n["input"], n["cache_read"], n["cache_write_5m"], n["cache_write_1h"])
        ledger.add(call, usage, n["output"])
        try:
            call = driver.send(usage)
        except StopIteration:
            call = None
    return ledger.result(prepared, policy, info.id, counts)
