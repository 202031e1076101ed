"""ScriptedLLMClient: a test double that answers from a queue of scripted responses.

Shipped inside the package so users can test their own code against sessiongen without a
provider; its public home is `sessiongen.testing`. It records every request it receives,
like RecordingLLMClient.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field

from ..errors import ProviderError
from ..tokens import count_text_tokens, count_tool_call_tokens
from .client import collect
from .types import (
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


@dataclass(frozen=True)
class ScriptedReply:
    """One scripted provider answer: text and/or tool calls, or an error to raise."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: FinishReason | None = None
    error: ProviderError | None = None
    cut_after_events: int | None = None

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

    def queue(self, replies: Iterable[ScriptedReply]) -> None:
        self.script.extend(replies)

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        # The engine's counter (`count_request_tokens`, each message counted once); imported
        # here, since the engine's modules import the llm package.
        from ..session.compaction import request_tokens

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
        events.append(
            UsageEvent(usage=Usage(input_tokens=request_tokens(request), output_tokens=output))
        )
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
