"""Tests written for the survivors of the providers and tokens mutation run (issue 30,
`benchmarks/mutation-report.md`): each pins a behaviour no earlier test observed, at the wire
(the emulator's answers to raw bodies) or at a counter's public result."""

from __future__ import annotations

import asyncio
import base64
import json
import os
from collections.abc import AsyncIterator
from typing import Any, Literal

import httpx
import httpx2
import pytest
from botocore.awsrequest import AWSResponse  # type: ignore[import-untyped]
from openai import AsyncOpenAI
from sessiongen._probe import BEARER_ENV, Guard, Prompt
from sessiongen.emulator import EmulatorState, FaultSpec, create_app
from sessiongen.emulator.client import inprocess_llm
from sessiongen.errors import (
    ProviderConnectionError,
    ProviderServerError,
    ProviderStreamInterrupted,
)
from sessiongen.llm import (
    LLMMessage,
    LLMRequest,
    ReasoningContent,
    TextContent,
    ToolCallContent,
)
from sessiongen.llm.types import TextDelta
from sessiongen.providers.bedrock.adapter import BedrockLLMClient
from sessiongen.providers.bedrock.probe import Driver as BedrockDriver
from sessiongen.providers.bedrock.wire import error_for as bedrock_error_for
from sessiongen.providers.gemini.adapter import GeminiLLMClient
from sessiongen.providers.gemini.counting import gemini_media_tokens, gemini_signature_tokens
from sessiongen.providers.gemini.wire import lower_request as gemini_lower_request
from sessiongen.providers.openai.adapter import OpenAILLMClient
from sessiongen.providers.openai.counting import (
    TOOLS_CLOSE,
    TOOLS_OPEN,
    openai_chat_positions,
    openai_responses_positions,
    tool_text,
)
from sessiongen.providers.openai.probe import Driver as OpenAIDriver
from sessiongen.tokens import count_bpe_tokens, token_facts

from tests._filler import filler
from tests.llm.conftest import (
    MESSAGE_STOP,
    Seen,
    block_start,
    block_stop,
    events_of,
    message_delta,
    message_start,
    mock_http,
    mocked,
    req,
    streamed,
)
from tests.llm.conftest import Canned as CannedAnswer
from tests.providers._sdk import (
    bedrock_client,
    botocore_answer,
    converse_answer,
    gemini_client,
)

BASE_URL = "http://emulator"
GEMINI_3 = "gemini-3-flash-preview"


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    """Raw HTTP to an in-process emulator that bills as the APIs do (framing on)."""
    transport = httpx.ASGITransport(app=create_app(EmulatorState()))
    async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as client:
        yield client


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


# --- Gemini --------------------------------------------------------------------------------


def _gemini_tool_turn(signature: str) -> dict[str, Any]:
    schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    return {
        "tools": [{"functionDeclarations": [{"name": "read", "parameters": schema}]}],
        "contents": [
            {"role": "user", "parts": [{"text": "Read a.py."}]},
            {
                "role": "model",
                "parts": [
                    {
                        "functionCall": {"name": "read", "args": {"path": "a.py"}},
                        "thoughtSignature": signature,
                    }
                ],
            },
            {
                "role": "user",
                "parts": [{"functionResponse": {"name": "read", "response": {"out": "x = 1"}}}],
            },
        ],
    }


async def _gemini_prompt_tokens(http: httpx.AsyncClient, body: dict[str, Any]) -> int:
    response = await http.post(f"/v1beta/models/{GEMINI_3}:generateContent", json=body)
    assert response.status_code == 200, response.text
    tokens: int = response.json()["usageMetadata"]["promptTokenCount"]
    return tokens


async def test_a_replayed_gemini_3_signature_is_billed_in_the_prompt(
    http: httpx.AsyncClient,
) -> None:
    """A function call's thought signature carries the turn's thoughts back on Gemini 3: the
    prompt of the same request costs what the signature carries more than with the
    validator-skip signature, which carries nothing."""
    carried = b64(bytes(1071))
    skip = b64(b"skip_thought_signature_validator")
    extra = gemini_signature_tokens(carried, GEMINI_3)
    assert extra > 0 and gemini_signature_tokens(skip, GEMINI_3) == 0
    signed = await _gemini_prompt_tokens(http, _gemini_tool_turn(carried))
    skipped = await _gemini_prompt_tokens(http, _gemini_tool_turn(skip))
    assert signed - skipped == extra


# --- OpenAI --------------------------------------------------------------------------------


def test_an_untyped_property_is_rendered_as_any_in_a_chat_tool() -> None:
    """A property schema without a `type` is rendered `any` in the function's TypeScript
    signature (`type f = (_: {\nx?: any,\n}) => any;`), counted like any other text."""
    facts = token_facts()["openai_chat"]
    tool = {
        "type": "function",
        "function": {"name": "f", "parameters": {"type": "object", "properties": {"x": {}}}},
    }
    assert tool_text("f", "", {"properties": {"x": {}}}) == (
        "type f = (_: {\nx?: any,\n}) => any;\n\n"
    )
    rendered = count_bpe_tokens(
        TOOLS_OPEN + "type f = (_: {\nx?: any,\n}) => any;\n\n" + TOOLS_CLOSE
    )
    assert openai_chat_positions({"tools": [tool]}) == [
        facts["tool"] + rendered + facts["tools"] + facts["request"]
    ]


def _responses_tool(name: str) -> dict[str, Any]:
    schema = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
    return {"type": "function", "name": name, "description": "Read a file.", "parameters": schema}


def test_only_the_first_responses_tool_carries_the_tools_framing() -> None:
    """The tools section's framing is billed once, on the first tool: a second tool costs
    its own text (and per-tool framing) only; the first carries the namespace and the rest."""
    facts = token_facts()["openai_responses"]
    both = openai_responses_positions({"tools": [_responses_tool("a"), _responses_tool("b")]})
    (alone,) = openai_responses_positions({"tools": [_responses_tool("b")]})
    text_b = tool_text("b", "Read a file.", _responses_tool("b")["parameters"])
    text_a = tool_text("a", "Read a file.", _responses_tool("a")["parameters"])
    assert both[1] == count_bpe_tokens(text_b) + facts["tool"]
    whole = count_bpe_tokens(TOOLS_OPEN + text_a + text_b + TOOLS_CLOSE)
    assert sum(both) == whole + facts["tools"] + 2 * facts["tool"] + facts["request"]
    assert alone == count_bpe_tokens(TOOLS_OPEN + text_b + TOOLS_CLOSE) + (
        facts["tools"] + facts["tool"] + facts["request"]
    )


async def test_a_chat_request_held_over_a_reset_is_answered_500(http: httpx.AsyncClient) -> None:
    """A reset lets a held Chat Completions request go with a 500 in OpenAI's error shape
    (it belongs to the state before the reset)."""
    (await http.post("/_emulator/hold", json={"count": 1})).raise_for_status()
    body = {"model": "gpt-4.1", "messages": [{"role": "user", "content": "Hi."}]}
    held = asyncio.create_task(http.post("/v1/chat/completions", json=body))
    for _ in range(2000):
        if (await http.get("/_emulator/hold")).json()["waiting"] == 1:
            break
        await asyncio.sleep(0.005)
    (await http.post("/_emulator/reset")).raise_for_status()
    answer = await asyncio.wait_for(held, 30)
    assert answer.status_code == 500
    assert answer.json()["error"]["message"] == "The emulator was reset while held."
    assert answer.json()["error"]["type"] == "server_error"


@pytest.mark.parametrize(
    ("status", "message", "kind"),
    [
        (400, "Invalid request.", "invalid_request_error"),
        (401, "Incorrect API key provided.", "invalid_request_error"),
        (403, "You are not allowed to access this resource.", "invalid_request_error"),
        (404, "The requested resource was not found.", "invalid_request_error"),
        (429, "Rate limit reached for requests.", "rate_limit_exceeded"),
        (500, "The server had an error while processing your request.", "server_error"),
        (503, "The engine is currently overloaded, please try again later.", "server_error"),
    ],
)
async def test_a_fault_without_a_message_gets_openais_wording(
    http: httpx.AsyncClient, status: int, message: str, kind: str
) -> None:
    """A fault with a status alone is answered in OpenAI's words and error type for it."""
    (await http.post("/_emulator/faults", json={"status": status})).raise_for_status()
    body = {"model": "gpt-4.1", "messages": [{"role": "user", "content": "Hi."}]}
    answer = await http.post("/v1/chat/completions", json=body)
    assert answer.status_code == status
    assert answer.json()["error"]["message"] == message
    assert answer.json()["error"]["type"] == kind


# --- Anthropic -----------------------------------------------------------------------------


def _text_in_the_block_start(_: Seen) -> CannedAnswer:
    return streamed(
        message_start(),
        block_start(0, {"type": "text", "text": "Whole."}),
        block_stop(0),
        message_delta("end_turn", {"output_tokens": 2}),
        MESSAGE_STOP,
    )


async def test_text_sent_in_a_blocks_start_event_is_streamed() -> None:
    """A text block may arrive whole in its `content_block_start` (no delta follows): its
    text is streamed and is the reply's text."""
    async with mocked(_text_in_the_block_start) as (llm, _):
        events = await events_of(llm, req())
        response = await llm.generate(req())
    assert [e for e in events if isinstance(e, TextDelta)] == [TextDelta(text="Whole.")]
    assert response.text == "Whole."


# --- Bedrock -------------------------------------------------------------------------------

BEDROCK_ENDPOINT = "http://127.0.0.1:1"


def test_the_bedrock_probe_signs_with_dummy_credentials_against_an_emulator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Against an emulator (`dummy`) the driver signs with its own placeholder credentials,
    so a machine without AWS credentials (nor a Bedrock key, which it drops for its
    lifetime) can probe one; the environment is as it was after `close`."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
    monkeypatch.setenv(BEARER_ENV, "a-key-for-another-endpoint")
    driver = BedrockDriver(BEDROCK_ENDPOINT, None, True, Guard(BEDROCK_ENDPOINT))
    sent: list[str] = []

    def answer(request: Any, **kwargs: object) -> AWSResponse:
        sent.append(request.headers.get("Authorization").decode())
        return converse_answer(request)

    driver._client.meta.events.register_first("before-send.bedrock-runtime.Converse", answer)
    driver._client.converse(
        modelId="anthropic.claude-sonnet-4-6",
        messages=[{"role": "user", "content": [{"text": "hi"}]}],
    )
    (authorization,) = sent
    assert authorization.startswith("AWS4-HMAC-SHA256 Credential=probe/")
    driver.close()
    assert os.environ[BEARER_ENV] == "a-key-for-another-endpoint"


class _BadGateway:
    """A proxy's HTML 502 in front of Bedrock, answered in place of the endpoint."""

    def __call__(self, request: Any, **kwargs: object) -> AWSResponse:
        body = b"<html><body>502 Bad Gateway</body></html>"
        return botocore_answer(request, 502, body, "text/html")


async def test_a_bedrock_error_without_a_json_body_keeps_its_message_as_the_body() -> None:
    """An error answer whose body botocore cannot read into members (an HTML 502) still has
    a body on the typed error: the message it was answered with."""
    client = bedrock_client(BEDROCK_ENDPOINT)
    client.meta.events.register_first("before-send.bedrock-runtime", _BadGateway())
    hello = LLMMessage(role="user", content=(TextContent(text="hi"),))
    request = LLMRequest(model="anthropic.claude-sonnet-5", max_output_tokens=8, messages=(hello,))
    with pytest.raises(ProviderServerError) as raised:
        await BedrockLLMClient(client).generate(request)
    assert raised.value.provider_status == 502
    assert raised.value.body == {"message": "Bad Gateway"}


async def test_an_unpadded_base64_text_document_is_read(http: httpx.AsyncClient) -> None:
    """Converse's JSON wire carries a document's bytes base64-encoded; the emulator reads
    them without their `=` padding too, and bills the same text either way."""
    text = b"A short note."  # 13 bytes: its base64 ends in "=="
    padded = b64(text)
    assert padded.endswith("==")

    async def input_tokens(data: str) -> int:
        document = {"format": "txt", "name": "note", "source": {"bytes": data}}
        content = [{"document": document}, {"text": "Summarise it."}]
        body = {"messages": [{"role": "user", "content": content}]}
        answer = await http.post("/model/anthropic.claude-sonnet-5/converse", json=body)
        assert answer.status_code == 200, answer.text
        tokens: int = answer.json()["usage"]["inputTokens"]
        return tokens

    assert await input_tokens(padded.rstrip("=")) == await input_tokens(padded)


# --- Gemini streaming ------------------------------------------------------------------------


@pytest.mark.parametrize("alt", [None, "json"])
async def test_a_gemini_stream_without_alt_sse_is_one_json_array(
    http: httpx.AsyncClient, alt: str | None
) -> None:
    """`streamGenerateContent` without `?alt=sse` answers a JSON array of the chunks (the
    SDK always asks for SSE; a raw client need not)."""
    body = {"contents": [{"role": "user", "parts": [{"text": "Hi."}]}]}
    params = {"alt": alt} if alt else {}
    answer = await http.post(
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent", json=body, params=params
    )
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("application/json")
    chunks = answer.json()
    assert isinstance(chunks, list) and chunks
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"


def _sse_events(answer: httpx.Response) -> list[Any]:
    return [json.loads(line[6:]) for line in answer.text.splitlines() if line.startswith("data: ")]


@pytest.mark.parametrize(
    ("status", "code"),
    [
        ("INVALID_ARGUMENT", 400),
        ("UNAUTHENTICATED", 401),
        ("PERMISSION_DENIED", 403),
        ("NOT_FOUND", 404),
        ("RESOURCE_EXHAUSTED", 429),
        ("INTERNAL", 500),
        ("UNAVAILABLE", 503),
        ("DEADLINE_EXCEEDED", 504),
    ],
)
async def test_a_gemini_sse_stream_sends_only_chunks_and_a_faults_error_last(
    http: httpx.AsyncClient, status: str, code: int
) -> None:
    """Every `data:` event of a Gemini SSE stream is a chunk object; a fault's
    `error_event` adds one `{"error": ...}` event after them, in Gemini's error shape: the
    HTTP code the troubleshooting page gives for that status."""
    url = "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
    body = {"contents": [{"role": "user", "parts": [{"text": "Hi."}]}]}
    plain = _sse_events(await http.post(url, json=body, params={"alt": "sse"}))
    assert plain and all(isinstance(event, dict) and "candidates" in event for event in plain)
    fault = {"status": 200, "cut_after_events": 1, "error_event": status}
    (await http.post("/_emulator/faults", json=fault)).raise_for_status()
    broken = _sse_events(await http.post(url, json=body, params={"alt": "sse"}))
    assert len(broken) == 2 and "candidates" in broken[0]
    assert broken[1]["error"]["status"] == status
    assert broken[1]["error"]["code"] == code


async def test_a_thinking_reply_without_a_call_signs_its_last_part(
    http: httpx.AsyncClient,
) -> None:
    """Gemini signs the first function call of a reply, else its last part: a reply with
    thoughts and text carries the signature on the text, not on the thought."""
    script = {"responses": [{"thinking": "Think first.", "text": "Then answer."}]}
    (await http.post("/_emulator/script", json=script)).raise_for_status()
    body = {"contents": [{"role": "user", "parts": [{"text": "Hi."}]}]}
    answer = await http.post(f"/v1beta/models/{GEMINI_3}:generateContent", json=body)
    assert answer.status_code == 200, answer.text
    parts = answer.json()["candidates"][0]["content"]["parts"]
    assert [part.get("thought", False) for part in parts] == [True, False]
    assert "thoughtSignature" not in parts[0] and parts[-1]["thoughtSignature"]


def test_a_signature_that_is_not_base64_goes_back_as_its_own_bytes() -> None:
    """Another provider's reasoning signature is no base64: it is sent as its UTF-8 bytes,
    not as what a lenient decoder would make of its letters."""
    call = ToolCallContent(id="call_1", name="read", input={"path": "a.py"})
    signed = ReasoningContent(text="", signature="sig-1")
    request = LLMRequest(
        model="gemini-2.5-flash",
        messages=(
            LLMMessage(role="user", content=(TextContent(text="Read a.py."),)),
            LLMMessage(role="assistant", content=(signed, call)),
        ),
    )
    (part,) = gemini_lower_request(request)["contents"][1]["parts"]
    assert part["thought_signature"] == b"sig-1"


def test_a_prewarm_asks_gemini_for_one_output_token() -> None:
    """A pre-warm (`max_output_tokens=0`) is sent as 1, the smallest value that asks for
    output at all."""
    hello = LLMMessage(role="user", content=(TextContent(text="hi"),))
    request = LLMRequest(model="gemini-2.5-flash", max_output_tokens=0, messages=(hello,))
    assert gemini_lower_request(request)["config"]["max_output_tokens"] == 1


def test_a_chat_response_format_bills_its_name_description_and_schema() -> None:
    """A `json_schema` response format costs its framing, its name and description as text,
    and its schema as compact JSON without titles, once, on the first position."""
    facts = token_facts()["openai_chat"]
    schema = {"type": "object", "title": "Reply", "properties": {"answer": {"type": "string"}}}
    fmt = {
        "type": "json_schema",
        "json_schema": {"name": "reply", "description": "The answer.", "schema": schema},
    }
    messages = [{"role": "user", "content": "What is 2 + 2?"}]
    plain = openai_chat_positions({"messages": messages})
    formatted = openai_chat_positions({"messages": messages, "response_format": fmt})
    shown = '{"type":"object","properties":{"answer":{"type":"string"}}}'
    expected = facts["format"] + count_bpe_tokens("replyThe answer.") + count_bpe_tokens(shown)
    assert formatted[0] - plain[0] == expected


async def test_a_refused_bedrock_connection_is_a_connection_error() -> None:
    """Nothing listening at the endpoint: botocore's connection error is the typed one."""
    hello = LLMMessage(role="user", content=(TextContent(text="hi"),))
    request = LLMRequest(model="anthropic.claude-sonnet-5", max_output_tokens=8, messages=(hello,))
    llm = BedrockLLMClient(
        endpoint_url=BEDROCK_ENDPOINT, aws_access_key_id="x", aws_secret_access_key="x"
    )
    with pytest.raises(ProviderConnectionError):
        await llm.generate(request)
    await llm.aclose()


@pytest.mark.parametrize(
    ("code", "status"),
    [
        ("ValidationException", 400),
        ("AccessDeniedException", 403),
        ("UnrecognizedClientException", 403),
        ("ResourceNotFoundException", 404),
        ("ModelTimeoutException", 408),
        ("ModelErrorException", 424),
        ("ModelStreamErrorException", 424),
        ("ThrottlingException", 429),
        ("ModelNotReadyException", 429),
        ("ServiceQuotaExceededException", 429),
        ("InternalServerException", 500),
        ("ServiceUnavailableException", 503),
    ],
)
def test_a_bedrock_error_event_in_a_200_stream_stands_for_its_codes_status(
    code: str, status: int
) -> None:
    """ConverseStream's exception events arrive inside a 200: the error stands for the
    HTTP status Bedrock documents for the exception's code."""
    error = bedrock_error_for(code, 200, "failed mid-stream")
    assert error.provider_status == status


def test_an_interrupted_turns_reasoning_is_dropped_too() -> None:
    """A turn that ended in a tool result, with no assistant message, is an earlier turn
    once the user writes again: its reasoning costs nothing."""
    reasoning = {"type": "reasoning", "summary": [{"type": "summary_text", "text": "z" * 4000}]}
    call = {"type": "function_call", "call_id": "c1", "name": "read", "arguments": "{}"}
    output = {"type": "function_call_output", "call_id": "c1", "output": "x = 1"}
    items = [{"role": "user", "content": "first"}, reasoning, call, output]
    body = {"model": "gpt-5", "input": [*items, {"role": "user", "content": "stop; instead"}]}
    assert openai_responses_positions(body)[1] == 0


@pytest.mark.parametrize(
    ("lifetime", "point"),
    [
        ("default", {"type": "default"}),
        ("short", {"type": "default"}),
        ("long", {"type": "default", "ttl": "1h"}),
    ],
)
def test_the_bedrock_probe_asks_for_the_1h_ttl_only_for_a_long_lifetime(
    lifetime: Literal["default", "short", "long"], point: dict[str, str]
) -> None:
    """The probe's Converse body marks its system and anchor turn with `cachePoint`s, with
    `ttl: "1h"` for the long lifetime alone."""
    driver = BedrockDriver(BEDROCK_ENDPOINT, None, True, Guard(BEDROCK_ENDPOINT))
    bodies: list[dict[str, Any]] = []

    def answer(request: Any, **kwargs: object) -> AWSResponse:
        bodies.append(json.loads(request.body))
        return converse_answer(request)

    driver._client.meta.events.register_first("before-send.bedrock-runtime.Converse", answer)
    driver.send(Prompt("anthropic.claude-sonnet-5", "Be brief.", ("hi",), lifetime, False, 0))
    driver.close()
    (body,) = bodies
    assert body["system"][1] == {"cachePoint": point}
    assert body["messages"][0]["content"][1] == {"cachePoint": point}


async def test_gemini_usage_totals_and_every_stream_chunk_carries_the_cached_prompt(
    http: httpx.AsyncClient,
) -> None:
    """`totalTokenCount` is prompt plus output; streamed, every chunk before the last
    carries the prompt's counts, the cached share included, with the prompt as its total."""
    prompt = {"contents": [{"role": "user", "parts": [{"text": filler(2000, "prompt")}]}]}
    url = f"/v1beta/models/{GEMINI_3}"
    first = (await http.post(f"{url}:generateContent", json=prompt)).json()["usageMetadata"]
    assert first["totalTokenCount"] == first["promptTokenCount"] + first["candidatesTokenCount"]
    script = {"responses": [{"thinking": "Think first.", "text": "Then answer."}]}
    (await http.post("/_emulator/script", json=script)).raise_for_status()
    answer = await http.post(f"{url}:streamGenerateContent", json=prompt, params={"alt": "sse"})
    early, last = (event["usageMetadata"] for event in _sse_events(answer))
    assert last["cachedContentTokenCount"] > 0
    assert last["totalTokenCount"] == last["promptTokenCount"] + last["candidatesTokenCount"]
    assert early == {
        **{k: v for k, v in last.items() if k != "candidatesTokenCount"},
        "totalTokenCount": last["promptTokenCount"],
    }


async def test_a_csv_document_is_billed_as_its_text(http: httpx.AsyncClient) -> None:
    """Converse documents other than PDF (csv, md, html, doc...) are read as their text:
    a csv document costs what the same bytes cost as a txt one."""
    data = b64(b"name,qty\napples,3\npears,5\n")

    async def input_tokens(fmt: str) -> int:
        document = {"format": fmt, "name": "table", "source": {"bytes": data}}
        content = [{"document": document}, {"text": "Sum the quantities."}]
        body = {"messages": [{"role": "user", "content": content}]}
        answer = await http.post("/model/anthropic.claude-sonnet-5/converse", json=body)
        assert answer.status_code == 200, answer.text
        tokens: int = answer.json()["usage"]["inputTokens"]
        return tokens

    assert await input_tokens("csv") == await input_tokens("txt")


PDF = b"%PDF-1.4 1 0 obj <</Type /Page>> 2 0 obj <</Type /Page>> /Type /Pages"


def test_a_gemini_pdf_part_is_billed_per_page_and_only_under_its_mime_type() -> None:
    """An `application/pdf` inline part costs the image rate per page (two pages here); the
    same bytes under another type are not read as a PDF (no size: counted as JSON)."""
    per_page = token_facts()["gemini"]["image_tokens"]
    assert gemini_media_tokens("application/pdf", b64(PDF)) == 2 * per_page
    assert gemini_media_tokens("application/octet-stream", b64(PDF)) is None
    assert gemini_media_tokens("video/mp4", b64(PDF)) is None  # no duration in a PDF


async def test_a_gemini_error_event_of_an_unknown_status_is_internal(
    http: httpx.AsyncClient,
) -> None:
    """A fault's `error_event` that names no status of Gemini's table is sent as a 500
    `INTERNAL` error event."""
    url = "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
    body = {"contents": [{"role": "user", "parts": [{"text": "Hi."}]}]}
    fault = {"status": 200, "cut_after_events": 1, "error_event": "SOMETHING_ELSE"}
    (await http.post("/_emulator/faults", json=fault)).raise_for_status()
    events = _sse_events(await http.post(url, json=body, params={"alt": "sse"}))
    assert events[-1]["error"]["code"] == 500
    assert events[-1]["error"]["status"] == "INTERNAL"


async def test_a_request_on_cached_content_keeps_its_generation_config(
    http: httpx.AsyncClient,
) -> None:
    """A generate request that names a `cachedContent` is that content followed by its own
    contents, under its own `generationConfig`: a one-token limit cuts the reply."""
    cache = {
        "model": "models/gemini-2.5-flash",
        "systemInstruction": {"parts": [{"text": filler(3000, "manual")}]},
        "contents": [{"role": "user", "parts": [{"text": "The document."}]}],
        "ttl": "600s",
    }
    created = await http.post("/v1beta/cachedContents", json=cache)
    assert created.status_code == 200, created.text
    body = {
        "cachedContent": created.json()["name"],
        "contents": [{"role": "user", "parts": [{"text": "A question with a long answer?"}]}],
        "generationConfig": {"maxOutputTokens": 1},
    }
    answer = await http.post("/v1beta/models/gemini-2.5-flash:generateContent", json=body)
    assert answer.status_code == 200, answer.text
    reply = answer.json()
    assert reply["candidates"][0]["finishReason"] == "MAX_TOKENS"
    assert reply["usageMetadata"]["candidatesTokenCount"] == 1
    assert reply["usageMetadata"]["cachedContentTokenCount"] > 0


async def test_an_openai_stream_cut_before_its_usage_chunk_is_interrupted() -> None:
    """A Chat Completions stream that sends its finish chunk but ends before the usage
    chunk it was asked for (`include_usage`) is interrupted: the request's cost is unknown."""
    state = EmulatorState()
    state.add_fault(FaultSpec(cut_after_events=3))  # role, text, finish: no usage chunk
    hello = LLMMessage(role="user", content=(TextContent(text="hi"),))
    request = LLMRequest(model="gpt-4.1", max_output_tokens=64, messages=(hello,))
    async with inprocess_llm("openai", state, max_retries=0) as llm:
        with pytest.raises(ProviderStreamInterrupted):
            await llm.generate(request)
    assert [r["status"] for r in state.requests()] == [200]


CHAT_CHUNK = {
    "id": "chatcmpl-1",
    "object": "chat.completion.chunk",
    "created": 1,
    "model": "gpt-4.1",
    "choices": [
        {"index": 0, "delta": {"role": "assistant", "content": "Hel"}, "finish_reason": None}
    ],
}


def _chunk_then_garbage(_: Seen) -> CannedAnswer:
    body = f"data: {json.dumps(CHAT_CHUNK)}\n\ndata: {{not json\n\n".encode()
    headers = {"content-type": "text/event-stream", "x-request-id": "req_garbled"}
    return CannedAnswer(body=body, headers=headers)


async def test_an_openai_stream_chunk_that_is_not_json_is_an_interruption() -> None:
    """A chunk the SDK cannot parse breaks the stream: a typed interruption naming the JSON
    error and carrying the request id, not the SDK's exception."""
    http2 = mock_http("httpx2", _chunk_then_garbage, [])
    assert isinstance(http2, httpx2.AsyncClient)
    async with OpenAILLMClient(
        http_client=http2,
        base_url="http://mock/v1",
        api_key="k",
        max_retries=0,
    ) as llm:
        with pytest.raises(ProviderStreamInterrupted, match="JSONDecodeError") as raised:
            await llm.generate(req().model_copy(update={"model": "gpt-4.1"}))
    assert raised.value.provider_request_id == "req_garbled"


async def test_a_ready_openai_client_keeps_its_retry_count_unless_told() -> None:
    """A ready `AsyncOpenAI` client's `max_retries` is the adapter's, unless one is passed."""
    client = AsyncOpenAI(api_key="k", base_url="http://mock/v1", max_retries=5)
    assert OpenAILLMClient(client).max_retries == 5
    assert OpenAILLMClient(client, max_retries=1).max_retries == 1
    await client.close()


async def test_a_ready_gemini_client_is_used_and_not_mixed_with_options() -> None:
    """`GeminiLLMClient(client)` sends through that client; a client with options to build
    another is refused."""
    state = EmulatorState()
    transport = httpx.ASGITransport(app=create_app(state))
    async with httpx.AsyncClient(transport=transport, base_url="http://gemini.emulator") as h:
        sdk = gemini_client(h, "http://gemini.emulator")
        with pytest.raises(ValueError, match="ready genai.Client or options"):
            GeminiLLMClient(sdk, api_key="another-key")
        hello = LLMMessage(role="user", content=(TextContent(text="hi"),))
        request = LLMRequest(model="gemini-2.5-flash", max_output_tokens=8, messages=(hello,))
        response = await GeminiLLMClient(sdk).generate(request)
    assert response.text and [r["status"] for r in state.requests()] == [200]


@pytest.mark.parametrize(
    ("base_url", "sent_to"),
    [
        ("http://127.0.0.1:1", "http://127.0.0.1:1/v1/"),
        ("http://127.0.0.1:1/v1", "http://127.0.0.1:1/v1/"),
        ("http://127.0.0.1:1/v1/", "http://127.0.0.1:1/v1/"),
        (None, "https://api.openai.com/v1/"),
    ],
)
def test_the_openai_probe_sends_under_v1(base_url: str | None, sent_to: str) -> None:
    """An emulator's or proxy's root URL gets the API's `/v1`; one that has it keeps it."""
    driver = OpenAIDriver(base_url, "k", Guard(base_url))
    assert str(driver._client.base_url) == sent_to
    driver.close()
