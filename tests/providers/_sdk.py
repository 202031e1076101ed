"""The official SDK clients the provider tests point at an emulator, built one way."""

from __future__ import annotations

from typing import Any

import boto3  # type: ignore[import-untyped]  # boto3 ships no type hints
import httpx
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
