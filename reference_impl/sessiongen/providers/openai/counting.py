"""The OpenAI wires' token count: Chat Completions and Responses bodies, one count per
cached position, with GPT-4o-class image tiles (`catalog/tokens.json`, sections `openai_*`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ..._media_size import decode_base64_prefix, image_size, pdf_pages
from ...tokens import canonical_json, count_json_tokens, count_text_tokens, token_section


def openai_image_tokens(width: int, height: int, detail: str | None = "auto") -> int:
    """An image's tokens on GPT-4o-class models: 85 at `detail: low`; otherwise the image is
    scaled to fit 2048 x 2048, then its shortest side to 768 px, and costs 85 plus 170 per
    512 px tile (OpenAI vision guide, "Calculating costs")."""
    facts = token_section("openai_images")
    if detail == "low":
        return int(facts["low"])
    w, h = float(width), float(height)
    fit = float(facts["fit"])
    if max(w, h) > fit:
        scale = fit / max(w, h)
        w, h = w * scale, h * scale
    short = float(facts["shortest_side"])
    if min(w, h) > short:
        scale = short / min(w, h)
        w, h = w * scale, h * scale
    tile = float(facts["tile_size"])
    tiles = math.ceil(math.floor(w) / tile) * math.ceil(math.floor(h) / tile)
    return int(facts["base"]) + int(facts["tile"]) * tiles


def _openai_image_url_tokens(url: str, detail: str | None) -> int:

    facts = token_section("openai_images")
    size = image_size(decode_base64_prefix(url)) if url.startswith("data:") else None
    if size is None:
        size = tuple(facts["unknown_size"])
    return openai_image_tokens(int(size[0]), int(size[1]), detail)


# --- OpenAI Chat Completions and Responses ------------------------------------------------


def _openai_text(content: Any) -> tuple[str, int]:
    """(text, media tokens) of a Chat / Responses `content`: a string, or a list of parts
    (`text`, `input_text`, `output_text`, `refusal`; images by `openai_image_tokens`; PDF
    files per page)."""

    if content is None:
        return "", 0
    if isinstance(content, str):
        return content, 0
    if not isinstance(content, list):
        return canonical_json(content), 0
    texts: list[str] = []
    media = 0
    facts = token_section("openai_images")
    for part in content:
        if not isinstance(part, Mapping):
            continue
        kind = part.get("type")
        if kind in ("image_url", "input_image"):
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, Mapping) else image
            detail = (image.get("detail") if isinstance(image, Mapping) else None) or part.get(
                "detail"
            )
            media += _openai_image_url_tokens(str(url or ""), detail)
        elif kind in ("file", "input_file"):
            inner = part.get("file")
            file: Mapping[str, Any] = inner if isinstance(inner, Mapping) else part
            data = str(file.get("file_data") or "")
            pages = pdf_pages(decode_base64_prefix(data)) if data else None
            media += (pages or 1) * int(facts["pdf_page_tokens"])
        elif "text" in part:
            texts.append(str(part.get("text", "")))
        elif kind == "refusal":
            texts.append(str(part.get("refusal", "")))
    return "".join(texts), media


def _arguments_text(raw: Any) -> str:
    return raw if isinstance(raw, str) else canonical_json(raw)


def _ts_type(schema: Any) -> str:
    """A JSON schema as the TypeScript-like type OpenAI renders function tools with (`type
    name = (_: {city: string, country?: string}) => any;`, property descriptions as `//`
    comments): approximate, for counting."""
    if not isinstance(schema, Mapping):
        return "any"
    if "enum" in schema:
        return " | ".join(canonical_json(v) for v in schema["enum"])
    if "const" in schema:
        return canonical_json(schema["const"])
    kinds = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(kinds, list):
        return " | ".join(_ts_type(k) for k in kinds)
    kind = schema.get("type")
    if kind == "array":
        return _ts_type(schema.get("items")) + "[]"
    if kind == "object" or "properties" in schema:
        required = set(schema.get("required") or [])
        fields = []
        for key, sub in (schema.get("properties") or {}).items():
            note = sub.get("description") if isinstance(sub, Mapping) else None
            comment = f"// {note}\n" if note else ""
            fields.append(f"{comment}{key}{'' if key in required else '?'}: {_ts_type(sub)},")
        return "{" + "\n".join(fields) + "}" if fields else "{}"
    if kind == "integer":
        return "number"
    return str(kind) if isinstance(kind, str) else "any"


def _openai_tool_tokens(
    name: str, description: str, parameters: Any, facts: Mapping[str, Any]
) -> int:
    """One function tool as OpenAI renders it into the prompt (`_ts_type`), plus framing."""
    props = parameters.get("properties") if isinstance(parameters, Mapping) else None
    signature = f"(_: {_ts_type(parameters)})" if props else "()"
    comment = f"// {description}\n" if description else ""
    return int(facts["tool"]) + count_text_tokens(f"{comment}type {name} = {signature} => any;")


def _openai_format_tokens(fmt: Any, facts: Mapping[str, Any]) -> int:
    """A structured-output format: its name, description and JSON schema (its JSON counted
    at the calibrated `format_scale`), plus framing."""
    if not isinstance(fmt, Mapping) or fmt.get("type") not in ("json_schema",):
        return 0  # text and json_object carry no schema
    inner = fmt.get("json_schema")
    spec: Mapping[str, Any] = inner if isinstance(inner, Mapping) else fmt
    schema = spec.get("schema")
    words = count_text_tokens(str(spec.get("name") or "") + str(spec.get("description") or ""))
    schema_tokens = math.ceil(count_json_tokens(schema or {}) * float(facts["format_scale"]))
    return int(facts["format"]) + words + schema_tokens


def openai_chat_positions(body: Mapping[str, Any], *, framing: bool = True) -> list[int]:
    """Prompt tokens of a Chat Completions body, one per position the emulator caches: each
    entry of `tools`, then each message. Framing (calibrated, `catalog/tokens.json`
    `openai_chat`): per message, per tool call, per tool definition and once for the tools
    section, once for a `response_format` schema and for the reply's priming."""
    facts = token_section("openai_chat", framing)
    counts: list[int] = []
    for i, tool in enumerate(body.get("tools") or []):
        fn = tool.get("function") or {} if isinstance(tool, Mapping) else {}
        tokens = _openai_tool_tokens(
            str(fn.get("name", "")), str(fn.get("description") or ""), fn.get("parameters"), facts
        )
        counts.append(tokens + (int(facts["tools"]) if i == 0 else 0))
    for message in body.get("messages") or []:
        text, media = _openai_text(message.get("content"))
        tokens = int(facts["message"]) + count_text_tokens(text) + media
        if message.get("name"):
            tokens += int(facts["name"]) + count_text_tokens(str(message["name"]))
        for call in message.get("tool_calls") or []:
            fn = call.get("function") or {}
            tokens += (
                int(facts["tool_call"])
                + count_text_tokens(str(fn.get("name", "")))
                + count_text_tokens(_arguments_text(fn.get("arguments")))
            )
        counts.append(tokens)
    extra = int(facts["request"]) + _openai_format_tokens(body.get("response_format"), facts)
    if counts:
        counts[0] += extra
    return counts


def _responses_items(body: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    raw = body.get("input")
    if isinstance(raw, str):
        return [{"role": "user", "content": raw}]
    return [item for item in raw if isinstance(item, Mapping)] if isinstance(raw, list) else []


def _last_user_index(items: list[Mapping[str, Any]]) -> int:
    for i in range(len(items) - 1, -1, -1):
        if items[i].get("role") == "user" and items[i].get("type", "message") == "message":
            return i
    return -1


def _responses_tool_tokens(tool: Any, facts: Mapping[str, Any]) -> int:
    """One Responses tool definition: a function as OpenAI renders it (`_openai_tool_tokens`),
    any other type (custom, namespace, hosted) as its JSON, plus framing."""
    if not isinstance(tool, Mapping):
        return 0
    if tool.get("type", "function") == "function":
        return _openai_tool_tokens(
            str(tool.get("name", "")),
            str(tool.get("description") or ""),
            tool.get("parameters"),
            facts,
        )
    return int(facts["tool"]) + count_json_tokens(tool)


def openai_responses_positions(body: Mapping[str, Any], *, framing: bool = True) -> list[int]:
    """Prompt tokens of a Responses body, one per position the emulator caches: each entry
    of `tools`, `instructions` when set, then each `input` item (an `additional_tools` item
    counts its tools as `tools` entries count). Reasoning items of earlier
    turns (before the last user message) cost nothing: OpenAI drops them from context
    ("reasoning items from previous turns are discarded", OpenAI reasoning guide); the
    current turn's count their summary text (UNCONFIRMED). Framing is calibrated
    (`catalog/tokens.json` `openai_responses`)."""
    facts = token_section("openai_responses", framing)
    counts: list[int] = []
    for i, tool in enumerate(body.get("tools") or []):
        tokens = _responses_tool_tokens(tool, facts)
        counts.append(tokens + (int(facts["tools"]) if i == 0 and tokens else 0))
    if body.get("instructions"):
        counts.append(int(facts["item"]) + count_text_tokens(str(body["instructions"])))
    items = _responses_items(body)
    turn = _last_user_index(items)
    for k, item in enumerate(items):
        kind = item.get("type", "message")
        if kind == "additional_tools":
            # "Tools in an `additional_tools` item become available only after that item
            # appears in the input" (OpenAI tool search guide): the item is one position,
            # its tools counted like top-level `tools` (how they are rendered: UNCONFIRMED).
            tools = item.get("tools")
            listed = tools if isinstance(tools, list) else []
            tokens = int(facts["item"]) + sum(_responses_tool_tokens(t, facts) for t in listed)
        elif kind in ("function_call", "custom_tool_call"):
            # A custom tool's call carries its "input ... as plain text" (OpenAI
            # function-calling guide, custom tools); framed like a function call (UNCONFIRMED).
            raw = item.get("arguments") if kind == "function_call" else item.get("input")
            tokens = (
                int(facts["function_call"])
                + count_text_tokens(str(item.get("name", "")))
                + count_text_tokens(_arguments_text(raw))
            )
        elif kind in ("function_call_output", "custom_tool_call_output"):
            text, media = _openai_text(item.get("output"))
            tokens = int(facts["function_call_output"]) + count_text_tokens(text) + media
        elif kind == "reasoning":
            if k < turn:
                tokens = 0
            else:
                text, _ = _openai_text(item.get("summary"))
                tokens = count_text_tokens(text)
        else:
            text, media = _openai_text(item.get("content"))
            tokens = int(facts["item"]) + count_text_tokens(text) + media
        counts.append(tokens)
    text_config = body.get("text")
    fmt = text_config.get("format") if isinstance(text_config, Mapping) else None
    extra = int(facts["request"]) + _openai_format_tokens(fmt, facts)
    if counts:
        counts[0] += extra
    return counts
