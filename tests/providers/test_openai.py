"""OpenAI: the lowering against the SDK's own request types, the official SDK against the
emulator's Chat Completions and Responses endpoints (automatic prefix caching), and the
engine on the OpenAI adapter."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Literal

import httpx2
import pydantic
import pytest
from openai import AsyncOpenAI, NotFoundError
from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolParam
from openai.types.chat.completion_create_params import CompletionCreateParamsStreaming
from sessiongen import Agent, ModelRef, SessionEngine, SessionStore
from sessiongen.emulator import EmulatorState, FaultSpec, create_app
from sessiongen.errors import ProviderNotFound, ProviderRateLimited
from sessiongen.llm.types import (
    CacheMark,
    LLMMessage,
    LLMRequest,
    ReasoningContent,
    SystemPart,
    TextContent,
    ToolCallContent,
    ToolChoice,
    ToolDefinition,
    ToolResultContent,
)
from sessiongen.providers.openai.adapter import OpenAILLMClient
from sessiongen.providers.openai.wire import lower_request

BASE = "http://emulator/v1"
MODEL = "gpt-4.1"
LONG_SYSTEM = "You are a careful coding agent. " * 200  # ~1,600 tokens: above the minimum
TOOL = ToolDefinition(
    name="read_file",
    description="Read a file of the workspace.",
    input_schema={"type": "object", "properties": {"path": {"type": "string"}}},
)


def _request(choice: ToolChoice | None = None) -> LLMRequest:
    return LLMRequest(
        model=MODEL,
        system=(SystemPart(text=LONG_SYSTEM, cache=CacheMark(ttl="1h")),),
        tools=(TOOL,),
        tool_choice=choice,
        prompt_cache_key="session-1",
        messages=(
            LLMMessage(role="user", content=(TextContent(text="Read app.py."),)),
            LLMMessage(
                role="assistant",
                content=(
                    ReasoningContent(text="I should read it.", signature="sig"),
                    TextContent(text="Reading."),
                    ToolCallContent(id="call_1", name="read_file", input={"path": "app.py"}),
                ),
            ),
            LLMMessage(
                role="user",
                content=(
                    ToolResultContent(tool_call_id="call_1", text="def add(a, b): ..."),
                    TextContent(text="Now summarise it."),
                ),
            ),
        ),
    )


# --- lowering ------------------------------------------------------------------------------


def _materialized(value: Any) -> Any:
    """A validated value with pydantic's lazy `Iterable` validators run (they validate as
    they are iterated)."""
    if isinstance(value, dict):
        return {k: _materialized(v) for k, v in value.items()}
    if isinstance(value, list | tuple) or type(value).__name__ == "ValidatorIterator":
        return [_materialized(v) for v in value]
    return value


@pytest.mark.parametrize("choice", ["auto", "any", "tool", "none"])
def test_the_lowering_is_valid_for_the_sdk_request_types(
    choice: Literal["auto", "any", "tool", "none"],
) -> None:
    """Validated offline with pydantic against the SDK's own TypedDicts
    (`CompletionCreateParamsStreaming`, `ChatCompletionMessageParam`,
    `ChatCompletionToolParam`): pydantic drops unknown keys, so equality means none."""
    name = "read_file" if choice == "tool" else None
    body = lower_request(_request(ToolChoice(type=choice, name=name)))
    params = {**body, "stream": True}
    validated = pydantic.TypeAdapter(CompletionCreateParamsStreaming).validate_python(params)
    assert set(validated) == set(params)
    messages = pydantic.TypeAdapter(ChatCompletionMessageParam)
    assert [_materialized(messages.validate_python(m)) for m in body["messages"]] == body[
        "messages"
    ]
    tools = pydantic.TypeAdapter(ChatCompletionToolParam)
    assert [_materialized(tools.validate_python(t)) for t in body["tools"]] == body["tools"]
    assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant", "tool", "user"]
    assert body["prompt_cache_key"] == "session-1"
    assert body["prompt_cache_retention"] == "24h"  # from the 1h mark


def test_tool_choice_none_keeps_the_tools_and_the_tool_history() -> None:
    auto = lower_request(_request(ToolChoice(type="auto")))
    none = lower_request(_request(ToolChoice(type="none")))
    assert none["tool_choice"] == "none"
    assert none["tools"] == auto["tools"]
    assert none["messages"] == auto["messages"]
    assert {k: v for k, v in none.items() if k != "tool_choice"} == {
        k: v for k, v in auto.items() if k != "tool_choice"
    }
    assert lower_request(_request(ToolChoice(type="any")))["tool_choice"] == "required"
    named = lower_request(_request(ToolChoice(type="tool", name="read_file")))
    assert named["tool_choice"] == {"type": "function", "function": {"name": "read_file"}}


# --- the SDK against the emulator ----------------------------------------------------------


@pytest.fixture
async def emulator() -> AsyncIterator[tuple[EmulatorState, AsyncOpenAI]]:
    state = EmulatorState(framing=False)  # the bare byte-based count these caching tests size by
    transport = httpx2.ASGITransport(app=create_app(state))
    http = httpx2.AsyncClient(transport=transport)
    client = AsyncOpenAI(api_key="test", base_url=BASE, http_client=http, max_retries=0)
    async with client:
        yield state, client


async def test_chat_completions_reads_the_cached_prefix_on_the_second_request(
    emulator: tuple[EmulatorState, AsyncOpenAI],
) -> None:
    state, client = emulator
    body = lower_request(_request(ToolChoice(type="auto")))
    first = await client.chat.completions.create(**body)
    second = await client.chat.completions.create(**{**body, "tool_choice": "none"})
    assert first.usage is not None and second.usage is not None
    assert first.usage.prompt_tokens_details is not None
    assert second.usage.prompt_tokens_details is not None
    assert first.usage.prompt_tokens_details.cached_tokens == 0
    cached = second.usage.prompt_tokens_details.cached_tokens
    assert cached is not None and cached >= 1024 and cached % 128 == 0
    assert second.usage.prompt_tokens - cached < 128  # the whole prompt, rounded down
    log = state.requests()
    assert [e["provider"] for e in log] == ["openai", "openai"]
    assert [e["path"] for e in log] == ["/v1/chat/completions"] * 2
    assert log[1]["usage"]["prompt_tokens_details"]["cached_tokens"] == cached
    # Another prompt_cache_key routes elsewhere: a miss (UNCONFIRMED model).
    third = await client.chat.completions.create(**{**body, "prompt_cache_key": "other"})
    assert third.usage is not None and third.usage.prompt_tokens_details is not None
    assert third.usage.prompt_tokens_details.cached_tokens == 0


async def test_responses_reads_the_cached_prefix_on_the_second_request(
    emulator: tuple[EmulatorState, AsyncOpenAI],
) -> None:
    state, client = emulator
    tools: Any = [
        {
            "type": "function",
            "name": "read_file",
            "description": "Read a file.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
            "strict": False,
        }
    ]
    history: Any = [
        {"role": "user", "content": "Read app.py."},
        {"type": "function_call", "call_id": "call_1", "name": "read_file", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "def add(a, b): ..."},
    ]
    first = await client.responses.create(
        model=MODEL, instructions=LONG_SYSTEM, input=history, tools=tools, store=False
    )
    history = [*history, {"role": "user", "content": "And util.py?"}]
    second = await client.responses.create(
        model=MODEL,
        instructions=LONG_SYSTEM,
        input=history,
        tools=tools,
        tool_choice="none",
        store=False,
    )
    assert first.usage is not None and second.usage is not None
    assert first.usage.input_tokens_details.cached_tokens == 0
    cached = second.usage.input_tokens_details.cached_tokens
    assert cached >= 1024 and cached % 128 == 0 and cached < second.usage.input_tokens
    assert second.output_text
    log = state.requests()
    assert log[-1]["provider"] == "openai" and log[-1]["path"] == "/v1/responses"
    assert log[-1]["usage"]["input_tokens_details"]["cached_tokens"] == cached
    events = [
        e.type
        async for e in await client.responses.create(
            model=MODEL, instructions=LONG_SYSTEM, input=history, tools=tools, stream=True
        )
    ]
    assert events[0] == "response.created" and events[-1] == "response.completed"


async def test_an_unknown_model_is_a_404_in_the_openai_shape(
    emulator: tuple[EmulatorState, AsyncOpenAI],
) -> None:
    _, client = emulator
    with pytest.raises(NotFoundError) as caught:
        await client.chat.completions.create(
            model="claude-sonnet-4-6", messages=[{"role": "user", "content": "hi"}]
        )
    assert caught.value.code == "model_not_found"
    llm = OpenAILLMClient(client)
    with pytest.raises(ProviderNotFound):
        await llm.generate(LLMRequest(model="nope", messages=_request().messages[:1]))


async def test_a_fault_is_one_request_and_a_typed_error(
    emulator: tuple[EmulatorState, AsyncOpenAI],
) -> None:
    state, client = emulator
    state.add_fault(FaultSpec(status=429))
    with pytest.raises(ProviderRateLimited) as caught:
        await OpenAILLMClient(client).generate(_request())
    assert caught.value.provider_request_id == "req_000001"
    assert [(e["status"], e["provider"]) for e in state.requests()] == [(429, "openai")]


async def test_a_held_request_waits_for_the_release(
    emulator: tuple[EmulatorState, AsyncOpenAI],
) -> None:
    state, client = emulator
    state.add_holds(1)
    task = asyncio.create_task(
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])
    )
    while state.hold_status()["waiting"] == 0:
        await asyncio.sleep(0.001)
    assert state.requests() == []
    state.release_holds()
    assert (await task).choices[0].message.content
    assert len(state.requests()) == 1


# --- the engine on the adapter -------------------------------------------------------------


async def test_the_engine_runs_a_turn_and_a_generate_through_the_adapter(
    emulator: tuple[EmulatorState, AsyncOpenAI], tmp_path: Path
) -> None:
    state, client = emulator
    (tmp_path / "AGENTS.md").write_text("Keep it short.\n")
    agent = Agent(
        name="gpt",
        model=ModelRef(id=MODEL),
        system=LONG_SYSTEM,
        tools=("read_file",),
        max_output_tokens=256,
    )
    store = SessionStore(":memory:")
    try:
        engine = SessionEngine(store, OpenAILLMClient(client), [agent])
        session = engine.create_session("gpt", workspace=str(tmp_path))
        await engine.run(session.id, "Hello.")
        await engine.run(session.id, "Hello again.")
        log = state.requests()
        assert all(e["provider"] == "openai" for e in log)
        assert log[-1]["usage"]["prompt_tokens_details"]["cached_tokens"] >= 1024
        before = store.dump()
        reply = await engine.generate(session.id, "A title?")
        assert reply.text
        assert store.dump() == before
        assert state.requests()[-1]["body"]["messages"][0]["role"] == "system"
    finally:
        store.close()
