"""Claude on Bedrock's Converse API is billed as the Messages API bills it, plus a fixed
per-request overhead: a request is counted as Anthropic's wire counts it
(`providers.anthropic.counting`) and `request_overhead()` more."""

from __future__ import annotations

from ...llm.types import LLMRequest
from ...tokens import token_section
from ..anthropic import count_request as count_as_messages


def request_overhead() -> int:
    """The input tokens Bedrock bills on every Converse request beyond what the same
    request costs on the Messages API (CALIBRATED on recorded Converse usage: `catalog/
    tokens.json` `bedrock.request`). Billed as uncached input: it is no part of a prefix."""
    return int(token_section("bedrock")["request"])


def count_request(request: LLMRequest) -> int:
    """The request's input tokens: the Messages body it maps to, plus the overhead."""
    return count_as_messages(request) + request_overhead()
