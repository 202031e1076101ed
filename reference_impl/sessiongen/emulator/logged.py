"""Reading a logged request body the way every provider's `emulator` part reads its own: the
text of a content value in any provider's shape, and the tool names of a `tools` list."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def text_of(content: Any) -> str:
    """The text of a content value: a string, a block with `text`, or a list of them."""
    if isinstance(content, str):
        return content
    if isinstance(content, Mapping):
        return str(content.get("text") or "")
    if isinstance(content, list):
        return "\n".join(text_of(part) for part in content)
    return ""


def tool_names(tools: Iterable[Mapping[str, Any]]) -> list[str]:
    """The names of a `tools` list: each tool's `name` (or its `function`'s), and the tools of
    a `namespace` entry one by one."""
    names: list[str] = []
    for tool in tools:
        if tool.get("type") == "namespace":
            names += [str(inner.get("name")) for inner in tool.get("tools") or []]
            continue
        name = tool.get("name") or (tool.get("function") or {}).get("name")
        if name:
            names.append(str(name))
    return names


def messages_texts(body: Mapping[str, Any]) -> tuple[str, str]:
    """A Messages-shaped body's system prompt and its last user text (Anthropic, Converse)."""
    users = [m for m in body.get("messages") or [] if m.get("role") == "user"]
    last = text_of(users[-1].get("content")) if users else ""
    return text_of(body.get("system")), last
