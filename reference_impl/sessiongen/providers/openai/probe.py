"""The probe's OpenAI driver: the probe's prompts as Chat Completions through the openai
SDK (automatic caching, `prompt_cache_retention` for the lifetimes), and the Responses API's
free input-token count.

The guard (`sessiongen._probe.Guard`) owns the deadline and the origin checks; this module
owns how the provider's SDK is built on it and what one probe request is on its wire."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

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
from .wire import usage_from_openai

USAGE: Shape = {
    "prompt_tokens": int,
    "completion_tokens": int,
    "prompt_tokens_details?": {"cached_tokens?": int, "cache_write_tokens?": int},
}
"""The usage fields the driver reads, checked (`read_answer`) before they are used."""


class Driver(StainlessDriver):
    _api = "OpenAI"

    def __init__(self, base_url: str | None, api_key: str, guard: Guard) -> None:
        self._sdk = import_sdk("openai")
        self._guard = guard
        if base_url is not None and not urlsplit(base_url).path.rstrip("/").endswith("/v1"):
            base_url = f"{base_url}/v1"
        self._client = guard.sdk_client("openai", base_url, api_key=api_key)

    def send(self, prompt: Prompt) -> Usage:

        rules = get_model(prompt.model).prompt_cache
        system: Any = prompt.system
        extra: dict[str, Any] = {}
        if rules is not None:
            # GPT-5.6+: one lifetime, "at least 30 minutes"; and an explicit breakpoint after
            # the shared system prompt, the guide's remedy for "A shared prefix is not always
            # a cached prefix" (the implicit one ends each request's own last message).
            extra["prompt_cache_options"] = {"ttl": rules.default_ttl}
            mark = {"mode": "explicit"}
            system = [{"type": "text", "text": prompt.system, "prompt_cache_breakpoint": mark}]
        messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
        messages += [{"role": role, "content": text} for role, text in roles(prompt.turns)]
        if rules is None and prompt.lifetime != "default":
            extra["prompt_cache_retention"] = "24h" if prompt.lifetime == "long" else "in_memory"
        completion = self._call(
            lambda: self._client.chat.completions.create(
                model=prompt.model, messages=messages, max_completion_tokens=1, **extra
            )
        )
        return usage_from_openai(read_answer(completion, {"usage": USAGE})["usage"])

    def count(self, prompt: Prompt) -> int | None:
        items = [{"role": role, "content": text} for role, text in roles(prompt.turns)]
        try:
            counted = self._call(
                lambda: self._client.responses.input_tokens.count(
                    model=prompt.model, instructions=prompt.system, input=items
                )
            )
        except RequestFailed:
            return None
        return int(read_answer(counted, {"input_tokens": int})["input_tokens"])


def sdk_client(guard: Guard, base_url: str | None, **credentials: Any) -> Any:
    """The openai SDK's client on `guard`'s HTTP client (the SDK's own would follow
    redirects), with the guard's timeout and no retries."""
    return import_sdk("openai").OpenAI(
        base_url=base_url,
        http_client=guard.http_client(),
        timeout=httpx2.Timeout(guard.timeout),
        max_retries=0,
        **credentials,
    )


def driver(base_url: str | None, api_key: str | None, *, emulator: bool, guard: Guard) -> Driver:
    """The driver `sessiongen._probe.make_driver` asks for."""
    return Driver(base_url, required_key("openai", api_key, emulator=emulator), guard)


def model_id(model: str) -> str:
    """The id the API takes for a catalogued model: the catalog's own."""
    return model


def has_long_lifetime(info: ModelInfo) -> bool:
    """Whether the probe's long lifetime exists on this model: the extended `"24h"`
    retention (the guide's list, `extended_retention`), which GPT-5.6 and later do not take
    ("Replace `prompt_cache_retention` with `prompt_cache_options.ttl`"): their one lifetime
    is `"30m"`, asked for on every request."""
    return info.extended_retention and info.prompt_cache is None
