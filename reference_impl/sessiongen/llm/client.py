"""The LLMClient protocol and the one function that collects a stream into a response."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
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


class StreamFold:
    """Folds stream events as they arrive: text, reasoning, tool calls, the last usage.

    `collect` and durable Settlement both use it, so a stream means the same to both.
    """

    def __init__(self) -> None:
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.reasoning_signature: str | None = None
        self.calls: list[ToolCall] = []
        self.usage = Usage()

    def feed(self, event: StreamEvent) -> FinishEvent | None:
        """Take one event; returns the finish event when the stream is done."""
        if isinstance(event, TextDelta):
            self.text.append(event.text)
        elif isinstance(event, ReasoningDelta):
            self.reasoning.append(event.text)
            if event.signature is not None:
                self.reasoning_signature = event.signature
        elif isinstance(event, ToolCallEvent):
            self.calls.append(event.call)
        elif isinstance(event, UsageEvent):
            self.usage = event.usage
        elif isinstance(event, FinishEvent):
            return event
        return None

    def response(self, finish: FinishEvent) -> LLMResponse:
        return LLMResponse(
            text="".join(self.text),
            reasoning="".join(self.reasoning),
            reasoning_signature=self.reasoning_signature,
            tool_calls=tuple(self.calls),
            usage=self.usage,
            finish_reason=finish.reason,
            model=finish.model,
            response_id=finish.response_id,
        )


@asynccontextmanager
async def closing(events: AsyncIterator[StreamEvent]) -> AsyncIterator[AsyncIterator[StreamEvent]]:
    """Close `events` on the way out, however it is left (finished, broken off at the finish
    event, an error, a cancellation): a stream left suspended keeps its request, its wire
    body and its connection alive until the garbage collector finds it."""
    try:
        yield events
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()


async def collect(events: AsyncIterator[StreamEvent]) -> LLMResponse:
    """Fold one stream into an LLMResponse, closing it. A stream without a finish event is
    interrupted."""
    fold = StreamFold()
    async with closing(events):
        async for event in events:
            finish = fold.feed(event)
            if finish is not None:
                return fold.response(finish)
    raise ProviderStreamInterrupted("the provider stream ended before it finished")
