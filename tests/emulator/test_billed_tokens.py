"""Prompt tokens as the providers bill them (`sessiongen.tokens`, `catalog/tokens.json`): one
test per rule, each quoting the documentation it follows, most through the emulator's own
endpoints (the billed counting is the emulator's default; this suite's fixture turns it off,
so the tests here turn it back on with `emu.billed()` or build their own emulator).

Media sizes are read from the bytes' headers (`sessiongen._media_size`), never decoded: the
images here are headers only, built by hand.
"""

from __future__ import annotations

import base64
import math
import struct
import zlib
from typing import Any

import httpx2
import pytest
from anthropic.types import (
    ImageBlockParam,
    TextBlockParam,
    ToolResultBlockParam,
    ToolUseBlockParam,
)
from sessiongen._media_size import audio_seconds, image_size, pdf_pages, video_seconds
from sessiongen.cache import get_model, list_models
from sessiongen.emulator import EmulatorState, create_app
from sessiongen.providers.anthropic.counting import count_model_body_tokens, request_tokens
from sessiongen.providers.gemini.counting import (
    gemini_image_tokens,
    gemini_media_tokens,
    gemini_signature_tokens,
)
from sessiongen.providers.openai.counting import (
    openai_chat_positions,
    openai_image_tokens,
    openai_responses_positions,
)
from sessiongen.tokens import (
    anthropic_image_tokens,
    count_bpe_tokens,
    scale_tokens,
    text_scale,
    token_facts,
)

from .conftest import MODEL, Emu, user

# --- media headers, built by hand ----------------------------------------------------------


def png(width: int, height: int) -> bytes:
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = b"IHDR" + ihdr
    return (
        b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + chunk + struct.pack(">I", zlib.crc32(chunk))
    )


def jpeg(width: int, height: int) -> bytes:
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    sof = b"\xff\xc0" + struct.pack(">HBHHB", 17, 8, height, width, 3) + b"\x01\x11\x00" * 3
    return b"\xff\xd8" + app0 + sof


def gif(width: int, height: int) -> bytes:
    return b"GIF89a" + struct.pack("<HH", width, height) + b"\x00\x00\x00"


def webp(width: int, height: int) -> bytes:
    body = b"WEBPVP8X" + struct.pack("<I", 10) + b"\x00" * 4
    body += (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
    return b"RIFF" + struct.pack("<I", len(body)) + body


def wav(seconds: float, byte_rate: int = 16000) -> bytes:
    data = int(seconds * byte_rate)
    fmt = struct.pack("<HHIIHH", 1, 1, byte_rate // 2, byte_rate, 2, 16)
    return (
        b"RIFF"
        + struct.pack("<I", 36 + data)
        + b"WAVEfmt "
        + struct.pack("<I", 16)
        + fmt
        + b"data"
        + struct.pack("<I", data)
    )


def mp4(seconds: int, timescale: int = 1000) -> bytes:
    mvhd = (
        b"mvhd"
        + b"\x00\x00\x00\x00"
        + b"\x00" * 8
        + struct.pack(">II", timescale, seconds * timescale)
    )
    return b"\x00\x00\x00\x18ftypisom" + b"\x00" * 12 + struct.pack(">I", len(mvhd) + 4) + mvhd


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_image_sizes_are_read_from_the_header_of_each_format() -> None:
    """PNG (IHDR), JPEG (the SOF frame), GIF (the logical screen) and WebP (VP8X): the width
    and height a provider's formula needs, from the first bytes alone."""
    for build in (png, jpeg, gif, webp):
        assert image_size(build(1024, 768)) == (1024, 768), build.__name__
    assert image_size(b"not an image") is None


def test_media_durations_and_pages_are_read_from_their_headers() -> None:
    assert audio_seconds(wav(2.5)) == pytest.approx(2.5)
    assert video_seconds(mp4(12)) == pytest.approx(12.0)
    assert pdf_pages(b"%PDF-1.4 1 0 obj <</Type /Page>> 2 0 obj <</Type /Page>> /Type /Pages") == 2
    assert pdf_pages(b"%PDF-1.4 a file cut before its page objects") == 1
    assert pdf_pages(b"no pdf") is None


# --- Anthropic -----------------------------------------------------------------------------


def test_every_claude_model_has_a_tool_use_system_prompt() -> None:
    """ "When you use `tools`, the API also automatically includes a special system prompt
    for the model which enables tool use" (AD:about-claude/pricing): every catalogued Claude
    model, on the Claude API and on Bedrock ("Bedrock Claude the same"), bills one."""
    for info in list_models():
        if info.provider in ("anthropic", "bedrock"):
            assert min(info.tool_system_prompt_tokens) > 0, info.id
    assert get_model("claude-sonnet-4-6").tool_system_prompt_tokens == (497, 589)
    assert get_model("anthropic.claude-fable-5").tool_system_prompt_tokens == (290, 410)


def test_the_tool_use_prompt_is_billed_by_default() -> None:
    """The engine's counter and a fresh emulator bill the tool-use prompt unless told not to:
    the API always bills it."""
    assert EmulatorState().tool_prompt is True
    tool = {"name": "t", "description": "", "input_schema": {"type": "object"}}
    body = {"model": MODEL, "tools": [tool], "messages": [user({"type": "text", "text": "hi"})]}
    assert count_model_body_tokens(body) - count_model_body_tokens(body, tool_prompt=False) == 497


def test_anthropic_image_tokens_follow_the_vision_formula() -> None:
    """ "tokens = (width px * height px)/750"; "If your image's long edge is more than 1568
    pixels, or your image is more than ~1,600 tokens, it will first be scaled down, preserving
    aspect ratio, until it's within the size limits" (AD:build-with-claude/vision)."""
    assert anthropic_image_tokens(200, 200) == 54  # 40,000 / 750, rounded up
    assert anthropic_image_tokens(1000, 1000) == 1334
    big = anthropic_image_tokens(3008, 2000)  # scaled down to about 1,600 tokens
    assert 1590 <= big <= 1600
    assert anthropic_image_tokens(4000, 400) <= 1568 * 157 // 750 + 1  # long edge to 1568


async def test_an_image_block_costs_its_formula_not_its_base64(emu: Emu) -> None:
    """The emulator bills an image by its pixels (the header's width and height), however
    long its base64: a 200 x 200 PNG is 54 tokens."""
    await emu.billed()
    data = b64(png(200, 200)) + "A" * 40_000  # padding: no more tokens
    image: ImageBlockParam = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": data},
    }
    counted = await emu.client.messages.count_tokens(
        model=MODEL, messages=[user(image, {"type": "text", "text": "x"})]
    )
    text_only = await emu.client.messages.count_tokens(
        model=MODEL, messages=[user({"type": "text", "text": "x"})]
    )
    assert counted.input_tokens - text_only.input_tokens == 54


def test_a_pdf_document_costs_per_page() -> None:
    """ "each page is converted into an image" and its text extracted, both billed
    (AD:build-with-claude/pdf-support): a PDF costs per page (the per-page figure is calibrated
    on two recorded one-page PDFs)."""
    pdf = b"%PDF-1.4 1 0 obj <</Type /Page>> 2 0 obj <</Type /Page>> 3 0 obj <</Type /Page>>"
    document = {"type": "document", "source": {"type": "base64", "data": b64(pdf)}}
    body = {"model": MODEL, "messages": [{"role": "user", "content": [document]}]}
    per_page = token_facts()["anthropic"]["pdf_page_tokens"]
    assert count_model_body_tokens(body, framing=False) == 3 * per_page


def test_deferred_tools_cost_nothing_until_a_tool_reference_loads_them() -> None:
    """ "Tools with defer_loading: true are not loaded into context initially"; a
    `tool_reference` block in a tool result expands to the full definition
    (AD:agents-and-tools/tool-use/tool-search-tool)."""
    deferred = {
        "name": "lookup",
        "description": "Look an order up.",
        "input_schema": {"type": "object", "properties": {"order_id": {"type": "string"}}},
        "defer_loading": True,
    }
    question = user({"type": "text", "text": "Find order 1."})
    with_it = {"model": MODEL, "tools": [deferred], "messages": [question]}
    without = {"model": MODEL, "messages": [question]}
    prompt = get_model(MODEL).tool_prompt_tokens("auto")
    assert count_model_body_tokens(with_it) == count_model_body_tokens(without) + prompt
    loaded = {
        **with_it,
        "messages": [
            question,
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "a", "name": "s", "input": {}}],
            },
            user(
                {
                    "type": "tool_result",
                    "tool_use_id": "a",
                    "content": [{"type": "tool_reference", "tool_name": "lookup"}],
                }
            ),
        ],
    }
    unloaded = {**loaded, "tools": [{**deferred, "name": "other"}]}
    assert count_model_body_tokens(loaded) > count_model_body_tokens(unloaded)


def test_blocks_before_a_compaction_block_are_dropped() -> None:
    """ "On subsequent requests, append the response to your messages. The API automatically
    drops all message blocks prior to the compaction block" (AD:build-with-claude/compaction):
    only the summary and what follows it are billed."""
    history = [
        user({"type": "text", "text": "x" * 40_000}),
        {"role": "assistant", "content": [{"type": "compaction", "content": "Summary."}]},
        user({"type": "text", "text": "Go on."}),
    ]
    compacted = {"model": MODEL, "messages": history}
    summary_only = {"model": MODEL, "messages": history[1:]}
    assert count_model_body_tokens(compacted) == count_model_body_tokens(summary_only) < 100


async def test_a_request_that_would_trigger_compaction_is_refused(emu: Emu) -> None:
    """The API summarises the conversation when its input reaches the compaction trigger (an
    extra sampling step, billed apart); the emulator does not model that, so it refuses the
    request with a 400 invalid_request_error naming what is not modelled."""
    body: dict[str, Any] = {
        "model": MODEL,
        "max_tokens": 16,
        "context_management": {
            "edits": [
                {"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 50}}
            ]
        },
        "messages": [user({"type": "text", "text": "y" * 400})],
    }
    response = await emu.admin.post("/v1/messages", json=body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert "compaction is not modelled by the emulator" in error["message"]
    body["context_management"]["edits"][0]["trigger"]["value"] = 150_000
    assert (await emu.admin.post("/v1/messages", json=body)).status_code == 200


def test_anthropic_defined_tools_cost_their_documented_definitions() -> None:
    """ "The bash tool adds 245 input tokens", the text editor tool 700, computer use "735
    tokens per tool definition" (AD:agents-and-tools/tool-use, their pages)."""
    question = user({"type": "text", "text": "ls"})
    plain = count_model_body_tokens({"model": MODEL, "messages": [question]}, tool_prompt=False)
    bash = {"model": MODEL, "tools": [{"type": "bash_20250124", "name": "bash"}]}
    assert count_model_body_tokens({**bash, "messages": [question]}, tool_prompt=False) == (
        plain + 245
    )


# --- Bedrock -------------------------------------------------------------------------------


async def test_bedrock_images_and_documents_are_accepted_and_billed_like_claude() -> None:
    """Converse `image` and `document` blocks (bytes sources) reach Claude as image and
    document blocks: billed by the same formulas as on the Claude API."""
    app = create_app(EmulatorState())
    content = [
        {"text": "Both?"},
        {"image": {"format": "png", "source": {"bytes": b64(png(200, 200))}}},
        {"document": {"format": "pdf", "name": "d", "source": {"bytes": b64(b"%PDF-1.4 x")}}},
    ]
    body = {"messages": [{"role": "user", "content": content}]}
    text_only = {"messages": [{"role": "user", "content": content[:1]}]}
    model = "anthropic.claude-sonnet-4-6"
    async with httpx2.AsyncClient(
        transport=httpx2.ASGITransport(app=app), base_url="http://e"
    ) as c:
        response = await c.post(f"/model/{model}/converse", json=body)
        plain = await c.post(f"/model/{model}/converse", json=text_only)
    assert response.status_code == plain.status_code == 200, response.text
    per_page = token_facts()["anthropic"]["pdf_page_tokens"]
    added = response.json()["usage"]["inputTokens"] - plain.json()["usage"]["inputTokens"]
    assert added == 54 + per_page


# --- OpenAI --------------------------------------------------------------------------------


def test_openai_chat_messages_carry_their_framing() -> None:
    """ "every message follows <|start|>{role/name}\\n{content}<|end|>\\n" (3 tokens and the
    role's) and "every reply is primed with <|start|>assistant<|message|>" (3), openai-cookbook
    "How to count tokens with tiktoken"; texts by the model's encoding."""
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    assert sum(openai_chat_positions(body)) == 3 + count_bpe_tokens("user") + 1 + 3
    assert sum(openai_chat_positions(body, framing=False)) == count_bpe_tokens("hi")


def test_openai_image_tokens_follow_the_vision_guide() -> None:
    """ "A 1024 x 1024 square image in detail: high mode costs 765 tokens"; "A 2048 x 4096
    image in detail: high mode costs 1105 tokens"; "A 4096 x 8192 image in detail: low most
    costs 85 tokens" (OpenAI vision guide, "Calculating costs")."""
    assert openai_image_tokens(1024, 1024, "high") == 765
    assert openai_image_tokens(2048, 4096, "high") == 1105
    assert openai_image_tokens(4096, 8192, "low") == 85


def test_a_chat_image_part_is_billed_by_its_pixels() -> None:
    url = "data:image/png;base64," + b64(png(1024, 1024)) + "A" * 100_000
    part = {"type": "image_url", "image_url": {"url": url}}
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": [part]}]}
    assert sum(openai_chat_positions(body)) == 3 + 1 + 765 + 3  # 1: the role, "user"


def test_responses_drop_the_reasoning_of_earlier_turns() -> None:
    """ "reasoning items from previous turns are discarded" from the context (OpenAI
    reasoning guide): an earlier turn's reasoning item costs nothing, however long; the
    current turn's (after the last user message, in a tool loop) is kept."""
    summary = "The user asks a question; answer it. " * 100
    reasoning = {"type": "reasoning", "summary": [{"type": "summary_text", "text": summary}]}
    earlier = {
        "model": "gpt-5",
        "input": [
            {"role": "user", "content": "first"},
            reasoning,
            {"role": "assistant", "content": "answer"},
            {"role": "user", "content": "second"},
        ],
    }
    without = {**earlier, "input": [i for i in earlier["input"] if i is not reasoning]}
    assert sum(openai_responses_positions(earlier)) == sum(openai_responses_positions(without))
    current = {**earlier, "input": [*earlier["input"], reasoning]}
    assert sum(openai_responses_positions(current)) == sum(
        openai_responses_positions(without)
    ) + count_bpe_tokens(summary)


# --- Gemini --------------------------------------------------------------------------------


def test_gemini_media_tokens_follow_the_token_guide() -> None:
    """ "image inputs with both dimensions <=384 pixels are counted as 258 tokens. Images
    larger in one or both dimensions are cropped and scaled as needed into tiles ..., each
    counted as 258 tokens"; "Video ... 263 tokens per second"; "Audio ... 32 tokens per
    second" (ai.google.dev/gemini-api/docs/tokens): the tiling of Gemini 2.0. Gemini 2.5
    bills one image 258 whatever its size (its `promptTokensDetails`: a 640x480 image, 258)."""
    assert gemini_image_tokens(384, 300, "gemini-2.0-flash") == 258
    assert gemini_image_tokens(1024, 1024, "gemini-2.0-flash") % 258 == 0
    assert gemini_image_tokens(1024, 1024, "gemini-2.0-flash") > 258
    assert gemini_image_tokens(640, 480, "gemini-2.5-flash") == 258
    assert gemini_image_tokens(1024, 1024, "gemini-2.5-pro") == 258
    assert gemini_media_tokens("video/mp4", b64(mp4(10)), "gemini-2.5-flash") == 2630
    assert gemini_media_tokens("audio/wav", b64(wav(3.0)), "gemini-2.5-flash") == 96


def test_gemini_3_thought_signatures_cost_prompt_tokens_gemini_2_5_ones_do_not() -> None:
    """A Gemini 3 thought signature carries the turn's thoughts back and is billed with the
    prompt (the recorded set: a 1,071-byte signature adds the 292 thoughts of the turn before);
    a Gemini 2.5 one costs nothing (recorded: 49 then 80 tokens, a 1,040-character signature
    in between)."""
    signature = b64(bytes(1071))
    assert 250 <= gemini_signature_tokens(signature, "gemini-3-flash-preview") <= 330
    assert gemini_signature_tokens(signature, "gemini-2.5-pro") == 0
    skip = base64.b64encode(b"skip_thought_signature_validator").decode()
    assert gemini_signature_tokens(skip, "gemini-3-flash-preview") == 0


async def test_vertex_style_snake_case_parts_are_accepted_and_count_the_same() -> None:
    """The API's JSON mapping takes the proto field names too ("parsers accept both the
    lowerCamelCase name and the original proto field name", protobuf JSON mapping): a body in
    the Vertex / google-genai spelling (`function_call`, `inline_data`, `mime_type`,
    `system_instruction`) is served and billed as its camelCase twin."""

    def body(snake: bool) -> dict[str, Any]:
        def k(camel: str, snake_name: str) -> str:
            return snake_name if snake else camel

        return {
            k("systemInstruction", "system_instruction"): {"parts": [{"text": "Be brief."}]},
            "contents": [
                {
                    "role": "user",
                    "parts": [
                        {"text": "Look."},
                        {
                            k("inlineData", "inline_data"): {
                                k("mimeType", "mime_type"): "image/png",
                                "data": b64(png(64, 64)),
                            }
                        },
                    ],
                },
                {
                    "role": "model",
                    "parts": [
                        {
                            k("functionCall", "function_call"): {
                                "name": "f",
                                "args": {"snake_key": 1},
                            }
                        }
                    ],
                },
                {
                    "role": "user",
                    "parts": [
                        {
                            k("functionResponse", "function_response"): {
                                "name": "f",
                                "response": {"output": "ok"},
                            }
                        }
                    ],
                },
            ],
        }

    app = create_app(EmulatorState())
    counts = []
    async with httpx2.AsyncClient(
        transport=httpx2.ASGITransport(app=app), base_url="http://e"
    ) as c:
        for snake in (False, True):
            response = await c.post(
                "/v1beta/models/gemini-2.5-flash:generateContent", json=body(snake)
            )
            assert response.status_code == 200, response.text
            counts.append(response.json()["usageMetadata"]["promptTokenCount"])
            (await c.post("/_emulator/reset")).raise_for_status()
    assert counts[0] == counts[1] > 258


# --- server tools ---------------------------------------------------------------------------


async def test_a_forced_server_tool_is_refused_in_each_providers_error_shape(emu: Emu) -> None:
    """A server tool runs on the provider's side and "search results ... count towards input
    tokens" of the request that ran it (AD:agents-and-tools/tool-use/web-search-tool): a
    request that forces one (the API would certainly run it) is refused with a 400 naming it,
    Anthropic's `invalid_request_error`, OpenAI's `{"error": {..., "param": "tool_choice"}}`;
    offered but not forced, it is served (the emulated model never calls it)."""
    search = {"type": "web_search_20250305", "name": "web_search"}
    body: dict[str, Any] = {
        "model": MODEL,
        "max_tokens": 16,
        "tools": [search],
        "tool_choice": {"type": "tool", "name": "web_search"},
        "messages": [user({"type": "text", "text": "news?"})],
    }
    refused = await emu.admin.post("/v1/messages", json=body)
    assert refused.status_code == 400
    assert refused.json()["error"]["type"] == "invalid_request_error"
    assert "server tool 'web_search_20250305' is not modelled" in refused.json()["error"]["message"]
    del body["tool_choice"]
    assert (await emu.admin.post("/v1/messages", json=body)).status_code == 200
    hosted = {
        "model": "gpt-4o",
        "input": "news?",
        "tools": [{"type": "web_search_preview"}],
        "tool_choice": {"type": "web_search_preview"},
    }
    answer = await emu.admin.post("/v1/responses", json=hosted)
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["param"] == "tool_choice" and "is not modelled" in error["message"]


def test_anthropic_framing_counts_messages_and_tool_call_ids() -> None:
    """The Messages template's tokens (calibrated, `catalog/tokens.json` `anthropic`): per
    message, per system prompt, per tool call and tool result, whose ids are prompt text too
    (a recorded round trip adds 38 tokens for one empty tool call and a 6-letter result)."""
    facts = token_facts()["anthropic"]
    text: TextBlockParam = {"type": "text", "text": "hi"}
    one = {"model": MODEL, "messages": [user(text)]}
    once = request_tokens(one, text_scale(MODEL))  # the request's template and hidden prompts
    assert (
        count_model_body_tokens(one)
        == scale_tokens(count_model_body_tokens(one, framing=False), text_scale(MODEL))
        + facts["message"]
        + once
    )
    call: ToolUseBlockParam = {
        "type": "tool_use",
        "id": "toolu_" + "x" * 24,
        "name": "f",
        "input": {},
    }
    result: ToolResultBlockParam = {
        "type": "tool_result",
        "tool_use_id": call["id"],
        "content": "Mexico",
    }
    turn = {
        "model": MODEL,
        "messages": [user(text), {"role": "assistant", "content": [call]}, user(result)],
    }
    rate = facts["id_chars_per_token"]
    ids = 2 * math.ceil(len(str(call["id"])) / rate)
    extra = 3 * facts["message"] + facts["tool_use"] + facts["tool_result"] + ids
    billed = count_model_body_tokens(turn, tool_prompt=False)
    bare = scale_tokens(count_model_body_tokens(turn, framing=False), text_scale(MODEL))
    # each of the 3 blocks' texts is scaled and rounded up on its own: up to 1 token each
    assert 0 <= billed - (bare + extra + request_tokens(turn, text_scale(MODEL))) <= 3
    longer = "toolu_" + "y" * 84  # the ids are text: 60 more characters, in both blocks
    call["id"] = result["tool_use_id"] = longer
    assert count_model_body_tokens(turn, tool_prompt=False) - billed == 2 * (
        math.ceil(90 / rate) - math.ceil(30 / rate)
    )


def test_an_openai_pdf_file_part_is_billed_per_page() -> None:
    """File inputs: "both the extracted text and an image of each page" go to the model
    (OpenAI file inputs guide); a PDF part costs per page, not its base64."""
    pdf = b"%PDF-1.4 1 0 obj <</Type /Page>> 2 0 obj <</Type /Page>>"
    part = {"type": "file", "file": {"filename": "a.pdf", "file_data": b64(pdf) + "A" * 9_000}}
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": [part]}]}
    per_page = token_facts()["openai_chat"]["pdf_page_tokens"]
    assert sum(openai_chat_positions(body)) == 3 + 1 + 2 * per_page + 3  # 1: the role
