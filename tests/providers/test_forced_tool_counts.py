"""The engine's token count of a request with tools, on models with and without a tool-use
system prompt.

Anthropic bills a "Tool use system prompt token count" that depends on the tool choice
(`auto`/`none` vs `any`/`tool`; AD:agents-and-tools/tool-use/overview#pricing): the catalog
carries those two figures for Claude models (on Anthropic's API and, through `tokens.json`,
on Bedrock). OpenAI and Gemini models have no such prompt in the catalog, so the engine's
count (`count_request_tokens`, its overflow check's counter) of a request to one of them must
not move when the tool choice forces a tool.
"""

from __future__ import annotations

import pytest
from sessiongen.cache import list_models
from sessiongen.llm.types import LLMMessage, LLMRequest, TextContent, ToolChoice, ToolDefinition
from sessiongen.providers import count_request_tokens

TOOL = ToolDefinition(
    name="read_file",
    description="Read a file of the workspace.",
    input_schema={"type": "object", "properties": {"path": {"type": "string"}}},
)
CHOICES = (
    ToolChoice(type="auto"),
    ToolChoice(type="none"),
    ToolChoice(type="any"),
    ToolChoice(type="tool", name="read_file"),
)
NO_TOOL_PROMPT = [m.id for m in list_models() if m.provider in ("openai", "gemini")]


def request(model: str, choice: ToolChoice | None) -> LLMRequest:
    question = LLMMessage(role="user", content=(TextContent(text="What does app.py do?"),))
    return LLMRequest(model=model, messages=(question,), tools=(TOOL,), tool_choice=choice)


@pytest.mark.parametrize("model", NO_TOOL_PROMPT)
def test_forcing_a_tool_leaves_the_count_alone_without_a_tool_prompt(model: str) -> None:
    """Every tool choice, and none, counts the same tokens on an OpenAI or Gemini model."""
    counts = {count_request_tokens(request(model, choice)) for choice in (None, *CHOICES)}
    assert len(counts) == 1, (model, counts)


def test_forcing_a_tool_is_counted_where_the_model_has_a_tool_prompt() -> None:
    """The contrast that shows the count above reads the tool choice: on Claude Sonnet 4.6,
    whose tool-use system prompt is longer for `any`/`tool`, forcing a tool counts more."""
    auto = count_request_tokens(request("claude-sonnet-4-6", ToolChoice(type="auto")))
    forced = count_request_tokens(request("claude-sonnet-4-6", ToolChoice(type="any")))
    assert forced > auto
