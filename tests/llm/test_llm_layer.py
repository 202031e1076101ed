"""The provider-neutral LLM layer: collect() and the shipped test doubles."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Iterable
from typing import TYPE_CHECKING

import pytest
from sessiongen.errors import ProviderOverloaded, ProviderStreamInterrupted
from sessiongen.llm import (
    LLMClient,
    LLMMessage,
    LLMRequest,
    LLMResponse,
    TextContent,
    ToolCall,
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
from sessiongen.providers import count_request_tokens
from sessiongen.testing import RecordingLLMClient, ScriptedLLMClient, ScriptedReply
from sessiongen.tokens import count_text_tokens

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic
    from openai import AsyncOpenAI
    from sessiongen.providers.anthropic.adapter import AnthropicLLMClient
    from sessiongen.providers.openai.adapter import OpenAILLMClient


def request(text: str = "hello there") -> LLMRequest:
    message = LLMMessage(role="user", content=(TextContent(text=text),))
    return LLMRequest(model="scripted-1", messages=(message,))


async def from_list(events: Iterable[StreamEvent]) -> AsyncIterator[StreamEvent]:
    for event in events:
        yield event


# --- collect -------------------------------------------------------------------------------


async def test_collect_folds_text_reasoning_tool_calls_and_last_usage() -> None:
    call_a = ToolCall(id="t1", name="read_file", input={"path": "a"})
    call_b = ToolCall(id="t2", name="grep", input={"pattern": "x"})
    events: list[StreamEvent] = [
        UsageEvent(usage=Usage(input_tokens=10, output_tokens=1)),
        ReasoningDelta(text="Hmm, "),
        ReasoningDelta(text="ok.", signature=None),
        ReasoningDelta(text="", signature="sig"),
        TextDelta(text="Hel"),
        TextDelta(text="lo"),
        ToolCallEvent(call=call_a),
        ToolCallEvent(call=call_b),
        UsageEvent(usage=Usage(input_tokens=10, output_tokens=30, cache_read_tokens=4)),
        FinishEvent(reason="tool_use", model="m-1", response_id="r-1"),
    ]
    assert await collect(from_list(events)) == LLMResponse(
        text="Hello",
        reasoning="Hmm, ok.",
        reasoning_signature="sig",  # kept: it goes back on the wire with the thinking block
        tool_calls=(call_a, call_b),
        usage=Usage(input_tokens=10, output_tokens=30, cache_read_tokens=4),
        finish_reason="tool_use",
        model="m-1",
        response_id="r-1",
    )


async def test_collect_without_usage_reports_zero_usage() -> None:
    response = await collect(from_list([FinishEvent(reason="end_turn", model="m")]))
    assert (response.text, response.usage, response.response_id) == ("", Usage(), None)


async def test_collect_without_finish_is_interrupted() -> None:
    with pytest.raises(ProviderStreamInterrupted):
        await collect(from_list([TextDelta(text="partial"), UsageEvent(usage=Usage())]))


async def test_collect_stops_at_the_finish_event() -> None:
    consumed: list[StreamEvent] = []

    async def stream() -> AsyncGenerator[StreamEvent, None]:
        for event in (TextDelta(text="a"), FinishEvent(reason="end_turn", model="m")):
            consumed.append(event)
            yield event
        consumed.append(TextDelta(text="after finish"))
        yield TextDelta(text="after finish")

    events = stream()
    assert (await collect(events)).text == "a"
    assert len(consumed) == 2
    await events.aclose()


# --- ScriptedLLMClient ---------------------------------------------------------------------


async def test_scripted_replies_in_order_then_default_text() -> None:
    client = ScriptedLLMClient([ScriptedReply(text="first")], default_text="fallback")
    client.queue([ScriptedReply(text="second")])
    answers = [(await client.generate(request())).text for _ in range(4)]
    assert answers == ["first", "second", "fallback", "fallback"]
    assert len(client.requests) == 4


async def test_scripted_default_text_is_ok() -> None:
    response = await ScriptedLLMClient().generate(request())
    assert (response.text, response.finish_reason, response.model) == (
        "OK",
        "end_turn",
        "scripted-1",
    )


async def test_scripted_stream_events_and_usage() -> None:
    req = request("count my tokens")
    client = ScriptedLLMClient([ScriptedReply(text="four")])
    events = [event async for event in client.stream(req)]
    assert events == [
        TextDelta(text="four"),
        UsageEvent(
            usage=Usage(
                input_tokens=count_request_tokens(req), output_tokens=count_text_tokens("four")
            )
        ),
        FinishEvent(reason="end_turn", model="scripted-1"),
    ]


async def test_scripted_tool_calls_finish_with_tool_use() -> None:
    reply = ScriptedReply.calling(("t1", "read_file", {"path": "src/app.py"}), text="Looking.")
    response = await ScriptedLLMClient([reply]).generate(request())
    assert response.text == "Looking."
    assert response.tool_calls == (
        ToolCall(id="t1", name="read_file", input={"path": "src/app.py"}),
    )
    assert response.finish_reason == "tool_use"


async def test_scripted_finish_reason_override() -> None:
    client = ScriptedLLMClient([ScriptedReply(text="cut", finish_reason="max_tokens")])
    assert (await client.generate(request())).finish_reason == "max_tokens"


async def test_scripted_error_reply_raises_and_still_records() -> None:
    error = ProviderOverloaded("Overloaded", provider_status=529, provider_request_id="req_1")
    client = ScriptedLLMClient([ScriptedReply(error=error), ScriptedReply(text="recovered")])
    with pytest.raises(ProviderOverloaded) as info:
        await client.generate(request())
    assert info.value is error
    assert (await client.generate(request())).text == "recovered"
    assert len(client.requests) == 2


@pytest.mark.parametrize("cut", [0, 1, 2])
async def test_scripted_cut_after_events_interrupts_the_stream(cut: int) -> None:
    client = ScriptedLLMClient([ScriptedReply(text="partial", cut_after_events=cut)])
    events = [event async for event in client.stream(request())]
    assert len(events) == cut
    assert not any(isinstance(e, FinishEvent) for e in events)
    client.queue([ScriptedReply(text="partial", cut_after_events=cut)])
    with pytest.raises(ProviderStreamInterrupted):
        await client.generate(request())


async def test_scripted_cut_after_all_events_is_a_whole_reply() -> None:
    client = ScriptedLLMClient([ScriptedReply(text="whole", cut_after_events=3)])
    assert (await client.generate(request())).text == "whole"


# --- RecordingLLMClient --------------------------------------------------------------------


async def test_recording_records_each_request_once_and_marks_how() -> None:
    inner = ScriptedLLMClient([ScriptedReply(text="streamed"), ScriptedReply(text="generated")])
    recording = RecordingLLMClient(inner)
    first, second = request("one"), request("two")
    streamed = await collect(recording.stream(first))
    generated = await recording.generate(second)
    assert (streamed.text, generated.text) == ("streamed", "generated")
    assert recording.requests == [first, second]
    assert recording.calls == ["stream", "generate"]
    # Each call is forwarded as the same call: the inner client sees each request once.
    assert inner.requests == [first, second]


async def test_recording_records_failed_calls_too() -> None:
    error = ProviderOverloaded("Overloaded", provider_status=529)
    recording = RecordingLLMClient(ScriptedLLMClient([ScriptedReply(error=error)]))
    with pytest.raises(ProviderOverloaded):
        await recording.generate(request())
    assert recording.calls == ["generate"]
    assert len(recording.requests) == 1


def test_doubles_satisfy_the_protocol() -> None:
    scripted = ScriptedLLMClient()
    assert isinstance(scripted, LLMClient)
    assert isinstance(RecordingLLMClient(scripted), LLMClient)


@pytest.mark.parametrize("adapter", ["anthropic", "openai"])
async def test_leaving_async_with_closes_a_client_the_adapter_built(adapter: str) -> None:
    """`async with` (sessiongen._resource.AsyncResource) calls `aclose()`: a client the
    adapter built is closed, one the caller passed in is left open."""
    built: AnthropicLLMClient | OpenAILLMClient
    given: AnthropicLLMClient | OpenAILLMClient
    given_sdk: AsyncAnthropic | AsyncOpenAI
    if adapter == "anthropic":
        from anthropic import AsyncAnthropic
        from sessiongen.providers.anthropic.adapter import AnthropicLLMClient

        built = AnthropicLLMClient(base_url="http://emulator.invalid", api_key="x")
        given_sdk = AsyncAnthropic(base_url="http://emulator.invalid", api_key="x")
        given = AnthropicLLMClient(client=given_sdk)
    else:
        from openai import AsyncOpenAI
        from sessiongen.providers.openai.adapter import OpenAILLMClient

        built = OpenAILLMClient(base_url="http://emulator.invalid/v1", api_key="x")
        given_sdk = AsyncOpenAI(base_url="http://emulator.invalid/v1", api_key="x")
        given = OpenAILLMClient(client=given_sdk)
    async with built as entered:
        assert entered is built
    async with given:
        pass
    assert built._client.is_closed() and not given_sdk.is_closed()
    await given_sdk.close()
