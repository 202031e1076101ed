"""Google's Gemini API (generateContent, google-genai SDK): implicit caching with no writes,
and explicit `cachedContents` resources."""

from __future__ import annotations

from ...llm.types import LLMRequest
from ..base import Provider
from . import wire
from .counting import declarations_of, gemini_positions


def count_request(request: LLMRequest) -> int:
    """The generateContent body's input tokens."""
    body = wire.rest_body(wire.lower_request(request))
    return sum(gemini_positions(body, declarations_of(body), request.model))


PROVIDER = Provider(
    name="gemini",
    package=__name__,
    sdk="google.genai",
    sdk_label="google-genai SDK",
    key_env=("GOOGLE_API_KEY", "GEMINI_API_KEY"),
    lab_model="gemini-3-flash-preview",  # implicit caching from 1,024 tokens
    cache_note=(
        "\nGemini caches implicitly, with no writes: every later request reads back the"
        "\nprefix an earlier one sent (from 1,024 tokens on gemini-3-flash-preview). The"
        "\ngenerate call reads the whole session prefix and leaves the session unchanged."
    ),
    lower=wire.lower_request,
    count=count_request,
    usage=wire.usage_from_gemini,
    view=wire.wire_view,
)
