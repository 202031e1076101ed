"""The providers sessiongen speaks, one folder each, registered in one table.

Each folder (`anthropic/`, `bedrock/`, `openai/`, `gemini/`) holds everything about its
provider: the record (`__init__.py`: `PROVIDER`), the wire lowering and usage reader
(`wire.py`), the token counter (`counting.py`), the SDK adapter (`adapter.py`), the emulator's
routes for its API (`emulator.py`) and the probe's driver (`probe.py`). Adding a provider is
a new folder and its models in the catalog's data; `register` puts its record in the table.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from ..catalog import UnknownModel, get_model
from ..llm.types import LLMRequest
from . import anthropic, bedrock, gemini, openai
from .base import PARTS, Provider


class UnknownProvider(ValueError):
    """A provider name no registered provider has."""


class ProviderRegistry:
    """The registered providers by name, in registration order."""

    def __init__(self, *providers: Provider) -> None:
        self._by_name: dict[str, Provider] = {}
        for provider in providers:
            self.register(provider)

    def register(self, provider: Provider) -> Provider:
        """Add `provider` (its name must be new)."""
        if provider.name in self._by_name:
            raise ValueError(f"provider {provider.name!r} is already registered")
        self._by_name[provider.name] = provider
        return provider

    def unregister(self, name: str) -> None:
        self._by_name.pop(name, None)

    def __getitem__(self, name: str) -> Provider:
        try:
            return self._by_name[name]
        except KeyError:
            known = ", ".join(self._by_name)
            raise UnknownProvider(f"provider must be one of {known}, got {name!r}") from None

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __iter__(self) -> Iterator[Provider]:
        return iter(tuple(self._by_name.values()))

    def __len__(self) -> int:
        return len(self._by_name)

    def names(self) -> tuple[str, ...]:
        return tuple(self._by_name)

    def column(self, field: str) -> Mapping[str, Any]:
        """A live read-only view of one field by provider name (`column("lab_model")`)."""
        return _Column(self, field)


class _Column(Mapping[str, Any]):
    def __init__(self, registry: ProviderRegistry, field: str) -> None:
        self._registry, self._field = registry, field

    def __getitem__(self, name: str) -> Any:
        if name not in self._registry:
            raise KeyError(name)
        return getattr(self._registry[name], self._field)

    def __iter__(self) -> Iterator[str]:
        return iter(self._registry.names())

    def __len__(self) -> int:
        return len(self._registry)


PROVIDERS = ProviderRegistry(anthropic.PROVIDER, bedrock.PROVIDER, openai.PROVIDER, gemini.PROVIDER)
"""The one table of providers."""


def provider_of(model: str) -> Provider:
    """The provider a model id goes to, from the catalog; Anthropic for an id the catalog
    does not know (a scripted test double's)."""
    try:
        name = get_model(model).provider
    except UnknownModel:
        name = "anthropic"
    return PROVIDERS[name]


def count_request_tokens(request: LLMRequest) -> int:
    """Input tokens of a provider-neutral request: lowered as the provider of its model
    lowers it, and counted as that provider's wire is billed (framing and the tool-use
    system prompt included)."""
    return provider_of(request.model).count(request)


__all__ = [
    "PARTS",
    "PROVIDERS",
    "Provider",
    "ProviderRegistry",
    "UnknownProvider",
    "count_request_tokens",
    "provider_of",
]
