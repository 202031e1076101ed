"""Texts of an exact size under the emulator's base count, for tests that size prompts to the
token (the minimum cacheable length, a TTL boundary, a breakpoint interval)."""

from __future__ import annotations

from sessiongen.tokens import count_text_tokens, text_of_tokens


def filler(tokens: int, tag: str) -> str:
    """An ASCII text of exactly `tokens` base tokens, unique by `tag`."""
    text = text_of_tokens(tokens, tag)
    assert count_text_tokens(text) == tokens, (tag, tokens)
    return text
