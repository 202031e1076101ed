"""Session History to provider messages: the one conversion the Step and generate share."""

from __future__ import annotations

from collections.abc import Iterable

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
