"""The counting rules issue 31 added, each against its source: OpenAI's vision guide (images
per model family), the real requests the recordings show the APIs served and billed, and the
calibrated hidden prompts of the Messages API.

Sources: OpenAI vision guide "Calculating costs" (llms-txt-archive/openai-platform,
api/docs/guides/images-vision.md @ 209a95892777133f6787d8a2e9f52ad58ae01e7a); the recordings
of benchmarks/data/recordings/*.jsonl (each cites its repository, path and commit)."""

from __future__ import annotations

import base64
import math
from typing import Any

import httpx2
import pytest
from sessiongen._media_size import decode_base64_prefix, image_size
from sessiongen.emulator import EmulatorState, create_app
from sessiongen.providers.anthropic.counting import count_model_body_tokens, hidden_prompt_tokens
from sessiongen.providers.openai.counting import openai_image_tokens, openai_responses_positions
from sessiongen.tokens import count_json_tokens, count_text_tokens, token_facts

from tests.emulator.test_billed_tokens import png


def test_patch_models_follow_the_guides_worked_examples() -> None:
    """ "A 1024 × 1024 image has a post-resize patch count of **1024**" and "A 1800 × 2400
    image has a post-resize patch count of **1452**" (1,536-patch budget), then "Multiply by
    the model's token multiplier": `gpt-5-mini` 1.62, `gpt-5-nano` 2.46, `o4-mini` 1.72."""
    assert openai_image_tokens(1024, 1024, "high", "gpt-5-mini") == 1659  # ceil(1024 x 1.62)
    assert openai_image_tokens(1800, 2400, "high", "gpt-5-mini") == 2353  # ceil(1452 x 1.62)
    assert openai_image_tokens(1800, 2400, "high", "gpt-5-nano") == 3572  # ceil(1452 x 2.46)
    assert openai_image_tokens(1024, 1024, "high", "o4-mini") == 1762  # ceil(1024 x 1.72)


def test_tile_models_take_their_familys_base_and_tile() -> None:
    """| `gpt-5`, `gpt-5-chat-latest` | 70 | 140 |; | `gpt-4o-mini` | 2833 | 5667 |;
    | `o1`, `o1-pro`, `o3` | 75 | 150 |: a 640 x 480 image is 2 tiles of 512 px (recorded:
    crewAI's gpt-4o-mini request with a 640 x 480 PNG billed 14,184 = 2,833 + 2 x 5,667 + text)."""
    assert openai_image_tokens(640, 480, "high", "gpt-4o-mini") == 2833 + 2 * 5667
    assert openai_image_tokens(640, 480, "high", "gpt-5") == 70 + 2 * 140
    assert openai_image_tokens(640, 480, "high", "o3") == 75 + 2 * 150
    assert openai_image_tokens(640, 480, "low", "gpt-4o-mini") == 2833
    assert openai_image_tokens(640, 480, "high", "gpt-4o") == 85 + 2 * 170


def test_a_base64_cut_before_a_marker_still_gives_its_dimensions() -> None:
    """A recorded image cut to its first characters, with a marker after the cut, is still
    read for its header (the recordings' `shortened` values)."""
    data = base64.b64encode(png(640, 480)).decode()[:50] + "…[shortened]"
    assert image_size(decode_base64_prefix("data:image/png;base64," + data)) == (640, 480)


def _messages(**extra: Any) -> dict[str, Any]:
    return {
        "model": "claude-sonnet-4-5",
        "messages": [{"role": "user", "content": "Give me a person."}],
        **extra,
    }


def test_structured_output_and_thinking_bill_their_hidden_prompts() -> None:
    """The Messages API bills a hidden prompt for structured output (a fixed part and the
    schema) and for thinking; each is counted once, on top of the blocks (calibrated)."""
    facts = token_facts()["anthropic"]
    schema = {"type": "object", "properties": {"name": {"type": "string"}}}
    plain = count_model_body_tokens(_messages())
    shaped = count_model_body_tokens(
        _messages(output_config={"format": {"type": "json_schema", "schema": schema}})
    )
    assert shaped - plain >= facts["structured_output"] + count_json_tokens(schema)
    beta = count_model_body_tokens(
        _messages(output_format={"type": "json_schema", "schema": schema})
    )
    assert beta == shaped
    thinking = count_model_body_tokens(
        _messages(thinking={"type": "enabled", "budget_tokens": 1024})
    )
    assert thinking - plain == facts["thinking"] > 0
    off = _messages(thinking={"type": "disabled"})
    assert hidden_prompt_tokens(off) == 0


async def _gemini(body: dict[str, Any]) -> httpx2.Response:
    app = create_app(EmulatorState())
    async with httpx2.AsyncClient(
        transport=httpx2.ASGITransport(app=app), base_url="http://e"
    ) as client:
        return await client.post("/v1beta/models/gemini-2.5-flash:generateContent", json=body)


@pytest.mark.parametrize(
    "body",
    [
        # crmne/ruby_llm: a function response sent in the "function" role
        {
            "contents": [
                {"role": "user", "parts": [{"text": "Weather?"}]},
                {"role": "model", "parts": [{"functionCall": {"name": "w", "args": {}}}]},
                {
                    "role": "function",
                    "parts": [{"functionResponse": {"name": "w", "response": {}}}],
                },
            ],
            "tools": [{"functionDeclarations": [{"name": "w"}]}],
        },
        # crmne/ruby_llm: one part, not a list; sublayerapp/sublayer: one content
        {"contents": [{"role": "user", "parts": {"text": "Hello."}}]},
        {"contents": {"role": "user", "parts": {"text": "Hello."}}},
        # sublayerapp/sublayer: one tool, not a list
        {
            "contents": {"role": "user", "parts": {"text": "Route?"}},
            "tools": {"functionDeclarations": [{"name": "route"}]},
        },
        # crmne/ruby_llm: an enum name in lowercase
        {
            "contents": [{"role": "user", "parts": [{"text": "Hi."}]}],
            "tools": [{"functionDeclarations": [{"name": "w"}]}],
            "toolConfig": {"functionCallingConfig": {"mode": "none"}},
        },
        # google/adk-go: a model turn's part that carries only its thought signature
        {
            "contents": [
                {"role": "user", "parts": [{"text": "Add."}]},
                {"role": "model", "parts": [{"text": "5"}, {"thoughtSignature": "c2ln"}]},
                {"role": "user", "parts": [{"text": "Again."}]},
            ]
        },
    ],
)
async def test_gemini_serves_what_the_real_api_billed(body: dict[str, Any]) -> None:
    response = await _gemini(body)
    assert response.status_code == 200, response.text
    assert response.json()["usageMetadata"]["promptTokenCount"] > 0


def test_a_text_longer_than_the_encoder_takes_is_counted_in_pieces() -> None:
    """bpe-openai refuses one input of more than 200,000 tokens; the counter feeds it pieces
    cut before a space, so a 250,000-token text counts 250,000."""
    assert count_text_tokens(" x" * 250_000) == 250_000
    assert count_text_tokens(" word" * 120_000) == 120_000  # one token each, cut between


def test_the_turns_encrypted_reasoning_is_billed_by_its_length() -> None:
    """A stateless caller (`include: ["reasoning.encrypted_content"]`, as crmne/ruby_llm and
    Codex send) gives the turn's reasoning back sealed: it is context again and billed (ruby_llm's
    gpt-5-nano tool round trip: 87 tokens, then 330 with 2,212 characters of ciphertext), so it
    is counted from its length (calibrated); an earlier turn's reasoning is dropped."""
    rate = token_facts()["openai_responses"]["encrypted_chars_per_token"]
    assert rate > 0
    sealed = {"type": "reasoning", "summary": [], "encrypted_content": "g" * 2_212}
    call = {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": "{}"}
    ask = {"role": "user", "content": "Weather in Berlin?"}

    def billed(*items: dict[str, Any]) -> int:
        return sum(openai_responses_positions({"model": "gpt-5-nano", "input": list(items)}))

    assert billed(ask, sealed, call) - billed(ask, call) == math.ceil(2_212 / rate)
    later = {"role": "user", "content": "And in Paris?"}
    assert billed(ask, sealed, call, later) == billed(ask, call, later)  # an earlier turn's
