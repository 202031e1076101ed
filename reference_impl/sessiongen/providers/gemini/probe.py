"""The probe's Gemini driver: the probe's prompts as generateContent calls through
google-genai (implicit caching), and its free countTokens.

The guard (`sessiongen._probe.Guard`) owns the deadline and the origin checks; this module
owns how the provider's SDK is built on it and what one probe request is on its wire."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx2

from ..._probe import (
    Guard,
    ProbeError,
    Prompt,
    RequestFailed,
    SDKDriver,
    Shape,
    import_sdk,
    read_answer,
    reason,
    required_key,
    roles,
    status_error,
)
from ...catalog import ModelInfo
from ...llm.types import Usage
from .wire import usage_from_gemini

USAGE: Shape = {
    "prompt_token_count": int,
    "cached_content_token_count?": int,
    "candidates_token_count?": int,
    "thoughts_token_count?": int,
}
"""The usage fields the driver reads, checked (`read_answer`) before they are used."""


class Driver(SDKDriver):
    def __init__(self, base_url: str | None, api_key: str, guard: Guard) -> None:
        import_sdk("gemini")
        # optional extra: google is imported only when it is used
        from google.genai import errors, types

        self._errors_module = errors
        self._types = types
        self._guard = guard
        self._client = guard.sdk_client("gemini", base_url, api_key=api_key)

    def send(self, prompt: Prompt) -> Usage:

        types = self._types
        contents = [
            types.Content(role="user" if role == "user" else "model", parts=[types.Part(text=t)])
            for role, t in roles(prompt.turns)
        ]
        config = types.GenerateContentConfig(system_instruction=prompt.system, max_output_tokens=1)
        response = self._call(
            lambda: self._client.models.generate_content(
                model=prompt.model, contents=contents, config=config
            )
        )
        return usage_from_gemini(read_answer(response, {"usage_metadata": USAGE})["usage_metadata"])

    def count(self, prompt: Prompt) -> int | None:
        # The Gemini API's countTokens takes no system instruction: it goes as a first turn.
        types = self._types
        texts = [(("user", prompt.system)), *roles(prompt.turns)]
        contents = [
            types.Content(role="user" if role == "user" else "model", parts=[types.Part(text=t)])
            for role, t in texts
        ]
        try:
            counted = self._call(
                lambda: self._client.models.count_tokens(model=prompt.model, contents=contents)
            )
        except RequestFailed:
            return None
        return int(read_answer(counted, {"total_tokens": int})["total_tokens"]) or None

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except self._errors_module.APIError as exc:
            raise status_error(int(exc.code or 0), str(exc.message or exc)) from None
        except httpx2.HTTPError as exc:
            raise ProbeError(f"cannot connect to the Gemini API: {reason(exc)}") from None


def sdk_client(guard: Guard, base_url: str | None, **credentials: Any) -> Any:
    """The google-genai client on `guard`'s HTTP client, one attempt, the guard's timeout."""
    sdk = import_sdk("gemini")
    # optional extra: google is imported only when it is used
    from google.genai import types

    options = types.HttpOptions(
        base_url=base_url,
        api_version="v1beta",
        # per request, in ms; without it google-genai sends with no timeout at all
        timeout=max(1, round(guard.timeout * 1000)),
        retry_options=types.HttpRetryOptions(attempts=1),
        httpx_client=guard.http_client(),
    )
    return sdk.Client(http_options=options, **credentials)


def driver(base_url: str | None, api_key: str | None, *, emulator: bool, guard: Guard) -> Driver:
    """The driver `sessiongen._probe.make_driver` asks for."""
    return Driver(base_url, required_key("gemini", api_key, emulator=emulator), guard)


def model_id(model: str) -> str:
    """The id the API takes for a catalogued model: the catalog's own."""
    return model


def has_long_lifetime(info: ModelInfo) -> bool:
    """Whether the probe's long lifetime exists on this model. Whether the retention probe may ask for the long lifetime (`one_hour_ttl`)."""
    return info.one_hour_ttl
