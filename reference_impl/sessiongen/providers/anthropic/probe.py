"""The probe's Anthropic driver: the probe's prompts as Messages requests through the
anthropic SDK, with `cache_control` breakpoints, and its free `count_tokens`.

The guard (`sessiongen._probe.Guard`) owns the deadline and the origin checks; this module
owns how the provider's SDK is built on it and what one probe request is on its wire."""

from __future__ import annotations

from typing import Any

import httpx2

from ..._probe import (
    Guard,
    Prompt,
    RequestFailed,
    Shape,
    StainlessDriver,
    import_sdk,
    read_answer,
    required_key,
    roles,
)
from ...catalog import ModelInfo, get_model
from ...llm.types import Usage
from .wire import usage_from_anthropic

USAGE: Shape = {
    "input_tokens": int,
    "output_tokens": int,
    "cache_read_input_tokens?": int,
    "cache_creation_input_tokens?": int,
    "cache_creation?": {"ephemeral_5m_input_tokens?": int, "ephemeral_1h_input_tokens?": int},
}
"""The usage fields the driver reads, checked (`read_answer`) before they are used."""


class Driver(StainlessDriver):
    _api = "Anthropic"

    def __init__(self, base_url: str | None, api_key: str, guard: Guard) -> None:
        self._sdk = import_sdk("anthropic")
        self._guard = guard
        self._client = guard.sdk_client("anthropic", base_url, api_key=api_key)

    def _body(self, prompt: Prompt) -> dict[str, Any]:
        mark: dict[str, Any] = {"type": "ephemeral"}
        if prompt.lifetime == "long":
            mark["ttl"] = "1h"
        messages: list[dict[str, Any]] = []
        for i, (role, text) in enumerate(roles(prompt.turns)):
            block: dict[str, Any] = {"type": "text", "text": text}
            if i == prompt.anchor:
                block["cache_control"] = mark
            messages.append({"role": role, "content": [block]})
        body: dict[str, Any] = {
            "model": prompt.model,
            "system": [{"type": "text", "text": prompt.system, "cache_control": mark}],
            "messages": messages,
        }
        if "disabled" in get_model(prompt.model).thinking_types:
            body["thinking"] = {"type": "disabled"}
        return body

    def send(self, prompt: Prompt) -> Usage:

        message = self._call(
            lambda: self._client.messages.create(
                max_tokens=0 if prompt.ping else 1, **self._body(prompt)
            )
        )
        return usage_from_anthropic(read_answer(message, {"usage": USAGE})["usage"])

    def count(self, prompt: Prompt) -> int | None:
        try:
            counted = self._call(lambda: self._client.messages.count_tokens(**self._body(prompt)))
        except RequestFailed:
            return None
        return int(read_answer(counted, {"input_tokens": int})["input_tokens"])


def sdk_client(guard: Guard, base_url: str | None, **credentials: Any) -> Any:
    """The anthropic SDK's client on `guard`'s HTTP client (the SDK's own would follow
    redirects), with the guard's timeout and no retries."""
    return import_sdk("anthropic").Anthropic(
        base_url=base_url,
        http_client=guard.http_client(),
        timeout=httpx2.Timeout(guard.timeout),
        max_retries=0,
        **credentials,
    )


def driver(base_url: str | None, api_key: str | None, *, emulator: bool, guard: Guard) -> Driver:
    """The driver `sessiongen._probe.make_driver` asks for."""
    return Driver(base_url, required_key("anthropic", api_key, emulator=emulator), guard)


def model_id(model: str) -> str:
    """The id the API takes for a catalogued model: the catalog's own."""
    return model


def has_long_lifetime(info: ModelInfo) -> bool:
    """Whether the probe's long lifetime exists on this model. Every model on the Messages API takes the 1h TTL (`one_hour_ttl`)."""
    return info.one_hour_ttl
