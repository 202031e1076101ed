"""The OpenAI counter is exact where OpenAI published the answer: the openai-cookbook notebook
"How to count tokens with tiktoken" (openai/openai-cookbook,
examples/How_to_count_tokens_with_tiktoken.ipynb @ c81359cdc6744f001e40c08a192604c5113fdab3)
sends two requests to the real API and prints what it billed:

* its six example messages (system messages with `name`s, one user message):
  "gpt-4o ... 124 prompt tokens counted by the OpenAI API." and for gpt-4-0613 (cl100k_base)
  "129 prompt tokens counted by the OpenAI API.";
* a system and a user message with one function tool (`get_current_weather`, an enum
  property): "gpt-4o ... 101 prompt tokens counted by the OpenAI API."

Both go through the emulator's own Chat Completions endpoint, over HTTP, with the official
SDK, so the figure checked is the one the wire bills."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest
from openai import AsyncOpenAI
from sessiongen.catalog import added_model, get_model
from sessiongen.emulator import EmulatorState, create_app
from sessiongen.providers.openai.counting import encoding_of, openai_chat_positions
from sessiongen.tokens import count_bpe_tokens

EXAMPLE_MESSAGES: list[dict[str, Any]] = [
    {
        "role": "system",
        "content": "You are a helpful, pattern-following assistant that translates corporate "
        "jargon into plain English.",
    },
    {
        "role": "system",
        "name": "example_user",
        "content": "New synergies will help drive top-line growth.",
    },
    {
        "role": "system",
        "name": "example_assistant",
        "content": "Things working well together will increase revenue.",
    },
    {
        "role": "system",
        "name": "example_user",
        "content": "Let's circle back when we have more bandwidth to touch base on "
        "opportunities for increased leverage.",
    },
    {
        "role": "system",
        "name": "example_assistant",
        "content": "Let's talk later when we're less busy about how to do better.",
    },
    {
        "role": "user",
        "content": "This late pivot means we don't have time to boil the ocean for the client "
        "deliverable.",
    },
]

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_current_weather",
        "description": "Get the current weather in a given location",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {
                    "type": "string",
                    "description": "The city and state, e.g. San Francisco, CA",
                },
                "unit": {
                    "type": "string",
                    "description": "The unit of temperature to return",
                    "enum": ["celsius", "fahrenheit"],
                },
            },
            "required": ["location"],
        },
    },
}
WEATHER_MESSAGES = [
    {
        "role": "system",
        "content": "You are a helpful assistant that can answer to questions about the weather.",
    },
    {"role": "user", "content": "What's the weather like in San Francisco?"},
]


@pytest.fixture
async def client() -> AsyncIterator[AsyncOpenAI]:
    transport = httpx2.ASGITransport(app=create_app(EmulatorState()))
    http = httpx2.AsyncClient(transport=transport)
    async with AsyncOpenAI(
        api_key="test", base_url="http://emulator/v1", http_client=http, max_retries=0
    ) as sdk:
        yield sdk


async def _billed(client: AsyncOpenAI, **body: Any) -> int:
    answer = await client.chat.completions.create(max_tokens=1, **body)
    assert answer.usage is not None
    return int(answer.usage.prompt_tokens)


async def test_the_cookbook_messages_bill_124_on_gpt_4o(client: AsyncOpenAI) -> None:
    assert await _billed(client, model="gpt-4o", messages=EXAMPLE_MESSAGES) == 124


async def test_the_cookbook_tool_request_bills_101_on_gpt_4o(client: AsyncOpenAI) -> None:
    body = {"model": "gpt-4o", "messages": WEATHER_MESSAGES, "tools": [WEATHER_TOOL]}
    assert await _billed(client, **body) == 101


def test_a_cl100k_model_counts_with_its_own_encoding() -> None:
    """gpt-4-0613 reads cl100k_base: the same messages bill 129 there, not 124."""
    gpt4 = dataclasses.replace(
        get_model("gpt-4o"), id="gpt-4-0613", aliases=(), tokenizer="cl100k_base"
    )
    with added_model(gpt4):
        assert encoding_of("gpt-4-0613") == "cl100k_base"
        body = {"model": "gpt-4-0613", "messages": EXAMPLE_MESSAGES}
        assert sum(openai_chat_positions(body)) == 129


def test_texts_count_with_the_byte_pair_encoding_not_bytes() -> None:
    """A number-heavy text splits into many more tokens than its bytes / 4, and English
    prose into fewer: the counter follows the encoding both ways."""
    digits = "3.14159 2.71828 1.41421 " * 20
    prose = "The quick brown fox jumps over the lazy dog near the riverbank. " * 40
    assert count_bpe_tokens(digits) > len(digits) / 4
    assert count_bpe_tokens(prose) < len(prose) / 4


def test_an_unknown_encoding_is_a_typed_error() -> None:
    with pytest.raises(ValueError, match="encoding must be one of"):
        count_bpe_tokens("x", "p50k_base")
