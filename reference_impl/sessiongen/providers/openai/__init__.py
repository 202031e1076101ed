"""OpenAI's Chat Completions and Responses APIs: automatic prefix caching, no writes, read
back in 128-token increments from 1,024 tokens."""

from __future__ import annotations

from ...llm.types import LLMRequest
from ..base import Provider
from . import wire
from .counting import openai_chat_positions


def count_request(request: LLMRequest) -> int:
    """The Chat Completions body's input tokens (the adapter's wire)."""
    return sum(openai_chat_positions(wire.lower_request(request)))


PROVIDER = Provider(
    name="openai",
    package=__name__,
    sdk="openai",
    sdk_label="openai SDK (Chat Completions)",
    key_env=("OPENAI_API_KEY",),
    lab_model="gpt-4.1",
    cache_note=(
        "\nOpenAI caches automatically, with no writes: every later request reads back the"
        "\nprefix an earlier one sent, rounded down to a multiple of 128 tokens (from 1,024)."
        "\nThe generate call reads the session prefix and leaves the session unchanged."
    ),
    lower=wire.lower_request,
    count=count_request,
    usage=wire.usage_from_openai,
    view=wire.wire_view,
)
