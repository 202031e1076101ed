"""A model that may not call a tool does not: a scripted tool call is dropped under
`tool_choice: none` or without tools, and the reply is text (the shared responder's rule,
`emulator.responder.allowed_reply`, which every provider endpoint applies)."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import Emu, text_block, user

TOOLS = [{"name": "read_file", "input_schema": {"type": "object"}}]
CALL = {"name": "read_file", "input": {"path": "a"}}


@pytest.mark.parametrize(
    ("extra", "calls"),
    [
        ({"tools": TOOLS}, 1),
        ({"tools": TOOLS, "tool_choice": {"type": "auto"}}, 1),
        ({"tools": TOOLS, "tool_choice": {"type": "none"}}, 0),
        ({}, 0),
    ],
    ids=["auto-omitted", "auto", "none", "no-tools"],
)
async def test_a_scripted_call_is_made_only_where_a_call_is_allowed(
    emu: Emu, extra: dict[str, Any], calls: int
) -> None:
    """AD:…/define-tools: `none` "prevents Claude from using any tools"; with no tools there
    is nothing to call. The reply then falls back to the echo, since the script had no text."""
    await emu.script({"text": "", "tool_calls": [CALL]})
    message = await emu.create(messages=[user(text_block(5, "question"))], **extra)
    kinds = [block.type for block in message.content]
    assert kinds.count("tool_use") == calls
    if calls:
        assert message.stop_reason == "tool_use"
    else:
        assert kinds == ["text"] and message.stop_reason == "end_turn"
        assert message.content[0].text.startswith("Emulated reply to: question")  # type: ignore[union-attr]


async def test_scripted_text_is_kept_when_the_call_is_dropped(emu: Emu) -> None:
    await emu.script({"text": "Here is the recap.", "tool_calls": [CALL]})
    message = await emu.create(
        messages=[user(text_block(5, "q"))], tools=TOOLS, tool_choice={"type": "none"}
    )
    assert [(b.type, getattr(b, "text", None)) for b in message.content] == [
        ("text", "Here is the recap.")
    ]
