"""A request as the emulator logged it (`GET /_emulator/requests`), read back as the cache saw
it: its model, its prompt as block positions (the same flattening and counts the emulator's
cache applied, so a shared prefix here is a shared prefix there) and its usage by kind."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..cache import TTL, CallShape, FlatBlock, get_model, is_known_model
from ..llm.types import Usage
from ..providers import PROVIDERS, Provider
from ..providers.openai.wire import CACHE_INCREMENT


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


_IMPLICIT_WRITES = ("anthropic", "bedrock")
"""Providers whose usage reports cache writes; the others cache implicitly and report only
reads."""


def call_shape(call: WireCall, ttl: TTL | None) -> CallShape:
    """What the miss-cause rule (`cache.miss_cause`) compares of a call: its model, and
    fingerprints of its tools, its system prompt and each of its messages, whatever the
    provider's spelling (`tools`; `system`, `instructions` or `systemInstruction`;
    `messages`, `input` or `contents`), cache markers left out (they move from message to
    message and are not content)."""
    body = call.body
    system = next(
        (body[k] for k in ("system", "instructions", "systemInstruction") if k in body), None
    )
    messages = next((body[k] for k in ("messages", "input", "contents") if k in body), None)
    listed: tuple[str, ...] | None = None
    if isinstance(messages, list):
        listed = tuple(_fingerprint(m) for m in messages)
    elif messages is not None:
        listed = (_fingerprint(messages),)
    return CallShape(
        at=call.started_at,
        model=call.model,
        prompt_tokens=call.prompt_tokens,
        tools=_fingerprint(body.get("tools")),
        system=_fingerprint(system),
        messages=listed,
        ttl=ttl,
    )


def left_cached(call: WireCall) -> int:
    """Tokens `call` left cached for the next call of its session: what it read and wrote
    where its provider reports writes, else (an implicit cache) its prompt up to its last
    implicit breakpoint (the catalog's `implicit_breakpoint_interval`; OpenAI bills reads in
    whole `CACHE_INCREMENT`s)."""
    usage = call.usage
    if call.provider in _IMPLICIT_WRITES:
        return usage.cache_read_tokens + usage.cache_write_5m_tokens + usage.cache_write_1h_tokens
    interval = (
        get_model(call.model).implicit_breakpoint_interval if is_known_model(call.model) else 1
    )
    if call.provider == "openai":  # reads are billed in whole increments
        interval = max(interval, CACHE_INCREMENT)
    interval = max(interval, 1)
    return call.prompt_tokens // interval * interval


def _fingerprint(value: Any) -> str:
    return json.dumps(_unmarked(value), sort_keys=True, separators=(",", ":"))


def _unmarked(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {
            k: _unmarked(v) for k, v in value.items() if k not in ("cache_control", "cachePoint")
        }
    if isinstance(value, list):
        return [_unmarked(v) for v in value]
    return value


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
