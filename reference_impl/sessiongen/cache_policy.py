"""Cache breakpoint policies: where a prepared request asks the provider to cache.

A policy is a function from a request (and the index of the block the tail breakpoint
anchors to) to the same request with `cache` marks placed. `opencode_default` places, within
a budget of four: the last tool, the first and last system parts, and the anchor block.
"""

from __future__ import annotations

from typing import Protocol

from .cache.model import MAX_BREAKPOINTS
from .llm.types import CacheMark, CacheTTL, LLMMessage, LLMRequest


class CachePolicy(Protocol):
    def __call__(self, request: LLMRequest, *, anchor: int | None, ttl: CacheTTL) -> LLMRequest:
        """Place breakpoints. `anchor` is the global index of the message content block the
        tail breakpoint goes on (None: the last block)."""
        ...


def _mark_block(
    messages: tuple[LLMMessage, ...], index: int, mark: CacheMark
) -> tuple[LLMMessage, ...]:
    out: list[LLMMessage] = []
    position = 0
    for message in messages:
        content = list(message.content)
        for i, block in enumerate(content):
            if position == index:
                content[i] = block.model_copy(update={"cache": mark})
            position += 1
        out.append(message.model_copy(update={"content": tuple(content)}))
    return tuple(out)


def block_count(messages: tuple[LLMMessage, ...]) -> int:
    return sum(len(m.content) for m in messages)


def opencode_default(request: LLMRequest, *, anchor: int | None, ttl: CacheTTL) -> LLMRequest:
    """Last tool, first and last system part, and the tail (anchor) block."""
    mark = CacheMark(ttl=ttl)
    budget = MAX_BREAKPOINTS
    tools = list(request.tools)
    if tools:
        tools[-1] = tools[-1].model_copy(update={"cache": mark})
        budget -= 1
    system = list(request.system)
    for i in sorted({0, len(system) - 1} if system else set()):
        if budget > 1:  # always keep one for the tail
            system[i] = system[i].model_copy(update={"cache": mark})
            budget -= 1
    messages = request.messages
    total = block_count(messages)
    if total and budget > 0:
        target = total - 1 if anchor is None else anchor
        if 0 <= target < total:
            messages = _mark_block(messages, target, mark)
    return request.model_copy(
        update={"tools": tuple(tools), "system": tuple(system), "messages": messages}
    )


def no_cache(request: LLMRequest, *, anchor: int | None, ttl: CacheTTL) -> LLMRequest:
    """Place no breakpoints at all."""
    return request
