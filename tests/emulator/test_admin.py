"""Conformance of the emulator's own surface: admin endpoint shapes, deterministic ids and
replies, the script queue, count_tokens, and the in-process SDK client helpers."""

from __future__ import annotations

import anthropic
import pytest
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
from sessiongen.emulator import EmulatorState, create_app, sync_client

from .conftest import MODEL, Emu, filler, text_block, text_of, tool_use_id, user


async def test_request_log_shape(emu: Emu) -> None:
    """`GET /_emulator/requests` -> {"requests": [...]}, each with id, virtual started_at,
    body as received, HTTP status and usage (null on errors)."""
    await emu.advance(12.5)
    body: MessageCreateParamsNonStreaming = {
        "model": MODEL,
        "max_tokens": 16,
        "messages": [user(text_block(5, "q"))],
    }
    message = await emu.client.messages.create(**body)
    with pytest.raises(anthropic.NotFoundError):
        await emu.create(model="claude-nope", messages=[user(text_block(5, "q"))])
    first, second = await emu.requests()
    assert {"id", "started_at", "body", "status", "usage"} <= set(first)
    assert first["id"] == "req_000001" == message._request_id
    assert first["started_at"] == 12.5
    assert first["body"] == body
    assert first["status"] == 200
    assert first["usage"] == message.usage.model_dump(exclude_none=True)
    assert (second["status"], second["usage"]) == (404, None)


async def test_clock_endpoint(emu: Emu) -> None:
    """`POST /_emulator/clock` with {"advance": s} or {"now": s} returns {"now": s}; exactly
    one of the two is required; time never goes negative."""
    assert await emu.advance(30) == 30.0
    assert await emu.advance(0.5) == 30.5
    assert await emu.set_time(7) == 7.0
    for bad in ({}, {"advance": 1, "now": 2}, {"advance": -1}, {"now": -5}):
        response = await emu.admin.post("/_emulator/clock", json=bad)
        assert response.status_code == 400, bad
        assert response.json()["error"]["type"] == "invalid_request_error", bad
    assert (await emu.admin.get("/_emulator/clock")).json() == {"now": 7.0}


async def test_script_queue_and_deterministic_ids(emu: Emu) -> None:
    """Scripted responses are used in order (text then tool_use blocks, stop_reason tool_use
    when there are tool calls), then the default echo resumes; message, tool-use and request
    ids count up from 1."""
    await emu.script(
        {"text": "Reading.", "tool_calls": [{"name": "read_file", "input": {"path": "a"}}]},
        {"tool_calls": [{"id": "toolu_custom", "name": "grep", "input": {"q": "x"}}]},
        {"text": "Refused.", "stop_reason": "refusal"},
    )
    tools = [{"name": name, "input_schema": {"type": "object"}} for name in ("read_file", "grep")]
    first = await emu.create(messages=[user(text_block(5, "one"))], tools=tools)
    assert first.id == "msg_000001"
    assert [b.type for b in first.content] == ["text", "tool_use"]
    assert tool_use_id(first.content[1]) == "toolu_000001"
    assert first.stop_reason == "tool_use"
    second = await emu.create(messages=[user(text_block(5, "two"))], tools=tools)
    assert tool_use_id(second.content[0]) == "toolu_custom"
    third = await emu.create(messages=[user(text_block(5, "three"))])
    assert (text_of(third.content[0]), third.stop_reason) == ("Refused.", "refusal")
    fourth = await emu.create(messages=[user({"type": "text", "text": "  plain   echo  "})])
    assert text_of(fourth.content[0]) == "Emulated reply to: plain echo"
    assert [r["id"] for r in await emu.requests()] == [f"req_00000{i}" for i in range(1, 5)]


async def test_default_reply_stops_at_max_tokens(emu: Emu) -> None:
    """The deterministic reply is cut to `max_tokens` with stop_reason "max_tokens"."""
    message = await emu.create(
        max_tokens=3, messages=[user({"type": "text", "text": "hello " * 20})]
    )
    assert message.stop_reason == "max_tokens"
    assert message.usage.output_tokens == 3
    assert text_of(message.content[0]) == "Emulated rep"  # 3 tokens = 12 bytes


async def test_stop_sequences(emu: Emu) -> None:
    """stop_sequences cut the reply before the sequence, stop_reason "stop_sequence"."""
    await emu.script({"text": "alpha END beta"})
    message = await emu.create(stop_sequences=["END"], messages=[user(text_block(5, "q"))])
    assert (text_of(message.content[0]), message.stop_reason, message.stop_sequence) == (
        "alpha ",
        "stop_sequence",
        "END",
    )


async def test_forced_tool_choice_calls_the_tool(emu: Emu) -> None:
    """tool_choice any/tool "prefill the assistant turn, so no text comes before the
    tool_use" (AD:…/define-tools): the unscripted reply is a call of that tool."""
    tools = [
        {"name": "a", "description": "A.", "input_schema": {"type": "object"}},
        {"name": "b", "description": "B.", "input_schema": {"type": "object"}},
    ]
    message = await emu.create(
        tools=tools, tool_choice={"type": "tool", "name": "b"}, messages=[user(text_block(5, "q"))]
    )
    assert [(c.type, getattr(c, "name", None)) for c in message.content] == [("tool_use", "b")]
    assert message.stop_reason == "tool_use"


async def test_prewarm_does_not_consume_the_script(emu: Emu) -> None:
    """A max_tokens 0 pre-warm produces no output, so the scripted reply waits for the real
    request."""
    await emu.script({"text": "Scripted."})
    await emu.create(max_tokens=0, messages=[user(text_block(5, "warmup"))])
    real = await emu.create(messages=[user(text_block(5, "q"))])
    assert text_of(real.content[0]) == "Scripted."


async def test_reset_clears_everything(emu: Emu) -> None:
    """`POST /_emulator/reset` clears cache, log, script, faults and counters and sets the
    clock to 0."""
    system = [text_block(1100, "reset", "5m")]
    await emu.create(system=system, messages=[user(text_block(5, "q"))])
    await emu.script({"text": "left over"})
    await emu.faults(status=500, count=3)
    await emu.advance(100)
    assert (await emu.admin.post("/_emulator/reset")).json() == {"reset": True}
    assert await emu.requests() == []
    assert (await emu.admin.get("/_emulator/clock")).json() == {"now": 0.0}
    message = await emu.create(system=system, messages=[user(text_block(5, "q"))])
    assert message.id == "msg_000001" and message._request_id == "req_000001"
    assert message.usage.cache_read_input_tokens == 0  # the cache is empty again
    assert text_of(message.content[0]).startswith("Emulated reply")


async def test_cache_inspection_endpoint(emu: Emu) -> None:
    """`GET /_emulator/cache` lists entries with their TTL window on the virtual clock."""
    emu.state.ttft = 1.5
    await emu.advance(10)
    await emu.create(
        system=[text_block(1100, "inspect", "1h")], messages=[user(text_block(5, "q"))]
    )
    (entry,) = (await emu.admin.get("/_emulator/cache")).json()["entries"]
    assert (entry["tokens"], entry["ttl"], entry["model"]) == (1100, "1h", MODEL)
    assert (entry["written_at"], entry["available_at"], entry["expires_at"]) == (10, 11.5, 3610)


async def test_count_tokens(emu: Emu) -> None:
    """`POST /v1/messages/count_tokens` -> {"input_tokens": N}, counted block by block with the
    shared counter; it is logged (usage null) and touches no cache."""
    tool = {"name": "t", "description": "", "input_schema": {"type": "object"}}
    counted = await emu.client.messages.count_tokens(
        model=MODEL,
        tools=[tool],  # type: ignore[list-item]
        system=filler(100, "sys"),
        messages=[user(text_block(1100, "count", "5m"))],
    )
    assert counted.input_tokens == 1 + 5 + 100 + 1100  # name, '{"type":"object"}', texts
    (logged,) = await emu.requests()
    assert (logged["status"], logged["usage"]) == (200, None)
    assert (await emu.admin.get("/_emulator/cache")).json()["entries"] == []


async def test_request_id_header_on_every_response(emu: Emu) -> None:
    """Every response carries a `request-id` header, success included (AD:api/errors)."""
    raw = await emu.client.messages.with_raw_response.create(
        model=MODEL, max_tokens=8, messages=[user(text_block(5, "q"))]
    )
    assert raw.headers["request-id"] == "req_000001"
    missing = await emu.admin.get("/v1/nothing-here")
    assert missing.status_code == 404
    assert missing.json()["error"]["type"] == "not_found_error"
    assert missing.headers["request-id"] == missing.json()["request_id"]


def test_sync_client_runs_in_process() -> None:
    """`sync_client(app)` drives the app with the synchronous SDK and no socket (what the
    notebooks use); streaming works too."""
    state = EmulatorState()
    with sync_client(create_app(state)) as client:
        message = client.messages.create(
            model=MODEL, max_tokens=16, messages=[{"role": "user", "content": "sync"}]
        )
        with client.messages.stream(
            model=MODEL, max_tokens=16, messages=[{"role": "user", "content": "stream"}]
        ) as stream:
            final = stream.get_final_message()
    assert text_of(message.content[0]) == "Emulated reply to: sync"
    assert text_of(final.content[0]) == "Emulated reply to: stream"
    assert [r["status"] for r in state.requests()] == [200, 200]
