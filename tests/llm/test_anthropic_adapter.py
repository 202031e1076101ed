"""AnthropicLLMClient: exact lowering, and the real SDK driven through mock transports."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import httpx
import httpx2
import pytest
from sessiongen.emulator import BackgroundServer, FaultSpec, ScriptedResponse, free_port
from sessiongen.emulator.errors import ERROR_TYPES as EMULATOR_ERROR_TYPES
from sessiongen.emulator.errors import error_type_for
from sessiongen.errors import (
    ContextOverflow,
    ProviderAuthenticationError,
    ProviderConnectionError,
    ProviderError,
    ProviderInvalidRequest,
    ProviderOverloaded,
    ProviderRateLimited,
    ProviderServerError,
    ProviderStreamInterrupted,
    ProviderTimeout,
    provider_error_for_status,
)
from sessiongen.llm import (
    CacheMark,
    LLMMessage,
    LLMRequest,
    ReasoningContent,
    SystemPart,
    TextContent,
    ToolCall,
    ToolCallContent,
    ToolChoice,
    ToolResultContent,
    collect,
)
from sessiongen.llm.types import (
    FinishEvent,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallEvent,
    Usage,
    UsageEvent,
)
from sessiongen.providers.anthropic.adapter import AnthropicLLMClient, lower_request
from sessiongen.providers.anthropic.wire import ERROR_TYPES
from sessiongen.testing import RecordingLLMClient

from .conftest import (
    EMULATOR_MODEL,
    FLAVORS,
    GREP_TOOL,
    MODEL,
    READ_TOOL,
    USER_HI,
    Flavor,
    Handler,
    Seen,
    bad_request,
    cached_usage_reply,
    connect_error,
    context_window_reply,
    cut_mid_stream,
    emu_req,
    emulated,
    ends_without_message_stop,
    error_event_mid_stream,
    events_of,
    garbled_tool_reply,
    html_bad_gateway,
    legacy_usage_reply,
    mock_http,
    mocked,
    overloaded,
    overloaded_mid_stream,
    pause_turn_reply,
    prompt_too_long,
    rate_limited,
    read_error_mid_stream,
    read_timeout,
    recorded_requests,
    req,
    server_error,
    text_reply,
    thinking_reply,
    timeout_mid_stream,
    tool_reply,
    truncated_tool_reply,
    unauthorized,
    unknown_error_mid_stream,
    without_credentials,
)

# --- lowering snapshots --------------------------------------------------------------------


def test_lower_minimal_request() -> None:
    assert lower_request(req()) == {
        "model": MODEL,
        "max_tokens": 256,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
    }


def test_lower_system_with_cache_marks_and_1h_ttl() -> None:
    request = req(
        system=(
            SystemPart(text="You are terse.", cache=CacheMark(ttl="1h")),
            SystemPart(text="Project rules."),
            SystemPart(text="Today is Tuesday.", cache=CacheMark(ttl="5m")),
        ),
        messages=(LLMMessage(role="user", content=(TextContent(text="hi", cache=CacheMark()),)),),
    )
    assert lower_request(request) == {
        "model": MODEL,
        "max_tokens": 256,
        "system": [
            {
                "type": "text",
                "text": "You are terse.",
                "cache_control": {"type": "ephemeral", "ttl": "1h"},
            },
            {"type": "text", "text": "Project rules."},
            {
                "type": "text",
                "text": "Today is Tuesday.",
                "cache_control": {"type": "ephemeral"},
            },
        ],
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}],
            }
        ],
    }


def test_lower_tool_use_and_tool_result_pairing() -> None:
    request = req(
        messages=(
            USER_HI,
            LLMMessage(
                role="assistant",
                content=(
                    TextContent(text="Reading both."),
                    ToolCallContent(id="toolu_1", name="read_file", input={"path": "a.txt"}),
                    ToolCallContent(id="toolu_2", name="read_file", input={"path": "b.txt"}),
                ),
            ),
            LLMMessage(
                role="user",
                content=(
                    ToolResultContent(tool_call_id="toolu_1", text="alpha"),
                    ToolResultContent(
                        tool_call_id="toolu_2",
                        text="no such file",
                        is_error=True,
                        cache=CacheMark(ttl="1h"),
                    ),
                ),
            ),
        ),
        tools=(READ_TOOL, GREP_TOOL),
    )
    assert lower_request(request) == {
        "model": MODEL,
        "max_tokens": 256,
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Reading both."},
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "read_file",
                        "input": {"path": "a.txt"},
                    },
                    {
                        "type": "tool_use",
                        "id": "toolu_2",
                        "name": "read_file",
                        "input": {"path": "b.txt"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "alpha"},
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_2",
                        "content": "no such file",
                        "is_error": True,
                        "cache_control": {"type": "ephemeral", "ttl": "1h"},
                    },
                ],
            },
        ],
        "tools": [
            {
                "name": "read_file",
                "description": "Read a file",
                "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
            },
            {
                "name": "grep",
                "description": "Search",
                "input_schema": {"type": "object"},
                "cache_control": {"type": "ephemeral"},
            },
        ],
    }


def test_lower_tool_choice_none_keeps_the_tools() -> None:
    body = lower_request(
        req(tools=(READ_TOOL,), tool_choice=ToolChoice(type="none", disable_parallel_tool_use=True))
    )
    assert body["tools"] == [
        {
            "name": "read_file",
            "description": "Read a file",
            "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
        }
    ]
    # none has no parallel flag on the wire: there are no tool calls to keep apart.
    assert body["tool_choice"] == {"type": "none"}
    assert list(body) == ["model", "max_tokens", "messages", "tools", "tool_choice"]


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        (ToolChoice(), {"type": "auto"}),
        (
            ToolChoice(type="auto", disable_parallel_tool_use=True),
            {"type": "auto", "disable_parallel_tool_use": True},
        ),
        (
            ToolChoice(type="any", disable_parallel_tool_use=True),
            {"type": "any", "disable_parallel_tool_use": True},
        ),
        (
            ToolChoice(type="tool", name="grep", disable_parallel_tool_use=True),
            {"type": "tool", "name": "grep", "disable_parallel_tool_use": True},
        ),
        (ToolChoice(type="tool", name="grep"), {"type": "tool", "name": "grep"}),
    ],
)
def test_lower_tool_choice_and_disable_parallel_placement(
    choice: ToolChoice, wire: dict[str, Any]
) -> None:
    body = lower_request(req(tools=(READ_TOOL,), tool_choice=choice))
    assert body["tool_choice"] == wire
    assert "disable_parallel_tool_use" not in body


def test_lower_omits_tool_choice_when_unset() -> None:
    assert "tool_choice" not in lower_request(req(tools=(READ_TOOL,)))


def test_lower_tool_choice_tool_without_name_is_rejected() -> None:
    with pytest.raises(ValueError, match="name"):
        lower_request(req(tools=(READ_TOOL,), tool_choice=ToolChoice(type="tool")))


def test_lower_reasoning_with_and_without_signature() -> None:
    request = req(
        messages=(
            USER_HI,
            LLMMessage(
                role="assistant",
                content=(
                    ReasoningContent(text="Think first.", signature="sig_abc"),
                    ReasoningContent(text="Unsigned, cannot be replayed."),
                    TextContent(text="Done."),
                ),
            ),
        )
    )
    assert lower_request(request)["messages"][1] == {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "Think first.", "signature": "sig_abc"},
            {"type": "text", "text": "Done."},
        ],
    }


def test_lower_merges_provider_options_last_and_ignores_other_providers() -> None:
    request = req(
        tools=(READ_TOOL,),
        tool_choice=ToolChoice(),
        prompt_cache_key="session-1",
        provider_options={
            "anthropic": {
                "thinking": {"type": "enabled", "budget_tokens": 1024},
                "metadata": {"user_id": "u1"},
                "temperature": 0.2,
            },
            "openai": {"reasoning": {"effort": "low"}},
        },
    )
    body = lower_request(request)
    assert list(body) == [
        "model",
        "max_tokens",
        "messages",
        "tools",
        "tool_choice",
        "thinking",
        "metadata",
        "temperature",
    ]
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert body["metadata"] == {"user_id": "u1"}
    assert body["temperature"] == 0.2
    # There is no wire field for a cache key; the session identity travels in headers.
    assert "session-1" not in json.dumps(body)


def test_lower_request_is_pure() -> None:
    request = req(provider_options={"anthropic": {"temperature": 0.0}})
    first = lower_request(request)
    first["messages"].clear()
    first.pop("temperature")
    assert lower_request(request) == {
        "model": MODEL,
        "max_tokens": 256,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        "temperature": 0.0,
    }


# --- streaming -----------------------------------------------------------------------------


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_text_reply_streams_deltas_usage_and_finish(flavor: Flavor) -> None:
    async with mocked(text_reply, flavor) as (llm, seen):
        events = await events_of(llm, req())
    assert events == [
        UsageEvent(usage=Usage(input_tokens=12, output_tokens=1)),
        TextDelta(text="Hel"),
        TextDelta(text="lo."),
        UsageEvent(usage=Usage(input_tokens=12, output_tokens=5)),
        FinishEvent(reason="end_turn", model=MODEL, response_id="msg_01"),
    ]
    assert len(seen) == 1
    assert seen[0].url == "http://mock/v1/messages"


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_tool_use_reply_accumulates_partial_json(flavor: Flavor) -> None:
    async with mocked(tool_reply, flavor) as (llm, _):
        events = await events_of(llm, req(tools=(READ_TOOL,)))
        response = await llm.generate(req(tools=(READ_TOOL,)))
    calls = [e.call for e in events if isinstance(e, ToolCallEvent)]
    assert calls == [
        ToolCall(id="toolu_1", name="read_file", input={"path": "src/app.py"}),
        ToolCall(id="toolu_2", name="list_files", input={}),
    ]
    assert response.text == "Let me look."
    assert response.tool_calls == tuple(calls)
    assert response.finish_reason == "tool_use"
    assert response.usage == Usage(input_tokens=12, output_tokens=40)
    assert response.response_id == "msg_01"


async def test_thinking_maps_to_reasoning_with_signature_and_unknown_events_pass() -> None:
    async with mocked(thinking_reply) as (llm, _):
        events = await events_of(llm, req())
    reasoning = [e for e in events if isinstance(e, ReasoningDelta)]
    assert reasoning == [
        ReasoningDelta(text="Consider "),
        ReasoningDelta(text="it."),
        ReasoningDelta(text="", signature="sig_xyz"),
    ]
    async with mocked(thinking_reply) as (llm, _):
        response = await llm.generate(req())
    assert (response.reasoning, response.text) == ("Consider it.", "Answer.")


async def test_usage_is_cumulative_and_keeps_message_start_input_fields() -> None:
    async with mocked(cached_usage_reply) as (llm, _):
        events = await events_of(llm, req())
    usages = [e.usage for e in events if isinstance(e, UsageEvent)]
    start = Usage(
        input_tokens=7,
        output_tokens=1,
        cache_read_tokens=900,
        cache_write_5m_tokens=100,
        cache_write_1h_tokens=200,
    )
    assert usages == [
        start,
        start.model_copy(update={"output_tokens": 20}),
        start.model_copy(update={"output_tokens": 25}),
    ]
    assert usages[-1].total_input_tokens == 1207


async def test_cache_write_total_without_split_counts_as_5m() -> None:
    async with mocked(legacy_usage_reply) as (llm, _):
        response = await llm.generate(req())
    assert response.usage == Usage(input_tokens=3, output_tokens=2, cache_write_5m_tokens=50)


@pytest.mark.parametrize(
    ("handler", "reason"),
    [(context_window_reply, "context_window"), (pause_turn_reply, "other")],
)
async def test_stop_reasons_map_to_finish_reasons(handler: Handler, reason: str) -> None:
    async with mocked(handler) as (llm, _):
        response = await llm.generate(req())
    assert response.finish_reason == reason


async def test_tool_input_cut_by_max_tokens_is_dropped_not_fatal() -> None:
    async with mocked(truncated_tool_reply) as (llm, _):
        response = await llm.generate(req(tools=(GREP_TOOL,)))
    assert (response.finish_reason, response.tool_calls) == ("max_tokens", ())


async def test_invalid_tool_input_json_is_a_provider_error() -> None:
    async with mocked(garbled_tool_reply) as (llm, _):
        with pytest.raises(ProviderError, match="invalid JSON input for tool 'grep'") as info:
            await llm.generate(req(tools=(GREP_TOOL,)))
    assert info.value.provider_request_id == "req_stream_1"


async def test_request_headers_and_body_go_on_the_wire() -> None:
    request = req(
        system=(SystemPart(text="Be brief.", cache=CacheMark(ttl="1h")),),
        tools=(READ_TOOL,),
        tool_choice=ToolChoice(type="none"),
        headers={"x-session-id": "ses_1", "anthropic-beta": "some-beta-2026-01-01"},
        provider_options={"anthropic": {"temperature": 0.5, "metadata": {"user_id": "u1"}}},
    )
    async with mocked(text_reply) as (llm, seen):
        await llm.generate(request)
    assert seen[0].headers["x-session-id"] == "ses_1"
    assert seen[0].headers["anthropic-beta"] == "some-beta-2026-01-01"
    assert seen[0].body == {**lower_request(request), "stream": True}


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_bridged_and_native_clients_send_the_same_request(flavor: Flavor) -> None:
    request = req(headers={"x-session-id": "ses_2"})
    async with mocked(text_reply, flavor) as (llm, seen):
        await llm.generate(request)
    assert seen[0].body == {**lower_request(request), "stream": True}
    assert seen[0].headers["x-session-id"] == "ses_2"
    assert seen[0].headers["content-type"] == "application/json"


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_the_sdk_timeout_reaches_the_transport(flavor: Flavor) -> None:
    async with mocked(text_reply, flavor) as (llm, seen):
        await llm.generate(req())
    # The SDK's own default (10 min, 5 s connect), not the httpx client's 5 s everywhere.
    assert seen[0].timeout == anthropic.DEFAULT_TIMEOUT.as_dict()
    assert seen[0].timeout["read"] == 600


async def test_consumer_may_stop_at_finish_without_leaking() -> None:
    async with mocked(text_reply) as (llm, _):
        async for event in llm.stream(req()):
            if isinstance(event, FinishEvent):
                break


# --- errors --------------------------------------------------------------------------------


@pytest.mark.parametrize("flavor", FLAVORS)
@pytest.mark.parametrize(
    ("handler", "error", "status", "error_type"),
    [
        (rate_limited, ProviderRateLimited, 429, "rate_limit_error"),
        (overloaded, ProviderOverloaded, 529, "overloaded_error"),
        (server_error, ProviderServerError, 500, "api_error"),
        (bad_request, ProviderInvalidRequest, 400, "invalid_request_error"),
        (unauthorized, ProviderAuthenticationError, 401, "authentication_error"),
    ],
)
async def test_status_errors_are_typed_with_status_and_request_id(
    flavor: Flavor, handler: Handler, error: type[ProviderError], status: int, error_type: str
) -> None:
    async with mocked(handler, flavor) as (llm, _):
        with pytest.raises(error) as info:
            await events_of(llm, req())
    assert type(info.value) is error
    assert info.value.provider_status == status
    assert info.value.provider_request_id == f"req_{status}"
    assert info.value.provider_error_type == error_type
    assert isinstance(info.value.__cause__, anthropic.APIStatusError)


async def test_error_message_comes_from_the_body() -> None:
    async with mocked(rate_limited) as (llm, _):
        with pytest.raises(ProviderRateLimited) as info:
            await llm.generate(req())
    assert str(info.value) == "Number of requests has exceeded your rate limit"


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_prompt_too_long_is_context_overflow(flavor: Flavor) -> None:
    async with mocked(prompt_too_long, flavor) as (llm, _):
        with pytest.raises(ContextOverflow) as info:
            await llm.generate(req())
    assert info.value.provider_status == 400
    assert info.value.provider_request_id == "req_400"
    assert "prompt is too long" in str(info.value)


async def test_non_json_error_body_is_a_server_error() -> None:
    async with mocked(html_bad_gateway) as (llm, _):
        with pytest.raises(ProviderServerError) as info:
            await llm.generate(req())
    assert info.value.provider_status == 502
    assert "Bad Gateway" in str(info.value)


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_timeout_is_provider_timeout(flavor: Flavor) -> None:
    async with mocked(read_timeout, flavor) as (llm, seen):
        with pytest.raises(ProviderTimeout) as info:
            await llm.generate(req())
    assert isinstance(info.value.__cause__, anthropic.APITimeoutError)
    assert len(seen) == 1


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_connection_error_is_provider_connection_error(flavor: Flavor) -> None:
    async with mocked(connect_error, flavor) as (llm, _):
        with pytest.raises(ProviderConnectionError) as info:
            await events_of(llm, req())
    assert type(info.value) is ProviderConnectionError


@pytest.mark.parametrize("flavor", FLAVORS)
@pytest.mark.parametrize("handler", [cut_mid_stream, read_error_mid_stream, timeout_mid_stream])
async def test_stream_broken_midway_is_interrupted(flavor: Flavor, handler: Handler) -> None:
    events: list[StreamEvent] = []
    async with mocked(handler, flavor) as (llm, _):
        with pytest.raises(ProviderStreamInterrupted) as info:
            async for event in llm.stream(req()):
                events.append(event)
    assert TextDelta(text="Hel") in events
    assert info.value.provider_request_id == "req_stream_1"


async def test_stream_ending_without_message_stop_is_interrupted() -> None:
    async with mocked(ends_without_message_stop) as (llm, _):
        with pytest.raises(ProviderStreamInterrupted, match="message_stop") as info:
            await llm.generate(req())
    assert info.value.provider_request_id == "req_stream_1"


async def test_error_event_mid_stream_maps_by_error_type() -> None:
    async with mocked(overloaded_mid_stream) as (llm, _):
        with pytest.raises(ProviderOverloaded) as info:
            await events_of(llm, req())
    assert (info.value.provider_status, info.value.provider_error_type) == (529, "overloaded_error")
    assert info.value.provider_request_id == "req_stream_1"


@pytest.mark.parametrize(("status", "error_type"), sorted(ERROR_TYPES.items()))
async def test_every_documented_error_type_mid_stream_maps_as_its_status(
    status: int, error_type: str
) -> None:
    async with mocked(error_event_mid_stream(error_type)) as (llm, _):
        with pytest.raises(ProviderError) as info:
            await llm.generate(req())
    expected = provider_error_for_status(status, "Stream error", error_type=error_type)
    assert type(info.value) is type(expected)
    assert (info.value.provider_status, info.value.provider_error_type) == (status, error_type)


def test_the_emulator_answers_from_the_adapters_error_table() -> None:
    assert EMULATOR_ERROR_TYPES is ERROR_TYPES
    assert all(error_type_for(status) == kind for status, kind in ERROR_TYPES.items())


async def test_error_event_of_unknown_type_is_interrupted() -> None:
    async with mocked(unknown_error_mid_stream) as (llm, _):
        with pytest.raises(ProviderStreamInterrupted) as info:
            await llm.generate(req())
    assert info.value.provider_error_type == "mystery_error"


async def test_missing_credentials_is_an_authentication_error_at_call(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    without_credentials(monkeypatch, tmp_path)
    seen: list[Seen] = []
    async with AnthropicLLMClient(http_client=mock_http("httpx2", text_reply, seen)) as llm:
        with pytest.raises(ProviderAuthenticationError, match="ANTHROPIC_API_KEY"):
            await llm.generate(req())
    assert seen == []


async def test_unusable_credentials_profile_is_an_authentication_error_at_construction(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    without_credentials(monkeypatch, tmp_path)
    monkeypatch.setenv("ANTHROPIC_CONFIG_DIR", str(tmp_path / "anthropic"))
    http = httpx2.AsyncClient(transport=httpx2.MockTransport(lambda r: httpx2.Response(500)))
    async with http:
        with pytest.raises(ProviderAuthenticationError, match="ANTHROPIC_API_KEY") as info:
            AnthropicLLMClient(http_client=http, base_url="https://mock")
    assert isinstance(info.value.__cause__, anthropic.CredentialsError)


# --- attempts ------------------------------------------------------------------------------


async def test_generate_makes_exactly_one_attempt_even_when_the_client_retries() -> None:
    seen: list[Seen] = []
    http = mock_http("httpx2", overloaded, seen)
    assert isinstance(http, httpx2.AsyncClient)
    sdk = anthropic.AsyncAnthropic(
        api_key="sk-test", base_url="http://mock", max_retries=2, http_client=http
    )
    async with sdk:
        llm = AnthropicLLMClient(sdk)
        assert llm.max_retries == 2
        with pytest.raises(ProviderOverloaded):
            await llm.generate(req())
        assert len(seen) == 1
        # stream() follows the client's own retry policy: 1 attempt + 2 retries.
        with pytest.raises(ProviderOverloaded):
            await events_of(llm, req())
        assert len(seen) == 4


async def test_generate_single_attempt_under_529_through_the_httpx_bridge() -> None:
    async with mocked(overloaded, "httpx", max_retries=2) as (llm, seen):
        with pytest.raises(ProviderOverloaded):
            await llm.generate(req())
    assert len(seen) == 1


# --- construction --------------------------------------------------------------------------


async def test_from_env_uses_the_sdk_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-env")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://emulator.test:8080")
    async with AnthropicLLMClient.from_env(max_retries=1) as llm:
        assert llm.client.api_key == "sk-env"
        assert str(llm.client.base_url) == "http://emulator.test:8080"
        assert llm.max_retries == 1


async def test_default_retries_are_the_sdk_default() -> None:
    async with AnthropicLLMClient(api_key="sk-test", base_url="http://mock") as llm:
        assert llm.max_retries == anthropic.DEFAULT_MAX_RETRIES


async def test_http_client_base_url_is_used_unless_overridden() -> None:
    async with AnthropicLLMClient(
        http_client=httpx2.AsyncClient(base_url="http://a.test"), api_key="k"
    ) as llm:
        assert str(llm.client.base_url) == "http://a.test"
    async with AnthropicLLMClient(
        http_client=httpx.AsyncClient(base_url="http://a.test"),
        api_key="k",
        base_url="http://b.test",
    ) as llm:
        assert str(llm.client.base_url) == "http://b.test"


async def test_injected_client_is_not_closed_and_not_mixed_with_options() -> None:
    async with anthropic.AsyncAnthropic(api_key="k", base_url="http://mock") as sdk:
        with pytest.raises(ValueError, match="ready AsyncAnthropic"):
            AnthropicLLMClient(sdk, api_key="other")
        async with AnthropicLLMClient(sdk) as llm:
            assert llm.client is sdk
        assert not sdk.is_closed()


async def test_is_an_llm_client() -> None:
    from sessiongen.llm import LLMClient

    async with AnthropicLLMClient(api_key="k", base_url="http://mock") as llm:
        assert isinstance(llm, LLMClient)


# --- the in-process emulator ---------------------------------------------------------------


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_emulator_text_reply(flavor: Flavor) -> None:
    async with emulated(flavor) as (llm, admin):
        script = {"responses": [{"text": "Hello from the emulator."}]}
        await admin("POST", "/_emulator/script", script)
        events = await events_of(llm, emu_req())
        recorded = await recorded_requests(admin)
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    finish = events[-1]
    assert text == "Hello from the emulator."
    assert isinstance(finish, FinishEvent)
    assert (finish.reason, finish.model) == ("end_turn", EMULATOR_MODEL)
    assert finish.response_id
    usages = [e.usage for e in events if isinstance(e, UsageEvent)]
    assert usages[-1].input_tokens > 0 and usages[-1].output_tokens > 0
    assert len(recorded) == 1


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_emulator_tool_use_and_thinking_reply(flavor: Flavor) -> None:
    script = {
        "responses": [
            {
                "thinking": "The user wants a file.",
                "tool_calls": [{"name": "read_file", "input": {"path": "src/app.py", "n": 2}}],
            }
        ]
    }
    async with emulated(flavor) as (llm, admin):
        await admin("POST", "/_emulator/script", script)
        response = await llm.generate(emu_req(tools=(READ_TOOL,)))
    assert response.finish_reason == "tool_use"
    assert response.reasoning == "The user wants a file."
    assert [(c.name, c.input) for c in response.tool_calls] == [
        ("read_file", {"path": "src/app.py", "n": 2})
    ]
    assert response.tool_calls[0].id


async def test_emulator_sees_the_lowered_body() -> None:
    request = emu_req(
        system=(SystemPart(text="Be brief.", cache=CacheMark(ttl="1h")),),
        tools=(READ_TOOL,),
        tool_choice=ToolChoice(type="none"),
    )
    async with emulated() as (llm, admin):
        await llm.generate(request)
        recorded = await recorded_requests(admin)
    assert recorded[0]["body"] == {**lower_request(request), "stream": True}


@pytest.mark.parametrize("flavor", FLAVORS)
@pytest.mark.parametrize(
    ("status", "error"),
    [(429, ProviderRateLimited), (529, ProviderOverloaded), (500, ProviderServerError)],
)
async def test_emulator_faults_are_typed_and_generate_attempts_once(
    flavor: Flavor, status: int, error: type[ProviderError]
) -> None:
    async with emulated(flavor, max_retries=2) as (llm, admin):
        await admin("POST", "/_emulator/faults", {"status": status, "count": 1})
        with pytest.raises(error) as info:
            await llm.generate(emu_req())
        recorded = await recorded_requests(admin)
        # The fault is spent, so the next call succeeds.
        assert (await llm.generate(emu_req())).finish_reason == "end_turn"
    assert type(info.value) is error
    assert info.value.provider_status == status
    assert info.value.provider_request_id == recorded[0]["id"]
    assert len(recorded) == 1


async def test_emulator_stream_retries_follow_the_client() -> None:
    async with emulated(max_retries=2) as (llm, admin):
        fault = {"status": 529, "count": 2, "headers": {"retry-after-ms": "1"}}
        await admin("POST", "/_emulator/faults", fault)
        response = await collect(llm.stream(emu_req()))
        recorded = await recorded_requests(admin)
    assert response.finish_reason == "end_turn"
    assert [r["status"] for r in recorded] == [529, 529, 200]


async def test_emulator_prompt_too_long_is_context_overflow() -> None:
    huge = LLMMessage(role="user", content=(TextContent(text=" x" * 1_000_001),))
    async with emulated() as (llm, _):
        with pytest.raises(ContextOverflow) as info:
            await llm.generate(emu_req(messages=(huge,)))
    assert info.value.provider_status == 400
    assert info.value.provider_request_id


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_emulator_cut_stream_is_interrupted(flavor: Flavor) -> None:
    async with emulated(flavor) as (llm, admin):
        await admin("POST", "/_emulator/script", {"responses": [{"text": "A long answer."}]})
        await admin("POST", "/_emulator/faults", {"status": 200, "cut_after_events": 4})
        with pytest.raises(ProviderStreamInterrupted) as info:
            await events_of(llm, emu_req())
    assert info.value.provider_request_id


async def test_emulator_error_event_mid_stream_is_overloaded() -> None:
    fault = {"status": 200, "cut_after_events": 3, "error_event": "overloaded_error"}
    async with emulated() as (llm, admin):
        await admin("POST", "/_emulator/faults", fault)
        with pytest.raises(ProviderOverloaded) as info:
            await llm.generate(emu_req())
    assert (info.value.provider_status, info.value.provider_error_type) == (529, "overloaded_error")
    assert info.value.provider_request_id


async def test_recording_client_keeps_the_adapters_unstreamed_prewarm() -> None:
    """Wrapped in a RecordingLLMClient, a pre-warming generate (max_output_tokens 0) still goes
    out unstreamed, as the adapter sends it: the API rejects max_tokens 0 on a stream."""
    request = emu_req().model_copy(update={"max_output_tokens": 0})
    async with emulated() as (llm, admin):
        recording = RecordingLLMClient(llm)
        response = await recording.generate(request)
        recorded = await recorded_requests(admin)
    assert response.usage.input_tokens > 0
    assert (recording.requests, recording.calls) == ([request], ["generate"])
    assert [(r["stream"], r["status"], r["body"]["max_tokens"]) for r in recorded] == [
        (False, 200, 0)
    ]


# --- the emulator on a real socket ---------------------------------------------------------


async def test_real_socket_via_env_and_aborted_chunked_stream_is_interrupted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with BackgroundServer() as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-emulator")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        server.state.queue_responses([ScriptedResponse(text="Over a real socket.")])
        async with AnthropicLLMClient.from_env(max_retries=0) as llm:
            assert (await llm.generate(emu_req())).text == "Over a real socket."
            server.state.add_fault(FaultSpec(status=200, cut_after_events=4, cut_mode="abort"))
            with pytest.raises(ProviderStreamInterrupted) as info:
                await events_of(llm, emu_req())
    assert isinstance(info.value.__cause__, httpx2.RemoteProtocolError)
    assert info.value.provider_request_id


async def test_real_socket_connection_refused_is_a_connection_error() -> None:
    port = free_port()
    async with AnthropicLLMClient(
        api_key="k", base_url=f"http://127.0.0.1:{port}", max_retries=0
    ) as llm:
        with pytest.raises(ProviderConnectionError, match="ConnectError"):
            await llm.generate(emu_req())


def test_prewarm_with_manual_thinking_sends_the_smallest_valid_max_tokens() -> None:
    """max_tokens 0 is rejected with manual extended thinking; budget + 1 is the least
    the API accepts, so the lowering sends that instead."""
    request = LLMRequest(
        model="claude-sonnet-4-6",
        messages=(LLMMessage(role="user", content=(TextContent(text="hi"),)),),
        max_output_tokens=0,
        provider_options={"anthropic": {"thinking": {"type": "enabled", "budget_tokens": 2048}}},
    )
    assert lower_request(request)["max_tokens"] == 2049
    plain = request.model_copy(update={"provider_options": {}})
    assert lower_request(plain)["max_tokens"] == 0
