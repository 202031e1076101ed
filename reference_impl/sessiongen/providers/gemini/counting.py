"""The Gemini generateContent wire's token count: parts, function declarations and media by
Google's formulas, one count per cached position (`catalog/tokens.json`, section `gemini`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ..._media_size import audio_seconds, decode_base64_prefix, image_size, pdf_pages, video_seconds
from ...tokens import (
    b64_bytes,
    count_json_tokens,
    count_text_tokens,
    count_tool_call_tokens,
    token_section,
)

_TEXT_TYPES = frozenset({"application/json", "application/xml", "application/x-yaml"})


def declarations_of(body: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The function declarations of a generateContent body's tools."""
    tools = body.get("tools") or []
    return [d for tool in tools for d in tool.get("functionDeclarations") or []]


def _gemini_family_3(model: str) -> bool:
    return any(model.startswith(p) for p in token_section("gemini")["signature_models"])


def flat_image_tokens(model: str) -> int | None:
    """The flat per-image count of `model`'s generation (`catalog/tokens.json` gemini
    `flat_image_tokens`, by model-id prefix, the longest first), or None for a model that
    tiles its images."""
    table: Mapping[str, int] = token_section("gemini")["flat_image_tokens"]
    for prefix in sorted(table, key=len, reverse=True):
        if model.startswith(prefix):
            return int(table[prefix])
    return None


def gemini_image_tokens(width: int, height: int, model: str = "") -> int:
    """An image's tokens on Gemini. Gemini 2.0 and earlier: 258 when both dimensions are at
    most 384 px; a larger one is cropped and scaled into tiles of 258 tokens each
    (ai.google.dev/gemini-api/docs/tokens; the crop unit, the shorter side / 1.5, and the
    overview tile are calibrated). Later generations bill a flat count per image whatever
    its size (`flat_image_tokens`): 258 on Gemini 2.5, as its `promptTokensDetails` report
    for a 640x480 image; 1,120 on Gemini 3 at its default media resolution (UNCONFIRMED)."""
    facts = token_section("gemini")
    flat = flat_image_tokens(model)
    if flat is not None:
        return flat
    per = int(facts["image_tokens"])
    small = int(facts["image_small_edge"])
    if width <= small and height <= small:
        return per
    unit = max(1, math.floor(min(width, height) / 1.5))
    tiles = math.ceil(width / unit) * math.ceil(height / unit)
    return per * (tiles + int(facts["image_overview_tiles"]))


def gemini_media_tokens(mime_type: str, data: Any, model: str = "") -> int | None:
    """The tokens of an `inlineData` part: images by `gemini_image_tokens`, video at 263
    tokens a second, audio at 32 (ai.google.dev/gemini-api/docs/tokens); None when the size
    cannot be read from the bytes."""
    facts = token_section("gemini")
    raw, total = b64_bytes(data)
    if mime_type.startswith("image/"):
        size = image_size(raw)
        return gemini_image_tokens(*size, model=model) if size else None
    if mime_type.startswith("video/"):
        seconds = video_seconds(raw)
        return math.ceil(seconds * int(facts["video_tokens_per_second"])) if seconds else None
    if mime_type.startswith("audio/"):
        seconds = audio_seconds(raw, total)
        return math.ceil(seconds * int(facts["audio_tokens_per_second"])) if seconds else None
    if mime_type == "application/pdf":
        pages = pdf_pages(raw)
        return pages * int(facts["image_tokens"]) if pages else None
    if mime_type.startswith("text/") or mime_type in _TEXT_TYPES:
        # A text file is read as its text (recorded: text/plain parts bill their words).
        text = raw.decode("utf-8", errors="replace")
        return math.ceil(count_text_tokens(text) * float(facts["text_scale"]))
    return None


def gemini_signature_tokens(signature: str, model: str) -> int:
    """The prompt tokens a replayed thought signature costs: none before Gemini 3 (a Gemini
    2.5 signature is free), on Gemini 3 the thoughts it carries back, estimated from the
    signature's decoded size (calibrated on the recorded set)."""

    if not signature or not _gemini_family_3(model):
        return 0
    facts = token_section("gemini")
    size = len(decode_base64_prefix(signature))
    over = size - int(facts["signature_offset_bytes"])
    return max(0, math.ceil(over * float(facts["signature_tokens_per_byte"])))


# --- Gemini generateContent ---------------------------------------------------------------


def gemini_part_tokens(part: Mapping[str, Any], model: str = "", *, framing: bool = True) -> int:
    """Prompt tokens of one Gemini content part (camelCase keys): text, function calls and
    responses (with framing), inline media by `gemini_media_tokens`, plus a Gemini 3 thought
    signature's replayed thoughts (`gemini_signature_tokens`)."""
    facts = token_section("gemini", framing)
    scale = float(facts["text_scale"])
    tokens: int
    if "text" in part:
        tokens = math.ceil(count_text_tokens(str(part["text"])) * scale)
    elif "functionCall" in part:
        call = part["functionCall"]
        tokens = int(facts["function_call"]) + math.ceil(
            count_tool_call_tokens(str(call.get("name", "")), dict(call.get("args") or {})) * scale
        )
    elif "functionResponse" in part:
        response = part["functionResponse"]
        body = response.get("response") or {}
        tokens = int(facts["function_response"]) + math.ceil(
            (count_text_tokens(str(response.get("name", ""))) + count_json_tokens(body)) * scale
        )
    elif "inlineData" in part:
        blob = part["inlineData"]
        media = gemini_media_tokens(str(blob.get("mimeType", "")), blob.get("data"), model)
        tokens = media if media is not None else count_json_tokens(dict(part))
    elif "fileData" in part:
        mime = str(part["fileData"].get("mimeType", ""))
        tokens = (
            gemini_image_tokens(1024, 1024, model)
            if mime.startswith("image/")
            else count_json_tokens(dict(part))
        )
    else:
        tokens = count_json_tokens({k: v for k, v in part.items() if k != "thoughtSignature"})
    return tokens + gemini_signature_tokens(str(part.get("thoughtSignature") or ""), model)


def gemini_declaration_tokens(declaration: Mapping[str, Any], *, framing: bool = True) -> int:
    """Prompt tokens of one function declaration: name, description, schema, framing."""
    facts = token_section("gemini", framing)
    schema = (
        declaration.get("parametersJsonSchema")
        or declaration.get("parameters")
        or declaration.get("parameters_json_schema")
        or {}
    )
    return (
        int(facts["declaration"])
        + count_text_tokens(str(declaration.get("name", "")))
        + count_text_tokens(str(declaration.get("description") or ""))
        + math.ceil(count_json_tokens(schema) * float(facts["schema_scale"]))
    )


def gemini_positions(
    body: Mapping[str, Any],
    declarations: list[Mapping[str, Any]],
    model: str = "",
    *,
    framing: bool = True,
) -> list[int]:
    """Prompt tokens of a generateContent body, one per position the emulator caches: each
    function declaration, each `systemInstruction` part, each part of each content."""
    facts = token_section("gemini", framing)
    counts = [gemini_declaration_tokens(d, framing=framing) for d in declarations]
    if counts:
        counts[0] += int(facts["declarations"])
    system = (body.get("systemInstruction") or {}).get("parts") or []
    for i, part in enumerate(system):
        opens = int(facts["content"]) if i == 0 else 0
        counts.append(gemini_part_tokens(part, model, framing=framing) + opens)
    for content in body.get("contents") or []:
        for j, part in enumerate(content.get("parts") or []):
            opens = int(facts["content"]) if j == 0 else 0
            counts.append(gemini_part_tokens(part, model, framing=framing) + opens)
    if counts:
        counts[0] += int(facts["request"])
    return counts
