"""A request as the emulator logged it (`GET /_emulator/requests`), read back as the cache saw
it: its model, its prompt as block positions (the same flattening and counts the emulator's
cache applied, so a shared prefix here is a shared prefix there) and its usage by kind."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..cache import FlatBlock
from ..llm.types import Usage
from ..providers import PROVIDERS, Provider
from ..providers.gemini.counting import declarations_of

_GEMINI_PATH = re.compile(r"/models/(?P<model>[^/:]+):")
_BEDROCK_PATH = re.compile(r"/model/(?P<model>[^/]+)/converse")


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
    if provider == "gemini":
        found = _GEMINI_PATH.search(path)
        return found["model"] if found else ""
    if provider == "bedrock":
        found = _BEDROCK_PATH.search(path)
        return found["model"] if found else ""
    return str(body.get("model") or "")


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
    if provider == "gemini":
        return [str(d.get("name")) for d in declarations_of(body)]
    if provider == "bedrock":
        tools = (body.get("toolConfig") or {}).get("tools") or []
        return [str((t.get("toolSpec") or {}).get("name")) for t in tools if "toolSpec" in t]
    tools = list(body.get("tools") or [])
    if provider == "openai" and isinstance(body.get("input"), list):
        # Responses: tools added mid-thread in `additional_tools` items count too.
        for item in body["input"]:
            if isinstance(item, Mapping) and item.get("type") == "additional_tools":
                tools += item.get("tools") or []
    names: list[str] = []
    for tool in tools:
        if tool.get("type") == "namespace":
            names += [str(inner.get("name")) for inner in tool.get("tools") or []]
            continue
        name = tool.get("name") or (tool.get("function") or {}).get("name")
        if name:
            names.append(str(name))
    return names


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Mapping):
        return str(content.get("text") or "")
    if isinstance(content, list):
        return "\n".join(_text_of(part) for part in content)
    return ""


def _texts(call: WireCall) -> tuple[str, str]:
    """The call's system prompt and its last user text, whatever the provider."""
    body = call.body
    if call.provider == "gemini":
        system = _text_of((body.get("systemInstruction") or {}).get("parts"))
        users = [c for c in body.get("contents") or [] if c.get("role", "user") == "user"]
        return system, _text_of(users[-1].get("parts")) if users else ""
    if call.provider == "openai":
        items = body.get("input") if "input" in body else body.get("messages")
        items = [items] if isinstance(items, str) else items or []
        system = str(body.get("instructions") or "") + "\n".join(
            _text_of(i.get("content")) for i in items if i.get("role") in ("system", "developer")
        )
        users = [i for i in items if isinstance(i, Mapping) and i.get("role") == "user"]
        return system, _text_of(users[-1].get("content")) if users else ""
    users = [m for m in body.get("messages") or [] if m.get("role") == "user"]
    last = _text_of(users[-1].get("content")) if users else ""
    return _text_of(body.get("system")), last
