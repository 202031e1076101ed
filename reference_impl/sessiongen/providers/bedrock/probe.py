"""The probe's Bedrock driver: the probe's prompts as Converse calls through boto3, with
`cachePoint` blocks, and Bedrock's CountTokens. A Bedrock API key is read by boto3 from the
environment only, so the driver sets it there for its lifetime and restores it on close.

The guard (`sessiongen._probe.Guard`) owns the deadline and the origin checks; this module
owns how the provider's SDK is built on it and what one probe request is on its wire."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..._probe import (
    BEARER_ENV,
    Guard,
    ProbeError,
    Prompt,
    RequestFailed,
    SDKDriver,
    Shape,
    import_sdk,
    read_answer,
    reason,
    roles,
    status_error,
)
from ...catalog import ModelInfo, get_model
from ...llm.types import Usage
from .wire import usage_from_bedrock

USAGE: Shape = {
    "inputTokens": int,
    "outputTokens": int,
    "cacheReadInputTokens?": int,
    "cacheWriteInputTokens?": int,
    "cacheDetails?": [{"inputTokens": int, "ttl?": str}],
}
"""The usage fields the driver reads, checked (`read_answer`) before they are used."""


class Driver(SDKDriver):
    def __init__(
        self, base_url: str | None, api_key: str | None, dummy: bool, guard: Guard
    ) -> None:
        import_sdk("bedrock")
        self._guard = guard
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        credentials: dict[str, str] = {}
        if dummy:  # an emulator takes any credentials; boto3 wants some to sign with
            credentials = {"aws_access_key_id": "probe", "aws_secret_access_key": "probe"}
        # boto3 reads a Bedrock API key only from the environment, and only when it signs a
        # request: the key stays there until `close`, then the environment is as it was.
        self._saved_bearer = os.environ.get(BEARER_ENV)
        if api_key is not None:
            os.environ[BEARER_ENV] = api_key
        elif dummy:
            os.environ.pop(BEARER_ENV, None)
        try:
            self._client = guard.sdk_client(
                "bedrock", base_url, region_name=region or "us-east-1", **credentials
            )
        except BaseException:
            self._restore_bearer()
            raise

    def _restore_bearer(self) -> None:
        if self._saved_bearer is None:
            os.environ.pop(BEARER_ENV, None)
        else:
            os.environ[BEARER_ENV] = self._saved_bearer

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._restore_bearer()

    def _body(self, prompt: Prompt) -> dict[str, Any]:
        point: dict[str, Any] = {"type": "default"}
        if prompt.lifetime == "long":
            point["ttl"] = "1h"
        messages = []
        for i, (role, text) in enumerate(roles(prompt.turns)):
            content: list[dict[str, Any]] = [{"text": text}]
            if i == prompt.anchor:
                content.append({"cachePoint": point})
            messages.append({"role": role, "content": content})
        return {"system": [{"text": prompt.system}, {"cachePoint": point}], "messages": messages}

    def send(self, prompt: Prompt) -> Usage:

        response = self._call(
            lambda: self._client.converse(
                modelId=prompt.model, inferenceConfig={"maxTokens": 1}, **self._body(prompt)
            )
        )
        usage: dict[str, Any] = read_answer(response, {"usage": USAGE})["usage"]
        return usage_from_bedrock(usage)

    def count(self, prompt: Prompt) -> int | None:
        try:
            counted = self._call(
                lambda: self._client.count_tokens(
                    modelId=prompt.model, input={"converse": self._body(prompt)}
                )
            )
        except RequestFailed:
            return None
        return int(read_answer(counted, {"inputTokens": int})["inputTokens"])

    @contextmanager
    def _errors(self) -> Iterator[None]:
        # optional extra: botocore is imported only when it is used
        from botocore import exceptions  # type: ignore[import-untyped]

        try:
            yield
        except exceptions.NoCredentialsError:
            raise ProbeError(
                "no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or a "
                "profile), or AWS_BEARER_TOKEN_BEDROCK / --api-key for a Bedrock API key"
            ) from None
        except exceptions.EndpointConnectionError as exc:
            raise ProbeError(f"cannot connect to Bedrock: {reason(exc)}") from None
        except exceptions.ClientError as exc:
            status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
            message = str(exc.response.get("Error", {}).get("Message") or exc)
            raise status_error(status, message) from None


def sdk_client(guard: Guard, base_url: str | None, **credentials: Any) -> Any:
    """boto3's `bedrock-runtime` client: it sends through urllib3, which botocore never lets
    follow a redirect, and its `before-send` and `before-parse` events get the guard's origin
    checks; one attempt, the guard's timeouts."""
    sdk = import_sdk("bedrock")
    # optional extra: botocore is imported only when it is used
    from botocore.config import Config  # type: ignore[import-untyped]

    config = Config(
        connect_timeout=guard.timeout,
        read_timeout=guard.timeout,
        retries={"total_max_attempts": 1, "mode": "standard"},
    )
    client = sdk.client("bedrock-runtime", endpoint_url=base_url, config=config, **credentials)
    client.meta.events.register("before-send.bedrock-runtime", guard.before_send)
    client.meta.events.register("before-parse.bedrock-runtime", guard.before_parse)
    return client


def driver(base_url: str | None, api_key: str | None, *, emulator: bool, guard: Guard) -> Driver:
    """The driver `sessiongen._probe.make_driver` asks for."""
    return Driver(base_url, api_key, emulator and api_key is None, guard)


def model_id(model: str) -> str:
    """The id Converse takes for a catalogued model: its US inference profile where the
    catalog lists one (these models answer only through a profile), else the model's id."""
    info = get_model(model)
    return next((a for a in info.aliases if a.startswith("us.")), model)


def has_long_lifetime(info: ModelInfo) -> bool:
    """Whether the probe's long lifetime exists on this model. The 1h TTL only on the models AWS's table lists (`one_hour_ttl`)."""
    return info.one_hour_ttl
