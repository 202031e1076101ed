"""A scripted reply with a `match` waits for its request: a real agent's side calls (a title
on a small model, a classifier with no tools) pass it by, over the wire, on the official SDK."""

from __future__ import annotations

from .conftest import Emu, text_block, text_of, tool_use_id, user

TOOLS = [{"name": "Read", "input_schema": {"type": "object"}}]


async def test_side_calls_pass_a_matched_script_by(emu: Emu) -> None:
    """Entries for requests that offer `Read` are kept for them: a request without tools and
    one on another model get the unscripted echo, then the loop gets its call and its text,
    in order."""
    await emu.script(
        {"match": {"tools": ["Read"]}, "tool_calls": [{"name": "Read", "input": {"p": "a"}}]},
        {"match": {"tools": ["Read"], "model": "claude-sonnet-*"}, "text": "Done."},
    )
    title = await emu.create(messages=[user({"type": "text", "text": "title this"})])
    assert text_of(title.content[0]) == "Emulated reply to: title this"
    loop = await emu.create(messages=[user(text_block(5, "one"))], tools=TOOLS)
    assert tool_use_id(loop.content[0]) == "toolu_000001"
    other = await emu.create(
        model="claude-haiku-4-5", messages=[user({"type": "text", "text": "x"})], tools=TOOLS
    )
    assert text_of(other.content[0]) == "Emulated reply to: x"
    last = await emu.create(messages=[user(text_block(5, "two"))], tools=TOOLS)
    assert text_of(last.content[0]) == "Done."
    assert emu.state.clear_script() == 0


async def test_an_unmatched_entry_is_first_in_first_out(emu: Emu) -> None:
    """Without `match`, the next request takes the next entry, whatever it is."""
    await emu.script({"text": "first"}, {"match": {"tools": ["Read"]}, "text": "loop"})
    side = await emu.create(messages=[user({"type": "text", "text": "side"})])
    assert text_of(side.content[0]) == "first"
    assert emu.state.clear_script() == 1


async def test_without_tells_a_subagent_from_its_parent(emu: Emu) -> None:
    """A subagent is not offered the spawn tool: an entry that must not see `Agent` waits for
    the subagent's request, and the parent's request (which offers it) passes it by."""
    spawn = [*TOOLS, {"name": "Agent", "input_schema": {"type": "object"}}]
    await emu.script({"match": {"tools": ["Read"], "without": ["Agent"]}, "text": "child"})
    parent = await emu.create(messages=[user(text_block(5, "parent"))], tools=spawn)
    assert text_of(parent.content[0]) != "child"
    child = await emu.create(messages=[user(text_block(5, "child"))], tools=TOOLS)
    assert text_of(child.content[0]) == "child"
    assert emu.state.clear_script() == 0
