"""OpenAILLMClient: the LLMClient over OpenAI Chat Completions, on the official async SDK.

The lowering, the usage reading and the error table are in `openai_wire` (no SDK import);
this module only talks to the SDK. Why Chat Completions: see `openai_wire`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from contextlib import aclosing, contextmanager
from typing import Any

import httpx2
from openai import (  # the SDK: absolute import, never this module
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    AsyncOpenAI,
    OpenAIError,
)

from .._resource import AsyncResource
from ..errors import (
    ContextOverflow,
    ProviderAuthenticationError,
    ProviderConnectionError,
    ProviderError,
    ProviderStreamInterrupted,
    ProviderTimeout,
)
from .client import collect
from .openai_wire import error_for, lower_request, usage_from_openai
from .types import (
    FinishEvent,
    FinishReason,
    LLMRequest,
    LLMResponse,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallEvent,
    UsageEvent,
)

__all__ = ["OpenAILLMClient"]

_FINISH_REASONS: dict[str, FinishReason] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}


def _status_error(err: APIStatusError) -> ProviderError | ContextOverflow:
    body: dict[str, Any] = err.body if isinstance(err.body, dict) else {}
    nested = body.get("error")
    error: dict[str, Any] = nested if isinstance(nested, dict) else body
    message = str(error.get("message") or err.message)
    code = error.get("code")
    return error_for(
        err.status_code,
        message,
        code=code if isinstance(code, str) else None,
        request_id=err.request_id,
        error_type=error.get("type") if isinstance(error.get("type"), str) else None,
    )


@contextmanager
def _provider_errors(request_id: list[str | None]) -> Iterator[None]:
    """Translate every SDK and transport failure inside the block into a sessiongen error."""
    try:
        yield
    except APIStatusError as err:
        raise _status_error(err) from err
    except APITimeoutError as err:
        raise ProviderTimeout("the provider call timed out", request_id=request_id[0]) from err
    except APIConnectionError as err:
        raise ProviderConnectionError(
            f"could not reach the provider: {err.message}", request_id=request_id[0]
        ) from err
    except (httpx2.HTTPError, httpx2.StreamError, json.JSONDecodeError) as err:
        raise ProviderStreamInterrupted(
            f"the provider stream broke: {type(err).__name__}: {err}", request_id=request_id[0]
        ) from err
    except OpenAIError as err:
        if "api_key" in str(err):
            raise ProviderAuthenticationError(str(err)) from err
        raise ProviderError(str(err), request_id=request_id[0]) from err


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


class OpenAILLMClient(AsyncResource):
    """LLMClient over OpenAI Chat Completions, through `openai.AsyncOpenAI`.

    `stream()` retries as the SDK client is configured to (`max_retries`, default 0 here);
    `generate()` makes exactly one HTTP attempt (SG-INV-3). Every failure surfaces as a
    sessiongen error. Pass a ready `client` (the caller keeps owning it) or the options to
    build one; `http_client` is an `httpx2.AsyncClient` (the SDK's own HTTP library).
    """

    def __init__(
        self,
        client: AsyncOpenAI | None = None,
        *,
        http_client: httpx2.AsyncClient | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        max_retries: int = 0,
    ) -> None:
        if client is not None:
            if (http_client, base_url, api_key) != (None, None, None):
                raise ValueError("pass a ready AsyncOpenAI client or options to build one")
            self._client = client
            self._owns_client = False
        else:
            with _provider_errors([None]):
                self._client = AsyncOpenAI(
                    api_key=api_key,
                    base_url=base_url,
                    http_client=http_client,
                    max_retries=max_retries,
                )
            self._owns_client = True
        self._single_attempt = self._client.with_options(max_retries=0)

    @property
    def client(self) -> AsyncOpenAI:
        return self._client

    def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        return self._events(self._client, request)

    async def generate(self, request: LLMRequest) -> LLMResponse:
        async with aclosing(self._events(self._single_attempt, request)) as events:
            return await collect(events)

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.close()

    async def _events(
        self, client: AsyncOpenAI, request: LLMRequest
    ) -> AsyncGenerator[StreamEvent, None]:
        body = lower_request(request)
        request_id: list[str | None] = [None]
        calls = _Calls()
        finish: str | None = None
        model, response_id = request.model, None
        usage_seen = False
        with _provider_errors(request_id):
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
            request_id[0] = raw_stream.response.headers.get("x-request-id")
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
                request_id=request_id[0],
            )
        for call in calls.calls(truncated=finish == "length"):
            yield ToolCallEvent(call=call)
        reason = _FINISH_REASONS.get(finish, "other")
        yield FinishEvent(reason=reason, model=model, response_id=response_id)
