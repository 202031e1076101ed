"""OpenAILLMClient: the LLMClient over OpenAI Chat Completions, on the official async SDK.

The lowering, the usage reading and the error table are in `openai_wire` (no SDK import);
this module only talks to the SDK. Why Chat Completions: see `openai_wire`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any

import httpx2

from ...errors import ProviderError, ProviderStreamInterrupted
from ...llm._adapter import Call, FailureKind, ProviderAdapter, ProviderAnswer, require
from ...llm.types import (
    FinishEvent,
    FinishReason,
    LLMRequest,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallEvent,
    UsageEvent,
)
from .wire import CONTEXT_LENGTH_CODE, lower_request, usage_from_openai

__all__ = ["OpenAILLMClient"]

require("openai", "openai", "OpenAILLMClient")

from openai import (  # noqa: E402  # the SDK, after the install hint; never this module
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    AsyncOpenAI,
    OpenAIError,
)

_FINISH_REASONS: dict[str, FinishReason] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}


def _read_failure(err: Exception) -> ProviderAnswer | tuple[FailureKind, str] | None:
    if isinstance(err, APIStatusError):
        body: dict[str, Any] = err.body if isinstance(err.body, dict) else {}
        nested = body.get("error")
        error: dict[str, Any] = nested if isinstance(nested, dict) else body
        code = error.get("code")
        kind = error.get("type")
        return ProviderAnswer(
            status=err.status_code,
            message=str(error.get("message") or err.message),
            headers=dict(err.response.headers),
            body=err.body,
            request_id=err.request_id,
            error_type=kind if isinstance(kind, str) else code if isinstance(code, str) else None,
            context_overflow=code == CONTEXT_LENGTH_CODE,
        )
    if isinstance(err, APITimeoutError):
        return "timeout", err.message
    if isinstance(err, APIConnectionError):
        return "connection", err.message
    if isinstance(err, httpx2.HTTPError | httpx2.StreamError | json.JSONDecodeError):
        return "stream", f"{type(err).__name__}: {err}"
    if isinstance(err, OpenAIError):
        return ("credentials" if "api_key" in str(err) else "other"), str(err)
    return None


class _Calls:
    """Tool-call fragments of a Chat stream, by index."""

    def __init__(self) -> None:
        self.parts: dict[int, dict[str, Any]] = {}

    def feed(self, deltas: Any) -> None:
        for delta in deltas or []:
            slot = self.parts.setdefault(delta.index, {"id": None, "name": "", "args": []})
            if delta.id:
                slot["id"] = delta.id
            fn = delta.function
            if fn is not None:
                if fn.name:
                    slot["name"] += fn.name
                if fn.arguments:
                    slot["args"].append(fn.arguments)

    def calls(self, truncated: bool) -> list[ToolCall]:
        out: list[ToolCall] = []
        for index in sorted(self.parts):
            slot = self.parts[index]
            text = "".join(slot["args"])
            try:
                arguments = json.loads(text) if text.strip() else {}
            except json.JSONDecodeError:
                arguments = None
            if not isinstance(arguments, dict):
                if truncated:
                    continue  # output cut by the token limit can end inside the JSON
                raise ProviderError(
                    f"the provider sent invalid JSON arguments for tool {slot['name']!r}"
                )
            out.append(
                ToolCall(id=slot["id"] or f"call_{index}", name=slot["name"], input=arguments)
            )
        return out


class OpenAILLMClient(ProviderAdapter):
    """LLMClient over OpenAI Chat Completions, through `openai.AsyncOpenAI`.

    The SDK's own retries are off; `stream()` retries as every adapter does (`max_retries`,
    `DEFAULT_MAX_RETRIES` unless told; see `ProviderAdapter`), `generate()` makes exactly one
    HTTP attempt (SG-INV-3). Every failure surfaces as a sessiongen error. Pass a ready
    `client` (the caller keeps owning it; its `max_retries` is the adapter's unless one is
    given, and the adapter applies it, the SDK's own retries off) or the options
    to build one; `http_client` is an `httpx2.AsyncClient` (the SDK's own HTTP library).
    """

    provider = "OpenAI"
    request_id_headers = ("x-request-id",)

    def __init__(
        self,
        client: AsyncOpenAI | None = None,
        *,
        http_client: httpx2.AsyncClient | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        max_retries: int | None = None,
    ) -> None:
        if max_retries is None and client is not None:
            max_retries = client.max_retries  # a ready client's retry count, applied here
        super().__init__(max_retries=max_retries)
        if client is not None:
            if (http_client, base_url, api_key) != (None, None, None):
                raise ValueError("pass a ready AsyncOpenAI client or options to build one")
            self._client = client
            self._owns_client = False
        else:
            with self._provider_errors():
                self._client = AsyncOpenAI(
                    api_key=api_key, base_url=base_url, http_client=http_client, max_retries=0
                )
            self._owns_client = True
        self._single_attempt = self._client.with_options(max_retries=0)

    @property
    def client(self) -> AsyncOpenAI:
        return self._client

    def _read_failure(self, err: Exception) -> ProviderAnswer | tuple[FailureKind, str] | None:
        return _read_failure(err)

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.close()

    async def _attempt(self, request: LLMRequest) -> AsyncGenerator[StreamEvent, None]:
        client = self._single_attempt
        body = lower_request(request)
        call = Call()
        calls = _Calls()
        finish: str | None = None
        model, response_id = request.model, None
        usage_seen = False
        with self._provider_errors(call):
            # Only the required fields go typed; the rest of the lowered body goes as
            # extra_body, so the wire body is exactly lower_request's.
            raw_stream = await client.chat.completions.create(
                model=body.pop("model"),
                messages=body.pop("messages"),
                stream=True,
                stream_options={"include_usage": True},
                extra_body=body or None,
                extra_headers=request.headers or None,
            )
            call.request_id = raw_stream.response.headers.get("x-request-id")
            async with raw_stream:
                async for chunk in raw_stream:
                    model, response_id = chunk.model or model, chunk.id or response_id
                    for choice in chunk.choices:
                        if choice.delta.content:
                            yield TextDelta(text=choice.delta.content)
                        calls.feed(choice.delta.tool_calls)
                        if choice.finish_reason is not None:
                            finish = choice.finish_reason
                    if chunk.usage is not None:
                        usage_seen = True
                        yield UsageEvent(usage=usage_from_openai(chunk.usage))
        if finish is None or not usage_seen:
            raise ProviderStreamInterrupted(
                "the provider stream ended before its finish and usage chunks",
                provider_request_id=call.request_id,
            )
        for tool_call in calls.calls(truncated=finish == "length"):
            yield ToolCallEvent(call=tool_call)
        reason = _FINISH_REASONS.get(finish, "other")
        yield FinishEvent(reason=reason, model=model, response_id=response_id)
