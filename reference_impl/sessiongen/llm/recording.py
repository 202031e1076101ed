"""RecordingLLMClient: forwards to another client and keeps every request it forwards."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from .client import LLMClient, collect
from .types import LLMRequest, LLMResponse, StreamEvent


@dataclass
class RecordingLLMClient:
    """Wraps an LLMClient; `requests` holds each forwarded request, `calls` says how."""

    inner: LLMClient
    requests: list[LLMRequest] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        self.requests.append(request)
        self.calls.append("stream")
        async for event in self.inner.stream(request):
            yield event

    async def generate(self, request: LLMRequest) -> LLMResponse:
        self.requests.append(request)
        self.calls.append("generate")
        return await collect(self.inner.stream(request))
