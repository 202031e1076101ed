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

from typing import Protocol

from ..llm.types import (
    CacheMark,
    CacheTTL,
    LLMMessage,
    LLMRequest,
    ReasoningContent,
    TextContent,
)
from .transcript import LLMMessages, block_count, sum_blocks


class CachePolicy(Protocol):
    """Places cache breakpoints on a prepared request; see `opencode_default`."""

    def __call__(self, request: LLMRequest, *, anchor: int | None, ttl: CacheTTL) -> LLMRequest:
        """Place breakpoints. `anchor` is the global index of the message content block the
        tail breakpoint goes on (None: the last block)."""
        ...


MARKED_VARIANTS = 4
"""How many marked variants of one message tuple it keeps (`LLMMessages.marked`)."""


def mark_blocks(
    messages: tuple[LLMMessage, ...], blocks: tuple[int, ...], mark: CacheMark
) -> tuple[LLMMessage, ...]:
    """`messages` with each of `blocks` (global content block indexes, ascending, each in
    range) marked with `mark`: only the messages holding one are copied (the rest are
    immutable and shared).

    An `LLMMessages` made from another (`base[:keep]` and a tail of its own: a request's
    history and its transient messages) has the base's variant with the marks that fall in
    it, which the base keeps (so a history is marked once for all the requests that share
    it), and only its own tail is marked here. Either way the result is the same messages
    with the same marks."""
    if not blocks:
        return messages
    if not isinstance(messages, LLMMessages):
        return _marked(messages, blocks, mark)
    key = (blocks, tuple(mark.__dict__.values()))  # the mark's value, cheaper than its hash
    found = messages.marked.get(key)
    if found is not None:
        return found
    base = messages.base
    if base is not None:
        keep = messages.keep
        before = block_count(messages) - sum_blocks(messages[keep:])
        head = mark_blocks(base, tuple(b for b in blocks if b < before), mark)
        own = tuple(b - before for b in blocks if b >= before)
        tail = messages.tail
        marked_tail = (
            _marked(messages[keep:], own, mark) if tail is None else mark_blocks(tail, own, mark)
        )
        result = LLMMessages.derive(head, keep, marked_tail)
    else:
        result = LLMMessages(_marked(messages, blocks, mark))
    kept = list(messages.marked.items())[-(MARKED_VARIANTS - 1) :]
    messages.marked = {**dict(kept), key: result}  # replaced whole: never seen half made
    result.__dict__["blocks"] = messages.blocks  # a mark moves no block
    return result


def _marked(
    messages: tuple[LLMMessage, ...], blocks: tuple[int, ...], mark: CacheMark
) -> tuple[LLMMessage, ...]:
    """Full placement: `messages` with `blocks` marked, searched from the end, where
    breakpoints go; each message holding one is copied once."""
    if not blocks:
        return messages
    result = list(messages)
    wanted = sorted(blocks, reverse=True)
    end = block_count(messages)
    for i in range(len(messages) - 1, -1, -1):
        if not wanted:
            break
        message = messages[i]
        start = end - len(message.content)
        if wanted[0] >= start:
            content = list(message.content)
            while wanted and wanted[0] >= start:
                at = wanted.pop(0) - start
                content[at] = content[at].model_copy(update={"cache": mark})
            result[i] = message.model_copy(update={"content": tuple(content)})
        end = start
    return tuple(result)


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
    # startup: the cache model loads with the first request, not with the engine's import
    from ..cache.prefix import MAX_BREAKPOINTS

    budget = MAX_BREAKPOINTS
    tools = list(request.tools)
    if tools:
        tools[-1] = tools[-1].with_cache(mark)
        budget -= 1
    total = block_count(request.messages)
    blocks = sorted({b for b in message_blocks if 0 <= b < total})
    system = list(request.system)
    for i in sorted(p for p in system_parts if 0 <= p < len(system)):
        if budget > len(blocks):  # the message blocks come first
            system[i] = system[i].model_copy(update={"cache": mark})
            budget -= 1
    messages = mark_blocks(request.messages, tuple(blocks[-budget:] if budget else ()), mark)
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
(`warming.study.placement`, notebook 03) on seeded tool-heavy coding sessions through the engine
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
    from ..cache.store import LOOKBACK_WINDOW  # startup: as `_place` imports the cache model

    rung = tail - LOOKBACK_WINDOW
    while 0 <= rung < tail and not _cacheable(request.messages, rung):
        rung += 1
    blocks = [rung, tail] if 0 <= rung < tail else [tail]
    return _place(request, system_parts={len(request.system) - 1}, message_blocks=blocks, ttl=ttl)
