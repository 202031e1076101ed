"""The cache store, the second half of the prompt-cache model: Anthropic's cache rules
(breakpoints, 20-block lookback, TTLs, minimum length, three-point billing, availability)
applied to flattened requests (`prefix.py`) on a caller-supplied virtual clock.

This module and `prefix.py` are the one implementation of those rules. The emulator calls
`CacheStore.process` for every `/v1/messages` request; a trace simulator can drive the
lower-level `CacheStore.apply` with synthetic blocks. It does no I/O and never reads the
wall clock.

Two more ways in, on the same entries, heap and clock:

* `apply_implicit`: implicit prefix caching (OpenAI, Gemini). The provider places
  breakpoints every `ImplicitRule.interval` tokens from the start of the flattened prompt;
  a request reads up to the last one it shares with a live entry, whatever the earlier
  request's last message was, and writes every one it reaches;
* `pin` / `lookup` / `set_expiry` / `remove`: an entry with a fixed expiry that reads do not
  move (Gemini's explicit `cachedContents`, which live until their `expireTime`).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from heapq import heappop, heappush
from itertools import accumulate, compress, count
from operator import itemgetter
from typing import Any

from ..catalog import get_model
from ..llm.types import total_input_tokens
from .prefix import TTL, PreparedRequest, check_breakpoints

TTL_SECONDS: Mapping[str, float] = {"5m": 300.0, "1h": 3600.0}
LOOKBACK_WINDOW = 20

_HASH, _TOKENS, _MARK = itemgetter(0), itemgetter(1), itemgetter(2)


@dataclass(slots=True)  # slots: a replay creates and reads entries by the million
class CacheEntry:
    """One cache entry: the prefix ending at a breakpoint of an earlier request.

    Lifetimes run from the start of the request that writes or reads the entry (docs, added
    2026-08-06). `available_at` is when the writing request's response began: the docs say an
    entry "only becomes available after the first response begins".
    """

    model: str
    prefix_hash: str
    tokens: int
    ttl: str
    """A breakpoint's TTL ("5m" / "1h"), or the label of an implicit rule or a pinned entry."""
    written_at: float
    available_at: float
    expires_at: float
    last_used_at: float
    hits: int = 0
    life: float | None = None
    """Seconds a read or rewrite keeps the entry alive (implicit entries); None: the store's
    lifetime for `ttl`."""
    max_expires_at: float | None = None
    """No read or rewrite keeps the entry past this (an implicit rule's `max_age`)."""
    stored_for: str | None = None
    """The catalogued model whose storage price (`cache_storage_per_mtok_hour`) the entry
    accrues while it lives (Gemini's explicit caches); None: storage is not billed."""

    def alive(self, now: float) -> bool:
        # Inclusive: the docs call 5m / 1h a *minimum* lifetime.
        return now <= self.expires_at

    def usable(self, now: float) -> bool:
        return self.available_at <= now and self.alive(now)


@dataclass(frozen=True)
class CacheUsage:
    """The cache-relevant part of the API's `usage`.

    Total input = `cache_read_input_tokens + cache_creation_input_tokens + input_tokens`.
    """

    input_tokens: int
    cache_read_input_tokens: int
    ephemeral_5m_input_tokens: int
    ephemeral_1h_input_tokens: int

    @property
    def cache_creation_input_tokens(self) -> int:
        return self.ephemeral_5m_input_tokens + self.ephemeral_1h_input_tokens

    @property
    def total_input_tokens(self) -> int:
        return total_input_tokens(
            self.input_tokens, self.cache_read_input_tokens, self.cache_creation_input_tokens
        )

    def to_api(self, output_tokens: int = 0) -> dict[str, Any]:
        """The `usage` object exactly as the Messages API spells it."""
        return {
            "input_tokens": self.input_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
            "cache_creation": {
                "ephemeral_5m_input_tokens": self.ephemeral_5m_input_tokens,
                "ephemeral_1h_input_tokens": self.ephemeral_1h_input_tokens,
            },
            "output_tokens": output_tokens,
            "service_tier": "standard",
        }


@dataclass(frozen=True)
class BreakpointOutcome:
    """What happened at one breakpoint."""

    position: int
    ttl: TTL
    prefix_tokens: int
    reached_minimum: bool
    hit_position: int | None  # the position its lookback window matched, if any
    written: bool  # a new entry was created (or an in-flight one extended)


@dataclass(frozen=True)
class CacheResult:
    """The usage of one request plus the positions behind it (for notebooks and traces)."""

    usage: CacheUsage
    hit_position: int | None
    read_tokens: int  # A
    one_hour_end: int  # B
    last_breakpoint_end: int  # C
    breakpoints: tuple[BreakpointOutcome, ...]


@dataclass(frozen=True, slots=True)
class CompiledBlocks:
    """Flattened blocks `(prefix_hash, tokens, breakpoint)` checked against the API's
    breakpoint rules and summed once (`compile_blocks`), for a request the store sees many
    times: a trace replay sends the same prompts under many policies."""

    hashes: tuple[str, ...]
    prefix: tuple[int, ...]
    """Tokens up to and including each position."""
    breakpoints: tuple[tuple[int, TTL], ...]
    """(position, TTL) of each breakpoint, in prefix order."""

    one_hour: bool = False
    """Whether any breakpoint is 1h (else billing needs no 1h pass)."""

    @property
    def total(self) -> int:
        return self.prefix[-1] if self.prefix else 0


def compile_blocks(blocks: Sequence[tuple[str, int, TTL | None]]) -> CompiledBlocks:
    """Check `blocks`' breakpoints (`check_breakpoints`: raises `CacheControlError`) and sum
    their tokens, for `CacheStore.usage`."""
    # Whole-prompt passes run in C (map/accumulate/compress): replays send long prompts.
    prefix = tuple(accumulate(map(_TOKENS, blocks)))
    marked = compress(count(), map(_MARK, blocks))  # a TTL is a non-empty string
    breakpoints = tuple((i, ttl) for i in marked if (ttl := blocks[i][2]) is not None)
    check_breakpoints([(f"blocks.{i}", ttl) for i, ttl in breakpoints])
    one_hour = any(ttl == "1h" for _, ttl in breakpoints)
    return CompiledBlocks(tuple(map(_HASH, blocks)), prefix, breakpoints, one_hour)


@dataclass(frozen=True)
class ImplicitRule:
    """How a provider caches implicitly: where its breakpoints are and how long entries live.

    `interval`: a breakpoint every this many tokens from the start of the prompt (1: at every
    token, so a read reaches the end of the last shared position). `life`: seconds an entry
    lives after its latest write or read (sliding). `max_age`: no entry outlives its first
    write by more than this (None: no cap). `label` names the rule in `CacheEntry.ttl`.
    """

    interval: int
    life: float
    max_age: float | None = None
    label: str = "implicit"

    def __post_init__(self) -> None:
        if self.interval < 1:
            raise ValueError(f"interval must be >= 1 token, got {self.interval!r}")
        if not self.life > 0:
            raise ValueError(f"life must be > 0 seconds, got {self.life!r}")


@dataclass(frozen=True)
class ImplicitResult:
    """What `apply_implicit` did: `read_tokens` up to the matched breakpoint (0 on a miss),
    `hit_position` the position holding it, `written_tokens` up to the request's last
    breakpoint (0 when the prompt reaches no eligible breakpoint), `total_tokens`."""

    read_tokens: int
    hit_position: int | None
    written_tokens: int
    total_tokens: int


@dataclass(frozen=True)
class BoundaryResult:
    """What `apply_boundaries` did: `read_tokens` up to the matched boundary (0 on a miss) at
    `hit_position`; `written_end` the tokens up to the last boundary written (0: none);
    `write_tokens` what the writes add beyond the read (billed as cache writes), and the
    rest of `total_tokens` past both is plain input."""

    read_tokens: int
    hit_position: int | None
    write_tokens: int
    written_end: int
    total_tokens: int

    @property
    def input_tokens(self) -> int:
        return self.total_tokens - max(self.read_tokens, self.written_end)


class CacheStore:
    """All cache entries, keyed by (model namespace, prefix hash). Thread-safe: every public
    method holds one lock, so it can serve an ASGI app running in another thread.

    The cost of `apply` depends on the request's blocks, not on how many entries are stored:
    lookups go through a per-model dict, and expiry is on a heap of `(expires_at, seq,
    entry)` records. Each apply first pops the records that fell due before its `now` and
    drops their entries if they are really dead: an entry refreshed since its record was
    pushed is pushed again with its new expiry instead (so a read costs no heap work, and
    each stored entry has one record, plus one for each refresh that moved its expiry
    earlier, which only a clock moved back can do). Observably this is the eager rule "every apply first
    drops the entries that are dead at its `now`": the store holds only entries alive at the
    latest apply, a key rewritten after it died moves to the end of the "oldest first" order,
    and moving the clock back revives nothing (what was dead is gone). Each entry is pushed
    once when written and popped once when it dies, so an apply's expiry work is O(log n)
    per entry written, refreshed or dying, never a pass over the live ones.
    """

    def __init__(self, *, linger: float = 0.0, max_entries: int | None = None) -> None:
        """`linger`: seconds an entry outlives its TTL. Anthropic promises *at least* the
        TTL; 0 (the default) is exactly the promise, and a positive value asks what a longer
        real lifetime would change. Clients must never rely on it.
        `max_entries`: the most entries kept alive at once (None: no bound, what a replay
        wants). Past it the entries due to expire first (of one TTL, the least recently
        used) are evicted and counted (`evicted`): a server facing untrusted requests must
        not let a stopped clock keep every prefix of every request alive."""
        if not linger >= 0:
            raise ValueError(f"linger must be >= 0 seconds, got {linger!r}")
        if max_entries is not None and max_entries < 1:
            raise ValueError(f"max_entries must be >= 1 or None, got {max_entries!r}")
        self.max_entries = max_entries
        self._lock = threading.Lock()
        self._life = {ttl: seconds + linger for ttl, seconds in TTL_SECONDS.items()}
        self._reset()

    def _reset(self) -> None:
        # The same entries twice: in insertion order ("oldest first"), and by model then
        # hash, so a lookup needs no key tuple. `_expiry` is the heap of expiry records.
        self._entries: dict[tuple[str, str], CacheEntry] = {}
        self._index: dict[str, dict[str, CacheEntry]] = {}
        self._expiry: list[tuple[float, int, CacheEntry]] = []
        self._seq = count()
        self.evicted = 0

    def clear(self) -> None:
        with self._lock:
            self._reset()

    def entries(self) -> list[CacheEntry]:
        """Copies of every stored entry (all alive at the latest apply), oldest first."""
        with self._lock:
            return [replace(e) for e in self._entries.values()]

    def _expire(self, now: float) -> None:
        """Drop every entry dead at `now`: pop the records due before it."""
        heap = self._expiry
        while heap and heap[0][0] < now:
            _, _, entry = heappop(heap)
            bucket = self._index.get(entry.model)
            if bucket is None or bucket.get(entry.prefix_hash) is not entry:
                continue  # a duplicate record of an entry already dropped
            if entry.alive(now):
                # Refreshed since this record was pushed: it falls due at its new expiry.
                heappush(heap, (entry.expires_at, next(self._seq), entry))
            else:
                del bucket[entry.prefix_hash]
                del self._entries[(entry.model, entry.prefix_hash)]

    def _evict(self) -> None:
        """Over `max_entries`: drop the entries that fall due first (each record popped is
        either stale, an entry refreshed since, pushed again, or the entry's own)."""
        heap, bound = self._expiry, self.max_entries
        while bound is not None and len(self._entries) > bound and heap:
            due, _, entry = heappop(heap)
            bucket = self._index.get(entry.model)
            if bucket is None or bucket.get(entry.prefix_hash) is not entry:
                continue
            if entry.expires_at > due:
                heappush(heap, (entry.expires_at, next(self._seq), entry))
                continue
            self._drop(entry.model, entry.prefix_hash)
            self.evicted += 1

    def _lifetime(self, entry: CacheEntry) -> float:
        return entry.life if entry.life is not None else self._life[entry.ttl]

    def _refresh(self, entry: CacheEntry, expires_at: float) -> None:
        """Set an entry's expiry; a later one needs no heap work (its record is pushed again
        when it falls due), an earlier one (only after the clock moved back) a new record."""
        earlier = expires_at < entry.expires_at
        entry.expires_at = expires_at
        if earlier:
            heappush(self._expiry, (expires_at, next(self._seq), entry))

    def _stored(
        self, entry: CacheEntry, bucket: dict[str, CacheEntry] | None
    ) -> dict[str, CacheEntry]:
        """Keep a new entry: by (model, prefix), in its model's index (`bucket`, made if
        absent and returned) and on the expiry heap."""
        self._entries[(entry.model, entry.prefix_hash)] = entry
        if bucket is None:
            bucket = self._index[entry.model] = {}
        bucket[entry.prefix_hash] = entry
        heappush(self._expiry, (entry.expires_at, next(self._seq), entry))
        return bucket

    def process(self, request: PreparedRequest, *, now: float, ttft: float = 0.0) -> CacheResult:
        """Apply the cache rules to a flattened request of a catalogued model (raises
        `UnknownModel`); entries are namespaced by the canonical model id, so an alias and
        its model share them (UNCONFIRMED)."""
        info = get_model(request.model)
        return self.apply(
            request.flat(), model=info.id, now=now, min_tokens=info.min_cacheable_tokens, ttft=ttft
        )

    def apply(
        self,
        blocks: Sequence[tuple[str, int, TTL | None]],
        *,
        model: str,
        now: float,
        min_tokens: int,
        ttft: float = 0.0,
    ) -> CacheResult:
        """The cache rules on already-flattened blocks `(prefix_hash, tokens, breakpoint)`.

        Reads: each breakpoint whose prefix reaches `min_tokens` checks at most
        `LOOKBACK_WINDOW` positions, itself first, walking back, for an entry an earlier
        request wrote that is available (`available_at <= now`) and alive. A = tokens up to
        the highest match. Every matched entry is refreshed to its own TTL from `now`.

        Writes: every breakpoint that reaches the minimum gets an entry (TTL from `now`,
        available at `now + ttft`) unless a live one exists. Billing is three-point: B = the
        highest 1h breakpoint after A (else A), C = the last breakpoint; read A, 1h write
        B - A, 5m write C - B, input = total - C. A prefix below the minimum is neither read
        nor written and costs no error.
        """
        compiled = compile_blocks(blocks)
        prefix = compiled.prefix
        a, b, c, hit, positions, written = self._apply(compiled, model, now, min_tokens, ttft)
        # input, read, 5m write, 1h write
        usage = CacheUsage(compiled.total - c, a, c - b, b - a)
        outcomes = tuple(
            [
                # position, ttl, prefix tokens, reached the minimum, matched position, written
                BreakpointOutcome(
                    bp,
                    ttl,
                    prefix[bp],
                    prefix[bp] >= min_tokens,
                    positions.get(bp),
                    bp in written,
                )
                for bp, ttl in compiled.breakpoints
            ]
        )
        return CacheResult(usage, hit, a, b, c, outcomes)

    def usage(
        self,
        compiled: CompiledBlocks,
        *,
        model: str,
        now: float,
        min_tokens: int,
        ttft: float = 0.0,
    ) -> CacheUsage:
        """`apply(...).usage` for blocks checked once with `compile_blocks`: the same rules
        and the same effect on the store, without re-checking the breakpoints or reporting
        per-breakpoint outcomes (what a replay of many requests needs)."""
        a, b, c, _, _, _ = self._apply(compiled, model, now, min_tokens, ttft)
        return CacheUsage(compiled.total - c, a, c - b, b - a)

    def _apply(
        self, compiled: CompiledBlocks, model: str, now: float, min_tokens: int, ttft: float
    ) -> tuple[int, int, int, int | None, dict[int, int], set[int]]:
        """`apply`'s rules: (A, B, C, the highest matched position, breakpoint -> matched
        position, the breakpoints written)."""
        hashes, prefix, eligible = compiled.hashes, compiled.prefix, compiled.breakpoints
        if eligible and prefix[eligible[0][0]] < min_tokens:
            # Prefix sums never decrease: the eligible breakpoints are the last ones.
            eligible = tuple(bp for bp in eligible if prefix[bp[0]] >= min_tokens)
        positions: dict[int, int] = {}  # breakpoint -> matched position
        written: set[int] = set()
        with self._lock:
            if self._expiry and self._expiry[0][0] < now:
                self._expire(now)
            bucket = self._index.get(model)
            matched: dict[int, CacheEntry] = {}  # matched position -> its entry
            if bucket:
                keys = bucket.keys()
                for bp, _ in eligible:
                    lo = max(bp - LOOKBACK_WINDOW + 1, 0)
                    if keys.isdisjoint(hashes[lo : bp + 1]):
                        continue  # the usual miss, decided without a Python loop
                    for pos in range(bp, lo - 1, -1):
                        entry = bucket.get(hashes[pos])
                        if entry is not None and entry.usable(now):
                            positions[bp] = pos
                            matched[pos] = entry
                            break
            hit = max(matched) if matched else None
            for entry in matched.values():
                self._refresh(entry, now + self._lifetime(entry))
                entry.last_used_at = now
                entry.hits += 1

            a = prefix[hit] if hit is not None else 0
            b = a  # prefix sums never decrease, so every 1h breakpoint after A is >= A
            if compiled.one_hour:
                for bp, ttl in eligible:
                    if ttl == "1h" and (hit is None or bp > hit) and prefix[bp] > b:
                        b = prefix[bp]
            c = max(prefix[eligible[-1][0]], b) if eligible else a

            for bp, ttl in eligible:
                if positions.get(bp) == bp:
                    continue  # its own entry was usable: nothing to write
                prefix_hash = hashes[bp]
                expires = now + self._life[ttl]
                entry = bucket.get(prefix_hash) if bucket is not None else None
                if entry is None:  # stored entries are alive at `now` (`_expire`)
                    entry = CacheEntry(
                        model=model,
                        prefix_hash=prefix_hash,
                        tokens=prefix[bp],
                        ttl=ttl,
                        written_at=now,
                        available_at=now + ttft,
                        expires_at=expires,
                        last_used_at=now,
                    )
                    bucket = self._stored(entry, bucket)
                    written.add(bp)
                elif entry.available_at > now:
                    # Written by a request whose response has not begun yet: this request
                    # writes the same prefix again, so it becomes available at the earlier
                    # of the two response starts and lives as long as the longer.
                    entry.available_at = min(entry.available_at, now + ttft)
                    if expires > entry.expires_at:
                        entry.ttl = ttl
                        self._refresh(entry, expires)
                    written.add(bp)
            self._evict()
        return a, b, c, hit, positions, written

    def apply_implicit(
        self,
        blocks: Sequence[tuple[str, int, Any]],
        *,
        model: str,
        now: float,
        min_tokens: int,
        rule: ImplicitRule,
        ttft: float = 0.0,
    ) -> ImplicitResult:
        """Implicit prefix caching on flattened blocks `(prefix_hash, tokens, _)` (a block's
        breakpoint field is ignored: the provider places its own).

        Breakpoints sit at every multiple of `rule.interval` tokens that is at least
        `min_tokens`. A breakpoint inside position `i` (or at its end) belongs to `i`, and the
        entry for `i` (keyed by its prefix hash) stands for every breakpoint up to the last
        one in `i`: an earlier request with the same positions 0..i had the same breakpoints
        there. A prefix that matches only part of a position matches none of its breakpoints
        (the hash is per position).

        Read: the last position with a breakpoint whose entry is usable (available and
        alive), walking back from the end; `read_tokens` = its last breakpoint. Writes: every
        position with a breakpoint gets an entry or, if it has one, a refresh: it lives
        `rule.life` from `now`, but never past `written_at + rule.max_age`. A new entry is
        available at `now + ttft`; one still in flight becomes available at the earlier of
        the two response starts, as in `apply`.
        """
        interval = rule.interval
        prefix = list(accumulate(map(_TOKENS, blocks)))
        total = prefix[-1] if prefix else 0
        first = -(-max(min_tokens, 1) // interval) * interval  # the first eligible breakpoint
        marks: list[tuple[int, int]] = []  # (position, its last breakpoint)
        start = 0
        for i, end in enumerate(prefix):
            last = end // interval * interval
            if last >= first and last > start:
                marks.append((i, last))
            start = end
        with self._lock:
            if self._expiry and self._expiry[0][0] < now:
                self._expire(now)
            bucket = self._index.get(model)
            hit: int | None = None
            read = 0
            if bucket:
                for i, last in reversed(marks):
                    entry = bucket.get(blocks[i][0])
                    if entry is not None and entry.usable(now):
                        hit, read = i, last
                        entry.hits += 1
                        break
            for i, last in marks:
                prefix_hash = blocks[i][0]
                entry = bucket.get(prefix_hash) if bucket is not None else None
                if entry is None:
                    expires = now + rule.life
                    cap = None if rule.max_age is None else now + rule.max_age
                    entry = CacheEntry(
                        model=model,
                        prefix_hash=prefix_hash,
                        tokens=last,
                        ttl=rule.label,
                        written_at=now,
                        available_at=now + ttft,
                        expires_at=expires if cap is None else min(expires, cap),
                        last_used_at=now,
                        life=rule.life,
                        max_expires_at=cap,
                    )
                    self._entries[(model, prefix_hash)] = entry
                    if bucket is None:
                        bucket = self._index[model] = {}
                    bucket[prefix_hash] = entry
                    heappush(self._expiry, (entry.expires_at, next(self._seq), entry))
                    continue
                if entry.available_at > now:
                    entry.available_at = min(entry.available_at, now + ttft)
                entry.life = rule.life
                entry.ttl = rule.label
                expires = now + rule.life
                if entry.max_expires_at is not None:
                    expires = min(expires, entry.max_expires_at)
                self._refresh(entry, expires)
                entry.last_used_at = now
            self._evict()
        written = marks[-1][1] if marks else 0
        return ImplicitResult(read, hit, written, total)

    def apply_boundaries(
        self,
        blocks: Sequence[tuple[str, int, Any]],
        *,
        model: str,
        now: float,
        min_tokens: int,
        lookups: Sequence[int],
        writes: Sequence[int],
        life: float,
        label: str,
        ttft: float = 0.0,
    ) -> BoundaryResult:
        """Caching at boundaries the caller chose (OpenAI GPT-5.6 and later, whose rules for
        choosing them live with that provider): flattened blocks `(prefix_hash, tokens, _)`,
        the positions a request looks its prefix up at (`lookups`) and those it writes
        (`writes`). Only a position whose prefix reaches `min_tokens` counts.

        Read: the longest looked-up position with a usable entry (available and alive); it
        is refreshed, `life` from `now` ("reusing the prefix refreshes its lifetime without
        another cache-write charge"). Writes: each written position gets an entry, available
        at `now + ttft`, or has its entry refreshed (one still in flight becomes available
        at the earlier of the two response starts, as in `apply`). Billing: the writes cost
        what they add beyond the read, up to the last written position; past it the prompt
        is plain input, unwritten.
        """
        prefix = list(accumulate(map(_TOKENS, blocks)))
        total = prefix[-1] if prefix else 0
        looked = sorted({i for i in lookups if prefix[i] >= min_tokens}, reverse=True)
        written = sorted({i for i in writes if prefix[i] >= min_tokens})
        with self._lock:
            if self._expiry and self._expiry[0][0] < now:
                self._expire(now)
            bucket = self._index.get(model)
            hit: int | None = None
            if bucket:
                for i in looked:
                    entry = bucket.get(blocks[i][0])
                    if entry is not None and entry.usable(now):
                        hit = i
                        entry.hits += 1
                        entry.last_used_at = now
                        self._refresh(entry, now + life)
                        break
            for i in written:
                prefix_hash = blocks[i][0]
                entry = bucket.get(prefix_hash) if bucket is not None else None
                if entry is None:
                    entry = CacheEntry(
                        model=model,
                        prefix_hash=prefix_hash,
                        tokens=prefix[i],
                        ttl=label,
                        written_at=now,
                        available_at=now + ttft,
                        expires_at=now + life,
                        last_used_at=now,
                        life=life,
                    )
                    bucket = self._stored(entry, bucket)
                    continue
                if entry.available_at > now:
                    entry.available_at = min(entry.available_at, now + ttft)
                entry.life = life
                entry.last_used_at = now
                self._refresh(entry, max(entry.expires_at, now + life))
            self._evict()
        read = prefix[hit] if hit is not None else 0
        end = prefix[written[-1]] if written else 0
        return BoundaryResult(read, hit, max(end - read, 0), end, total)

    def pin(
        self,
        *,
        model: str,
        prefix_hash: str,
        tokens: int,
        now: float,
        expires_at: float,
        label: str,
        stored_for: str | None = None,
    ) -> CacheEntry:
        """Store (or replace) an entry that lives until `expires_at` whatever reads it, and
        is available at once; returns a copy. `stored_for`: the model whose storage price
        the entry accrues (`CacheEntry.stored_for`)."""
        with self._lock:
            if self._expiry and self._expiry[0][0] < now:
                self._expire(now)
            self._drop(model, prefix_hash)
            entry = CacheEntry(
                model=model,
                prefix_hash=prefix_hash,
                tokens=tokens,
                ttl=label,
                written_at=now,
                available_at=now,
                expires_at=expires_at,
                last_used_at=now,
                stored_for=stored_for,
            )
            self._entries[(model, prefix_hash)] = entry
            self._index.setdefault(model, {})[prefix_hash] = entry
            heappush(self._expiry, (expires_at, next(self._seq), entry))
            self._evict()
            return replace(entry)

    def lookup(self, model: str, prefix_hash: str, now: float) -> CacheEntry | None:
        """A copy of the entry if it is usable at `now` (nothing is refreshed)."""
        with self._lock:
            entry = self._index.get(model, {}).get(prefix_hash)
            return replace(entry) if entry is not None and entry.usable(now) else None

    def set_expiry(self, model: str, prefix_hash: str, expires_at: float) -> bool:
        """Move a stored entry's expiry (earlier or later); False if there is none."""
        with self._lock:
            entry = self._index.get(model, {}).get(prefix_hash)
            if entry is None:
                return False
            self._refresh(entry, expires_at)
            return True

    def remove(self, model: str, prefix_hash: str) -> bool:
        """Drop a stored entry; False if there is none. Its heap record is skipped later."""
        with self._lock:
            return self._drop(model, prefix_hash)

    def _drop(self, model: str, prefix_hash: str) -> bool:
        bucket = self._index.get(model)
        if bucket is None or prefix_hash not in bucket:
            return False
        del bucket[prefix_hash]
        del self._entries[(model, prefix_hash)]
        return True
