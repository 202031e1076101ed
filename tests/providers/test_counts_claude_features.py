"""Claude's billed extras as the emulator bills them at the wire: the Claude 3 models'
tool-use system prompts (Anthropic's table), the citing instructions of cited documents and
search results (calibrated), and Converse's thinking and structured output, billed as the
Messages API bills the same request.

Sources: "Tool use system prompt token count", https://docs.anthropic.com/en/docs/tool-use-pricing-and-tokens
(stored page; the current AD:about-claude/pricing table starts at Claude 4); the recordings
of crmne/ruby_llm (spec/fixtures/vcr_cassettes/chat_citations_with_*, chat_with_schema_with_*,
chat_with_extended_thinking_* @ fb5a49bf04da78d3e74496431ad1c99df5e7e5f0), in
benchmarks/data/recordings/anthropic_bedrock.jsonl."""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx2
import pytest
from sessiongen.catalog import get_model, override_model
from sessiongen.emulator import EmulatorState, create_app
from sessiongen.providers.anthropic.counting import cites_documents
from sessiongen.tokens import scale_of, scale_tokens, token_facts

# | Claude 3 Opus | auto | 530 tokens | / | Claude 3 Opus | any, tool | 281 tokens |
# | Claude 3 Sonnet | auto | 159 tokens | / | Claude 3 Sonnet | any, tool | 235 tokens |
# | Claude 3 Haiku | auto | 264 tokens | / | Claude 3 Haiku | any, tool | 340 tokens |
CLAUDE_3_TOOL_PROMPTS = {
    "claude-3-opus-20240229": (530, 281),
    "claude-3-sonnet-20240229": (159, 235),
    "claude-3-haiku-20240307": (264, 340),
}
TOOL = {"name": "weather", "description": "The weather.", "input_schema": {"type": "object"}}
DOC = "The Ruby programming language was created by Yukihiro Matsumoto in 1993."


async def _post(path: str, body: dict[str, Any]) -> dict[str, Any]:
    app = create_app(EmulatorState())
    async with httpx2.AsyncClient(
        transport=httpx2.ASGITransport(app=app), base_url="http://e"
    ) as client:
        response = await client.post(path, json=body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


async def _messages(body: dict[str, Any]) -> int:
    usage = (await _post("/v1/messages", {"max_tokens": 64, **body}))["usage"]
    return int(usage["input_tokens"])


async def _converse(model: str, body: dict[str, Any]) -> int:
    return int((await _post(f"/model/{model}/converse", body))["usage"]["inputTokens"])


@pytest.mark.parametrize("model", sorted(CLAUDE_3_TOOL_PROMPTS))
async def test_claude_3_models_bill_their_own_tool_prompt(model: str) -> None:
    auto, forced = CLAUDE_3_TOOL_PROMPTS[model]
    info = get_model(model)
    assert (info.tool_prompt_tokens("auto"), info.tool_prompt_tokens("any")) == (auto, forced)
    # at the wire (as recorded traffic replays them; the API answers these retired ids 404):
    # the tool prompt follows the choice, per the model's own table
    ask = {"model": model, "messages": [{"role": "user", "content": "Weather?"}]}
    with override_model(model, retired=None):
        with_tool = await _messages({**ask, "tools": [TOOL]})
        forced_tool = await _messages({**ask, "tools": [TOOL], "tool_choice": {"type": "any"}})
    assert with_tool - forced_tool == auto - forced


def _citing(model: str) -> int:
    """The citing instructions in the model's tokens (calibrated, not zero)."""
    citing = scale_tokens(int(token_facts()["anthropic"]["citations"]), scale_of(get_model(model)))
    assert citing > 0
    return citing


def _cited(**citations: Any) -> dict[str, Any]:
    return {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": DOC},
        **({"citations": citations} if citations else {}),
    }


async def test_cited_documents_bill_the_citing_instructions_once() -> None:
    """Recorded: ruby_llm's text document with citations on Claude Haiku 4.5 billed 674 on
    the Messages API and 672 on Converse; the same content uncited counts about 72."""
    model = "claude-haiku-4-5"
    citing = _citing(model)

    async def billed(*blocks: dict[str, Any]) -> int:
        content = [{"type": "text", "text": "Who created Ruby?"}, *blocks]
        return await _messages({"model": model, "messages": [{"role": "user", "content": content}]})

    plain, one = await billed(_cited()), await billed(_cited(enabled=True))
    assert one - plain == citing
    off = await billed(_cited(enabled=False))
    assert off == plain
    two = await billed(_cited(enabled=True), _cited(enabled=True))
    assert two - await billed(_cited(), _cited()) == citing  # once, not per document


def test_search_results_in_tool_results_cite_too() -> None:
    result = {
        "type": "search_result",
        "source": "https://example.com/ruby",
        "title": "Ruby",
        "content": [{"type": "text", "text": DOC}],
        "citations": {"enabled": True},
    }
    turn = {"type": "tool_result", "tool_use_id": "t1", "content": [result]}
    assert cites_documents({"messages": [{"role": "user", "content": [turn]}]})
    result["citations"] = {"enabled": False}
    assert not cites_documents({"messages": [{"role": "user", "content": [turn]}]})


BEDROCK = "us.anthropic.claude-haiku-4-5-20251001-v1:0"
ASK = {"role": "user", "content": [{"text": "What is 3^3?"}]}


@pytest.mark.parametrize("name", ["thinking", "reasoning_config"])
async def test_converse_thinking_is_billed_as_on_messages(name: str) -> None:
    """ruby_llm sends Bedrock's `reasoning_config`, langchain-aws `thinking`, both in
    `additionalModelRequestFields`; Converse billed them as Messages bills thinking."""
    plain = await _converse(BEDROCK, {"messages": [ASK]})
    thinking = {"type": "enabled", "budget_tokens": 1024}
    extra = {"additionalModelRequestFields": {name: thinking}}
    on = await _converse(BEDROCK, {"messages": [ASK], **extra})
    assert on - plain == int(token_facts()["anthropic"]["thinking"]) > 0


async def test_converse_structured_output_is_billed_as_on_messages() -> None:
    schema = '{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}'
    fmt = {"type": "json_schema", "structure": {"jsonSchema": {"schema": schema, "name": "r"}}}
    shaped = await _converse(BEDROCK, {"messages": [ASK], "outputConfig": {"textFormat": fmt}})
    messages = await _messages(
        {
            "model": "claude-haiku-4-5",
            "messages": [{"role": "user", "content": [{"type": "text", "text": "What is 3^3?"}]}],
            "output_config": {"format": {"type": "json_schema", "schema": json.loads(schema)}},
        }
    )
    assert shaped == messages > await _converse(BEDROCK, {"messages": [ASK]})


async def test_converse_cited_pdf_keeps_its_citations() -> None:
    pdf = base64.b64encode(b"%PDF-1.4\n1 0 obj << /Type /Page >> endobj\n%%EOF").decode()

    def doc(**extra: Any) -> dict[str, Any]:
        return {"document": {"format": "pdf", "name": "d", "source": {"bytes": pdf}, **extra}}

    def body(block: dict[str, Any]) -> dict[str, Any]:
        return {"messages": [{"role": "user", "content": [{"text": "Summarise."}, block]}]}

    cited = await _converse(BEDROCK, body(doc(citations={"enabled": True})))
    plain = await _converse(BEDROCK, body(doc()))
    assert cited - plain == _citing(BEDROCK)
