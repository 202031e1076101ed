"""Settlement: give one provider stream its durable meaning.

It projects the streamed text and tool calls onto the Step's assistant message, records the
usage, executes the tool calls in the workspace (a failing tool is a tool error result, never
a crash), and marks a Step whose stream broke as interrupted, keeping what did arrive.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

from ..errors import ContextOverflow, ProviderError, ProviderStreamInterrupted
from ..llm.client import StreamFold, closing
from ..llm.types import FinishReason, StreamEvent, ToolCall, Usage
from ..model import (
    Part,
    ReasoningPart,
    StepInterrupted,
    StepSettled,
    TextPart,
    ToolCallPart,
    ToolExecuted,
)
from ..tools import ToolRegistry, Workspace, run_tool_call
from .store import SessionStore


@dataclass(frozen=True)
class Settled:
    message_id: str
    tool_calls: tuple[ToolCall, ...]
    finish_reason: FinishReason
    usage: Usage


def _parts(fold: StreamFold, *, with_calls: bool = True) -> tuple[Part, ...]:
    parts: list[Part] = []
    if fold.reasoning or fold.reasoning_signature:
        # The signature goes back on the wire with the thinking block in later requests,
        # which the provider requires after a tool call made with extended thinking.
        parts.append(
            ReasoningPart(text="".join(fold.reasoning), signature=fold.reasoning_signature)
        )
    if fold.text:
        parts.append(TextPart(text="".join(fold.text)))
    if with_calls:
        parts += [ToolCallPart(id=c.id, name=c.name, input=c.input) for c in fold.calls]
    return tuple(parts)


async def settle_stream(
    store: SessionStore, session_id: str, message_id: str, events: AsyncIterator[StreamEvent]
) -> Settled:
    """Consume the stream; one transaction settles it, or marks it interrupted and re-raises.

    The stream is closed whichever way this ends (settled, interrupted, cancelled)."""
    fold = StreamFold()
    try:
        async with closing(events):
            async for event in events:
                finish = fold.feed(event)
                if finish is not None:
                    settled = StepSettled(
                        message_id=message_id,
                        parts=_parts(fold),
                        finish_reason=finish.reason,
                        usage=fold.usage,
                    )
                    store.append(session_id, [settled])
                    return Settled(message_id, tuple(fold.calls), finish.reason, fold.usage)
        raise ProviderStreamInterrupted("the provider stream ended before it finished")
    except (ProviderError, ContextOverflow) as error:
        interrupted = StepInterrupted(
            message_id=message_id,
            reason=f"{type(error).__name__}: {error}",
            parts=_parts(fold, with_calls=False),
        )
        store.append(session_id, [interrupted])
        raise


async def execute_tools(
    store: SessionStore,
    session_id: str,
    message_id: str,
    calls: tuple[ToolCall, ...],
    tools: ToolRegistry,
    permitted: tuple[str, ...],
    workspace: str | None,
) -> None:
    """Run each call once, in order; each result is its own durable event."""
    root = None if workspace is None else Workspace(workspace)
    for call in calls:
        outcome = await run_tool_call(tools, call, permitted, root)
        store.append(
            session_id,
            [
                ToolExecuted(
                    message_id=message_id,
                    call_id=call.id,
                    result=outcome.text,
                    is_error=outcome.is_error,
                )
            ],
        )
