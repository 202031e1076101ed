"""Session History to provider messages: the one conversion the Step and generate share."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from itertools import compress, count
from operator import attrgetter, is_, is_not
from typing import TYPE_CHECKING, Any

from ..llm.types import (
    Content,
    LLMMessage,
    ReasoningContent,
    TextContent,
    ToolCallContent,
    ToolResultContent,
)
from ..model import (
    AssistantMessage,
    CompactionMessage,
    InstructionMessage,
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    UserMessage,
)

SUMMARY_PREFIX = "Summary of the conversation so far:\n"

if TYPE_CHECKING:
    kept = cached_property
else:

    class kept:
        """`functools.cached_property` without its lock (Python 3.11 takes one on every
        first read): computed at the first read and kept on the instance. Two threads may
        both compute it; each gets the same value."""

        def __init__(self, compute: Any) -> None:
            self.compute, self.name = compute, compute.__name__
            self.__doc__ = compute.__doc__

        def __get__(self, instance: Any, owner: Any = None) -> Any:
            if instance is None:
                return self
            value = instance.__dict__[self.name] = self.compute(instance)
            return value


def _blocks(message: Message) -> list[tuple[str, list[Content]]]:
    """A message as (role, content) runs; an assistant with tool calls adds a result run."""
    if isinstance(message, UserMessage):
        return [("user", [TextContent(text=p.text) for p in message.parts if p.text])]
    if isinstance(message, InstructionMessage):
        return [("user", [TextContent(text=message.text)])]
    if isinstance(message, CompactionMessage):
        return [("user", [TextContent(text=SUMMARY_PREFIX + message.summary)])]
    content: list[Content] = []
    results: list[Content] = []
    for part in message.parts:
        if isinstance(part, TextPart) and part.text:
            content.append(TextContent(text=part.text))
        elif isinstance(part, ReasoningPart):
            content.append(ReasoningContent(text=part.text, signature=part.signature))
        elif isinstance(part, ToolCallPart):
            content.append(ToolCallContent(id=part.id, name=part.name, input=part.input))
            results.append(
                ToolResultContent(
                    tool_call_id=part.id,
                    text=part.result or "",
                    is_error=part.state == "error",
                )
            )
    runs: list[tuple[str, list[Content]]] = [("assistant", content)]
    if results:
        runs.append(("user", results))
    return runs


def to_llm_messages(history: Iterable[Message]) -> LLMMessages:
    """Convert in order; empty runs are dropped and consecutive same-role runs merge."""
    merged: list[tuple[str, list[Content]]] = []
    for message in history:
        for role, content in _blocks(message):
            if not content:
                continue
            if merged and merged[-1][0] == role:
                merged[-1][1].extend(content)
            else:
                merged.append((role, list(content)))
    return LLMMessages(
        LLMMessage(role="user" if role == "user" else "assistant", content=tuple(content))
        for role, content in merged
    )


class LLMMessages(tuple[LLMMessage, ...]):
    """Provider messages that own what is known about them.

    A tuple, so it goes wherever a request's messages go; it is immutable, so what is
    computed about it once stays true and is kept on it (never in a table elsewhere):
    its content block count (`blocks`) and its variants with cache marks placed
    (`cache_policy`). How it was made is kept too:

    * `base`, `keep`: it is `base[:keep]` followed by its own messages from `keep` on (a
      lowered history with a transient tail, or a seam merged): what is known about `base`
      serves it, and only the tail is new;
    * `history`: the session messages it is the lowering of, if it is one (so a later
      history that extends them is lowered by converting only what follows).

    Slicing or copying it gives a plain tuple, which knows none of this; a plain tuple is
    served by doing the work, never by a guess."""

    base: tuple[LLMMessage, ...] | None = None
    keep: int = 0
    tail: LLMMessages | None = None
    """Its messages from `keep` on, when they are a tuple that owns its facts too."""
    history: tuple[Message, ...] | None = None

    def __hash__(self) -> int:  # kept: a tuple's hash visits every message each time
        found: int | None = self.__dict__.get("_hash")
        if found is None:
            found = self.__dict__["_hash"] = tuple.__hash__(self)
        return found

    def __reduce__(self) -> tuple[type[tuple[LLMMessage, ...]], tuple[tuple[LLMMessage, ...]]]:
        return (tuple, (tuple(self),))  # a copy or pickle is a plain tuple: nothing owned

    @kept
    def blocks(self) -> int:
        """How many content blocks the messages hold."""
        if self.base is not None:
            kept = block_count(self.base) - sum_blocks(self.base[self.keep :])
            return kept + sum_blocks(self[self.keep :])
        return sum_blocks(self)

    @kept
    def marked(self) -> dict[tuple[tuple[int, ...], tuple[object, ...]], LLMMessages]:
        """Variants with cache marks placed, by (blocks, the mark's fields), as
        `cache_policy` places them (filled there; replaced whole, never edited, so threads
        share it safely)."""
        return {}

    @classmethod
    def derive(
        cls, base: tuple[LLMMessage, ...], keep: int, tail: tuple[LLMMessage, ...]
    ) -> LLMMessages:
        """`base[:keep]` followed by `tail`, knowing so."""
        head = base if keep == len(base) else base[:keep]
        derived = cls(tuple.__add__(head, tuple(tail)))  # C-level copies, not iteration
        derived.base, derived.keep = base, keep
        if isinstance(tail, LLMMessages):
            derived.tail = tail
        return derived


_CONTENT = attrgetter("content")


def sum_blocks(messages: Iterable[LLMMessage]) -> int:
    return sum(map(len, map(_CONTENT, messages)))


def block_count(messages: tuple[LLMMessage, ...]) -> int:
    """How many content blocks `messages` hold (kept by an `LLMMessages`)."""
    if isinstance(messages, LLMMessages):
        return messages.blocks
    return sum_blocks(messages)


def join_llm_messages(first: tuple[LLMMessage, ...], then: tuple[LLMMessage, ...]) -> LLMMessages:
    """Two conversions as one: the run at the seam merges as `to_llm_messages` merges it."""
    if first and then and first[-1].role == then[0].role:
        seam = LLMMessage(role=then[0].role, content=(*first[-1].content, *then[0].content))
        return LLMMessages.derive(first, len(first) - 1, (seam, *then[1:]))
    return LLMMessages.derive(first, len(first), then)


def lower_history(history: tuple[Message, ...], prior: LLMMessages | None) -> LLMMessages:
    """`to_llm_messages(history)`, where `prior` is an earlier lowering of the same session:
    if `history` starts with `prior`'s messages (the same objects: the store hands out the
    same immutable messages until one changes), only what follows is converted. Identity,
    not equality, decides, so a changed message is never served from `prior`."""
    if prior is not None and prior.history is history:
        return prior
    before = None if prior is None else prior.history
    if prior is None or before is None or not _starts_with(history, before):
        lowered = to_llm_messages(history)
        lowered.history = history
        return lowered
    lowered = join_llm_messages(prior, to_llm_messages(history[len(before) :]))
    lowered.blocks  # noqa: B018  (computed while `prior` is at hand)
    # It keeps no reference to `prior`, so a long-lived session holds no chain of them.
    lowered.base, lowered.keep, lowered.history = None, 0, history
    return lowered


def _starts_with(history: tuple[Message, ...], prefix: tuple[Message, ...]) -> bool:
    return len(prefix) <= len(history) and all(map(is_, prefix, history))


JOINS_KEPT = 2
"""How many joins of its lowered history with transient messages a range keeps."""


@dataclass(frozen=True)
class ActiveRange:
    """Where active history lies in a session's messages: from `start` (the latest
    completed compaction, or 0) up to `cut` (the first unsettled assistant message at or
    after `start`; None: the end)."""

    messages: tuple[Message, ...]
    start: int
    cut: int | None
    unsettled: tuple[int, ...] = ()
    """Where every unsettled assistant message is, active or not."""
    prior: LLMMessages | None = field(default=None, repr=False, compare=False)
    """The latest lowering of an earlier range of the same session (`lowered` converts only
    what its history does not already hold)."""

    @cached_property
    def history(self) -> tuple[Message, ...]:
        """The active messages: one tuple per range, so later conversions of it can be
        recognised by identity."""
        return self.messages[self.start : self.cut]

    @cached_property
    def lowered(self) -> LLMMessages:
        """`history` as provider messages, owned by this range (so by the session's state
        in its context): converted once, and from `prior` where it extends it."""
        lowered = lower_history(self.history, self.prior)
        object.__setattr__(self, "prior", None)  # used: the range keeps its own lowering only
        return lowered

    def join(self, tail: tuple[LLMMessage, ...]) -> LLMMessages:
        """`join_llm_messages(self.lowered, tail)`, kept for the last few tails (by value):
        the same transient messages on the same history (a warming ping, a repeated
        question) are the same provider messages, with their marked variants, and copy
        nothing again (a counter then finds them unchanged by identity, at pointer cost)."""
        if not tail:
            return self.lowered
        joins: dict[tuple[LLMMessage, ...], LLMMessages] = self.__dict__.get("joins", {})
        try:
            found = joins.get(tail)
        except TypeError:  # an unhashable block (a tool call's input): joined each time
            return join_llm_messages(self.lowered, tail)
        if found is None:
            found = join_llm_messages(self.lowered, tail)
            kept = list(joins.items())[-(JOINS_KEPT - 1) :]
            self.__dict__["joins"] = {**dict(kept), tail: found}  # replaced whole
        return found

    def _latest_lowering(self) -> LLMMessages | None:
        lowered = self.__dict__.get("lowered")
        return lowered if isinstance(lowered, LLMMessages) else self.prior

    def advance(self, messages: tuple[Message, ...]) -> ActiveRange:
        """The range of `messages`, a later state of the same session: only the messages
        from the first one that is not (identically) the same as before are looked at."""
        same = _common_prefix(self.messages, messages)
        prior = self._latest_lowering()
        if self.start >= same:
            return _scan(messages, 0, 0, None, prior=prior)
        cut = self.cut if self.cut is not None and self.cut < same else None
        unsettled = tuple(i for i in self.unsettled if i < same)
        return _scan(messages, same, self.start, cut, unsettled, prior)


def _common_prefix(a: tuple[Message, ...], b: tuple[Message, ...]) -> int:
    """How many leading messages `a` and `b` share (the same objects)."""
    differs = next(compress(count(), map(is_not, a, b)), None)
    return min(len(a), len(b)) if differs is None else differs


def _scan(
    messages: tuple[Message, ...],
    begin: int,
    start: int,
    cut: int | None,
    unsettled: tuple[int, ...] = (),
    prior: LLMMessages | None = None,
) -> ActiveRange:
    """The range of `messages` given the range (`start`, `cut`, `unsettled`) of the ones
    before `begin`."""
    more: list[int] = []
    for index in range(begin, len(messages)):
        message = messages[index]
        if isinstance(message, CompactionMessage):
            start, cut = index, None
        elif isinstance(message, AssistantMessage) and not message.settled:
            more.append(index)
            if cut is None:
                cut = index
    return ActiveRange(messages, start, cut, (*unsettled, *more), prior)


def active_range(messages: tuple[Message, ...]) -> ActiveRange:
    return _scan(messages, 0, 0, None)


def active_history(messages: Iterable[Message]) -> tuple[Message, ...]:
    """History after the latest completed compaction, cut at the first unsettled assistant
    message, so an open tool call never reaches a request."""
    active: list[Message] = []
    for message in messages:
        if isinstance(message, CompactionMessage):
            active = []
        active.append(message)
    cut: list[Message] = []
    for message in active:
        if isinstance(message, AssistantMessage) and not message.settled:
            break
        cut.append(message)
    return tuple(cut)
