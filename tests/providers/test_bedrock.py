"""Bedrock Converse: the lowering against botocore's own parameter validation (it checks
shapes, required members, unions and ranges, not enum values), boto3 against
the emulator (cache reads at the wire and in the parsed usage), tool choice none, and the
engine through the adapter."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3  # type: ignore[import-untyped]  # boto3 ships no type hints
import pytest
from botocore.exceptions import ClientError, ParamValidationError  # type: ignore[import-untyped]
from botocore.validate import validate_parameters  # type: ignore[import-untyped]
from sessiongen import (
    ProviderInvalidRequest,
    ProviderServerError,
    ProviderStreamInterrupted,
    SessionEngine,
    SessionStore,
)
from sessiongen.emulator import BackgroundServer, EmulatorState
from sessiongen.emulator.state import FaultSpec, ScriptedResponse
from sessiongen.lab import write_workspace
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
from sessiongen.model import Agent, ModelRef
from sessiongen.providers.bedrock.adapter import BedrockLLMClient
from sessiongen.providers.bedrock.wire import lower_request, usage_from_bedrock

from tests._filler import filler
from tests.providers._sdk import bedrock_client

# AWS's table: Opus 4.5 has the 1h TTL and a 4,096-token minimum per checkpoint; Sonnet 4.6
# has 1,024 and the 5-minute TTL only (its 1h marks are lowered as 5m ones).
MODEL = "us.anthropic.claude-opus-4-5-20251101-v1:0"
SONNET_46 = "us.anthropic.claude-sonnet-4-6"
SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}


def _input_shape() -> Any:
    return (
        boto3.session.Session()
        .client(
            "bedrock-runtime",
            region_name="us-east-1",
            aws_access_key_id="x",
            aws_secret_access_key="x",
        )
        .meta.service_model.operation_model("Converse")
        .input_shape
    )


INPUT_SHAPE = _input_shape()


def request(choice: ToolChoice | None = None, *, marks: bool = True) -> LLMRequest:
    mark = CacheMark() if marks else None
    hour = CacheMark(ttl="1h") if marks else None  # 1h breakpoints must come before 5m ones
    return LLMRequest(
        model=MODEL,
        system=(SystemPart(text=filler(4500, "system"), cache=CacheMark(ttl="1h")),),
        tools=(
            ToolDefinition(name="read_file", description="Read.", input_schema=SCHEMA, cache=hour),
        ),
        messages=(
            LLMMessage(role="user", content=(TextContent(text="Read a.py"),)),
            LLMMessage(
                role="assistant",
                content=(
                    ReasoningContent(text="I should read it.", signature="sig"),
                    ReasoningContent(text="unsigned, dropped"),
                    ToolCallContent(id="t1", name="read_file", input={"path": "a.py"}),
                ),
            ),
            LLMMessage(
                role="user",
                content=(
                    ToolResultContent(tool_call_id="t1", text="print(1)", cache=mark),
                    TextContent(text="And now?"),
                ),
            ),
        ),
        tool_choice=choice,
        max_output_tokens=256,
    )


# --- lowering, validated offline by botocore's own parameter validation ----------------------


@pytest.mark.parametrize(
    "choice",
    [
        None,
        ToolChoice(type="auto"),
        ToolChoice(type="any"),
        ToolChoice(type="tool", name="read_file"),
        ToolChoice(type="none"),
    ],
    ids=lambda c: getattr(c, "type", "absent"),
)
def test_the_lowering_passes_botocore_validation(choice: ToolChoice | None) -> None:
    kwargs = lower_request(request(choice))
    validate_parameters(kwargs, INPUT_SHAPE)  # raises ParamValidationError on a bad shape
    assert kwargs["system"][1] == {"cachePoint": {"type": "default", "ttl": "1h"}}
    assert kwargs["toolConfig"]["tools"][1] == {"cachePoint": {"type": "default", "ttl": "1h"}}
    assistant = kwargs["messages"][1]["content"]
    assert assistant[0] == {
        "reasoningContent": {"reasoningText": {"text": "I should read it.", "signature": "sig"}}
    }
    assert len(assistant) == 2  # the unsigned reasoning is dropped
    assert kwargs["messages"][2]["content"][1] == {"cachePoint": {"type": "default"}}


def test_pre_warming_sends_the_smallest_valid_max_tokens() -> None:
    kwargs = lower_request(request().model_copy(update={"max_output_tokens": 0}))
    validate_parameters(kwargs, INPUT_SHAPE)
    assert kwargs["inferenceConfig"] == {"maxTokens": 1}


@pytest.mark.parametrize(
    "change",
    [
        lambda k: k["toolConfig"].update(toolChoice={"none": {}}),  # there is no none
        lambda k: k["inferenceConfig"].update(maxTokens=0),
        lambda k: k["system"].append({"cachePoint": {"ttl": "5m"}}),  # type is required
        lambda k: k["system"][0].update(cache_control={"type": "ephemeral"}),  # Anthropic's
        lambda k: k["toolConfig"].update(tools=[]),
    ],
    ids=["choice-none", "max-tokens-0", "no-type", "cache-control", "no-tools"],
)
def test_botocore_validation_rejects_shapes_the_provider_rejects(change: Any) -> None:
    kwargs = lower_request(request())
    change(kwargs)
    with pytest.raises(ParamValidationError):
        validate_parameters(kwargs, INPUT_SHAPE)


def test_tool_choice_none_keeps_tools_and_tool_history() -> None:
    none = lower_request(request(ToolChoice(type="none")))
    auto = lower_request(request(ToolChoice(type="auto")))
    assert none == auto  # toolChoice omitted (auto): the only spelling that keeps the prefix
    assert "toolChoice" not in none["toolConfig"]
    assert [t["toolSpec"]["name"] for t in none["toolConfig"]["tools"] if "toolSpec" in t] == [
        "read_file"
    ]
    flat = [b for m in none["messages"] for b in m["content"]]
    assert any("toolUse" in b for b in flat) and any("toolResult" in b for b in flat)


def test_usage_is_split_by_cache_details() -> None:
    usage = usage_from_bedrock(
        {
            "inputTokens": 5,
            "outputTokens": 7,
            "totalTokens": 1,
            "cacheReadInputTokens": 100,
            "cacheWriteInputTokens": 30,
            "cacheDetails": [{"ttl": "1h", "inputTokens": 20}, {"ttl": "5m", "inputTokens": 10}],
        }
    )
    assert (usage.cache_read_tokens, usage.cache_write_1h_tokens, usage.cache_write_5m_tokens) == (
        100,
        20,
        10,
    )
    assert (
        usage_from_bedrock(
            {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2, "cacheWriteInputTokens": 9}
        ).cache_write_5m_tokens
        == 9
    )


# --- boto3 against the emulator ------------------------------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[BackgroundServer]:
    with BackgroundServer() as background:
        yield background


@pytest.fixture
def state(server: BackgroundServer) -> EmulatorState:
    server.state.reset()
    return server.state


@pytest.fixture
def sdk(server: BackgroundServer) -> Any:
    return bedrock_client(server.url)


def test_the_same_prefix_again_reads_the_cache(state: EmulatorState, sdk: Any) -> None:
    kwargs = lower_request(request(ToolChoice(type="auto")))
    first = sdk.converse(**kwargs)
    state.clock.advance(60)
    second = sdk.converse(**kwargs)
    assert first["usage"]["cacheReadInputTokens"] == 0
    assert first["usage"]["cacheWriteInputTokens"] > 4500
    assert {d["ttl"] for d in first["usage"]["cacheDetails"]} == {"1h", "5m"}
    assert second["usage"]["cacheReadInputTokens"] == first["usage"]["cacheWriteInputTokens"]
    assert second["usage"]["cacheWriteInputTokens"] == 0
    logged = state.requests()
    assert [r["provider"] for r in logged] == ["bedrock", "bedrock"]
    assert [r["path"] for r in logged] == [f"/model/{MODEL}/converse"] * 2
    assert logged[1]["usage"] == second["usage"] and logged[1]["started_at"] == 60.0
    assert second["output"]["message"]["content"][0]["text"].startswith("Emulated reply to:")


def test_tool_history_without_tool_config_is_rejected(state: EmulatorState, sdk: Any) -> None:
    kwargs = lower_request(request())
    del kwargs["toolConfig"]
    with pytest.raises(ClientError) as caught:
        sdk.converse(**kwargs)
    error = caught.value.response["Error"]
    assert error["Code"] == "ValidationException"
    assert "toolConfig field must be defined" in error["Message"]
    assert state.requests()[0]["status"] == 400


def test_an_anthropic_model_id_is_not_a_bedrock_model(state: EmulatorState, sdk: Any) -> None:
    kwargs = lower_request(request().model_copy(update={"model": "claude-sonnet-4-6"}))
    with pytest.raises(ClientError, match="model identifier is invalid"):
        sdk.converse(**kwargs)


async def test_the_adapter_streams_and_maps_errors_with_one_attempt(
    state: EmulatorState, server: BackgroundServer
) -> None:
    llm = BedrockLLMClient(
        endpoint_url=server.url, aws_access_key_id="x", aws_secret_access_key="x"
    )
    state.queue_responses(
        [
            ScriptedResponse(
                thinking="hmm",
                text="Done.",
                tool_calls=[{"name": "read_file", "input": {"path": "b.py"}}],
            )
        ]
    )
    response = await llm.generate(request(ToolChoice(type="auto")))
    assert response.text == "Done." and response.reasoning == "hmm"
    assert response.reasoning_signature == "emulator-signature"
    assert [(c.name, c.input) for c in response.tool_calls] == [("read_file", {"path": "b.py"})]
    assert response.finish_reason == "tool_use" and response.usage.cache_write_1h_tokens > 0
    assert state.requests()[0]["path"].endswith("/converse-stream")

    state.add_fault(FaultSpec(status=500))
    with pytest.raises(ProviderServerError):
        await llm.generate(request())
    bad = request().model_copy(update={"tools": ()})  # tool history without toolConfig
    with pytest.raises(ProviderInvalidRequest):
        await llm.converse(bad)
    state.add_fault(FaultSpec(cut_after_events=2))  # messageStart + one delta, then EOF
    with pytest.raises(ProviderStreamInterrupted):
        await llm.generate(request())
    assert [r["status"] for r in state.requests()] == [200, 500, 400, 200]  # no retries


async def test_the_engine_runs_a_turn_and_a_generate_through_the_adapter(
    state: EmulatorState, server: BackgroundServer, tmp_path: Path
) -> None:
    agent = Agent(
        name="forge",
        model=ModelRef(id=SONNET_46),  # the engine's 1h marks go out as 5m cache points
        system=filler(1500, "engine-system"),
        tools=("read_file", "list_files"),
        max_output_tokens=256,
    )
    llm = BedrockLLMClient(
        endpoint_url=server.url, aws_access_key_id="x", aws_secret_access_key="x"
    )
    store = SessionStore(":memory:")
    try:
        engine = SessionEngine(store, llm, [agent])
        session = engine.create_session("forge", workspace=write_workspace(tmp_path))
        state.queue_responses(
            [
                ScriptedResponse(
                    tool_calls=[{"name": "read_file", "input": {"path": "src/app.py"}}]
                ),
                ScriptedResponse(text="It adds."),
            ]
        )
        await engine.run(session.id, "What does app.py do?")
        before = store.dump()
        result = await engine.generate(session.id, "A title?")
        assert result.text.startswith("Emulated reply to:")
        assert store.dump() == before
        logged = state.requests()
        assert len(logged) == 3 and all(r["status"] == 200 for r in logged)
        assert logged[1]["usage"]["cacheReadInputTokens"] > 0  # the step after the tool call
        assert logged[2]["usage"]["cacheReadInputTokens"] > 0  # generate reads the session's prefix
        # choice_none keeps the definitions (no toolChoice on the wire) and still reads the cache.
        await engine.generate(session.id, "A title?", tools_policy="choice_none")
        last = state.requests()[-1]
        assert (
            "toolChoice" not in last["body"]["toolConfig"] and last["body"]["toolConfig"]["tools"]
        )
        assert last["usage"]["cacheReadInputTokens"] > 0
        # no_tools drops toolConfig while the history has tool calls: Bedrock refuses that.
        with pytest.raises(ProviderInvalidRequest, match="toolConfig field must be defined"):
            await engine.generate(session.id, "A title?", tools_policy="no_tools")
        assert store.dump() == before
    finally:
        store.close()


@pytest.mark.parametrize(
    ("point", "message"),
    [
        ({"type": "default", "ttl": "2h"}, "enum value set: [5m, 1h]"),  # botocore lets it pass
        ({"type": "default", "ttl": "1h"}, "must not come after a ttl='5m'"),  # 5m tool, then 1h
    ],
    ids=["unknown-ttl", "1h-after-5m"],
)
def test_the_emulator_rejects_cache_points_the_cache_rules_refuse(
    state: EmulatorState, sdk: Any, point: dict[str, str], message: str
) -> None:
    kwargs = lower_request(request())
    kwargs["toolConfig"]["tools"][1] = {"cachePoint": {"type": "default"}}
    kwargs["system"][1] = {"cachePoint": point}
    validate_parameters(kwargs, INPUT_SHAPE)
    with pytest.raises(ClientError, match=message.replace("[", r"\[").replace("]", r"\]")):
        sdk.converse(**kwargs)
    assert state.cache.entries() == []  # a rejected request never reaches the cache


def test_claude_on_bedrock_has_its_anthropic_models_thinking_facts() -> None:
    """The same model behind Converse strips earlier thinking, defaults its thinking and
    accepts mid-conversation system messages as on Anthropic's API (UNCONFIRMED for
    Converse; models_bedrock.json says so)."""
    import re

    from sessiongen.catalog import get_model, list_models

    facts = ("thinking_default", "strips_prior_thinking", "mid_conversation_system")
    bedrock = [m for m in list_models() if m.provider == "bedrock"]
    assert bedrock
    for model in bedrock:
        name = re.sub(r"-v1(:0)?$", "", model.id.removeprefix("anthropic."))
        known = {m.id for m in list_models()} | {a for m in list_models() for a in m.aliases}
        anthropic = get_model(name if name in known else re.sub(r"-\d{8}$", "", name))
        assert [getattr(model, f) for f in facts] == [getattr(anthropic, f) for f in facts]
