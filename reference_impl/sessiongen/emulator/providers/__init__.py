"""The emulator's other providers: each module serves one provider's HTTP API on the same
`EmulatorState` (one clock, one request log, one `CacheStore`), so that provider's official
SDK runs against `sessiongen emulator` with its base URL pointed there.

A provider module exposes `router(state: EmulatorState) -> fastapi.APIRouter` and
`PATH_PREFIXES` (its API's path prefixes, which a token never guards: the SDK sends its own
credentials there); `ROUTERS` names the modules `create_app` mounts, in order.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator

from fastapi import APIRouter

from ..state import EmulatorState

ROUTERS: tuple[str, ...] = ("bedrock", "openai", "gemini")
"""Provider modules (relative to this package) whose routers the emulator serves."""


def provider_routers(state: EmulatorState) -> Iterator[APIRouter]:
    """Each provider module's router over `state`."""
    for name in ROUTERS:
        module = importlib.import_module(f"{__name__}.{name}")
        yield module.router(state)


def provider_prefixes() -> tuple[str, ...]:
    """Every provider module's API path prefixes."""
    prefixes: list[str] = []
    for name in ROUTERS:
        prefixes += importlib.import_module(f"{__name__}.{name}").PATH_PREFIXES
    return tuple(prefixes)
