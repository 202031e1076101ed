"""Gemini: the lowering (checked by google-genai's own pydantic types), the emulator's Gemini
API under the official SDK (implicit caching on the one CacheStore), tool choice NONE, errors,
and the engine running through GeminiLLMClient."""

from __future__ import annotations

import copy
import warnings
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pydantic
import pytest
from google import genai
from google.genai import types
from sessiongen import SessionEngine
from sessiongen.emulator import EmulatorState, FaultSpec, ScriptedResponse, create_app
from sessiongen.errors import (
    ProviderInvalidRequest,
    ProviderNotFound,
    ProviderRateLimited,
    ProviderServerError,
)
from sessiongen.lab import write_workspace
from sessiongen.llm import (
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
from sessiongen.model import Agent, ModelRef
from sessiongen.providers.gemini.adapter import GeminiLLMClient
from sessiongen.providers.gemini.wire import decode_signature, lower_request, usage_from_gemini
from sessiongen.session.store import SessionStore

from tests._filler import filler
from tests.providers._sdk import gemini_client

BASE_URL = "http://gemini.emulator"
MODEL = "gemini-2.5-flash"  # implicit-caching minimum 2,048 tokens (models_gemini.json)
SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}


def request(choice: ToolChoice | None = None, *, extra: tuple[LLMMessage, ...] = ()) -> LLMRequest:
    """Tools + system + a history with reasoning, a tool call and its result."""
    return LLMRequest(
        model=MODEL,
        system=(SystemPart(text=filler(2500, "system"), cache=CacheMark()),),
        tools=(ToolDefinition(name="read_file", description="Read a file.", input_schema=SCHEMA),),
        messages=(
            LLMMessage(role="user", content=(TextContent(text="What is in a.py?"),)),
            LLMMessage(
                role="assistant",
                content=(
                    ReasoningContent(text="I should read it.", signature="c2lnLTE="),
                    TextContent(text="Reading."),
                    ToolCallContent(id="call_1", name="read_file", input={"path": "a.py"}),
                ),
            ),
            LLMMessage(
                role="user",
                content=(
                    ToolResultContent(tool_call_id="call_1", text="x = 1", cache=CacheMark()),
                ),
            ),
            *extra,
        ),
        tool_choice=choice,
        max_output_tokens=256,
    )


# --- lowering, validated by the SDK's own types --------------------------------------------


def validate(lowered: dict[str, Any]) -> None:
    """google-genai's pydantic models (extra="forbid") accept exactly the SDK's shapes. Its
    enums only warn on an unknown value (forward compatibility), so warnings fail too."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for content in lowered["contents"]:
            types.Content.model_validate(content)
        types.GenerateContentConfig.model_validate(lowered["config"])


@pytest.mark.parametrize("choice", [None, "auto", "any", "tool", "none"])
def test_lowering_is_valid_for_the_sdk_types(choice: str | None) -> None:
    tool_choice = (
        None if choice is None else ToolChoice.model_validate({"type": choice, "name": "read_file"})
    )
    lowered = lower_request(request(tool_choice))
    validate(lowered)
    contents, config = lowered["contents"], lowered["config"]
    assert [c["role"] for c in contents] == ["user", "model", "user"]
    model_parts = contents[1]["parts"]
    # The signature rides on the first function call; the summary text is not sent back.
    assert model_parts == [
        {"text": "Reading."},
        {
            "function_call": {"id": "call_1", "name": "read_file", "args": {"path": "a.py"}},
            "thought_signature": decode_signature("c2lnLTE="),
        },
    ]
    assert contents[2]["parts"] == [
        {
            "function_response": {
                "id": "call_1",
                "name": "read_file",
                "response": {"output": "x = 1"},
            }
        }
    ]
    assert config["system_instruction"] == {"parts": [{"text": filler(2500, "system")}]}
    assert config["max_output_tokens"] == 256
    expected_mode = {
        None: None,
        "auto": {"mode": "AUTO"},
        "any": {"mode": "ANY"},
        "tool": {"mode": "ANY", "allowed_function_names": ["read_file"]},
        "none": {"mode": "NONE"},
    }[choice]
    assert config.get("tool_config", {}).get("function_calling_config") == expected_mode


@pytest.mark.parametrize(
    "breakage",
    [
        lambda low: low["contents"][0].update(role="user", content="x"),  # Anthropic's field
        lambda low: low["contents"][0]["parts"][0].update(cache_control={"type": "ephemeral"}),
        lambda low: low["config"].update(max_tokens=10),  # Anthropic's name
        lambda low: low["config"]["tool_config"]["function_calling_config"].update(mode="REQUIRED"),
        lambda low: low["config"]["tools"][0]["function_declarations"][0].update(
            input_schema=SCHEMA
        ),
    ],
)
def test_the_sdk_types_reject_shapes_the_api_rejects(breakage: Any) -> None:
    """The validation is real: a shape the API would refuse fails it."""
    lowered = copy.deepcopy(lower_request(request(ToolChoice(type="auto"))))
    breakage(lowered)
    with pytest.raises((pydantic.ValidationError, UserWarning)):
        validate(lowered)


def test_tool_choice_none_keeps_declarations_and_tool_history() -> None:
    auto = lower_request(request(ToolChoice(type="auto")))
    none = lower_request(request(ToolChoice(type="none")))
    assert none["contents"] == auto["contents"]
    assert none["config"]["tools"] == auto["config"]["tools"]
    assert none["config"]["tools"][0]["function_declarations"][0]["name"] == "read_file"
    assert none["config"]["tool_config"] == {"function_calling_config": {"mode": "NONE"}}


def test_usage_counts_cached_tokens_inside_the_prompt() -> None:
    usage = usage_from_gemini(
        {"promptTokenCount": 3000, "cachedContentTokenCount": 2500, "candidatesTokenCount": 7}
    )
    assert (usage.input_tokens, usage.cache_read_tokens, usage.output_tokens) == (500, 2500, 7)
    assert usage.total_input_tokens == 3000 and usage.cache_write_tokens == 0


# --- the official SDK against the emulator -------------------------------------------------


@dataclass
class Emulated:
    state: EmulatorState
    http: httpx.AsyncClient
    sdk: genai.Client
    llm: GeminiLLMClient


@pytest.fixture
async def emulated() -> AsyncIterator[Emulated]:
    state = EmulatorState(framing=False)  # the bare byte-based count these caching tests size by
    transport = httpx.ASGITransport(app=create_app(state))
    async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as http:
        sdk = gemini_client(http, BASE_URL)
        async with GeminiLLMClient(api_key="test-key", base_url=BASE_URL, http_client=http) as llm:
            yield Emulated(state, http, sdk, llm)


async def test_sdk_second_request_reads_the_implicit_cache(emulated: Emulated) -> None:
    first = lower_request(request(ToolChoice(type="auto")))
    r1 = await emulated.sdk.aio.models.generate_content(
        model=first["model"], contents=first["contents"], config=first["config"]
    )
    follow_up = (
        LLMMessage(role="assistant", content=(TextContent(text="It sets x."),)),
        LLMMessage(role="user", content=(TextContent(text="Thanks. And b.py?"),)),
    )
    second = lower_request(request(ToolChoice(type="auto"), extra=follow_up))
    r2 = await emulated.sdk.aio.models.generate_content(
        model=second["model"], contents=second["contents"], config=second["config"]
    )
    assert r1.usage_metadata is not None and r2.usage_metadata is not None
    prompt1 = r1.usage_metadata.prompt_token_count
    assert prompt1 is not None and prompt1 > 2048
    assert r1.usage_metadata.cached_content_token_count is None
    # The second reads the whole first prompt; its promptTokenCount includes the cached part.
    assert r2.usage_metadata.cached_content_token_count == prompt1
    assert r2.usage_metadata.prompt_token_count is not None
    assert r2.usage_metadata.prompt_token_count > prompt1
    log = emulated.state.requests()
    assert [e["provider"] for e in log] == ["gemini", "gemini"]
    assert log[0]["path"] == f"/v1beta/models/{MODEL}:generateContent"
    assert "cachedContentTokenCount" not in log[0]["usage"]
    assert log[1]["usage"]["cachedContentTokenCount"] == prompt1
    assert log[1]["headers"]["x-goog-api-key"] == "[redacted]"
    assert log[1]["body"]["tools"][0]["functionDeclarations"][0]["name"] == "read_file"


async def test_adapter_stream_hits_and_tool_choice_none_keeps_the_cache(
    emulated: Emulated,
) -> None:
    await emulated.llm.generate(request(ToolChoice(type="auto")))
    emulated.state.queue_responses(
        [ScriptedResponse.model_validate({"text": "No tools now.", "tool_calls": [{"name": "f"}]})]
    )
    response = await emulated.llm.generate(request(ToolChoice(type="none")))
    first, second = emulated.state.requests()
    assert first["stream"] and first["path"].endswith(":streamGenerateContent")
    assert second["body"]["toolConfig"] == {"functionCallingConfig": {"mode": "NONE"}}
    assert second["body"]["tools"] == first["body"]["tools"]
    # NONE never calls a function, and the declarations stay in the cached prefix.
    assert response.tool_calls == () and response.text == "No tools now."
    assert response.usage.cache_read_tokens == first["usage"]["promptTokenCount"]
    assert response.usage.input_tokens == 0 and response.model == MODEL


async def test_short_prompts_and_expired_entries_miss(emulated: Emulated) -> None:
    short = LLMRequest(
        model=MODEL, messages=(LLMMessage(role="user", content=(TextContent(text="hi"),)),)
    )
    await emulated.llm.generate(short)
    assert (await emulated.llm.generate(short)).usage.cache_read_tokens == 0
    await emulated.llm.generate(request())
    emulated.state.clock.advance(301)  # past the assumed 5 min lifetime (UNCONFIRMED)
    assert (await emulated.llm.generate(request())).usage.cache_read_tokens == 0


async def test_scripted_tool_call_and_signature_come_back(emulated: Emulated) -> None:
    emulated.state.queue_responses(
        [
            ScriptedResponse.model_validate(
                {
                    "thinking": "Look first.",
                    "tool_calls": [{"name": "read_file", "input": {"path": "b"}}],
                }
            )
        ]
    )
    response = await emulated.llm.generate(request(ToolChoice(type="auto")))
    assert response.finish_reason == "tool_use"
    assert [c.name for c in response.tool_calls] == ["read_file"]
    assert response.reasoning == "Look first." and response.reasoning_signature is not None


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (400, ProviderInvalidRequest),
        (404, ProviderNotFound),
        (429, ProviderRateLimited),
        (503, ProviderServerError),
    ],
)
async def test_errors_are_typed_and_sent_once(
    emulated: Emulated, status: int, error: type[Exception]
) -> None:
    emulated.state.add_fault(FaultSpec(status=status, count=3))
    with pytest.raises(error):
        await emulated.llm.generate(request())
    assert len(emulated.state.requests()) == 1  # no SDK retry


async def test_emulator_validation_answers_in_gemini_shape(emulated: Emulated) -> None:
    reply = await emulated.http.post(
        f"/v1beta/models/{MODEL}:generateContent",
        json={
            "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
            "tools": [{"functionDeclarations": [{"name": "f"}]}],
            "toolConfig": {
                "functionCallingConfig": {"mode": "AUTO", "allowedFunctionNames": ["f"]}
            },
        },
    )
    assert reply.status_code == 400 and reply.json()["error"]["status"] == "INVALID_ARGUMENT"
    missing = await emulated.http.post(
        "/v1beta/models/claude-sonnet-4-6:generateContent",
        json={"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
    )
    assert missing.status_code == 404 and missing.json()["error"]["status"] == "NOT_FOUND"


async def test_explicit_cached_content_is_read_and_expires(emulated: Emulated) -> None:
    sdk = emulated.sdk.aio
    cache = await sdk.caches.create(
        model=MODEL,
        config=types.CreateCachedContentConfig(
            system_instruction=filler(3000, "manual"),
            contents=[types.Content(role="user", parts=[types.Part(text="The document.")])],
            ttl="600s",
        ),
    )
    assert cache.name and cache.usage_metadata and cache.usage_metadata.total_token_count
    cached_tokens = cache.usage_metadata.total_token_count
    assert (await sdk.caches.get(name=cache.name)).expire_time == cache.expire_time
    config = types.GenerateContentConfig(cached_content=cache.name)
    reply = await sdk.models.generate_content(model=MODEL, contents="A question?", config=config)
    assert reply.usage_metadata is not None
    assert reply.usage_metadata.cached_content_token_count == cached_tokens
    assert reply.usage_metadata.prompt_token_count == cached_tokens + 3
    # The documented conflict: cachedContent with a system instruction, tools or toolConfig.
    with pytest.raises(genai.errors.ClientError) as conflict:
        await sdk.models.generate_content(
            model=MODEL,
            contents="Q",
            config=types.GenerateContentConfig(cached_content=cache.name, system_instruction="x"),
        )
    assert conflict.value.code == 400
    emulated.state.clock.advance(601)
    with pytest.raises(genai.errors.ClientError):
        await sdk.models.generate_content(model=MODEL, contents="Again?", config=config)
    with pytest.raises(genai.errors.ClientError):
        await sdk.caches.get(name=cache.name)
    too_small = types.CreateCachedContentConfig(system_instruction="short")
    with pytest.raises(genai.errors.ClientError):
        await sdk.caches.create(model=MODEL, config=too_small)


async def test_deleted_cached_content_is_gone(emulated: Emulated) -> None:
    sdk = emulated.sdk.aio
    config = types.CreateCachedContentConfig(system_instruction=filler(3000, "del"))
    cache = await sdk.caches.create(model=MODEL, config=config)
    assert cache.name is not None
    await sdk.caches.delete(name=cache.name)
    with pytest.raises(genai.errors.ClientError):
        await sdk.caches.get(name=cache.name)
    assert {e["provider"] for e in emulated.state.requests()} == {"gemini"}


# --- the engine through the adapter ---------------------------------------------------------


async def test_engine_turn_and_generate_through_gemini(emulated: Emulated, tmp_path: Path) -> None:
    workspace = write_workspace(tmp_path)
    agent = Agent(
        name="gem",
        model=ModelRef(id=MODEL),
        system="You are a careful coding assistant.",
        tools=("read_file", "list_files", "grep"),
        steps=4,
        max_output_tokens=512,
    )
    store = SessionStore(":memory:")
    try:
        engine = SessionEngine(store, emulated.llm, [agent])
        session = engine.create_session("gem", workspace=workspace)
        emulated.state.queue_responses(
            [
                ScriptedResponse.model_validate(
                    {
                        "text": "Looking.",
                        "tool_calls": [{"name": "read_file", "input": {"path": "src/app.py"}}],
                    }
                ),
                ScriptedResponse(text="add() and mean() are in src/app.py."),
            ]
        )
        await engine.run(session.id, "What is in src/app.py?")
        before = store.dump()
        result = await engine.generate(session.id, "Summarize in one line.")
        assert store.dump() == before
        assert result is not None
        log = emulated.state.requests()
        assert len(log) == 3 and {e["provider"] for e in log} == {"gemini"}
        parts = [p for c in log[-1]["body"]["contents"] for p in c["parts"]]
        assert any("functionCall" in p for p in parts)
        assert any("functionResponse" in p for p in parts)
        assert log[-1]["body"]["contents"][-1]["parts"][-1] == {"text": "Summarize in one line."}
    finally:
        store.close()
