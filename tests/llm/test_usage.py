"""The one reading of an Anthropic `usage`, and everything that reads one through it."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest
from sessiongen.cache import CacheUsage, token_counts
from sessiongen.lab import logged_usage
from sessiongen.llm.types import Usage
from sessiongen.providers.anthropic.wire import usage_from_anthropic

DOCS_EXAMPLE: dict[str, Any] = {
    "input_tokens": 2048,
    "cache_read_input_tokens": 1800,
    "cache_creation_input_tokens": 248,
    "output_tokens": 503,
    "cache_creation": {"ephemeral_5m_input_tokens": 148, "ephemeral_1h_input_tokens": 100},
}
DOCS_COUNTS = Usage(
    input_tokens=2048,
    output_tokens=503,
    cache_read_tokens=1800,
    cache_write_5m_tokens=148,
    cache_write_1h_tokens=100,
)
LEGACY: dict[str, Any] = {"input_tokens": 3, "output_tokens": 1, "cache_creation_input_tokens": 50}


@pytest.mark.parametrize(
    "usage",
    [DOCS_EXAMPLE, anthropic.types.Usage.model_validate(DOCS_EXAMPLE)],
    ids=["api-dict", "sdk-usage"],
)
def test_a_usage_reads_the_same_from_a_dict_and_an_sdk_object(usage: object) -> None:
    assert usage_from_anthropic(usage) == DOCS_COUNTS


@pytest.mark.parametrize(
    "usage",
    [LEGACY, anthropic.types.Usage.model_validate(LEGACY), {**LEGACY, "cache_creation": None}],
    ids=["api-dict", "sdk-usage", "null-split"],
)
def test_a_write_total_without_its_ttl_split_counts_as_5m(usage: object) -> None:
    assert usage_from_anthropic(usage) == Usage(
        input_tokens=3, output_tokens=1, cache_write_5m_tokens=50
    )


def test_absent_and_null_fields_count_zero_on_their_own() -> None:
    assert usage_from_anthropic({}) == Usage()
    assert usage_from_anthropic({"input_tokens": None, "output_tokens": 4}) == Usage(
        output_tokens=4
    )


def test_fields_an_event_omits_keep_their_earlier_value() -> None:
    delta = anthropic.types.MessageDeltaUsage.model_validate({"output_tokens": 25})
    assert usage_from_anthropic(delta, DOCS_COUNTS) == DOCS_COUNTS.model_copy(
        update={"output_tokens": 25}
    )


def test_a_later_write_total_keeps_the_1h_share_already_known() -> None:
    grown = anthropic.types.MessageDeltaUsage.model_validate(
        {"output_tokens": 9, "cache_creation_input_tokens": 300}
    )
    assert usage_from_anthropic(grown, DOCS_COUNTS) == DOCS_COUNTS.model_copy(
        update={"output_tokens": 9, "cache_write_5m_tokens": 200, "cache_write_1h_tokens": 100}
    )
    shrunk = {"cache_creation_input_tokens": 60}
    assert usage_from_anthropic(shrunk, DOCS_COUNTS) == DOCS_COUNTS.model_copy(
        update={"cache_write_5m_tokens": 0, "cache_write_1h_tokens": 60}
    )


# --- the readers ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "usage",
    [DOCS_EXAMPLE, LEGACY, anthropic.types.Usage.model_validate(DOCS_EXAMPLE)],
    ids=["api-dict", "legacy", "sdk-usage"],
)
def test_pricing_counts_tokens_by_the_rule(usage: object) -> None:
    counts = usage_from_anthropic(usage)
    assert token_counts(usage) == {
        "input": counts.input_tokens,
        "cache_write_5m": counts.cache_write_5m_tokens,
        "cache_write_1h": counts.cache_write_1h_tokens,
        "cache_read": counts.cache_read_tokens,
        "output": counts.output_tokens,
    }


def test_pricing_reads_a_cache_usage_with_its_ttl_split() -> None:
    assert token_counts(CacheUsage(2048, 1800, 148, 100)) == {
        "input": 2048,
        "cache_write_5m": 148,
        "cache_write_1h": 100,
        "cache_read": 1800,
        "output": 0,
    }


def test_logged_usage_reads_by_the_rule() -> None:
    assert logged_usage({"usage": DOCS_EXAMPLE}) == DOCS_COUNTS
    assert logged_usage({"usage": LEGACY}) == Usage(
        input_tokens=3, cache_write_5m_tokens=50, output_tokens=1
    )
    assert logged_usage({"usage": None}) == Usage()


def test_logged_usage_total_input_is_the_llm_layers() -> None:
    logged = logged_usage({"usage": DOCS_EXAMPLE})
    assert logged.total_input_tokens == 2048 + 1800 + 148 + 100
