"""A request as the emulator logged it (`GET /_emulator/requests`), read back as the cache saw
it: its model, its prompt as block positions (the same flattening and counts the emulator's
cache applied, so a shared prefix here is a shared prefix there) and its usage by kind."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..cache import FlatBlock
from ..llm.types import Usage
from ..providers import PROVIDERS, Provider


@dataclass(frozen=True)
class WireCall:
    """One logged request: where it went, what it asked and what it was billed."""

    id: str
    provider: str
    path: str
    status: int
    started_at: float
    model: str
    body: Mapping[str, Any]
    blocks: tuple[FlatBlock, ...]
    """The prompt's positions as the emulator's cache hashed and counted them; empty for a
    request the emulator refused."""
    usage: Usage
    headers: Mapping[str, str]

    @property
    def prompt_tokens(self) -> int:
        return sum(block.tokens for block in self.blocks)

    def tool_names(self) -> list[str]:
        """The tools the request offered, whatever the provider's spelling."""
        return _tool_names(self.provider, self.body)

    def texts(self) -> tuple[str, str]:
        """The request's system prompt and its last user text, whatever the provider."""
        return _texts(self)


def read_call(entry: Mapping[str, Any]) -> WireCall:
    """`entry` (one item of the log's `requests`) as a WireCall."""
    provider = str(entry.get("provider") or "anthropic")
    path = str(entry["path"])
    body: Mapping[str, Any] = entry.get("body") or {}
    status = int(entry["status"])
    model = _model(provider, path, body)
    blocks: tuple[FlatBlock, ...] = ()
    if status == 200 and body:
        blocks = tuple(_blocks(provider, path, model, body))
    return WireCall(
        id=str(entry["id"]),
        provider=provider,
        path=path,
        status=status,
        started_at=float(entry["started_at"]),
        model=model,
        body=body,
        blocks=blocks,
        usage=_usage(provider, entry.get("usage")),
        headers=dict(entry.get("headers") or {}),
    )


def shared_prefix_tokens(a: Sequence[FlatBlock], b: Sequence[FlatBlock]) -> int:
    """Tokens of the longest prefix `a` and `b` share, whole positions (each position's hash
    chains everything before it, so equal hashes mean an equal prefix)."""
    shared = 0
    for left, right in zip(a, b, strict=False):
        if left.prefix_hash != right.prefix_hash:
            break
        shared += left.tokens
    return shared


def _model(provider: str, path: str, body: Mapping[str, Any]) -> str:
    model: str = _provider(provider).part("emulator").logged_model(path, body)
    return model


def _blocks(provider: str, path: str, model: str, body: Mapping[str, Any]) -> list[FlatBlock]:
    blocks: list[FlatBlock] = _provider(provider).part("emulator").logged_blocks(body, path, model)
    return blocks


def _usage(provider: str, usage: Any) -> Usage:
    if not isinstance(usage, Mapping):
        return Usage()
    return _provider(provider).usage(usage)


def _provider(name: str) -> Provider:
    """The logged request's provider; Anthropic's layout for a log that names none."""
    return PROVIDERS[name] if name in PROVIDERS else PROVIDERS["anthropic"]


def _tool_names(provider: str, body: Mapping[str, Any]) -> list[str]:
    names: list[str] = _provider(provider).part("emulator").logged_tool_names(body)
    return names


def _texts(call: WireCall) -> tuple[str, str]:
    """The call's system prompt and its last user text, whatever the provider."""
    texts: tuple[str, str] = _provider(call.provider).part("emulator").logged_texts(call.body)
    return texts
