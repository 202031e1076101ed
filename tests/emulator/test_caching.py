"""Conformance: the prompt-cache rules, observed through the official SDK's `usage`.

Quotes are from AD:build-with-claude/prompt-caching (mirror llms-txt-archive/anthropic-platform,
Aug 2026) unless noted. Block numbers in docstrings are the docs' 1-based positions.
"""

from __future__ import annotations

from typing import Any

from anthropic.types import MessageParam, TextBlockParam

from .conftest import MODEL, PREFILL_MODEL, Emu, filler, text_block, usage_tuple, user

BLOCK = 200  # tokens per block: block 10 ends at 2,000 tokens, above the 1,024 minimum


def turn(n_blocks: int, breakpoints: tuple[int, ...]) -> list[MessageParam]:
    """One user message of `n_blocks` stable blocks with markers on the given 1-based blocks."""
    return [
        user(
            *(
                text_block(BLOCK, f"b{i}", "5m" if i in breakpoints else None)
                for i in range(1, n_blocks + 1)
            )
        )
    ]


async def test_lookback_turn2_hits_turn1_entry_at_block_10(emu: Emu) -> None:
    """ "Turn 1: 10 blocks, breakpoint on block 10 ... writes an entry at block 10. Turn 2: 15
    blocks, breakpoint on block 15. Block 15 has no entry, so the system walks back to block 10
    and finds the turn-1 entry. Cache hit at block 10; the system processes only blocks 11
    through 15 fresh and writes a new entry at block 15." """
    first = await emu.create(messages=turn(10, (10,)))
    assert usage_tuple(first.usage) == (0, 0, 10 * BLOCK, 0)
    second = await emu.create(messages=turn(15, (15,)))
    assert usage_tuple(second.usage) == (10 * BLOCK, 0, 5 * BLOCK, 0)


async def test_lookback_turn3_misses_entry_one_position_outside_window(emu: Emu) -> None:
    """ "Turn 3: 35 blocks, breakpoint on block 35. The system checks 20 positions (blocks 35
    through 16) and finds nothing. The turn-2 entry at block 15 is one position outside the
    window, so there is no cache hit." """
    await emu.create(messages=turn(10, (10,)))
    await emu.create(messages=turn(15, (15,)))
    third = await emu.create(messages=turn(35, (35,)))
    assert usage_tuple(third.usage) == (0, 0, 35 * BLOCK, 0)


async def test_second_breakpoint_starts_a_second_lookback_window(emu: Emu) -> None:
    """ "Adding a second breakpoint at block 15 starts a second lookback window there, which
    finds the turn-2 entry." """
    await emu.create(messages=turn(10, (10,)))
    await emu.create(messages=turn(15, (15,)))
    third = await emu.create(messages=turn(35, (15, 35)))
    assert usage_tuple(third.usage) == (15 * BLOCK, 0, 20 * BLOCK, 0)


async def test_lookback_window_counts_the_breakpoint_itself_as_first(emu: Emu) -> None:
    """ "The system checks at most 20 positions per breakpoint, counting the breakpoint itself
    as the first": an entry 19 positions back is found, one 20 back is not."""
    await emu.create(messages=turn(10, (10,)))
    hit = await emu.create(messages=turn(29, (29,)))  # positions 29..10
    assert hit.usage.cache_read_input_tokens == 10 * BLOCK
    await emu.admin.post("/_emulator/reset")
    await emu.create(messages=turn(10, (10,)))
    miss = await emu.create(messages=turn(30, (30,)))  # positions 30..11
    assert miss.usage.cache_read_input_tokens == 0


async def test_writes_happen_only_at_breakpoints(emu: Emu) -> None:
    """ "Cache writes happen only at your breakpoint ... The lookback walks through blocks 5, 4,
    3, 2, and 1, but the system never wrote an entry at any of those positions. No cache
    hit." (the timestamp example); moving the marker to block 5 makes every request read."""
    static = [text_block(300, f"static{i}") for i in range(1, 6)]
    for stamp in ("t=1", "t=2"):
        varying = text_block(20, stamp, "5m")
        message = await emu.create(messages=[user(*static, varying)])
        assert message.usage.cache_read_input_tokens == 0
        assert message.usage.cache_creation_input_tokens == 1520
    fixed: list[TextBlockParam] = [
        *static[:4],
        {**static[4], "cache_control": {"type": "ephemeral"}},
    ]
    await emu.create(messages=[user(*fixed, text_block(20, "t=3"))])
    again = await emu.create(messages=[user(*fixed, text_block(20, "t=4"))])
    assert usage_tuple(again.usage) == (1500, 0, 0, 20)


async def test_mixed_ttl_billing_docs_example(emu: Emu) -> None:
    """ "Position A: The token count at the highest cache hit ... Position B: The token count at
    the highest 1-hour cache_control block after A ... Position C: The token count at the last
    cache_control block. You'll be charged for: Cache read tokens for A. 1-hour cache write
    tokens for (B - A). 5-minute cache write tokens for (C - B)." Reproduces the docs' usage
    example: input 2048, read 1800, creation 248 = 148 (5m) + 100 (1h)."""
    s1 = text_block(1800, "s1", "1h")
    await emu.create(system=[s1], messages=[user(text_block(10, "warm"))])
    message = await emu.create(
        system=[s1, text_block(100, "s2", "1h"), text_block(148, "s3", "5m")],
        messages=[user(text_block(2048, "question"))],
    )
    usage = message.usage
    assert usage.input_tokens == 2048
    assert usage.cache_read_input_tokens == 1800
    assert usage.cache_creation_input_tokens == 248
    assert usage.cache_creation is not None
    assert usage.cache_creation.ephemeral_5m_input_tokens == 148
    assert usage.cache_creation.ephemeral_1h_input_tokens == 100


async def test_mixed_ttl_b_equals_a_without_a_1h_breakpoint_after_a(emu: Emu) -> None:
    """ "Position B: ... the highest 1-hour cache_control block after A (or equals A if none
    exist)": a 1h breakpoint at the hit itself adds no 1h write."""
    s1 = text_block(1100, "s1", "1h")
    await emu.create(system=[s1], messages=[user(text_block(10, "q"))])
    message = await emu.create(
        system=[s1, text_block(200, "s2", "5m")], messages=[user(text_block(10, "q"))]
    )
    assert usage_tuple(message.usage) == (1100, 0, 200, 10)


async def test_below_minimum_is_neither_written_nor_read(emu: Emu) -> None:
    """ "Any requests to cache fewer than this number of tokens will be processed without
    caching, and no error is returned ... if both cache_creation_input_tokens and
    cache_read_input_tokens are 0, the prompt was not cached" (Sonnet 4.6: 1,024)."""
    for _ in range(2):
        message = await emu.create(
            system=[text_block(1023, "short", "5m")], messages=[user(text_block(5, "q"))]
        )
        assert usage_tuple(message.usage) == (0, 0, 0, 1028)


async def test_minimum_reached_exactly_is_cached(emu: Emu) -> None:
    """The minimum is inclusive: a 1,024-token prefix on Sonnet 4.6 is written, then read."""
    system = [text_block(1024, "exact", "5m")]
    first = await emu.create(system=system, messages=[user(text_block(5, "q"))])
    second = await emu.create(system=system, messages=[user(text_block(5, "q"))])
    assert usage_tuple(first.usage) == (0, 0, 1024, 5)
    assert usage_tuple(second.usage) == (1024, 0, 0, 5)


async def test_minimum_is_per_model(emu: Emu) -> None:
    """ "4,096 tokens for Claude Haiku 4.5" vs "1,024 tokens for ... Claude Sonnet 4.6": the
    same 2,000-token prefix is cached on one and not on the other."""
    system = [text_block(2000, "mid", "5m")]
    haiku = await emu.create(
        model="claude-haiku-4-5", system=system, messages=[user(text_block(5, "q"))]
    )
    sonnet = await emu.create(model=MODEL, system=system, messages=[user(text_block(5, "q"))])
    assert haiku.usage.cache_creation_input_tokens == 0
    assert sonnet.usage.cache_creation_input_tokens == 2000


async def test_5m_entry_expires_after_five_minutes(emu: Emu) -> None:
    """ "By default, the cache has a 5-minute lifetime": read at 299 s, miss (and rewrite) at
    301 s of virtual time after the write."""
    system = [text_block(1100, "ttl5", "5m")]
    await emu.create(system=system, messages=[user(text_block(5, "q"))])
    await emu.set_time(299)
    assert (
        await emu.create(system=system, messages=[user(text_block(5, "q"))])
    ).usage.cache_read_input_tokens == 1100
    await emu.set_time(299 + 301)
    late = await emu.create(system=system, messages=[user(text_block(5, "q"))])
    assert usage_tuple(late.usage) == (0, 0, 1100, 5)


async def test_hit_refreshes_the_lifetime(emu: Emu) -> None:
    """ "The cache is refreshed for no additional cost each time the cached content is used":
    hits at 240 s and 480 s keep a 5m entry alive past 300 s after its write."""
    system = [text_block(1100, "refresh", "5m")]
    await emu.create(system=system, messages=[user(text_block(5, "q"))])
    for at in (240, 480, 720):
        await emu.set_time(at)
        message = await emu.create(system=system, messages=[user(text_block(5, "q"))])
        assert usage_tuple(message.usage) == (1100, 0, 0, 5), at


async def test_1h_entry_lives_an_hour(emu: Emu) -> None:
    """ "ttl": "1h" entries last an hour: read at 3,599 s; after a further 3,601 s idle it has
    expired and is written again (as a 1h write)."""
    system = [text_block(1100, "ttl1h", "1h")]
    await emu.create(system=system, messages=[user(text_block(5, "q"))])
    await emu.set_time(3599)
    assert (
        await emu.create(system=system, messages=[user(text_block(5, "q"))])
    ).usage.cache_read_input_tokens == 1100
    await emu.advance(3601)
    late = await emu.create(system=system, messages=[user(text_block(5, "q"))])
    assert usage_tuple(late.usage) == (0, 1100, 0, 5)


async def test_lifetime_counts_from_request_start(emu: Emu) -> None:
    """ "The lifetime is measured from the start of the request that writes or reads the cache
    entry, not from the end of its response": with a 100 s time to first token, the entry
    written at t=0 is still read at 300 s but gone at 301 s (not at 400 s)."""
    emu.state.ttft = 100.0
    system = [text_block(1100, "start", "5m")]
    await emu.create(system=system, messages=[user(text_block(5, "q"))])
    await emu.set_time(300)
    assert (
        await emu.create(system=system, messages=[user(text_block(5, "q"))])
    ).usage.cache_read_input_tokens == 1100
    await emu.set_time(300 + 301)
    assert (
        await emu.create(system=system, messages=[user(text_block(5, "q"))])
    ).usage.cache_read_input_tokens == 0


async def test_entry_available_only_after_first_response_begins(emu: Emu) -> None:
    """ "For concurrent requests, note that a cache entry only becomes available after the
    first response begins": with a 2 s time to first token, a request starting 1 s after the
    writer misses (and writes too), one starting at 2 s hits."""
    emu.state.ttft = 2.0
    system = [text_block(1100, "concurrent", "5m")]
    await emu.create(system=system, messages=[user(text_block(5, "q"))])
    await emu.set_time(1)
    parallel = await emu.create(system=system, messages=[user(text_block(5, "q"))])
    assert usage_tuple(parallel.usage) == (0, 0, 1100, 5)
    await emu.set_time(2)
    after = await emu.create(system=system, messages=[user(text_block(5, "q"))])
    assert usage_tuple(after.usage) == (1100, 0, 0, 5)


async def test_usage_sums_to_total_input(emu: Emu) -> None:
    """ "total_input_tokens = cache_read_input_tokens + cache_creation_input_tokens +
    input_tokens", and "cache_creation_input_tokens field equals the sum of the values in the
    cache_creation object"; the total equals count_tokens."""
    system = [text_block(1100, "sum1", "1h"), text_block(300, "sum2", "5m")]
    messages = [user(text_block(400, "sum3", "5m"), text_block(77, "tail"))]
    expected = (
        await emu.client.messages.count_tokens(model=MODEL, system=system, messages=messages)
    ).input_tokens
    for _ in range(2):
        usage = (await emu.create(system=system, messages=messages)).usage
        assert usage.cache_creation is not None
        creation = usage.cache_creation
        assert (
            usage.cache_creation_input_tokens
            == creation.ephemeral_5m_input_tokens + creation.ephemeral_1h_input_tokens
        )
        assert usage.cache_read_input_tokens is not None
        assert usage.cache_creation_input_tokens is not None
        total = (
            usage.cache_read_input_tokens + usage.cache_creation_input_tokens + usage.input_tokens
        )
        assert total == expected == 1877


async def test_automatic_caching_moves_forward(emu: Emu) -> None:
    """Automatic caching: "Request 2 ... System through User(2) read from cache; Asst(2) +
    User(3) written to cache" (table "How automatic caching works in multi-turn
    conversations")."""
    system = filler(1100, "auto-system")
    history: list[dict[str, Any]] = [{"role": "user", "content": filler(50, "u1")}]
    first = await emu.create(system=system, messages=history, cache_control={"type": "ephemeral"})
    assert usage_tuple(first.usage) == (0, 0, 1150, 0)
    history += [
        {"role": "assistant", "content": filler(40, "a1")},
        {"role": "user", "content": filler(30, "u2")},
    ]
    second = await emu.create(system=system, messages=history, cache_control={"type": "ephemeral"})
    assert usage_tuple(second.usage) == (1150, 0, 70, 0)


async def test_automatic_caching_walks_back_over_ineligible_blocks(emu: Emu) -> None:
    """ "If the last block is not eligible as an automatic cache breakpoint target, the system
    silently walks backwards to find the nearest eligible block": a trailing thinking block
    ("Thinking blocks cannot be cached directly") stays uncached input."""
    messages = [
        user(text_block(4100, "walk")),
        {
            "role": "assistant",
            "content": [{"type": "thinking", "thinking": filler(30, "think"), "signature": "s"}],
        },
    ]
    message = await emu.create(
        model=PREFILL_MODEL, messages=messages, cache_control={"type": "ephemeral"}
    )
    assert usage_tuple(message.usage) == (0, 0, 4100, 30)


async def test_automatic_caching_is_noop_with_same_ttl_marker(emu: Emu) -> None:
    """ "If the last block already has an explicit cache_control with the same TTL, automatic
    caching is a no-op" (edge cases): three explicit markers plus a top-level one give
    exactly the explicit markers' entries and usage."""
    blocks = [text_block(400, f"noop{i}", "5m") for i in range(3)]
    message = await emu.create(messages=[user(*blocks)], cache_control={"type": "ephemeral"})
    assert usage_tuple(message.usage) == (0, 0, 1200, 0)
    entries = (await emu.admin.get("/_emulator/cache")).json()["entries"]
    assert [e["tokens"] for e in entries] == [1200]  # 400 and 800 are below the minimum


async def test_prewarm_with_max_tokens_zero(emu: Emu) -> None:
    """ "Set max_tokens: 0 ... The API reads your prompt into the model and writes the cache at
    any cache_control breakpoint, then returns immediately without generating any output. The
    response has an empty content array, stop_reason: "max_tokens"" and "Zero output tokens
    are billed"; the follow-up request reads the warmed prefix."""
    system = [text_block(1100, "prewarm", "5m")]
    warm = await emu.create(max_tokens=0, system=system, messages=[user(text_block(2, "w"))])
    assert warm.content == []
    assert warm.stop_reason == "max_tokens"
    assert warm.usage.output_tokens == 0
    assert usage_tuple(warm.usage) == (0, 0, 1100, 2)
    real = await emu.create(system=system, messages=[user(text_block(9, "question"))])
    assert usage_tuple(real.usage) == (1100, 0, 0, 9)


async def test_prefix_must_be_identical(emu: Emu) -> None:
    """ "Cache hits require 100% identical prompt segments": one changed character in the
    system prompt misses."""
    await emu.create(system=[text_block(1100, "same", "5m")], messages=[user(text_block(5, "q"))])
    changed = await emu.create(
        system=[text_block(1100, "Same", "5m")], messages=[user(text_block(5, "q"))]
    )
    assert changed.usage.cache_read_input_tokens == 0


async def test_cache_control_is_not_part_of_the_prefix(emu: Emu) -> None:
    """A breakpoint reads entries written at other positions by the same content: moving the
    marker forward still hits the earlier write (the lookback finds "entries that earlier
    requests wrote", keyed by the prefix, not by where markers sat)."""
    await emu.create(messages=[user(text_block(1100, "m1", "5m"), text_block(50, "m2"))])
    moved = await emu.create(messages=[user(text_block(1100, "m1"), text_block(50, "m2", "5m"))])
    assert usage_tuple(moved.usage) == (1100, 0, 50, 0)


async def test_a_second_write_in_flight_keeps_the_first_response_start(emu: Emu) -> None:
    """ "a cache entry only becomes available after the first response begins": with a 0.5 s
    time to first token, a writer at t=10 makes the entry available at 10.5. A second request
    at 10.2 misses and writes the same prefix again; its own response begins at 10.7, so the
    entry still becomes available at 10.5, the earlier of the two: a third request at 10.3
    misses too (and writes), and one at 10.5 reads."""
    emu.state.ttft = 0.5
    system = [text_block(1100, "inflight", "5m")]
    question = [user(text_block(5, "q"))]
    await emu.set_time(10)
    await emu.create(system=system, messages=question)
    await emu.set_time(10.2)
    second = await emu.create(system=system, messages=question)
    assert usage_tuple(second.usage) == (0, 0, 1100, 5)
    await emu.set_time(10.3)
    third = await emu.create(system=system, messages=question)
    assert usage_tuple(third.usage) == (0, 0, 1100, 5)
    (entry,) = (await emu.admin.get("/_emulator/cache")).json()["entries"]
    assert entry["available_at"] == 10.5
    await emu.set_time(10.5)
    fourth = await emu.create(system=system, messages=question)
    assert usage_tuple(fourth.usage) == (1100, 0, 0, 5)
