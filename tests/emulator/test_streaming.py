"""Conformance: the SSE event sequence (AD:build-with-claude/streaming) and how the official
SDK's stream helpers read it, including streams cut short."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import httpx2
import pytest
from anthropic.types import ToolParam
from anthropic.types.message_create_params import MessageCreateParamsBase

from .conftest import MODEL, Emu, text_block, user

SCRIPT_INPUT = {"path": "src/app.py", "lines": [1, 20]}
SCRIPT = {
    "text": "Let me check both files for you.",
    "tool_calls": [{"name": "read_file", "input": SCRIPT_INPUT}],
}
TOOL: ToolParam = {
    "name": "read_file",
    "description": "Read a file.",
    "input_schema": {"type": "object"},
}


def shape(content: Any) -> list[tuple[Any, ...]]:
    """Content blocks without their (per-call) ids."""
    return [
        (b.type, b.name, b.input) if b.type == "tool_use" else (b.type, b.text) for b in content
    ]


async def raw_events(emu: Emu, **params: Any) -> list[tuple[str, dict[str, Any]]]:
    """(event name, data) of every SSE event as sent, pings included."""
    events: list[tuple[str, dict[str, Any]]] = []
    name = ""
    async with emu.client.messages.with_streaming_response.create(
        model=MODEL, max_tokens=256, stream=True, **params
    ) as response:
        async for line in response.iter_lines():
            if line.startswith("event: "):
                name = line.removeprefix("event: ")
            elif line.startswith("data: "):
                events.append((name, json.loads(line.removeprefix("data: "))))
    return events


async def test_event_sequence(emu: Emu) -> None:
    """ "message_start carries the Message with empty content and usage"; per block
    "content_block_start -> content_block_delta -> content_block_stop" (text_delta,
    input_json_delta); "Any number of ping events can appear"; "message_delta" with
    stop_reason, then "message_stop"."""
    await emu.script(SCRIPT)
    events = await raw_events(emu, tools=[TOOL], messages=[user(text_block(5, "q"))])
    names = [name for name, _ in events]
    assert names[:2] == ["message_start", "ping"]
    assert names[-2:] == ["message_delta", "message_stop"]
    body = names[2:-2]
    first_stop = body.index("content_block_stop")
    assert body[0] == "content_block_start"
    assert set(body[1:first_stop]) == {"content_block_delta"}
    assert body[first_stop + 1] == "content_block_start"
    assert body[-1] == "content_block_stop"
    assert all(name == data["type"] for name, data in events)
    start = events[0][1]["message"]
    assert start["content"] == [] and start["stop_reason"] is None
    assert {"cache_creation_input_tokens", "cache_read_input_tokens", "cache_creation"} <= set(
        start["usage"]
    )
    deltas = [d["delta"]["type"] for n, d in events if n == "content_block_delta"]
    assert "text_delta" in deltas and "input_json_delta" in deltas
    assert deltas.count("input_json_delta") > 1  # partial JSON split into several chunks
    assert events[-2][1]["delta"]["stop_reason"] == "tool_use"


async def test_message_delta_usage_is_cumulative(emu: Emu) -> None:
    """ "message_delta.usage is cumulative": it repeats the input and cache counts of
    message_start and carries the final output_tokens."""
    system = [text_block(1100, "stream-cache", "5m")]
    events = await raw_events(emu, system=system, messages=[user(text_block(5, "q"))])
    start_usage = events[0][1]["message"]["usage"]
    delta_usage = next(d["usage"] for n, d in events if n == "message_delta")
    assert start_usage["cache_creation_input_tokens"] == 1100
    for key in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"):
        assert delta_usage[key] == start_usage[key]
    logged = (await emu.requests())[-1]
    assert delta_usage["output_tokens"] == logged["usage"]["output_tokens"] > 0


async def test_sdk_stream_helper_builds_the_final_message(emu: Emu) -> None:
    """The SDK's `messages.stream(...).get_final_message()` accumulates the events into the same
    message a non-streaming call returns (text, tool_use input from partial JSON, usage)."""
    await emu.script(SCRIPT, SCRIPT)
    params: MessageCreateParamsBase = {
        "model": MODEL,
        "max_tokens": 256,
        "tools": [TOOL],
        "messages": [user(text_block(5, "q"))],
    }
    plain = await emu.client.messages.create(**params)
    async with emu.client.messages.stream(**params) as stream:
        final = await stream.get_final_message()
    assert shape(final.content) == shape(plain.content)
    assert final.stop_reason == plain.stop_reason == "tool_use"
    assert final.usage == plain.usage
    assert shape(final.content)[1] == ("tool_use", "read_file", SCRIPT_INPUT)


async def test_create_stream_true_yields_typed_events(emu: Emu) -> None:
    """`messages.create(stream=True)` parses every event into the SDK's typed events (the SDK
    skips pings); thinking arrives as thinking_delta then signature_delta."""
    await emu.script({"thinking": "Weigh the options.", "text": "Done."})
    stream = await emu.client.messages.create(
        model=MODEL, max_tokens=256, stream=True, messages=[user(text_block(5, "q"))]
    )
    types: list[str] = []
    async with stream:
        async for event in stream:
            types.append(event.type if event.type != "content_block_delta" else event.delta.type)
    assert types[0] == "message_start" and types[-1] == "message_stop"
    assert "thinking_delta" in types and "signature_delta" in types and "text_delta" in types
    assert "ping" not in types


async def test_cut_stream_ends_without_a_final_message(emu: Emu) -> None:
    """A stream cut after K events ("end" mode: the body ends cleanly, no message_stop): the
    SDK raises nothing, and `get_final_message()` returns the partial snapshot with
    stop_reason None. This is what a caller must detect as an interrupted stream."""
    await emu.faults(cut_after_events=4)
    async with emu.client.messages.stream(
        model=MODEL, max_tokens=256, messages=[user(text_block(5, "a long question"))]
    ) as stream:
        seen = [event.type async for event in stream]
        final = await stream.get_final_message()
    assert "message_stop" not in seen
    assert final.stop_reason is None
    assert final.content[0].type == "text" and final.content[0].text  # part of the text
    logged = await emu.requests()
    assert len(logged) == 1 and logged[0]["status"] == 200


async def test_aborted_stream_raises_in_the_sdk(emu: Emu) -> None:
    """A stream whose connection drops mid-body ("abort" mode, real socket only): iterating
    it raises the transport's RemoteProtocolError; the SDK does not wrap it."""
    if emu.transport == "asgi":
        pytest.skip("an in-process ASGI transport cannot express a dropped connection")
    await emu.faults(cut_after_events=4, cut_mode="abort")
    with pytest.raises(httpx2.RemoteProtocolError):
        async with emu.client.messages.stream(
            model=MODEL, max_tokens=256, messages=[user(text_block(5, "q"))]
        ) as stream:
            await stream.get_final_message()


async def test_error_event_mid_stream(emu: Emu) -> None:
    """ "Errors mid-stream: event: error / {"type":"error","error":{"type":"overloaded_error",
    "message":"Overloaded"}}": the SDK raises an APIStatusError carrying that body."""
    await emu.faults(cut_after_events=3, error_event="overloaded_error")
    with pytest.raises(anthropic.APIStatusError) as info:
        async with emu.client.messages.stream(
            model=MODEL, max_tokens=256, messages=[user(text_block(5, "q"))]
        ) as stream:
            await stream.get_final_message()
    assert info.value.body == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"},
    }
