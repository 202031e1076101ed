"""GeminiLLMClient: the LLMClient over Gemini `generateContent`, on the official `google-genai`.

Both `stream()` and `generate()` make exactly one HTTP attempt (SG-INV-3): the SDK client is
built with `HttpRetryOptions(attempts=1)`, which also turns off the SDK's implicit retry of
connection errors (it retries those only when no `retry_options` are set).
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any, cast

import httpx

from ...errors import ProviderStreamInterrupted
from ...llm._adapter import FailureKind, ProviderAdapter, ProviderAnswer, require
from ...llm.types import (
    FinishEvent,
    FinishReason,
    LLMRequest,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallEvent,
    UsageEvent,
)
from .wire import FINISH_REASONS, encode_signature, lower_request, usage_from_gemini

__all__ = ["GeminiLLMClient", "lower_request"]

require("google.genai", "google-genai", "GeminiLLMClient")

from google import genai  # noqa: E402  # the SDK, after the install hint
from google.genai import errors as genai_errors  # noqa: E402
from google.genai import types  # noqa: E402

SINGLE_ATTEMPT = types.HttpRetryOptions(attempts=1)
API_VERSION = "v1beta"  # the REST reference's version; google-genai 3.x would default to v1


def _read_failure(err: Exception) -> ProviderAnswer | tuple[FailureKind, str] | None:
    if isinstance(err, genai_errors.APIError):
        message = err.message or str(err)
        status = err.code if isinstance(err.code, int) else 500
        response = getattr(err, "response", None)
        headers = getattr(response, "headers", None)
        return ProviderAnswer(
            status=status,
            message=message,
            headers=dict(headers) if headers is not None else {},
            body=err.details,
            error_type=err.status if isinstance(err.status, str) else None,
            # The API's words for an over-long prompt (UNCONFIRMED wording).
            context_overflow="exceeds the maximum number of tokens" in message,
        )
    if isinstance(err, httpx.TimeoutException):
        return "timeout", str(err)
    if isinstance(err, httpx.TransportError):
        return "connection", f"{type(err).__name__}: {err}"
    if isinstance(err, httpx.HTTPError | httpx.StreamError | json.JSONDecodeError):
        return "stream", f"{type(err).__name__}: {err}"
    if isinstance(err, genai_errors.UnknownApiResponseError):
        return "stream", f"an unreadable chunk: {err}"
    return None


class _Decoder:
    """Folds `GenerateContentResponse` chunks into sessiongen stream events."""

    def __init__(self) -> None:
        self.model = ""
        self.response_id: str | None = None
        self.finish_reason: str | None = None
        self.calls = 0

    def feed(self, chunk: types.GenerateContentResponse) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        self.model = chunk.model_version or self.model
        self.response_id = chunk.response_id or self.response_id
        candidate = chunk.candidates[0] if chunk.candidates else None
        if candidate is not None:
            for part in (candidate.content.parts if candidate.content else None) or []:
                events.extend(self._part(part))
            if candidate.finish_reason is not None:
                self.finish_reason = str(candidate.finish_reason.value)
        if chunk.usage_metadata is not None:
            events.append(UsageEvent(usage=usage_from_gemini(chunk.usage_metadata)))
        return events

    def _part(self, part: types.Part) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        signature = encode_signature(part.thought_signature) if part.thought_signature else None
        if part.thought and part.text:
            return [ReasoningDelta(text=part.text, signature=signature)]
        if signature is not None:
            # A signature on a text or call part belongs to the reasoning before it.
            events.append(ReasoningDelta(text="", signature=signature))
        if part.function_call is not None:
            self.calls += 1
            call = part.function_call
            # The API may omit call ids (UNCONFIRMED when); a stable stand-in is made up.
            call_id = call.id or f"call_{self.response_id or 'gemini'}_{self.calls}"
            events.append(
                ToolCallEvent(
                    call=ToolCall(id=call_id, name=call.name or "", input=dict(call.args or {}))
                )
            )
        elif part.text:
            events.append(TextDelta(text=part.text))
        return events

    def finish(self) -> FinishEvent:
        reason = cast(FinishReason, FINISH_REASONS.get(self.finish_reason or "", "other"))
        if reason == "end_turn" and self.calls:
            reason = "tool_use"
        return FinishEvent(reason=reason, model=self.model, response_id=self.response_id)


class GeminiLLMClient(ProviderAdapter):
    """LLMClient over Gemini, through `google.genai.Client(...).aio`.

    The SDK's own retries are off (`SINGLE_ATTEMPT`); `stream()` retries as every adapter
    does (`max_retries`, `DEFAULT_MAX_RETRIES` unless told; see `ProviderAdapter`),
    `generate()` makes one HTTP attempt. Pass a ready `client` (kept by the caller, built
    with retries off), or the options to build one: `base_url` (e.g. the emulator's) and an
    `http_client` (an `httpx.AsyncClient`, e.g. over `httpx.ASGITransport(app)`), which the
    SDK then uses for every call. A built client is closed by `aclose()`.
    """

    provider = "Gemini"
    request_id_headers = ("x-request-id",)

    def __init__(
        self,
        client: genai.Client | None = None,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        http_client: httpx.AsyncClient | None = None,
        max_retries: int | None = None,
    ) -> None:
        super().__init__(max_retries=max_retries)
        if client is not None:
            if (api_key, base_url, http_client) != (None, None, None):
                raise ValueError("pass a ready genai.Client or options to build one")
            self._client = client
            self._owns_client = False
        else:
            options = types.HttpOptions(
                base_url=base_url,
                api_version=API_VERSION,
                retry_options=SINGLE_ATTEMPT,
                httpx_async_client=http_client,
            )
            self._client = genai.Client(api_key=api_key, http_options=options)
            self._owns_client = True

    @property
    def client(self) -> genai.Client:
        return self._client

    def _read_failure(self, err: Exception) -> ProviderAnswer | tuple[FailureKind, str] | None:
        return _read_failure(err)

    async def _attempt(self, request: LLMRequest) -> AsyncGenerator[StreamEvent, None]:
        kwargs = lower_request(request)
        config: dict[str, Any] = kwargs["config"]
        if request.headers:
            config["http_options"] = {"headers": dict(request.headers)}
        decoder = _Decoder()
        saw_finish = False
        with self._provider_errors():
            chunks = await self._client.aio.models.generate_content_stream(
                model=kwargs["model"],
                contents=kwargs["contents"],
                config=config,  # type: ignore[arg-type]  # a GenerateContentConfigDict
            )
            try:
                async for chunk in chunks:
                    for event in decoder.feed(chunk):
                        yield event
                    saw_finish = saw_finish or decoder.finish_reason is not None
            finally:
                # The SDK's stream holds the HTTP response until it is closed.
                aclose = getattr(chunks, "aclose", None)
                if aclose is not None:
                    await aclose()
        if not saw_finish:
            raise ProviderStreamInterrupted("the provider stream ended before a finishReason")
        yield decoder.finish()

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aio.aclose()
