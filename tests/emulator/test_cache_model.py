"""Unit tests of the cache model itself (sessiongen.cache), no HTTP: flattening and hashing,
the lower-level `CacheStore.apply` on synthetic blocks, the model catalog and pricing."""

from __future__ import annotations

import importlib.util
from typing import Any

import anthropic
import pytest
import sessiongen.cache
from sessiongen.cache import (
    LOOKBACK_WINDOW,
    CacheControlError,
    CacheStore,
    CacheUsage,
    check_breakpoints,
    cost,
    cost_breakdown,
    flatten_request,
    get_model,
    list_models,
    prefix,
    price,
    store,
    token_counts,
)
from sessiongen.catalog import UnknownModel

from tests._filler import filler

MIN = 1024


def body(**fields: Any) -> dict[str, Any]:
    return {"model": "claude-sonnet-4-6", "max_tokens": 8, "messages": [], **fields}


def synthetic(n: int, tokens: int = 100, marks: dict[int, str] | None = None) -> list[Any]:
    """`n` blocks with stable hashes h0..h{n-1} and markers at the given 0-based positions."""
    marks = marks or {}
    return [(f"h{i}", tokens, marks.get(i)) for i in range(n)]


def test_block_positions_follow_tools_system_messages() -> None:
    """One tool = one block, one system text block = one block (a string system is one), one
    message content block = one block (a string content is one; a tool_result is one)."""
    prepared = flatten_request(
        body(
            tools=[{"name": "t", "description": "d", "input_schema": {}}],
            system="You are terse.",
            messages=[
                {"role": "user", "content": "hi"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": "calling"},
                        {"type": "tool_use", "id": "toolu_1", "name": "t", "input": {}},
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "toolu_1",
                            "content": [
                                {"type": "text", "text": "a"},
                                {"type": "text", "text": "b"},
                            ],
                        }
                    ],
                },
            ],
        )
    )
    assert [(b.section, b.path, b.kind) for b in prepared.blocks] == [
        ("tools", "tools.0", "custom"),
        ("system", "system", "text"),
        ("messages", "messages.0.content", "text"),
        ("messages", "messages.1.content.0", "text"),
        ("messages", "messages.1.content.1", "tool_use"),
        ("messages", "messages.2.content.0", "tool_result"),
    ]
    assert prepared.blocks[-1].tokens == 2  # "a" + "b", one token each
    assert prepared.total_tokens == sum(b.tokens for b in prepared.blocks)


def test_hash_ignores_cache_control_and_content_spelling() -> None:
    """The prefix hash covers the block without its cache_control, and a plain-string content
    hashes like the equivalent single text block."""
    plain = flatten_request(body(messages=[{"role": "user", "content": "same"}]))
    marked = flatten_request(
        body(
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "same", "cache_control": {"type": "ephemeral"}}
                    ],
                }
            ]
        )
    )
    assert plain.blocks[0].prefix_hash == marked.blocks[0].prefix_hash
    assert marked.blocks[0].breakpoint == "5m"


def test_hash_covers_role_and_message_boundaries() -> None:
    """The same text as user vs assistant, or split across two messages, is another prefix."""

    def last_hash(messages: list[dict[str, Any]]) -> str:
        return flatten_request(body(messages=messages)).blocks[-1].prefix_hash

    one = last_hash(
        [
            {
                "role": "user",
                "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            }
        ]
    )
    two = last_hash([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
    other_role = last_hash(
        [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    )
    assert len({one, two, other_role}) == 3


def test_tool_input_key_order_is_part_of_the_prefix() -> None:
    """ "Verify that the keys in your tool_use content blocks have stable ordering ... randomize
    key order during JSON conversion, breaking caches": tool_use input order matters, block
    key order does not."""

    def first_hash(block: dict[str, Any]) -> str:
        return (
            flatten_request(body(messages=[{"role": "assistant", "content": [block]}]))
            .blocks[0]
            .prefix_hash
        )

    base = {"type": "tool_use", "id": "toolu_1", "name": "t", "input": {"a": 1, "b": 2}}
    reordered_input = {**base, "input": {"b": 2, "a": 1}}
    reordered_keys = dict(reversed(list(base.items())))
    assert first_hash(base) != first_hash(reordered_input)
    assert first_hash(base) == first_hash(reordered_keys)


def test_tool_result_marker_moves_from_last_sub_block() -> None:
    """ "a marker on the last sub-block is moved to the parent, and a marker elsewhere inside is
    not allowed" (release notes 2025-05-01)."""
    sub = [
        {"type": "text", "text": "a"},
        {"type": "text", "text": "b", "cache_control": {"type": "ephemeral"}},
    ]
    result = {"type": "tool_result", "tool_use_id": "x", "content": sub}
    prepared = flatten_request(body(messages=[{"role": "user", "content": [result]}]))
    assert prepared.blocks[0].breakpoint == "5m"
    result["content"] = list(reversed(sub))
    with pytest.raises(CacheControlError):
        flatten_request(body(messages=[{"role": "user", "content": [result]}]))


def test_thinking_blocks_cannot_carry_a_breakpoint() -> None:
    """ "Thinking blocks cannot be cached directly with cache_control"."""
    thinking = {
        "type": "thinking",
        "thinking": "t",
        "signature": "s",
        "cache_control": {"type": "ephemeral"},
    }
    with pytest.raises(CacheControlError):
        flatten_request(body(messages=[{"role": "assistant", "content": [thinking]}]))


def test_automatic_breakpoint_skips_empty_text_and_is_marked() -> None:
    """ "Empty text blocks cannot be cached"; automatic caching walks back over them."""
    prepared = flatten_request(
        body(
            cache_control={"type": "ephemeral", "ttl": "1h"},
            messages=[
                {
                    "role": "user",
                    "content": [{"type": "text", "text": "x"}, {"type": "text", "text": ""}],
                }
            ],
        )
    )
    assert [(b.breakpoint, b.automatic) for b in prepared.blocks] == [("1h", True), (None, False)]


def test_check_breakpoints_rules() -> None:
    """At most 4 breakpoints; no 1h after a 5m."""
    check_breakpoints([("a", "1h"), ("b", "1h"), ("c", "5m"), ("d", "5m")])
    with pytest.raises(CacheControlError, match="Found 5"):
        check_breakpoints([(str(i), "5m") for i in range(5)])
    with pytest.raises(CacheControlError, match="^b.cache_control.ttl: a ttl='1h'"):
        check_breakpoints([("a", "5m"), ("b", "1h")])


def test_apply_lookback_window_on_synthetic_blocks() -> None:
    """The lower-level entry point: a write at position p is found from a breakpoint at
    p + LOOKBACK_WINDOW - 1, not from p + LOOKBACK_WINDOW."""
    store = CacheStore()
    store.apply(synthetic(11, marks={10: "5m"}), model="m", now=0, min_tokens=MIN)
    near = store.apply(
        synthetic(30, marks={10 + LOOKBACK_WINDOW - 1: "5m"}), model="m", now=0, min_tokens=MIN
    )
    assert near.hit_position == 10 and near.read_tokens == 1100
    fresh = CacheStore()
    fresh.apply(synthetic(11, marks={10: "5m"}), model="m", now=0, min_tokens=MIN)
    far = fresh.apply(
        synthetic(31, marks={10 + LOOKBACK_WINDOW: "5m"}), model="m", now=0, min_tokens=MIN
    )
    assert far.hit_position is None


def test_apply_namespaces_models_and_reports_breakpoints() -> None:
    """Entries never cross models; each breakpoint reports its own outcome."""
    store = CacheStore()
    first = store.apply(synthetic(12, marks={5: "1h", 11: "5m"}), model="m", now=0, min_tokens=MIN)
    assert [(o.position, o.reached_minimum, o.written) for o in first.breakpoints] == [
        (5, False, False),
        (11, True, True),
    ]
    assert (
        store.apply(
            synthetic(12, marks={11: "5m"}), model="other", now=0, min_tokens=MIN
        ).read_tokens
        == 0
    )
    assert (
        store.apply(synthetic(12, marks={11: "5m"}), model="m", now=0, min_tokens=MIN).read_tokens
        == 1200
    )


def test_apply_ttl_boundary_is_inclusive() -> None:
    """5m and 1h are a *minimum* lifetime ("minimum lifetime of 5 minutes"): an entry is still
    readable at exactly 300 s, gone just after."""
    store = CacheStore()
    blocks = synthetic(11, marks={10: "5m"})
    store.apply(blocks, model="m", now=0, min_tokens=MIN)
    assert store.apply(blocks, model="m", now=300, min_tokens=MIN).read_tokens == 1100
    assert store.apply(blocks, model="m", now=600.001, min_tokens=MIN).read_tokens == 0


def test_apply_three_point_billing() -> None:
    """A = highest hit, B = highest 1h breakpoint after A, C = last breakpoint."""
    store = CacheStore()
    store.apply(synthetic(12, marks={11: "1h"}), model="m", now=0, min_tokens=MIN)
    result = store.apply(
        synthetic(20, marks={11: "1h", 14: "1h", 17: "5m"}), model="m", now=0, min_tokens=MIN
    )
    assert (result.read_tokens, result.one_hour_end, result.last_breakpoint_end) == (
        1200,
        1500,
        1800,
    )
    assert result.usage == CacheUsage(
        input_tokens=200,
        cache_read_input_tokens=1200,
        ephemeral_5m_input_tokens=300,
        ephemeral_1h_input_tokens=300,
    )


def test_usage_to_api_shape() -> None:
    """The usage object as the API spells it."""
    assert CacheUsage(3, 2, 5, 7).to_api(11) == {
        "input_tokens": 3,
        "cache_creation_input_tokens": 12,
        "cache_read_input_tokens": 2,
        "cache_creation": {"ephemeral_5m_input_tokens": 5, "ephemeral_1h_input_tokens": 7},
        "output_tokens": 11,
        "service_tier": "standard",
    }


@pytest.mark.parametrize(
    ("model", "minimum"),
    [
        ("claude-opus-5", 512),
        ("claude-sonnet-5", 1024),
        ("claude-sonnet-4-6", 1024),
        ("claude-sonnet-4-5", 1024),
        ("claude-opus-4-1", 1024),
        ("claude-opus-4-7", 2048),
        ("claude-3-5-haiku-latest", 2048),
        ("claude-opus-4-6", 4096),
        ("claude-opus-4-5", 4096),
        ("claude-haiku-4-5", 4096),
        ("claude-haiku-4-5-20251001", 4096),
    ],
)
def test_minimum_cacheable_lengths(model: str, minimum: int) -> None:
    """The minimum cacheable prompt length table (AD:…/prompt-caching#cache-limitations)."""
    assert get_model(model).min_cacheable_tokens == minimum


def test_catalog_prefill_and_aliases() -> None:
    """Prefill is rejected on 4.6+ and 5-series models; dated ids are aliases."""
    assert not get_model("claude-sonnet-4-6").prefill_allowed
    assert not get_model("claude-opus-5").prefill_allowed
    assert get_model("claude-opus-4-5").prefill_allowed
    assert get_model("claude-sonnet-4-5-20250929").id == "claude-sonnet-4-5"
    with pytest.raises(UnknownModel):
        get_model("claude-unknown")


READ_MULTIPLIERS = {
    # The pricing page's exceptions to 0.1x: Opus 5.5 "$0.20" on $4 input, Fable/Mythos 5.1
    # "$0.25" on $10; Sonnet 5.5 ($0.10 on $2) and Fable/Mythos 5.2 ($0.20 on $8) UNCONFIRMED.
    **dict.fromkeys(("claude-opus-5-5", "claude-sonnet-5-5"), 0.05),
    **dict.fromkeys(("claude-fable-5-1", "claude-mythos-5-1"), 0.025),
    **dict.fromkeys(("claude-fable-5-2", "claude-mythos-5-2"), 0.025),
}


def test_prices_follow_the_documented_multipliers() -> None:
    """ "5-minute cache write tokens are 1.25 times the base input tokens price; 1-hour cache
    write tokens are 2 times ...; Cache read tokens are 0.1 times"."""
    for model in list_models():
        if model.provider != "anthropic" or model.id == "claude-mythos-preview":
            continue  # Anthropic's multipliers; Mythos Preview is not in the pricing table
        p = price(model.id)
        if model.id == "claude-3-haiku-20240307":
            # the pricing page's Haiku 3 row, while it was sold: "$0.25 / MTok | $0.30 / MTok
            # | $0.50 / MTok | $0.03 / MTok | $1.25 / MTok" (its write rounded, not 1.25x)
            assert (p.cache_write_5m, p.cache_write_1h, p.cache_read) == (0.3, 0.5, 0.03)
            continue
        assert p.cache_write_5m == pytest.approx(1.25 * p.input), model.id
        assert p.cache_write_1h == pytest.approx(2 * p.input), model.id
        read = READ_MULTIPLIERS.get(model.id, 0.1)
        assert p.cache_read == pytest.approx(read * p.input), model.id
    assert price("claude-opus-4-5").output == 25.0


def test_cost_of_the_docs_usage_example() -> None:
    """cost(usage, model) on the docs' 1h usage example (input 2048, read 1800, 5m 148, 1h 100,
    output 503) at Sonnet 4.6 prices, from a dict, an SDK Usage and a CacheUsage."""
    usage = {
        "input_tokens": 2048,
        "cache_read_input_tokens": 1800,
        "cache_creation_input_tokens": 248,
        "output_tokens": 503,
        "cache_creation": {"ephemeral_5m_input_tokens": 148, "ephemeral_1h_input_tokens": 100},
    }
    expected = (2048 * 3 + 1800 * 0.3 + 148 * 3.75 + 100 * 6 + 503 * 15) / 1e6
    assert cost(usage, "claude-sonnet-4-6") == pytest.approx(expected)
    assert cost(anthropic.types.Usage.model_validate(usage), "claude-sonnet-4-6") == pytest.approx(
        expected
    )
    no_output = CacheUsage(2048, 1800, 148, 100)
    assert cost(no_output, "claude-sonnet-4-6") == pytest.approx(expected - 503 * 15 / 1e6)
    assert cost_breakdown(usage, "claude-sonnet-4-6").cache_write_1h == pytest.approx(600 / 1e6)
    legacy = {"input_tokens": 1, "cache_creation_input_tokens": 10, "output_tokens": 0}
    assert token_counts(legacy)["cache_write_5m"] == 10


# Everything `sessiongen.cache` exported before model.py was split into prefix.py and store.py.
CACHE_EXPORTS = {
    "LOOKBACK_WINDOW",
    "MAX_BREAKPOINTS",
    "TTL",
    "TTL_SECONDS",
    "Block",
    "BoundaryResult",
    "BreakpointOutcome",
    "CacheControlError",
    "CacheEntry",
    "CacheResult",
    "CacheStore",
    "ImplicitResult",
    "ImplicitRule",
    "PromptCacheRules",
    "storage_cost",
    "CacheUsage",
    "CostBreakdown",
    "FlatBlock",
    "ModelInfo",
    "PreparedRequest",
    "Price",
    "UnknownModel",
    "check_breakpoints",
    "cost",
    "cost_breakdown",
    "flatten_request",
    "get_model",
    "is_known_model",
    "list_models",
    "messages_settings",
    "price",
    "system_settings",
    "token_counts",
}


def test_the_cache_package_exports_the_same_names() -> None:
    """The split keeps every name (plus `override_model`), each defined in prefix.py or
    store.py; the old module is gone."""
    package = sessiongen.cache
    diagnosis = {
        "MISS_CAUSES",
        "MISS_SLACK",
        "CallShape",
        "MissCause",
        "count_causes",
        "is_miss",
        "miss_cause",
    }  # the miss-cause rule (diagnosis.py), added since the split
    assert set(package.__all__) == CACHE_EXPORTS | {"override_model", "alias_model"} | diagnosis
    assert all(hasattr(package, name) for name in package.__all__)
    assert package.flatten_request is prefix.flatten_request
    assert package.CacheStore is store.CacheStore
    assert importlib.util.find_spec("sessiongen.cache.model") is None


def test_billing_partitions_the_prompt() -> None:
    """`CacheUsage.total_input_tokens` (the cache side's one total) is the whole prompt,
    whatever the mix of reads, 1h writes, 5m writes and uncached input."""
    request = flatten_request(
        body(
            system=[
                {
                    "type": "text",
                    "text": filler(1100, "s"),
                    "cache_control": {"type": "ephemeral", "ttl": "1h"},
                },
                {"type": "text", "text": filler(1100, "t"), "cache_control": {"type": "ephemeral"}},
            ],
            messages=[{"role": "user", "content": filler(100, "u")}],
        )
    )
    cache = CacheStore()
    first = cache.process(request, now=0.0).usage
    second = cache.process(request, now=1.0).usage
    assert (first.ephemeral_1h_input_tokens, first.ephemeral_5m_input_tokens) == (1100, 1100)
    assert (second.cache_read_input_tokens, second.input_tokens) == (2200, 100)
    for usage in (first, second):
        assert usage.total_input_tokens == request.total_tokens == 2300
