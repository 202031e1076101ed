"""Claude on Bedrock's Converse API is billed as the Messages API bills it: a request is
counted as Anthropic's wire counts it (`providers.anthropic.counting`). A per-request
overhead beyond that (about 8 tokens in one reviewer's recordings) is not borne out by the
fitting projects' Converse requests, once Claude's own per-request template is counted."""

from __future__ import annotations

from ...llm.types import LLMRequest
from ..anthropic import count_request as count_as_messages


def count_request(request: LLMRequest) -> int:
    """The request's input tokens, as the Messages body it maps to."""
    return count_as_messages(request)
