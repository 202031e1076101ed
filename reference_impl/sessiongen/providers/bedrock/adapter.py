"""BedrockLLMClient: the LLMClient over AWS Bedrock Converse, on boto3's `bedrock-runtime`.

boto3 is synchronous, so every SDK call (and every read of a ConverseStream event) runs in a
worker thread. botocore retries are off (`total_max_attempts=1`: one HTTP attempt per call,
SG-INV-3), for `stream` and `generate` alike.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator
from typing import Any

from ...errors import ProviderError, ProviderStreamInterrupted
from ...llm._adapter import Call, FailureKind, ProviderAdapter, ProviderAnswer, require
from ...llm.types import (
    FinishEvent,
    LLMRequest,
    LLMResponse,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallEvent,
    UsageEvent,
)
from .wire import FINISH_REASONS, error_status, lower_request, usage_from_bedrock

__all__ = ["SINGLE_ATTEMPT", "BedrockLLMClient", "lower_request"]

require("boto3", "boto3", "BedrockLLMClient")

# boto3 and botocore ship no type hints.
import boto3  # type: ignore[import-untyped]  # noqa: E402
from botocore.config import Config  # type: ignore[import-untyped]  # noqa: E402
from botocore.exceptions import (  # type: ignore[import-untyped]  # noqa: E402
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    NoCredentialsError,
    ReadTimeoutError,
)

# botocore Config: `total_max_attempts` counts the first attempt too (`max_attempts` counts
# only retries), so 1 is exactly one HTTP request.
SINGLE_ATTEMPT = Config(retries={"total_max_attempts": 1, "mode": "standard"})


def _read_failure(err: Exception) -> ProviderAnswer | tuple[FailureKind, str] | None:
    if isinstance(err, ClientError):  # also EventStreamError, an error event inside a 200 stream
        response: dict[str, Any] = err.response
        error = response.get("Error", {})
        meta = response.get("ResponseMetadata", {})
        code = error.get("Code")
        message = str(error.get("Message") or err)
        status, overflow = error_status(code, meta.get("HTTPStatusCode"), message)
        # botocore keeps the parsed body, not its bytes: the members the provider sent.
        body = {k: v for k, v in response.items() if k not in ("Error", "ResponseMetadata")}
        return ProviderAnswer(
            status=status,
            message=message,
            headers=dict(meta.get("HTTPHeaders") or {}),
            body=body or {"message": message},
            request_id=meta.get("RequestId"),
            error_type=code,
            context_overflow=overflow,
        )
    if isinstance(err, ReadTimeoutError | ConnectTimeoutError):
        return "timeout", str(err)
    if isinstance(err, EndpointConnectionError):
        return "connection", str(err)
    if isinstance(err, NoCredentialsError):
        return "credentials", f"no usable AWS credentials: {err}"
    if isinstance(err, BotoCoreError):
        return "stream", str(err)
    return None


def _tool_input(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


class BedrockLLMClient(ProviderAdapter):
    """LLMClient over Converse / ConverseStream through a boto3 `bedrock-runtime` client.

    botocore's own retries are off (`SINGLE_ATTEMPT`); `stream()` retries as every adapter
    does (`max_retries`, `DEFAULT_MAX_RETRIES` unless told; see `ProviderAdapter`),
    `generate()` is one ConverseStream call collected. Pass a ready `client` (built with
    retries off, e.g. `config=SINGLE_ATTEMPT`; the caller keeps owning it) or the options to
    build one, which `aclose()` closes.
    """

    provider = "Bedrock"
    request_id_headers = ("x-amzn-requestid",)

    def __init__(
        self,
        client: Any | None = None,
        *,
        endpoint_url: str | None = None,
        region_name: str = "us-east-1",
        aws_access_key_id: str | None = None,
        aws_secret_access_key: str | None = None,
        max_retries: int | None = None,
    ) -> None:
        super().__init__(max_retries=max_retries)
        self._owns_client = client is None
        if client is None:
            client = boto3.client(
                "bedrock-runtime",
                endpoint_url=endpoint_url,
                region_name=region_name,
                aws_access_key_id=aws_access_key_id,
                aws_secret_access_key=aws_secret_access_key,
                config=SINGLE_ATTEMPT,
            )
        self._client = client

    @property
    def client(self) -> Any:
        return self._client

    def _read_failure(self, err: Exception) -> ProviderAnswer | tuple[FailureKind, str] | None:
        return _read_failure(err)

    async def aclose(self) -> None:
        if self._owns_client:
            self._client.close()

    async def converse(self, request: LLMRequest) -> LLMResponse:
        """One non-streaming Converse call."""
        kwargs = lower_request(request)
        with self._provider_errors():
            answer = await asyncio.to_thread(self._client.converse, **kwargs)
        text, reasoning, calls = [], [], []
        signature: str | None = None
        for block in answer["output"]["message"]["content"]:
            if "text" in block:
                text.append(block["text"])
            elif "toolUse" in block:
                use = block["toolUse"]
                calls.append(ToolCall(id=use["toolUseId"], name=use["name"], input=use["input"]))
            elif "reasoningContent" in block:
                part = block["reasoningContent"].get("reasoningText", {})
                reasoning.append(part.get("text", ""))
                signature = part.get("signature") or signature
        return LLMResponse(
            text="".join(text),
            reasoning="".join(reasoning),
            reasoning_signature=signature,
            tool_calls=tuple(calls),
            usage=usage_from_bedrock(answer["usage"]),
            finish_reason=FINISH_REASONS.get(answer["stopReason"], "other"),
            model=request.model,
            response_id=answer.get("ResponseMetadata", {}).get("RequestId"),
        )

    async def _attempt(self, request: LLMRequest) -> AsyncGenerator[StreamEvent, None]:
        kwargs = lower_request(request)
        with self._provider_errors():
            answer = await asyncio.to_thread(self._client.converse_stream, **kwargs)
        request_id = answer.get("ResponseMetadata", {}).get("RequestId")
        info = Call(request_id)
        raw_stream = answer["stream"]
        events = iter(raw_stream)
        tools: dict[int, tuple[str, str, list[str]]] = {}
        stop_reason: str | None = None
        unparsable: str | None = None
        done = object()
        try:
            while True:
                with self._provider_errors(info):
                    raw = await asyncio.to_thread(next, events, done)
                if raw is done:
                    break
                assert isinstance(raw, dict)
                if "contentBlockStart" in raw:
                    start = raw["contentBlockStart"]
                    use = start["start"].get("toolUse")
                    if use is not None:
                        tools[start["contentBlockIndex"]] = (use["toolUseId"], use["name"], [])
                elif "contentBlockDelta" in raw:
                    index = raw["contentBlockDelta"]["contentBlockIndex"]
                    delta = raw["contentBlockDelta"]["delta"]
                    if "text" in delta:
                        yield TextDelta(text=delta["text"])
                    elif "reasoningContent" in delta:
                        part = delta["reasoningContent"]
                        yield ReasoningDelta(
                            text=part.get("text", ""), signature=part.get("signature")
                        )
                    elif "toolUse" in delta and index in tools:
                        tools[index][2].append(delta["toolUse"]["input"])
                elif "contentBlockStop" in raw:
                    tool = tools.pop(raw["contentBlockStop"]["contentBlockIndex"], None)
                    if tool is not None:
                        arguments = _tool_input("".join(tool[2]))
                        if arguments is None:
                            # Output cut by max_tokens can end inside the JSON: an error only
                            # if the message does not stop for max_tokens (known later).
                            unparsable = tool[1]
                        else:
                            call = ToolCall(id=tool[0], name=tool[1], input=arguments)
                            yield ToolCallEvent(call=call)
                elif "messageStop" in raw:
                    stop_reason = raw["messageStop"]["stopReason"]
                elif "metadata" in raw:
                    yield UsageEvent(usage=usage_from_bedrock(raw["metadata"]["usage"]))
        finally:
            raw_stream.close()
        if stop_reason is None:
            raise ProviderStreamInterrupted(
                "the provider stream ended before messageStop", provider_request_id=request_id
            )
        if unparsable is not None and stop_reason != "max_tokens":
            raise ProviderError(
                f"the provider sent invalid JSON input for tool {unparsable!r}",
                provider_request_id=request_id,
            )
        yield FinishEvent(
            reason=FINISH_REASONS.get(stop_reason, "other"),
            model=request.model,
            response_id=request_id,
        )
