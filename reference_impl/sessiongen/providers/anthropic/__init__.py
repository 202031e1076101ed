"""Anthropic's Messages API: the provider the engine is built around and the emulator's
reference for prompt caching (explicit `cache_control` breakpoints)."""

from __future__ import annotations

from ...llm.types import LLMRequest
from ..base import Provider
from . import wire
from .counting import count_model_body_tokens

WRITES_NOTE = (
    "\nTurn one writes the prefix (tools, system, history); every later request reads it"
    "\nback and writes only what is new. The generate call reads the whole session prefix"
    "\nand leaves the session unchanged."
)


def count_request(request: LLMRequest) -> int:
    """The Messages body's input tokens (framing and the tool-use system prompt included)."""
    return count_model_body_tokens(wire.lower_request(request))


PROVIDER = Provider(
    name="anthropic",
    package=__name__,
    sdk="anthropic",
    sdk_label="anthropic SDK",
    key_env=("ANTHROPIC_API_KEY",),
    lab_model="claude-sonnet-4-6",
    cache_note=WRITES_NOTE,
    lower=wire.lower_request,
    count=count_request,
    usage=wire.usage_from_anthropic,
    view=wire.wire_view,
    messages_wire=True,
)
