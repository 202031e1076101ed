"""Settlement: give one provider stream its durable meaning.

It projects the streamed text and tool calls onto the Step's assistant message, records the
usage, executes the tool calls in the workspace (a failing tool is a tool error result, never
a crash), and marks a Step whose stream broke as interrupted, keeping what did arrive.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from .errors import ContextOverflow, ProviderError, ProviderStreamInterrupted, ToolError
from .llm.types import (
    FinishEvent,
    FinishReason,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallEvent,
    Usage,
    UsageEvent,
)
from .model import (
    Part,
    ReasoningPart,
    StepInterrupted,
    StepSettled,
    TextPart,
    ToolCallPart,
    ToolExecuted,
)
from .store import SessionStore
from .tools import ToolRegistry


@dataclass(frozen=True)
class Settled:
    message_id: str
    tool_calls: tuple[ToolCall, ...]
    finish_reason: FinishReason
    usage: Usage


def _parts(text: list[str], reasoning: list[str], calls: list[ToolCall]) -> tuple[Part, ...]:
    parts: list[Part] = []
    if reasoning:
        parts.append(ReasoningPart(text="".join(reasoning)))
    if text:
        parts.append(TextPart(text="".join(text)))
    parts += [ToolCallPart(id=c.id, name=c.name, input=c.input) for c in calls]
    return tuple(parts)


async def settle_stream(
    store: SessionStore, session_id: str, message_id: str, events: AsyncIterator[StreamEvent]
) -> Settled:
    """Consume the stream; one transaction settles it, or marks it interrupted and re-raises."""
    text: list[str] = []
    reasoning: list[str] = []
    calls: list[ToolCall] = []
    usage = Usage()
    try:
        async for event in events:
            if isinstance(event, TextDelta):
                text.append(event.text)
            elif isinstance(event, ReasoningDelta):
                reasoning.append(event.text)
            elif isinstance(event, ToolCallEvent):
                calls.append(event.call)
            elif isinstance(event, UsageEvent):
                usage = event.usage
            elif isinstance(event, FinishEvent):
                store.append(
                    session_id,
                    [
                        StepSettled(
                            message_id=message_id,
                            parts=_parts(text, reasoning, calls),
                            finish_reason=event.reason,
                            usage=usage,
                        )
                    ],
                )
                return Settled(message_id, tuple(calls), event.reason, usage)
        raise ProviderStreamInterrupted("the provider stream ended before it finished")
    except (ProviderError, ContextOverflow) as error:
        store.append(
            session_id,
            [
                StepInterrupted(
                    message_id=message_id,
                    reason=f"{type(error).__name__}: {error}",
                    parts=_parts(text, reasoning, []),
                )
            ],
        )
        raise


def execute_tools(
    store: SessionStore,
    session_id: str,
    message_id: str,
    calls: tuple[ToolCall, ...],
    tools: ToolRegistry,
    permitted: tuple[str, ...],
    workspace: str | None,
) -> None:
    """Run each call once, in order; each result is its own durable event."""
    for call in calls:
        try:
            if call.name not in permitted:
                raise ToolError(f"tool {call.name!r} is not permitted for this agent")
            if workspace is None:
                raise ToolError("this session has no workspace")
            result, is_error = tools.get(call.name).execute(Path(workspace), call.input), False
        except ToolError as error:
            result, is_error = f"{type(error).__name__}: {error}", True
        store.append(
            session_id,
            [
                ToolExecuted(
                    message_id=message_id, call_id=call.id, result=result, is_error=is_error
                )
            ],
        )
