"""One token counter and one context window for the engine and the emulator: the engine's
count of an `LLMRequest` is the emulator's count of the body it lowers to, and both read the
window from the model catalog."""

from __future__ import annotations

from typing import Any

import pytest
from sessiongen.cache import flatten_request, get_model, override_model
from sessiongen.emulator.validation import for_model
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
from sessiongen.providers import count_request_tokens
from sessiongen.providers.anthropic.adapter import lower_request
from sessiongen.session.counting import context_window
from sessiongen.testing import ScriptedLLMClient, ScriptedReply
from sessiongen.tokens import count_text_tokens, count_tool_call_tokens, scale_tokens, text_scale

from .conftest import MODEL, Emu

THOUGHT = "I should read the file first. " * 100
PNG = {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgoAAAANSUhEUg=="}


def said(role: str, *content: Any) -> LLMMessage:
    return LLMMessage(role=role, content=content)


def question(text: str = "What is in src/app.py?") -> LLMMessage:
    return said("user", TextContent(text=text))


READ = ToolDefinition(
    name="read_file",
    description="Read one file of the workspace.",
    input_schema={"type": "object", "properties": {"path": {"type": "string"}}},
)
GREP = ToolDefinition(
    name="grep",
    description="Search the workspace.",
    input_schema={"type": "object", "properties": {"q": {"type": "string"}}},
    cache=CacheMark(ttl="1h"),
)

REQUESTS: dict[str, LLMRequest] = {
    "plain text": LLMRequest(
        model=MODEL,
        system=(SystemPart(text="You are terse."), SystemPart(text="Be kind.", cache=CacheMark())),
        messages=(question("héllo wörld, ünïcode costs bytes"),),
    ),
    "tool calls and results": LLMRequest(
        model=MODEL,
        system=(SystemPart(text="You are a coding agent."),),
        tools=(READ, GREP),
        tool_choice=ToolChoice(type="auto", disable_parallel_tool_use=True),
        messages=(
            question(),
            said(
                "assistant",
                TextContent(text="Reading it."),
                ToolCallContent(id="toolu_1", name="read_file", input={"path": "src/app.py"}),
                ToolCallContent(id="toolu_2", name="grep", input={"q": "def", "flags": ["-n"]}),
            ),
            said(
                "user",
                ToolResultContent(tool_call_id="toolu_1", text="def add(a, b): ..."),
                ToolResultContent(tool_call_id="toolu_2", text="no such file", is_error=True),
            ),
        ),
    ),
    "signed reasoning": LLMRequest(
        model=MODEL,
        messages=(
            question(),
            said(
                "assistant",
                ReasoningContent(text=THOUGHT, signature="sig-1"),
                TextContent(text="It adds."),
            ),
            question("Thanks. And util.py?"),
        ),
    ),
    "unsigned reasoning": LLMRequest(
        model=MODEL,
        messages=(
            question(),
            said("assistant", ReasoningContent(text=THOUGHT), TextContent(text="It adds.")),
            question("Thanks. And util.py?"),
        ),
    ),
    # LLMRequest has no image content; provider options are how one reaches the wire.
    "image": LLMRequest(
        model=MODEL,
        provider_options={
            "anthropic": {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "image", "source": PNG},
                            {"type": "text", "text": "What is in this picture?"},
                        ],
                    }
                ]
            }
        },
    ),
}


@pytest.mark.parametrize("case", list(REQUESTS))
async def test_engine_count_is_the_emulators_count(emu: Emu, case: str) -> None:
    """For each request, the engine's count (`count_request_tokens`), the emulator's
    `count_tokens` answer and the cache model's prefix total are one number."""
    await emu.billed()  # as the API bills it: the engine's counter always counts so
    request = REQUESTS[case]
    body = lower_request(request)
    del body["max_tokens"]  # count_tokens takes no max_tokens
    response = await emu.admin.post("/v1/messages/count_tokens", json=body)
    assert response.status_code == 200, response.text
    emulator = response.json()["input_tokens"]
    cache_model = for_model(flatten_request(body), body).total_tokens
    assert count_request_tokens(request) == emulator == cache_model
    assert emulator > 0


def test_what_the_lowering_drops_costs_nothing() -> None:
    """Reasoning without a signature never reaches the wire, so it costs 0 tokens; signed,
    the same text costs its tokens (scaled to the model) on both sides."""
    signed = count_request_tokens(REQUESTS["signed reasoning"])
    unsigned = count_request_tokens(REQUESTS["unsigned reasoning"])
    thought = scale_tokens(count_text_tokens(THOUGHT), text_scale(MODEL))
    assert signed - unsigned == thought > 0


def test_the_window_comes_from_the_catalog() -> None:
    """The engine's window is the catalog's, for the model the request goes to, and follows
    it when a test changes it."""
    request = REQUESTS["plain text"]
    assert context_window(request) == get_model(MODEL).context_window == 1_000_000
    with override_model(MODEL, context_window=1200) as changed:
        assert changed.context_window == 1200
        assert context_window(request) == get_model(MODEL).context_window == 1200
    assert context_window(request) == 1_000_000


def test_override_model_covers_aliases_and_always_restores() -> None:
    """An override applies under every alias and is undone on exit, an error included; a
    model's names cannot be overridden."""
    alias = "claude-sonnet-4-5-20250929"
    with pytest.raises(RuntimeError), override_model("claude-sonnet-4-5", context_window=10):
        assert get_model(alias).context_window == 10
        raise RuntimeError
    assert get_model(alias).context_window == get_model("claude-sonnet-4-5").context_window
    assert get_model(alias).context_window == 200_000
    with pytest.raises(ValueError), override_model(MODEL, id="claude-other"):
        pass


async def test_the_scripted_client_bills_a_reply_as_the_emulator_does(emu: Emu) -> None:
    """The scripted test double counts its reply's output (text and tool calls) with the same
    counter as the emulator's responder."""
    calls: tuple[tuple[str, str, dict[str, object]], ...] = (
        ("toolu_1", "read_file", {"path": "src/app.py", "lines": [1, 20]}),
    )
    scripted = ScriptedLLMClient([ScriptedReply.calling(*calls, text="Reading it now.")])
    double = await scripted.generate(REQUESTS["plain text"])
    await emu.script(
        {
            "text": "Reading it now.",
            "tool_calls": [{"id": i, "name": n, "input": a} for i, n, a in calls],
        }
    )
    message = await emu.create(
        messages=[{"role": "user", "content": "Read it."}],
        tools=[{"name": "read_file", "input_schema": {"type": "object"}}],
    )
    # The text, the tool's name and its canonical input JSON, each by the base count.
    expected = count_text_tokens("Reading it now.") + count_tool_call_tokens(*calls[0][1:])
    assert double.usage.output_tokens == message.usage.output_tokens == expected
