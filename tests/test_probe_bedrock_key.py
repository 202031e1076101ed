"""`emulator probe --provider bedrock --api-key KEY` against a real endpoint signs with the key.

boto3 reads a Bedrock API key only from `AWS_BEARER_TOKEN_BEDROCK`, and only when it signs a
request: the driver once restored the environment right after building the client, so every
request failed with "no AWS credentials". No network: botocore's `before-send` hook records
the signed request and answers it in place of the endpoint.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse  # type: ignore[import-untyped]
from sessiongen._probe import BEARER_ENV, Guard
from sessiongen.providers.bedrock.probe import Driver as BedrockDriver

from tests.providers._sdk import converse_answer

ENDPOINT = "https://bedrock-runtime.us-east-1.amazonaws.com"


def test_the_api_key_signs_every_request_and_the_environment_is_restored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", BEARER_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
    driver = BedrockDriver(ENDPOINT, "bedrock-api-key-0123456789", False, Guard(ENDPOINT))
    sent: list[bytes | None] = []

    def answer(request: Any, **kwargs: object) -> AWSResponse:
        sent.append(request.headers.get("Authorization"))
        return converse_answer(request)

    driver._client.meta.events.register_first("before-send.bedrock-runtime.Converse", answer)
    for _ in range(2):
        driver._client.converse(
            modelId="anthropic.claude-sonnet-4-6",
            messages=[{"role": "user", "content": [{"text": "hi"}]}],
        )
    assert sent == [b"Bearer bedrock-api-key-0123456789"] * 2
    driver.close()
    assert BEARER_ENV not in os.environ


def test_a_refused_connection_is_reported_as_one_not_as_a_timeout() -> None:
    """urllib3's `NewConnectionError` (behind botocore's `EndpointConnectionError`) subclasses
    urllib3's `ConnectTimeoutError`: a refused connection once came out as the `--timeout`
    running out, "no complete answer within 30 s", after an instant refusal."""
    from sessiongen._probe import ProbeError, TimedOut
    from sessiongen.emulator import free_port

    url = f"https://127.0.0.1:{free_port()}"  # nothing listens there (refused before TLS)
    driver = BedrockDriver(url, "bedrock-api-key-0123456789", False, Guard(url))
    try:
        with pytest.raises(ProbeError) as caught:
            driver._call(
                lambda: driver._client.converse(
                    modelId="anthropic.claude-sonnet-4-6",
                    messages=[{"role": "user", "content": [{"text": "hi"}]}],
                )
            )
    finally:
        driver.close()
    assert not isinstance(caught.value, TimedOut)
    assert str(caught.value).startswith("cannot connect to Bedrock: "), str(caught.value)
