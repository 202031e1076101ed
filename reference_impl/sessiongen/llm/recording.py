"""RecordingLLMClient: forwards to another client and keeps every request it forwards.

Its public home is `sessiongen.testing`, next to the scripted test double it often wraps.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from .client import LLMClient, closing
from .types import LLMRequest, LLMResponse, StreamEvent


@dataclass
class RecordingLLMClient:
    """Wraps an LLMClient; `requests` holds each forwarded request, `calls` says how.

    Each call is forwarded as the same call, so the inner client keeps its own behaviour
    (e.g. AnthropicLLMClient's single attempt and unstreamed pre-warming in `generate`).
    """

    inner: LLMClient
    requests: list[LLMRequest] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        self.requests.append(request)
        self.calls.append("stream")
        async with closing(self.inner.stream(request)) as events:
            async for event in events:
                yield event

    async def generate(self, request: LLMRequest) -> LLMResponse:
        self.requests.append(request)
        self.calls.append("generate")
        return await self.inner.generate(request)
