"""The official SDK clients the provider tests point at an emulator, built one way."""

from __future__ import annotations

import json
from typing import Any

import boto3  # type: ignore[import-untyped]  # boto3 ships no type hints
import httpx
from botocore.awsrequest import AWSResponse  # type: ignore[import-untyped]
from google import genai
from google.genai import types
from sessiongen.providers.bedrock.adapter import SINGLE_ATTEMPT


def bedrock_client(url: str) -> Any:
    """boto3's bedrock-runtime client on the emulator at `url`, one attempt per call."""
    return boto3.client(
        "bedrock-runtime",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="x",
        config=SINGLE_ATTEMPT,
    )


def gemini_client(http: httpx.AsyncClient, base_url: str) -> genai.Client:
    """google-genai's client on the emulator behind `http`, one attempt per call."""
    options = types.HttpOptions(
        base_url=base_url,
        api_version="v1beta",
        httpx_async_client=http,
        retry_options=types.HttpRetryOptions(attempts=1),
    )
    return genai.Client(api_key="test-key", http_options=options)


CONVERSE_ANSWER = {
    "output": {"message": {"role": "assistant", "content": [{"text": "x"}]}},
    "stopReason": "end_turn",
    "usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2},
    "metrics": {"latencyMs": 1},
}
"""A minimal Converse answer, for a boto3 client answered in place of the endpoint."""


class BotocoreBody:
    """The body botocore streams from (`AWSResponse.raw`)."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, *args: object, **kwargs: object) -> list[bytes]:
        return [self.data]


def botocore_answer(request: Any, status: int, body: bytes, content_type: str) -> AWSResponse:
    """An answer to `request` that botocore reads as the endpoint's (registered on
    `before-send`, it stands in for the network)."""
    headers = {"content-type": content_type, "content-length": str(len(body))}
    return AWSResponse(request.url, status, headers, BotocoreBody(body))


def converse_answer(request: Any) -> AWSResponse:
    """`CONVERSE_ANSWER` as a 200 to `request`."""
    return botocore_answer(request, 200, json.dumps(CONVERSE_ANSWER).encode(), "application/json")
