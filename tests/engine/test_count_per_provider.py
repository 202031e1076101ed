"""The engine counts a request as the provider it goes to bills it (issue 30): the count the
overflow check and compaction decide on equals the prompt tokens the emulator bills for the
same request, sent through that provider's official SDK, on every provider.

Before this, `count_request_tokens` lowered every request as Anthropic's: a gpt-4.1 request
counted 1,298 tokens where the OpenAI wire bills 1,053."""

from __future__ import annotations

import pytest
from sessiongen.emulator import EmulatorState
from sessiongen.emulator.client import inprocess_llm
from sessiongen.lab import PROVIDER_MODELS, PROVIDERS, Provider
from sessiongen.llm.types import (
    LLMMessage,
    LLMRequest,
    SystemPart,
    TextContent,
    ToolCallContent,
    ToolDefinition,
    ToolResultContent,
)
from sessiongen.providers import count_request_tokens
from sessiongen.session.counting import RequestCounter

SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string", "description": "A file in the workspace."}},
    "required": ["path"],
}

request_tokens = RequestCounter().count
"""One counter over the whole module, so what it remembers serves later requests."""


def _request(model: str) -> LLMRequest:
    return LLMRequest(
        model=model,
        system=(SystemPart(text="You are a careful coding agent. " * 40),),
        tools=(
            ToolDefinition(name="read", description="Read a file. " * 20, input_schema=SCHEMA),
            ToolDefinition(name="list", description="List a folder. " * 10, input_schema=SCHEMA),
        ),
        messages=(
            LLMMessage(role="user", content=(TextContent(text="What does app.py do? " * 8),)),
            LLMMessage(
                role="assistant",
                content=(
                    TextContent(text="Let me read it."),
                    ToolCallContent(id="call_1", name="read", input={"path": "app.py"}),
                ),
            ),
            LLMMessage(
                role="user",
                content=(
                    ToolResultContent(
                        tool_call_id="call_1",
                        text="def greet(name):\n    return 'hi ' + name\n" * 12,
                    ),
                ),
            ),
        ),
        max_output_tokens=64,
    )


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_the_engine_counts_what_the_provider_bills(provider: Provider) -> None:
    request = _request(PROVIDER_MODELS[provider])
    state = EmulatorState()
    async with inprocess_llm(provider, state) as llm:
        await llm.generate(request)
    usage = state.requests()[-1]["usage"]
    billed = sum(
        int(usage.get(key) or 0)
        for key in (
            "input_tokens",
            "prompt_tokens",
            "promptTokenCount",
            "inputTokens",
            "cache_read_input_tokens",
            "cache_creation_input_tokens",
            "cacheReadInputTokens",
            "cacheWriteInputTokens",
        )
    )
    assert count_request_tokens(request) == billed, usage
    assert request_tokens(request) == billed


def test_a_change_of_the_models_facts_is_seen_at_once() -> None:
    """The counts the engine keeps (per message, per history, per tools-and-system head) are
    kept under the model's facts, so inside `override_model` the count is the fresh one, and
    after it the original again (issue 30: it used to stay at the count from before)."""
    from sessiongen.catalog import override_model

    request = _request(PROVIDER_MODELS["anthropic"])
    before = request_tokens(request)
    assert before == count_request_tokens(request)
    with override_model(request.model, token_multiplier=2.0):
        doubled = count_request_tokens(request)
        assert doubled > before
        assert request_tokens(request) == doubled
    assert request_tokens(request) == before
