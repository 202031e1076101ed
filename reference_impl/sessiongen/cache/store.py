"""The cache store, the second half of the prompt-cache model: Anthropic's cache rules
(breakpoints, 20-block lookback, TTLs, minimum length, three-point billing, availability)
applied to flattened requests (`prefix.py`) on a caller-supplied virtual clock.

This module and `prefix.py` are the one implementation of those rules. The emulator calls
`CacheStore.process` for every `/v1/messages` request; a trace simulator can drive the
lower-level `CacheStore.apply` with synthetic blocks. It does no I/O and never reads the
wall clock.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..tokens import total_input_tokens
from .catalog import get_model
from .prefix import TTL, PreparedRequest, check_breakpoints

TTL_SECONDS: Mapping[str, float] = {"5m": 300.0, "1h": 3600.0}
LOOKBACK_WINDOW = 20


@dataclass
class CacheEntry:
    """One cache entry: the prefix ending at a breakpoint of an earlier request.

    Lifetimes run from the start of the request that writes or reads the entry (docs, added
    2026-08-06). `available_at` is when the writing request's response began: the docs say an
    entry "only becomes available after the first response begins".
    """

    model: str
    prefix_hash: str
    tokens: int
    ttl: TTL
    written_at: float
    available_at: float
    expires_at: float
    last_used_at: float
    hits: int = 0

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


def uncached_usage(total_tokens: int) -> CacheUsage:
    return CacheUsage(total_tokens, 0, 0, 0)


class CacheStore:
    """All cache entries, keyed by (model namespace, prefix hash). Thread-safe: every public
    method holds one lock, so it can serve an ASGI app running in another thread."""

    def __init__(self) -> None:
        self._entries: dict[tuple[str, str], CacheEntry] = {}
        self._lock = threading.Lock()

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def entries(self) -> list[CacheEntry]:
        """Copies of every stored entry (expired ones are dropped lazily), oldest first."""
        with self._lock:
            return [replace(e) for e in self._entries.values()]

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
        marks = [(f"blocks.{i}", b[2]) for i, b in enumerate(blocks) if b[2] is not None]
        check_breakpoints(marks)
        prefix: list[int] = []
        total = 0
        for _, tokens, _ in blocks:
            total += tokens
            prefix.append(total)
        hashes = [b[0] for b in blocks]
        bps = [i for i, b in enumerate(blocks) if b[2] is not None]
        ttls: dict[int, TTL] = {i: ttl for i, (_, _, ttl) in enumerate(blocks) if ttl is not None}

        with self._lock:
            self._entries = {k: e for k, e in self._entries.items() if e.alive(now)}
            matches: dict[int, int] = {}  # breakpoint -> matched position
            for bp in bps:
                if prefix[bp] < min_tokens:
                    continue
                for pos in range(bp, max(bp - LOOKBACK_WINDOW, -1), -1):
                    entry = self._entries.get((model, hashes[pos]))
                    if entry is not None and entry.usable(now):
                        matches[bp] = pos
                        break
            hit = max(matches.values(), default=None)
            for pos in set(matches.values()):
                entry = self._entries[(model, hashes[pos])]
                entry.expires_at = now + TTL_SECONDS[entry.ttl]
                entry.last_used_at = now
                entry.hits += 1

            a = prefix[hit] if hit is not None else 0
            eligible = [bp for bp in bps if prefix[bp] >= min_tokens]
            after = [bp for bp in eligible if hit is None or bp > hit]
            b = max((prefix[bp] for bp in after if ttls[bp] == "1h"), default=a)
            c = max(prefix[eligible[-1]], b) if eligible else a

            written: set[int] = set()
            for bp in eligible:
                key = (model, hashes[bp])
                ttl = ttls[bp]
                expires = now + TTL_SECONDS[ttl]
                entry = self._entries.get(key)
                if entry is None:
                    self._entries[key] = CacheEntry(
                        model=model,
                        prefix_hash=hashes[bp],
                        tokens=prefix[bp],
                        ttl=ttl,
                        written_at=now,
                        available_at=now + ttft,
                        expires_at=expires,
                        last_used_at=now,
                    )
                    written.add(bp)
                elif not entry.usable(now):
                    # Written by a request whose response has not begun yet: this request
                    # writes the same prefix again, so it becomes available at the earlier
                    # of the two response starts and lives as long as the longer.
                    entry.available_at = min(entry.available_at, now + ttft)
                    if expires > entry.expires_at:
                        entry.expires_at, entry.ttl = expires, ttl
                    written.add(bp)

        usage = CacheUsage(
            input_tokens=total - c,
            cache_read_input_tokens=a,
            ephemeral_5m_input_tokens=c - b,
            ephemeral_1h_input_tokens=b - a,
        )
        outcomes = tuple(
            BreakpointOutcome(
                position=bp,
                ttl=ttls[bp],
                prefix_tokens=prefix[bp],
                reached_minimum=prefix[bp] >= min_tokens,
                hit_position=matches.get(bp),
                written=bp in written,
            )
            for bp in bps
        )
        return CacheResult(usage, hit, a, b, c, outcomes)
