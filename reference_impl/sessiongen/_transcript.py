"""Session History to provider messages: the one conversion the Step and generate share."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from itertools import compress, count
from operator import is_not

from .llm.types import (
    Content,
    LLMMessage,
    ReasoningContent,
    TextContent,
    ToolCallContent,
    ToolResultContent,
)
from .model import (
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


def to_llm_messages(history: Iterable[Message]) -> tuple[LLMMessage, ...]:
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
    return tuple(
        LLMMessage(role="user" if role == "user" else "assistant", content=tuple(content))
        for role, content in merged
    )


def join_llm_messages(
    first: tuple[LLMMessage, ...], then: tuple[LLMMessage, ...]
) -> tuple[LLMMessage, ...]:
    """Two conversions as one: the run at the seam merges as `to_llm_messages` merges it."""
    if not then:
        return first
    if first and first[-1].role == then[0].role:
        seam = LLMMessage(role=then[0].role, content=(*first[-1].content, *then[0].content))
        joined = (*first[:-1], seam, *then[1:])
        note_derived(joined, first, (first[-1],), (seam, *then[1:]))
        return joined
    joined = (*first, *then)
    note_derived(joined, first, (), then)
    return joined


# --- derivations: which messages a message tuple has that another one has not -------------
#
# A request's messages are mostly another tuple's (the lowered history) with a few messages
# replaced or added (the seam, the transient messages, the marked blocks). Whoever builds
# such a tuple notes it here, so a sum over its messages (`_compaction.request_tokens`) can
# come from the other tuple's sum, instead of visiting every message again. A note holds
# the tuples it names, so the ids stay theirs; only the last few are kept.

DERIVATIONS = 32

Messages = tuple[LLMMessage, ...]
_derived: dict[int, tuple[Messages, Derivation]] = {}
_derived_lock = threading.Lock()


@dataclass(frozen=True)
class Derivation:
    """A message tuple is `source` without the messages `removed` and with those `added`;
    `marks_only`: each added message is a removed one with cache marks changed, nothing
    else (so it counts the same tokens: a mark is no content)."""

    source: Messages
    removed: Messages
    added: Messages
    marks_only: bool = False


def note_derived(
    result: Messages,
    source: Messages,
    removed: Messages,
    added: Messages,
    *,
    marks_only: bool = False,
) -> None:
    """`result` is `source` without the messages `removed` and with the messages `added`."""
    with _derived_lock:
        _derived.pop(id(result), None)
        _derived[id(result)] = (result, Derivation(source, removed, added, marks_only))
        while len(_derived) > DERIVATIONS:
            del _derived[next(iter(_derived))]


def derivation(result: Messages) -> Derivation | None:
    """How `result` was derived, if that was noted."""
    entry = _derived.get(id(result))
    if entry is None or entry[0] is not result:
        return None
    return entry[1]


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

    @cached_property
    def history(self) -> tuple[Message, ...]:
        """The active messages: one tuple per range, so later conversions of it can be
        recognised by identity."""
        return self.messages[self.start : self.cut]

    def advance(self, messages: tuple[Message, ...]) -> ActiveRange:
        """The range of `messages`, a later state of the same session: only the messages
        from the first one that is not (identically) the same as before are looked at."""
        same = _common_prefix(self.messages, messages)
        if self.start >= same:
            return active_range(messages)
        cut = self.cut if self.cut is not None and self.cut < same else None
        unsettled = tuple(i for i in self.unsettled if i < same)
        return _scan(messages, same, self.start, cut, unsettled)


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
    return ActiveRange(messages, start, cut, (*unsettled, *more))


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
