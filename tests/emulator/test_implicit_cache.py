"""`CacheStore.apply_implicit` and pinned entries: the store-level rules behind OpenAI's and
Gemini's implicit caching and Gemini's explicit caches (the provider tests quote the docs)."""

from __future__ import annotations

import pytest
from sessiongen.cache import CacheStore, FlatBlock, ImplicitRule

RULE = ImplicitRule(interval=128, life=300.0)


def blocks(*parts: tuple[str, int]) -> list[FlatBlock]:
    """Positions with cumulative hashes: `(name, tokens)` each; equal names, equal prefix."""
    rows, chain = [], ""
    for name, tokens in parts:
        chain += "/" + name
        rows.append(FlatBlock(chain, tokens, None))
    return rows


def test_the_longest_shared_position_is_read_up_to_its_last_breakpoint() -> None:
    store = CacheStore()
    first = store.apply_implicit(
        blocks(("system", 1600), ("q1", 40)), model="m", now=0, min_tokens=1024, rule=RULE
    )
    assert (first.read_tokens, first.written_tokens, first.total_tokens) == (0, 1536, 1640)
    second = store.apply_implicit(
        blocks(("system", 1600), ("q2", 200)), model="m", now=10, min_tokens=1024, rule=RULE
    )
    assert (second.read_tokens, second.hit_position) == (1536, 0)
    assert second.written_tokens == 1792  # its own last breakpoint, inside q2


def test_below_the_minimum_and_partial_positions_are_not_read() -> None:
    store = CacheStore()
    store.apply_implicit(
        blocks(("a", 900), ("b", 900)), model="m", now=0, min_tokens=1024, rule=RULE
    )
    # Shares only position a (900 tokens, below the minimum): nothing.
    other = store.apply_implicit(
        blocks(("a", 900), ("c", 900)), model="m", now=1, min_tokens=1024, rule=RULE
    )
    assert other.read_tokens == 0
    # The same text as position b but chained after another a: another prefix.
    moved = store.apply_implicit(
        blocks(("z", 900), ("b", 900)), model="m", now=2, min_tokens=1024, rule=RULE
    )
    assert moved.read_tokens == 0


def test_entries_slide_but_never_outlive_max_age() -> None:
    store = CacheStore()
    rule = ImplicitRule(interval=1, life=300.0, max_age=1000.0, label="x")
    row = blocks(("p", 2000))
    store.apply_implicit(row, model="m", now=0, min_tokens=1024, rule=rule)
    for now in (250, 500, 750, 1000):
        assert store.apply_implicit(row, model="m", now=now, min_tokens=1024, rule=rule).read_tokens
    assert not store.apply_implicit(
        row, model="m", now=1001, min_tokens=1024, rule=rule
    ).read_tokens
    [entry] = store.entries()
    assert entry.ttl == "x" and entry.written_at == 1001


def test_a_pinned_entry_keeps_its_expiry_and_can_be_moved_or_removed() -> None:
    store = CacheStore()
    store.pin(model="e", prefix_hash="n", tokens=5, now=0, expires_at=7200, label="pinned")
    store.apply_implicit(blocks(("p", 2000)), model="m", now=3600, min_tokens=1, rule=RULE)
    assert store.lookup("e", "n", 7200) is not None
    assert store.set_expiry("e", "n", 100)
    store.apply_implicit(blocks(("p", 2000)), model="m", now=101, min_tokens=1, rule=RULE)
    assert store.lookup("e", "n", 101) is None and store.entries()[0].model == "m"
    store.pin(model="e", prefix_hash="n", tokens=5, now=200, expires_at=300, label="pinned")
    assert store.remove("e", "n") and not store.remove("e", "n")
    assert not store.set_expiry("e", "n", 999)


def test_a_bad_rule_is_refused() -> None:
    with pytest.raises(ValueError):
        ImplicitRule(interval=0, life=1)
    with pytest.raises(ValueError):
        ImplicitRule(interval=1, life=0)
