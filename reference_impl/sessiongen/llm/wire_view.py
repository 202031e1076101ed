"""A provider's request body seen the same way for every provider: its settings and its
history, block by block, with cache marks set apart. The parity diff reads this view, so
one comparison rule serves every wire; each `<provider>_wire` module knows its own layout
and builds the view (`wire_view(body)`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

BlockKind = Literal["text", "tool_call", "tool_result", "reasoning", "other"]


@dataclass(frozen=True)
class WireBlock:
    """One block of the history: a text, a tool call, a tool result, reasoning."""

    role: str  # "user" or "assistant" (providers' own names mapped onto these two)
    path: str  # where the block sits in the body, e.g. "messages[3].content[0]"
    kind: BlockKind
    content: Mapping[str, Any]  # the block as sent, without its cache mark
    mark: Any = None  # the block's cache mark as sent (a provider's breakpoint), if any
    mark_path: str = ""  # where the mark sits in the body


@dataclass(frozen=True)
class WireView:
    """A body as settings (every field outside the history, by dotted path) and blocks."""

    settings: Mapping[str, Any]
    blocks: tuple[WireBlock, ...]
    output_limit: str  # the settings path of the output-token limit
    sections: Mapping[str, str]  # settings path -> what it is, e.g. "tool definitions"
    tools: int  # tool definitions on the wire
    tool_choice: str  # as the provider spells it; "auto (omitted)" when tools go without one


def choice_or_default(choice: str | None, tools: int) -> str:
    """The tool choice as a table shows it: sent, the provider's default with tools, or none."""
    if choice is not None:
        return choice
    return "auto (omitted)" if tools else "— (no tools)"


def split_setting(body: Mapping[str, Any], container: str, field: str) -> dict[str, Any]:
    """Top-level settings of `body` with `container.field` set apart as its own path, so the
    output limit can differ while the rest of its container must not."""
    settings: dict[str, Any] = {}
    for key, value in body.items():
        if key == container and isinstance(value, Mapping):
            rest = {k: v for k, v in value.items() if k != field}
            if rest:
                settings[key] = rest
            if field in value:
                settings[f"{key}.{field}"] = value[field]
        else:
            settings[key] = value
    return settings
