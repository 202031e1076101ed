"""What a provider is to sessiongen: one `Provider` record, built in the provider's folder and
registered in `sessiongen.providers`, the one table every part reads (the engine's counter,
the emulator, the lab, the demo, parity, the probe).

The record holds the provider's low parts as values: its wire lowering, its token counter,
its usage reader and its body-layout reader. Its upper parts are modules of its folder,
found by name (`Provider.part`) so that the folder is a plugin of the layer it serves and
no host module lists providers:

* `adapter`: its `LLMClient` over the official SDK (imported only when used: the SDKs other
  than anthropic are optional extras);
* `emulator`: `router(state)`, `PATH_PREFIXES` and `connect(...)`, its API served by the
  emulator and its adapter pointed at it;
* `probe`: `Driver`, the probe's requests through its SDK against a live endpoint.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from ..llm.types import LLMRequest, Usage
from ..llm.wire_view import WireView

PARTS = ("adapter", "emulator", "probe")
"""The modules a provider's folder holds beside its record (`__init__.py`), its lowering
(`wire.py`) and its counter (`counting.py`)."""


@dataclass(frozen=True)
class Provider:
    """One provider API, as every part of sessiongen sees it."""

    name: str
    """The catalog's `provider` field for its models, and the lab's and probe's choice."""
    package: str
    """The provider's folder (a Python package) holding its parts."""
    sdk: str
    """The official SDK's import name (`google.genai`)."""
    sdk_label: str
    """The SDK as the demo names it ("openai SDK (Chat Completions)")."""
    key_env: tuple[str, ...]
    """The environment variables a live key is read from, in order."""
    lab_model: str
    """The model the lab and the demo run on this provider."""
    cache_note: str
    """How it caches, in a few lines under the demo's table."""
    lower: Callable[[LLMRequest], dict[str, Any]]
    """A provider-neutral request as the body the provider's SDK sends."""
    count: Callable[[LLMRequest], int]
    """A request's input tokens as the provider's wire bills them."""
    usage: Callable[[Any], Usage]
    """The provider's reported usage (a wire dict or an SDK object) as `Usage`."""
    view: Callable[[Mapping[str, Any]], WireView]
    """The body's layout for parity: which fields are tools, system, messages, settings."""
    messages_wire: bool = False
    """Counted as the Messages body is, message by message (so a counter may remember the
    messages of earlier requests): Anthropic and Claude on Bedrock's Converse."""

    def part(self, name: str) -> ModuleType:
        """The folder's module `name` (one of `PARTS`)."""
        if name not in PARTS:
            raise ValueError(f"a provider's parts are {', '.join(PARTS)}, not {name!r}")
        return importlib.import_module(f"{self.package}.{name}")
