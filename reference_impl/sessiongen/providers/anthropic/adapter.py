"""AnthropicLLMClient: the LLMClient over the Anthropic Messages API, on the official async SDK."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any, Self

import httpx
import httpx2
from anthropic import (
    AnthropicError,
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    AsyncAnthropic,
    CredentialsError,
)
from anthropic.types import RawMessageStreamEvent

from ...errors import ProviderError, ProviderStreamInterrupted
from ...llm._adapter import Call, FailureKind, ProviderAdapter, ProviderAnswer
from ...llm._httpx_bridge import as_httpx2, base_url_of
from ...llm.types import (
    FinishEvent,
    FinishReason,
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
from .wire import ERROR_TYPES, lower_request, usage_from_anthropic

__all__ = ["AnthropicLLMClient", "lower_request"]

# --- reading the SDK's errors ------------------------------------------------------------

# The HTTP status of each error type, for an `error` event inside a 200 stream, which the SDK
# raises as a status error carrying the stream's 200.
_ERROR_TYPE_STATUS = {error_type: status for status, error_type in ERROR_TYPES.items()}

_NO_CREDENTIALS = "no usable Anthropic credentials (set ANTHROPIC_API_KEY or pass api_key)"


def _read_failure(err: Exception) -> ProviderAnswer | tuple[FailureKind, str] | None:
    if isinstance(err, APIStatusError):
        status = err.status_code
        if status < 400:
            status = _ERROR_TYPE_STATUS.get(err.type or "", status)
        return ProviderAnswer(
            status=status,
            message=err.api_message or err.message,
            headers=dict(err.response.headers),
            body=err.body,
            request_id=err.request_id or _body_request_id(err.body),
            error_type=err.type,
        )
    if isinstance(err, APITimeoutError):
        return "timeout", err.message
    if isinstance(err, APIConnectionError):
        cause = err.__cause__
        return "connection", f"{type(cause).__name__}: {cause}" if cause else err.message
    if isinstance(err, httpx2.HTTPError | httpx2.StreamError | json.JSONDecodeError):
        # The SDK wraps transport failures only while sending; once the body streams, they
        # surface raw, and the stream is lost whatever the cause (timeouts included).
        return "stream", f"{type(err).__name__}: {err}"
    if isinstance(err, CredentialsError):
        # Raised when building a client whose credentials come from an unusable profile.
        return "credentials", f"{_NO_CREDENTIALS}: {err}"
    if isinstance(err, AnthropicError):
        return "other", str(err)
    if isinstance(err, TypeError) and "authentication method" in str(err):
        # With no credentials at all, the SDK raises a bare TypeError when it sends.
        return "credentials", f"{_NO_CREDENTIALS}: {err}"
    return None


def _body_request_id(body: object) -> str | None:
    value = body.get("request_id") if isinstance(body, dict) else None
    return value if isinstance(value, str) else None


# --- stream decoding -----------------------------------------------------------------------

_FINISH_REASONS: dict[str, FinishReason] = {
    "end_turn": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "stop_sequence": "stop_sequence",
    "refusal": "refusal",
    "model_context_window_exceeded": "context_window",
}


class _ToolBlock:
    def __init__(self, call_id: str, name: str, start_input: dict[str, Any]) -> None:
        self.call_id = call_id
        self.name = name
        self.start_input = start_input
        self.parts: list[str] = []


class _StreamDecoder:
    """Folds raw Messages stream events into sessiongen stream events, one event at a time."""

    def __init__(self) -> None:
        self.model = ""
        self.response_id: str | None = None
        self.usage = Usage()
        self.stop_reason: str | None = None
        self.finish: FinishEvent | None = None
        self._tools: dict[int, _ToolBlock] = {}
        self.unparsable_tool: str | None = None

    def feed(self, raw: RawMessageStreamEvent) -> list[StreamEvent]:
        # Dispatch on the `type` string, not the class: the SDK builds an unknown event type
        # into one of the known classes, and unknown events must be tolerated.
        if raw.type == "message_start":
            self.model = raw.message.model
            self.response_id = raw.message.id
            self.usage = usage_from_anthropic(raw.message.usage, self.usage)
            return [UsageEvent(usage=self.usage)]
        if raw.type == "content_block_start":
            return self._block_start(raw.index, raw.content_block)
        if raw.type == "content_block_delta":
            return self._block_delta(raw.index, raw.delta)
        if raw.type == "content_block_stop":
            return self._block_stop(raw.index)
        if raw.type == "message_delta":
            if raw.delta.stop_reason is not None:
                self.stop_reason = raw.delta.stop_reason
            self.usage = usage_from_anthropic(raw.usage, self.usage)
            return [UsageEvent(usage=self.usage)]
        if raw.type == "message_stop":
            self.finish = self._finish_event()
        return []

    def _block_start(self, index: int, block: Any) -> list[StreamEvent]:
        kind = getattr(block, "type", None)
        if kind == "tool_use":
            self._tools[index] = _ToolBlock(block.id, block.name, dict(block.input or {}))
        elif kind == "text" and block.text:
            return [TextDelta(text=block.text)]
        elif kind == "thinking" and block.thinking:
            return [ReasoningDelta(text=block.thinking, signature=block.signature or None)]
        return []

    def _block_delta(self, index: int, delta: Any) -> list[StreamEvent]:
        kind = getattr(delta, "type", None)
        if kind == "text_delta":
            return [TextDelta(text=delta.text)]
        if kind == "thinking_delta":
            return [ReasoningDelta(text=delta.thinking)]
        if kind == "signature_delta":
            return [ReasoningDelta(text="", signature=delta.signature)]
        if kind == "input_json_delta" and index in self._tools:
            self._tools[index].parts.append(delta.partial_json)
        return []

    def _block_stop(self, index: int) -> list[StreamEvent]:
        tool = self._tools.pop(index, None)
        if tool is None:
            return []
        text = "".join(tool.parts)
        if not text.strip():
            arguments: Any = tool.start_input
        else:
            try:
                arguments = json.loads(text)
            except json.JSONDecodeError:
                arguments = None
        if not isinstance(arguments, dict):
            # Output cut by max_tokens can end inside the JSON; that is only an error if the
            # message does not finish with max_tokens, which is known at message_delta.
            self.unparsable_tool = tool.name
            return []
        call = ToolCall(id=tool.call_id, name=tool.name, input=arguments)
        return [ToolCallEvent(call=call)]

    def _finish_event(self) -> FinishEvent:
        reason = _FINISH_REASONS.get(self.stop_reason or "", "other")
        return FinishEvent(reason=reason, model=self.model, response_id=self.response_id)


# --- the client ----------------------------------------------------------------------------


class AnthropicLLMClient(ProviderAdapter):
    """LLMClient over Anthropic Messages, through `anthropic.AsyncAnthropic`.

    The SDK's own retries are off; `stream()` retries as every adapter does (`max_retries`,
    `DEFAULT_MAX_RETRIES` unless told; see `ProviderAdapter`), `generate()` makes exactly one
    HTTP attempt. Every failure surfaces as a sessiongen error, never an SDK one. Pass a ready
    `client` (which the caller keeps owning; its `max_retries` is the adapter's unless one is
    given, and the adapter applies it, the SDK's own retries off), or the
    options to build one; an `http_client` may be an `httpx2.AsyncClient` (the SDK's own) or
    an `httpx.AsyncClient`, and its base_url is used when `base_url` is not given. A built
    client is closed by `aclose()`.
    """

    provider = "Anthropic"
    request_id_headers = ("request-id",)

    def __init__(
        self,
        client: AsyncAnthropic | None = None,
        *,
        http_client: httpx2.AsyncClient | httpx.AsyncClient | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        max_retries: int | None = None,
    ) -> None:
        if max_retries is None and client is not None:
            max_retries = client.max_retries  # a ready client's retry count, applied here
        super().__init__(max_retries=max_retries)
        if client is not None:
            if (http_client, base_url, api_key) != (None, None, None):
                raise ValueError("pass a ready AsyncAnthropic client or options to build one")
            self._client = client
            self._owns_client = False
        else:
            # None falls through to the SDK's ANTHROPIC_API_KEY / ANTHROPIC_BASE_URL lookup.
            with self._provider_errors():
                self._client = AsyncAnthropic(
                    api_key=api_key,
                    base_url=base_url or base_url_of(http_client),
                    http_client=as_httpx2(http_client),
                    max_retries=0,
                )
            self._owns_client = True
        self._single_attempt = self._client.with_options(max_retries=0)

    @classmethod
    def from_env(cls, *, max_retries: int | None = None) -> Self:
        """A client configured by the SDK's ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL."""
        return cls(max_retries=max_retries)

    @property
    def client(self) -> AsyncAnthropic:
        return self._client

    def _read_failure(self, err: Exception) -> ProviderAnswer | tuple[FailureKind, str] | None:
        return _read_failure(err)

    async def generate(self, request: LLMRequest) -> LLMResponse:
        if request.max_output_tokens == 0:
            # Pre-warming: the API rejects max_tokens 0 on a stream, so ask without one.
            return await self._complete(self._single_attempt, request)
        return await super().generate(request)

    async def _complete(self, client: AsyncAnthropic, request: LLMRequest) -> LLMResponse:
        """One non-streaming call, for requests the API refuses to stream."""
        body = lower_request(request)
        with self._provider_errors():
            message = await client.messages.create(
                model=body.pop("model"),
                max_tokens=body.pop("max_tokens"),
                messages=body.pop("messages"),
                extra_body=body or None,
                extra_headers=request.headers or None,
            )
        text = "".join(b.text for b in message.content if b.type == "text")
        calls = tuple(
            ToolCall(id=b.id, name=b.name, input=dict(b.input))
            for b in message.content
            if b.type == "tool_use"
        )
        return LLMResponse(
            text=text,
            tool_calls=calls,
            usage=usage_from_anthropic(message.usage),
            finish_reason=_FINISH_REASONS.get(message.stop_reason or "", "other"),
            model=message.model,
            response_id=message.id,
        )

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.close()

    async def _attempt(self, request: LLMRequest) -> AsyncGenerator[StreamEvent, None]:
        client = self._single_attempt
        body = lower_request(request)
        call = Call()
        decoder = _StreamDecoder()
        with self._provider_errors(call):
            # Only the required fields go as typed arguments; the rest of the lowered body goes
            # as extra_body, so the wire body is exactly lower_request's, whatever the SDK knows.
            raw_stream = await client.messages.create(
                model=body.pop("model"),
                max_tokens=body.pop("max_tokens"),
                messages=body.pop("messages"),
                stream=True,
                extra_body=body or None,
                extra_headers=request.headers or None,
            )
            call.request_id = raw_stream.response.headers.get("request-id")
            async with raw_stream:
                async for raw in raw_stream:
                    for event in decoder.feed(raw):
                        yield event
                    if decoder.finish is not None:
                        break
        # Yielded after the response is closed, so a consumer that stops here leaks nothing.
        if decoder.finish is None:
            raise ProviderStreamInterrupted(
                "the provider stream ended before message_stop",
                provider_request_id=call.request_id,
            )
        if decoder.unparsable_tool is not None and decoder.finish.reason != "max_tokens":
            raise ProviderError(
                f"the provider sent invalid JSON input for tool {decoder.unparsable_tool!r}",
                provider_request_id=call.request_id,
            )
        yield decoder.finish
