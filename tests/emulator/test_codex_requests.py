"""Codex CLI's own requests on `/v1/responses`, replayed through the official SDK: real bodies
recorded from codex-cli 0.169.0 against the emulator on 2026-12-05 (`fixtures/codex/`, each
with a `_source` key; request bodies only, no headers). Codex sends `tool_choice: "auto"`
with `tools: []` (compaction) or with no `tools` at all (code mode: every tool in an
`additional_tools` input item), calls `custom` (freeform) tools and tools inside
`namespace` tools, and asks its guardian review for `text.format` json_schema."""

from __future__ import annotations

import copy
import inspect
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from openai import AsyncOpenAI, BadRequestError
from openai.types.responses import ResponseCustomToolCall, ResponseFunctionToolCall
from sessiongen.emulator import EmulatorState, ScriptedToolCall, create_app
from sessiongen.providers.openai.counting import encoding_of
from sessiongen.tokens import canonical_json, count_bpe_tokens

FIXTURES = Path(__file__).parent / "fixtures" / "codex"
BASE = "http://emulator/v1"
PATCH = "*** Begin Patch\n*** Update File: calc.py\n@@\n-    return a - b\n+    return a + b\n*** End Patch\n"


def fixture(name: str) -> dict[str, Any]:
    """A recorded body, without the fixture's own `_source` note."""
    body: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text("utf-8"))
    assert "codex-cli 0.169.0" in body["_source"] and "2026-12-05" in body["_source"]
    return {k: v for k, v in body.items() if not k.startswith("_")}


Emulator = tuple[EmulatorState, AsyncOpenAI, httpx2.AsyncClient]


@pytest.fixture
async def emulator() -> AsyncIterator[Emulator]:
    state = EmulatorState(framing=False)  # the bare byte count: 4 bytes a token, no framing
    app = create_app(state)
    sdk_http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app))
    wire = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://emulator")
    client = AsyncOpenAI(api_key="test", base_url=BASE, http_client=sdk_http, max_retries=0)
    async with client, wire:
        yield state, client, wire


async def sdk_create(client: AsyncOpenAI, body: dict[str, Any]) -> Any:
    """`client.responses.create` with the body's keys; the ones this SDK has no parameter
    for (Codex's `client_metadata`) go in `extra_body`, as the SDK documents."""
    known = inspect.signature(client.responses.create).parameters
    params = {k: v for k, v in body.items() if k in known}
    extra = {k: v for k, v in body.items() if k not in known}
    return await client.responses.create(**params, extra_body=extra or None)


async def wire_reply(wire: httpx2.AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
    """The JSON the emulator sends for `body` (not streamed), status 200."""
    answer = await wire.post("/v1/responses", json={**body, "stream": False})
    assert answer.status_code == 200, answer.text
    reply: dict[str, Any] = answer.json()
    return reply


async def script(wire: httpx2.AsyncClient, *calls: dict[str, Any]) -> None:
    answer = await wire.post("/_emulator/script", json={"responses": [{"tool_calls": list(calls)}]})
    answer.raise_for_status()


def additional_tools(body: dict[str, Any]) -> list[Any]:
    items = [item for item in body["input"] if item.get("type") == "additional_tools"]
    assert len(items) == 1
    tools: list[Any] = items[0]["tools"]
    return tools


# --- fix 1: tool_choice without tools -------------------------------------------------------


async def test_codex_compaction_with_empty_tools_and_tool_choice_auto_is_served(
    emulator: Emulator,
) -> None:
    """Codex's pre-turn compaction sends `tools: []` with `tool_choice: "auto"`; the API
    serves it (OpenAI's own client depends on it), so the emulator must not 400 it."""
    state, client, _ = emulator
    body = fixture("compaction")
    assert body["tools"] == [] and body["tool_choice"] == "auto" and body["stream"] is True
    events = [event async for event in await sdk_create(client, body)]
    assert events[0].type == "response.created" and events[-1].type == "response.completed"
    assert events[-1].response.usage.input_tokens > 4000  # its ~20 KB history, billed
    assert [entry["status"] for entry in state.requests()] == [200]


async def test_codex_code_mode_turn_without_tools_is_served(emulator: Emulator) -> None:
    """Codex's default models send no `tools` key at all, only `tool_choice: "auto"`."""
    _, client, _ = emulator
    body = {**fixture("code_mode_turn"), "stream": False}
    assert "tools" not in body and body["tool_choice"] == "auto"
    response = await sdk_create(client, body)
    assert response.status == "completed" and response.output_text.startswith("Emulated reply")


async def test_tool_choice_rules_without_tools(emulator: Emulator) -> None:
    """Chat Completions keeps the API's 400; on Responses `"none"` is served too, and a
    forced choice with no tool defined anywhere is still refused (UNCONFIRMED)."""
    _, client, wire = emulator
    with pytest.raises(BadRequestError, match="only allowed when 'tools' are specified"):
        await client.chat.completions.create(
            model="gpt-5",
            messages=[{"role": "user", "content": "hi"}],
            tools=[],
            tool_choice="auto",
        )
    served = await client.responses.create(model="gpt-5", input="hi", tools=[], tool_choice="none")
    assert served.status == "completed"
    with pytest.raises(BadRequestError, match="only allowed when 'tools' are specified"):
        await client.responses.create(model="gpt-5", input="hi", tool_choice="required")
    # Tools only in an additional_tools item make "required" a call to the first of them.
    body = {**fixture("code_mode_turn"), "tool_choice": "required"}
    reply = await wire_reply(wire, body)
    assert [item["type"] for item in reply["output"]] == ["custom_tool_call"]
    assert reply["output"][0]["name"] == "exec" and reply["output"][0]["input"] == ""


# --- fix 2: additional_tools are counted and callable ---------------------------------------


async def test_additional_tools_are_counted_like_tools(emulator: Emulator) -> None:
    """The item's ~24 KB of tool JSON was billed as an empty message (a few tokens); its tools
    now count as `tools` entries do: on the bare count, each namespace's JSON by the model's
    encoding."""
    _, client, _ = emulator
    body = {**fixture("code_mode_turn"), "stream": False}
    tools = additional_tools(body)
    size = sum(len(json.dumps(tool, separators=(",", ":"))) for tool in tools)
    assert size > 20_000
    bare = copy.deepcopy(body)
    additional_tools(bare).clear()
    full = (await sdk_create(client, body)).usage.input_tokens
    empty = (await sdk_create(client, {**bare, "prompt_cache_key": "other"})).usage.input_tokens
    encoding = encoding_of(body["model"])
    assert full - empty == sum(count_bpe_tokens(canonical_json(t), encoding) for t in tools)
    assert full - empty >= 0.15 * size  # JSON is 3 to 6 bytes a token, not a few tokens


async def test_a_replayed_custom_tool_call_and_its_output_are_counted(emulator: Emulator) -> None:
    """Codex sends the call back with its output on the next request: the call's plain-text
    input and the output are prompt text, as a function call's arguments and output are."""
    _, client, _ = emulator
    body = {**fixture("code_mode_turn"), "stream": False}
    before = (await sdk_create(client, body)).usage.input_tokens
    call = {"type": "custom_tool_call", "call_id": "call_1", "name": "exec", "input": PATCH * 10}
    output = {"type": "custom_tool_call_output", "call_id": "call_1", "output": "ok\n" * 200}
    body["input"] = [*body["input"], call, output]
    after = (await sdk_create(client, body)).usage.input_tokens
    encoding = encoding_of(body["model"])
    expected = count_bpe_tokens("exec", encoding) + count_bpe_tokens(PATCH * 10, encoding)
    assert after - before == expected + count_bpe_tokens("ok\n" * 200, encoding)


# --- fix 3: scripted custom and namespaced calls --------------------------------------------


async def test_a_scripted_call_to_a_namespaced_custom_tool_streams_as_custom_tool_call(
    emulator: Emulator,
) -> None:
    """Code mode's only loop tool is `exec`, a custom tool in namespace `functions` of the
    additional_tools item: a scripted string input comes back as a `custom_tool_call` with
    that namespace and the string as its `input`, in the streamed events too."""
    _, client, wire = emulator
    code = 'text(JSON.stringify(await tools.exec_command({cmd: "cat calc.py"})));'
    await script(wire, {"name": "exec", "input": code})
    events = [event async for event in await sdk_create(client, fixture("code_mode_turn"))]
    kinds = [event.type for event in events]
    assert kinds == [
        "response.created",
        "response.output_item.added",
        "response.custom_tool_call_input.delta",
        "response.custom_tool_call_input.done",
        "response.output_item.done",
        "response.completed",
    ]
    done = events[4].item
    assert isinstance(done, ResponseCustomToolCall)
    assert (done.name, done.namespace, done.input) == ("exec", "functions", code)
    assert done.id is not None and done.id.startswith("ctc_")
    assert events[3].input == code and events[3].item_id == done.id
    final = events[-1].response.output
    assert len(final) == 1 and isinstance(final[0], ResponseCustomToolCall)
    assert final[0].call_id == done.call_id
    # On the wire, as the function-calling guide shows the item.
    await script(wire, {"name": "exec", "input": code})
    item = (await wire_reply(wire, fixture("code_mode_turn")))["output"][0]
    assert item == {
        "type": "custom_tool_call",
        "id": item["id"],
        "call_id": item["call_id"],
        "name": "exec",
        "input": code,
        "status": "completed",
        "namespace": "functions",
    }


async def test_a_scripted_call_to_a_namespaced_function_names_its_namespace(
    emulator: Emulator,
) -> None:
    """`spawn_agent` sits in namespace `collaboration` of the additional_tools item: before,
    the call was dropped (no function tool seen) and the reply was the echo."""
    _, client, wire = emulator
    await script(wire, {"name": "spawn_agent", "input": {"task": "write tests"}})
    response = await sdk_create(client, {**fixture("code_mode_turn"), "stream": False})
    [call] = response.output
    assert isinstance(call, ResponseFunctionToolCall)
    assert (call.name, call.namespace) == ("spawn_agent", "collaboration")
    assert json.loads(call.arguments) == {"task": "write tests"}


async def test_top_level_custom_and_function_tools(emulator: Emulator) -> None:
    """gpt-5.5's shape: `apply_patch` is a top-level custom tool, `exec_command` a function.
    A string input to the custom tool is its `input`; an object input to the function is
    JSON `arguments`; a string input to a function is the `arguments` string as is."""
    _, _, wire = emulator
    body = fixture("custom_tool_turn")
    kinds = {tool.get("name"): tool["type"] for tool in body["tools"]}
    assert kinds["apply_patch"] == "custom" and kinds["exec_command"] == "function"
    await script(
        wire,
        {"name": "apply_patch", "input": PATCH},
        {"name": "exec_command", "input": {"cmd": "python3 test_calc.py"}},
        {"name": "exec_command", "input": '{"cmd": "git diff"}'},
    )
    patch, run, raw = (await wire_reply(wire, body))["output"]
    assert patch["type"] == "custom_tool_call" and patch["input"] == PATCH
    assert "namespace" not in patch
    assert run["type"] == "function_call" and json.loads(run["arguments"]) == {
        "cmd": "python3 test_calc.py"
    }
    assert raw["type"] == "function_call" and raw["arguments"] == '{"cmd": "git diff"}'


async def test_a_string_input_elsewhere_is_an_object_with_that_input(emulator: Emulator) -> None:
    """Anthropic's tool_use `input` must be an object: a string reads as `{"input": s}`
    there, and a dump gives the string back."""
    _, _, wire = emulator
    call = ScriptedToolCall(name="apply_patch", input=PATCH)
    assert call.input == {"input": PATCH} and call.freeform == PATCH
    assert call.model_dump()["input"] == PATCH
    assert ScriptedToolCall.model_validate(call.model_dump()).freeform == PATCH
    await script(wire, {"name": "apply_patch", "input": PATCH})
    body = {
        "model": "claude-sonnet-4-6",
        "max_tokens": 256,
        "tools": [{"name": "apply_patch", "input_schema": {"type": "object"}}],
        "messages": [{"role": "user", "content": "patch it"}],
    }
    answer = await wire.post("/v1/messages", json=body)
    assert answer.status_code == 200, answer.text
    [block] = answer.json()["content"]
    assert block["type"] == "tool_use" and block["input"] == {"input": PATCH}


# --- fix 4: json_schema replies ---------------------------------------------------------------


async def test_an_unscripted_guardian_review_gets_json_its_schema_accepts(
    emulator: Emulator,
) -> None:
    """The guardian review asks for `text.format` json_schema `codex_output_schema`; Codex
    declined the command when the reply was the echo ("not valid JSON")."""
    _, client, _ = emulator
    body = {**fixture("guardian_review"), "stream": False}
    assert body["text"]["format"]["type"] == "json_schema"
    response = await sdk_create(client, body)
    verdict = json.loads(response.output_text)
    assert verdict == {"outcome": "allow"}  # required only, the first enum value
