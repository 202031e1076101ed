"""Test doubles for code built on sessiongen: run an engine without a provider.

`ScriptedLLMClient` answers from a script of `ScriptedReply`s and records every request;
`RecordingLLMClient` wraps any LLMClient (a scripted one, or a real one in production) and
records what it forwards. They are kept out of the top-level `sessiongen` namespace, which
holds what production code needs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field

from .errors import ProviderError
from .llm.client import collect
from .llm.recording import RecordingLLMClient
from .llm.types import (
    FinishEvent,
    FinishReason,
    LLMRequest,
    LLMResponse,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallEvent,
    Usage,
    UsageEvent,
)
from .session.counting import RequestCounter
from .tokens import count_text_tokens, count_tool_call_tokens

__all__ = ["RecordingLLMClient", "ScriptedLLMClient", "ScriptedReply"]


@dataclass(frozen=True)
class ScriptedReply:
    """One scripted provider answer: text and/or tool calls, or an error to raise."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: FinishReason | None = None
    error: ProviderError | None = None
    cut_after_events: int | None = None
    usage: Usage | None = None
    """The usage the provider reports; None: the request's input tokens as its provider
    bills them, and the reply's output."""

    @staticmethod
    def calling(*calls: tuple[str, str, dict[str, object]], text: str = "") -> ScriptedReply:
        """A reply that calls tools, given as (id, name, input) triples."""
        return ScriptedReply(
            text=text,
            tool_calls=tuple(ToolCall(id=i, name=n, input=dict(a)) for i, n, a in calls),
        )


@dataclass
class ScriptedLLMClient:
    """Test double: replies from `script` in order, then with `default_text`."""

    script: list[ScriptedReply] = field(default_factory=list)
    default_text: str = "OK"
    requests: list[LLMRequest] = field(default_factory=list)
    counter: RequestCounter = field(default_factory=RequestCounter, repr=False)
    """Counts each request's input tokens exactly, as the provider of its model bills them
    (its own counts, not the engine's: it stands for the provider)."""

    def queue(self, replies: Iterable[ScriptedReply]) -> None:
        self.script.extend(replies)

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        self.requests.append(request)
        reply = self.script.pop(0) if self.script else ScriptedReply(text=self.default_text)
        if reply.error is not None:
            raise reply.error
        events: list[StreamEvent] = []
        if reply.text:
            events.append(TextDelta(text=reply.text))
        events.extend(ToolCallEvent(call=call) for call in reply.tool_calls)
        output = count_text_tokens(reply.text) + sum(
            count_tool_call_tokens(c.name, c.input) for c in reply.tool_calls
        )
        usage = reply.usage or Usage(input_tokens=self.counter.count(request), output_tokens=output)
        events.append(UsageEvent(usage=usage))
        reason: FinishReason = reply.finish_reason or (
            "tool_use" if reply.tool_calls else "end_turn"
        )
        events.append(FinishEvent(reason=reason, model=request.model))
        for index, event in enumerate(events):
            if reply.cut_after_events is not None and index >= reply.cut_after_events:
                return
            yield event

    async def generate(self, request: LLMRequest) -> LLMResponse:
        return await collect(self.stream(request))
