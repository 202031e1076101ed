"""Cache breakpoint policies: where a prepared request asks the provider to cache.

A policy is a function from a request (and the index of the block the tail breakpoint
anchors to) to the same request with `cache` marks placed, within the provider's budget of
four. `opencode_default`: the last tool, the first and last system parts, the anchor block.
`previous_tail` (the default): the last tool, the block that ended the previous request (the
one before the last assistant message), the anchor block, and system parts while the budget
lasts; the extra mark lets a request that adds 20 or more blocks (a tool-heavy Step) still
find the previous request's entry, which the provider's 20-block lookback from the tail
alone cannot reach.
Extra breakpoints add no cost: writes are billed up to the last breakpoint either way.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Protocol

from ._transcript import note_derived
from .llm.types import (
    CacheMark,
    CacheTTL,
    LLMMessage,
    LLMRequest,
    ReasoningContent,
    TextContent,
)

_CONTENT = attrgetter("content")


class CachePolicy(Protocol):
    """Places cache breakpoints on a prepared request; see `opencode_default`."""

    def __call__(self, request: LLMRequest, *, anchor: int | None, ttl: CacheTTL) -> LLMRequest:
        """Place breakpoints. `anchor` is the global index of the message content block the
        tail breakpoint goes on (None: the last block)."""
        ...


def _mark_block(
    messages: tuple[LLMMessage, ...], index: int, mark: CacheMark
) -> tuple[LLMMessage, ...]:
    """`messages` with block `index` marked: only the message holding it is copied (the rest
    are immutable and shared). Searched from the end, where breakpoints go."""
    end = block_count(messages)
    marked_messages = _marked(messages, index, mark, end)
    remember_block_count(marked_messages, end)  # a mark moves no block
    return marked_messages


def _marked(
    messages: tuple[LLMMessage, ...], index: int, mark: CacheMark, end: int
) -> tuple[LLMMessage, ...]:
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        start = end - len(message.content)
        if start <= index < end:
            content = list(message.content)
            content[index - start] = content[index - start].model_copy(update={"cache": mark})
            marked = message.model_copy(update={"content": tuple(content)})
            result = (*messages[:i], marked, *messages[i + 1 :])
            note_derived(result, messages, (message,), (marked,), marks_only=True)
            return result
        end = start
    return messages


_last_count: tuple[tuple[LLMMessage, ...], int] = ((), 0)


def remember_block_count(messages: tuple[LLMMessage, ...], blocks: int) -> None:
    """Tell `block_count` the answer for `messages` (the caller built them and knows it)."""
    global _last_count
    _last_count = (messages, blocks)


def block_count(messages: tuple[LLMMessage, ...]) -> int:
    """How many content blocks `messages` hold. A policy asks this of the same messages
    several times, so the last answer is kept (for that one tuple, by identity)."""
    last = _last_count
    if last[0] is messages:
        return last[1]
    blocks = sum(map(len, map(_CONTENT, messages)))
    remember_block_count(messages, blocks)
    return blocks


def previous_request_tail(messages: tuple[LLMMessage, ...]) -> int | None:
    """The block that ended the previous request: the one before the last assistant message."""
    position = block_count(messages)
    for message in reversed(messages):
        position -= len(message.content)
        if message.role == "assistant":
            return None if position == 0 else position - 1
    return None


def _place(
    request: LLMRequest,
    *,
    system_parts: set[int],
    message_blocks: list[int],
    ttl: CacheTTL,
) -> LLMRequest:
    """Mark the last tool, then system parts, then message blocks, within the budget."""
    mark = CacheMark(ttl=ttl)
    from .cache.prefix import MAX_BREAKPOINTS  # the cache model is imported when first needed

    budget = MAX_BREAKPOINTS
    tools = list(request.tools)
    if tools:
        tools[-1] = tools[-1].model_copy(update={"cache": mark})
        budget -= 1
    total = block_count(request.messages)
    blocks = sorted({b for b in message_blocks if 0 <= b < total})
    system = list(request.system)
    for i in sorted(p for p in system_parts if 0 <= p < len(system)):
        if budget > len(blocks):  # the message blocks come first
            system[i] = system[i].model_copy(update={"cache": mark})
            budget -= 1
    messages = request.messages
    for block in blocks[-budget:] if budget else []:
        messages = _mark_block(messages, block, mark)
    return request.model_copy(
        update={"tools": tuple(tools), "system": tuple(system), "messages": messages}
    )


def _tail(request: LLMRequest, anchor: int | None) -> int:
    return block_count(request.messages) - 1 if anchor is None else anchor


def opencode_default(request: LLMRequest, *, anchor: int | None, ttl: CacheTTL) -> LLMRequest:
    """Last tool, first and last system part, and the tail (anchor) block."""
    return _place(
        request,
        system_parts={0, len(request.system) - 1},
        message_blocks=[_tail(request, anchor)],
        ttl=ttl,
    )


def previous_tail(request: LLMRequest, *, anchor: int | None, ttl: CacheTTL) -> LLMRequest:
    """Last tool, the previous request's tail and the tail (anchor), then the first and last
    system parts while the budget lasts: a session's first request has no previous tail, so
    it marks both system parts (the first is what sessions with other instructions share);
    later requests mark the first system part only."""
    tail = _tail(request, anchor)
    previous = previous_request_tail(request.messages)
    blocks = [tail] if previous is None or previous >= tail else [previous, tail]
    system = {0, len(request.system) - 1}
    return _place(request, system_parts=system, message_blocks=blocks, ttl=ttl)


def no_cache(request: LLMRequest, *, anchor: int | None, ttl: CacheTTL) -> LLMRequest:
    """Place no breakpoints at all."""
    return request


DEFAULT_CACHE_POLICY: CachePolicy = previous_tail
"""The engine's policy when none is given: the one place the default is chosen. Measured
(`warming.placement`, notebook 03) on seeded tool-heavy coding sessions through the engine
and the emulator, `previous_tail` costs 17-20% less than `opencode_default`: every Step
that adds 20 or more blocks makes the latter miss the previous request's entry."""


def _cacheable(messages: tuple[LLMMessage, ...], index: int) -> bool:
    """Whether the block at `index` can carry a breakpoint on the wire: a reasoning block
    cannot (the adapter drops its mark) and neither can an empty text block."""
    position = 0
    for message in messages:
        if index < position + len(message.content):
            block = message.content[index - position]
            return not isinstance(block, ReasoningContent) and not (
                isinstance(block, TextContent) and not block.text
            )
        position += len(message.content)
    return False


def lookback_ladder(request: LLMRequest, *, anchor: int | None, ttl: CacheTTL) -> LLMRequest:
    """Last tool, last system part, the tail (anchor), and a rung `LOOKBACK_WINDOW` blocks
    before the tail.

    Structure-blind: it never asks which block ended the previous request. The provider
    checks the 20 blocks ending at each breakpoint, so the tail's window and the rung's
    window together cover the 40 blocks before the tail without a gap: any earlier entry in
    them is read, whatever wrote it (a Step, a generate, a request whose reply failed). It
    loses to `previous_tail` on a Step that adds 40 or more blocks (20+ parallel tool calls)
    and keeps the last system part marked, so the shared tools+system entry stays refreshed
    for the next session. A rung on a block that cannot carry a mark (reasoning, empty
    text) moves toward the tail, which only narrows the covered span.
    """
    tail = _tail(request, anchor)
    from .cache.store import LOOKBACK_WINDOW

    rung = tail - LOOKBACK_WINDOW
    while 0 <= rung < tail and not _cacheable(request.messages, rung):
        rung += 1
    blocks = [rung, tail] if 0 <= rung < tail else [tail]
    return _place(request, system_parts={len(request.system) - 1}, message_blocks=blocks, ttl=ttl)
