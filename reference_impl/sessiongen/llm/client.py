"""The LLMClient protocol and the one function that collects a stream into a response."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol, runtime_checkable

from ..errors import ProviderStreamInterrupted
from .types import (
    FinishEvent,
    LLMRequest,
    LLMResponse,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallEvent,
    Usage,
    UsageEvent,
)


@runtime_checkable
class LLMClient(Protocol):
    """Executes provider requests. It never decides what becomes durable."""

    def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        """One provider call as a stream of events, ending with a FinishEvent."""
        ...

    async def generate(self, request: LLMRequest) -> LLMResponse:
        """One provider call collected into a response: exactly one stream."""
        ...


async def collect(events: AsyncIterator[StreamEvent]) -> LLMResponse:
    """Fold one stream into an LLMResponse. A stream without a finish event is interrupted."""
    text: list[str] = []
    reasoning: list[str] = []
    calls: list[ToolCall] = []
    usage = Usage()
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
            return LLMResponse(
                text="".join(text),
                reasoning="".join(reasoning),
                tool_calls=tuple(calls),
                usage=usage,
                finish_reason=event.reason,
                model=event.model,
                response_id=event.response_id,
            )
    raise ProviderStreamInterrupted("the provider stream ended before it finished")
