"""The OpenAI wires' token count: Chat Completions and Responses bodies, one count per
cached position, with GPT-4o-class image tiles (`catalog/tokens.json`, sections `openai_*`).

Texts are counted EXACTLY, with the model's own byte-pair encoding (`o200k_base` for every
catalogued model, the catalog's `tokenizer`; `bpe-openai` ships the tables, nothing is
downloaded). Around them, OpenAI's published message framing ("every message follows
<|start|>{role/name}\n{content}<|end|>\n", 3 tokens plus the role; "every reply is primed with
<|start|>assistant<|message|>", 3: openai-cookbook "How to count tokens with tiktoken"), and
function tools rendered as the TypeScript-like namespace the model reads (`tool_text`). What
no document gives (the tools section's framing, tool calls, Responses items, structured-output
formats) is CALIBRATED on real billed usage (`benchmarks/fit_token_constants.py`)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from ..._media_size import decode_base64_prefix, image_size, pdf_pages
from ...catalog import get_model
from ...tokens import BPE_ENCODINGS, canonical_json, count_bpe_tokens, per_chars, token_section


def _by_prefix(table: Mapping[str, Any], model: str) -> Any:
    """The entry of the longest key `model` starts with (None: none does)."""
    for prefix in sorted(table, key=len, reverse=True):
        if model.startswith(prefix):
            return table[prefix]
    return None


def _patch_tokens(width: int, height: int, budget: int | None, multiplier: float) -> int:
    """Patch-based image tokens (OpenAI vision guide, "Patch-based image tokenization"): the
    32 px patches covering the image, the image first scaled down to fit `budget` patches
    (None: no budget, the original size), times the model's multiplier."""
    patches = math.ceil(width / 32) * math.ceil(height / 32)
    if budget is not None and patches > budget:
        shrink = math.sqrt(32 * 32 * budget / (width * height))
        shrink *= min(
            math.floor(width * shrink / 32) / (width * shrink / 32),
            math.floor(height * shrink / 32) / (height * shrink / 32),
        )
        w, h = int(width * shrink), int(height * shrink)
        patches = min(budget, math.ceil(w / 32) * math.ceil(h / 32))
    return math.ceil(patches * multiplier)


def openai_image_tokens(
    width: int, height: int, detail: str | None = "auto", model: str = "gpt-4o"
) -> int:
    """An image's tokens on `model` (OpenAI vision guide, "Calculating costs"), by its
    family's rule (`catalog/tokens.json` `openai_images`, by model-id prefix):

    * patch-based models (`patches`: budget and multiplier; GPT-5-mini and -nano, GPT-4.1-mini
      and -nano, o4-mini, GPT-5.4 and later): `_patch_tokens`;
    * tile-based models (`tiles`: base and tile tokens; GPT-4o and GPT-4.1 85 / 170, GPT-5
      70 / 140, GPT-4o-mini 2,833 / 5,667, o1 and o3 75 / 150): the base alone at `detail:
      low`; otherwise the image is scaled to fit 2048 x 2048, then its shortest side to 768
      px, and costs the base plus the tile tokens per 512 px tile."""
    facts = token_section("openai_images")
    patched = _by_prefix(facts["patches"], model)
    if patched is not None:
        budget, multiplier = patched
        if detail == "low":
            budget = int(facts["low_patch_budget"])
        return _patch_tokens(width, height, budget, float(multiplier))
    base, per_tile = _by_prefix(facts["tiles"], model) or facts["tiles"]["gpt-4o"]
    if detail == "low":
        return int(base)
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
    return int(base) + int(per_tile) * tiles


def _openai_image_url_tokens(url: str, detail: str | None, model: str) -> int:

    facts = token_section("openai_images")
    size = image_size(decode_base64_prefix(url)) if url.startswith("data:") else None
    if size is None:
        size = tuple(facts["unknown_size"])
    return openai_image_tokens(int(size[0]), int(size[1]), detail, model)


# --- OpenAI Chat Completions and Responses ------------------------------------------------

DEFAULT_ENCODING = "o200k_base"


class _Text:
    """The exact text count of one request's model (its byte-pair encoding)."""

    def __init__(self, body: Mapping[str, Any]) -> None:
        self.model = str(body.get("model") or "")
        self.encoding = encoding_of(self.model)

    def __call__(self, text: str) -> int:
        return count_bpe_tokens(text, self.encoding)


def encoding_of(model: str) -> str:
    """The byte-pair encoding `model` counts with: its catalogued `tokenizer`, or
    `o200k_base` (every OpenAI model since GPT-4o) for a model the catalog does not know."""
    try:
        name = get_model(model).tokenizer
    except KeyError:
        return DEFAULT_ENCODING
    return name if name in BPE_ENCODINGS else DEFAULT_ENCODING


def _openai_text(content: Any, model: str = "gpt-4o", pdf_page: int = 765) -> tuple[str, int]:
    """(text, media tokens) of a Chat / Responses `content`: a string, or a list of parts
    (`text`, `input_text`, `output_text`, `refusal`; images by `openai_image_tokens`; PDF
    files at `pdf_page` tokens a page, the wire's own figure)."""

    if content is None:
        return "", 0
    if isinstance(content, str):
        return content, 0
    if not isinstance(content, list):
        return canonical_json(content), 0
    texts: list[str] = []
    media = 0
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
            media += _openai_image_url_tokens(str(url or ""), detail, model)
        elif kind in ("file", "input_file"):
            inner = part.get("file")
            file: Mapping[str, Any] = inner if isinstance(inner, Mapping) else part
            data = str(file.get("file_data") or "")
            pages = pdf_pages(decode_base64_prefix(data)) if data else None
            media += (pages or 1) * pdf_page
        elif "text" in part:
            texts.append(str(part.get("text", "")))
        elif kind == "refusal":
            texts.append(str(part.get("refusal", "")))
    return "".join(texts), media


def _arguments_text(raw: Any) -> str:
    return raw if isinstance(raw, str) else canonical_json(raw)


def _ts_type(schema: Any, indent: int) -> str:
    """One JSON-schema property's type as the function namespace spells it: enums as
    literal unions, arrays as `T[]`, objects as nested `{...}` blocks."""
    if not isinstance(schema, Mapping):
        return "any"
    if "enum" in schema and isinstance(schema["enum"], list):
        return " | ".join(canonical_json(v) for v in schema["enum"])
    if "const" in schema:
        return canonical_json(schema["const"])
    kinds = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(kinds, list):
        return " | ".join(_ts_type(k, indent) for k in kinds)
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(_ts_type({**schema, "type": k}, indent) for k in kind)
    if kind == "array":
        items = schema.get("items")
        return f"{_ts_type(items, indent)}[]" if items is not None else "any[]"
    if kind == "object" or "properties" in schema:
        return "{\n" + _ts_fields(schema, indent + 2) + "\n}"
    if kind == "integer":
        return "number"
    return str(kind) if isinstance(kind, str) else "any"


def _ts_fields(schema: Mapping[str, Any], indent: int) -> str:
    required = set(schema.get("required") or [])
    lines: list[str] = []
    properties = schema.get("properties")
    for key, sub in (properties if isinstance(properties, Mapping) else {}).items():
        note = sub.get("description") if isinstance(sub, Mapping) else None
        if note and indent < 2:
            lines.append(f"// {note}")
        optional = "" if key in required else "?"
        lines.append(f"{key}{optional}: {_ts_type(sub, indent)},")
    return "\n".join(" " * indent + line for line in lines)


def tool_text(name: str, description: str, parameters: Any) -> str:
    """One function tool as the model reads it inside `namespace functions { ... }`: its
    description as a `//` comment, then `type name = (_: {fields}) => any;` (no fields:
    `() => any;`). The rendering is the one community counters reproduce exactly
    (hmarr/openai-chat-tokens), not an OpenAI document."""
    props = parameters.get("properties") if isinstance(parameters, Mapping) else None
    lines = [f"// {description}"] if description else []
    if props and isinstance(parameters, Mapping):
        lines += [f"type {name} = (_: {{", _ts_fields(parameters, 0), "}) => any;"]
    else:
        lines.append(f"type {name} = () => any;")
    return "\n".join(lines) + "\n\n"


TOOLS_OPEN = "namespace functions {\n\n"
TOOLS_CLOSE = "} // namespace functions"


def _tool_positions(
    count: _Text, texts: list[str], facts: Mapping[str, Any], *, system: bool
) -> list[int]:
    """One count per tool definition. The namespace is counted whole, as the model reads it
    (a tool's first tokens may merge with the line before), plus the section's framing: 9,
    4 fewer when the request has a system message (the tools then share its message). The
    exact total goes to the positions: each tool its own text, the first one the rest."""
    if not texts:
        return []
    whole = count(TOOLS_OPEN + "".join(texts) + TOOLS_CLOSE)
    section = whole + int(facts["tools"]) + (int(facts["tools_system"]) if system else 0)
    rest = [count(text) + int(facts["tool"]) for text in texts[1:]]
    total = section + int(facts["tool"]) * len(texts)
    return [total - sum(rest), *rest]


def _has_system(messages: Any, instructions: Any = None) -> bool:
    listed = messages if isinstance(messages, list) else []
    return bool(instructions) or any(
        isinstance(m, Mapping) and m.get("role") in ("system", "developer") for m in listed
    )


def _untitled(schema: Any) -> Any:
    """A JSON schema without its `title`s, which the model is not shown."""
    if isinstance(schema, Mapping):
        return {k: _untitled(v) for k, v in schema.items() if k != "title"}
    if isinstance(schema, list):
        return [_untitled(v) for v in schema]
    return schema


def _format_tokens(count: _Text, fmt: Any, facts: Mapping[str, Any]) -> int:
    """A structured-output format: its name and description, and its JSON schema as compact
    JSON without titles (the rendering that fits the recorded usage best: no document gives
    it), plus calibrated framing."""
    if not isinstance(fmt, Mapping) or fmt.get("type") not in ("json_schema",):
        return 0  # text and json_object carry no schema
    inner = fmt.get("json_schema")
    spec: Mapping[str, Any] = inner if isinstance(inner, Mapping) else fmt
    words = count(str(spec.get("name") or "") + str(spec.get("description") or ""))
    schema = json.dumps(_untitled(spec.get("schema") or {}), separators=(",", ":"))
    return int(facts["format"]) + words + count(schema)


def openai_chat_positions(body: Mapping[str, Any], *, framing: bool = True) -> list[int]:
    """Prompt tokens of a Chat Completions body, one per position the emulator caches: each
    entry of `tools`, then each message. Exact text counts; the documented message framing
    (3 a message plus its role, 1 more for a name, 3 for the reply's priming); calibrated
    framing per tool call, per tool definition and for the tools section and a
    `response_format` schema (`catalog/tokens.json` `openai_chat`)."""
    facts = token_section("openai_chat", framing)
    count = _Text(body)
    texts = []
    for tool in body.get("tools") or []:
        fn = tool.get("function") or {} if isinstance(tool, Mapping) else {}
        texts.append(
            tool_text(
                str(fn.get("name", "")), str(fn.get("description") or ""), fn.get("parameters")
            )
        )
    system = _has_system(body.get("messages"))
    counts: list[int] = _tool_positions(count, texts, facts, system=system)
    for message in body.get("messages") or []:
        text, media = _openai_text(
            message.get("content"), count.model, int(facts["pdf_page_tokens"])
        )
        role = count(str(message.get("role") or "")) if framing else 0
        tokens = int(facts["message"]) + role + count(text) + media
        if message.get("name"):
            tokens += int(facts["name"]) + count(str(message["name"]))
        for call in message.get("tool_calls") or []:
            fn = call.get("function") or {}
            tokens += (
                int(facts["tool_call"])
                + count(str(fn.get("name", "")))
                + count(_arguments_text(fn.get("arguments")))
            )
        counts.append(tokens)
    extra = int(facts["request"]) + _format_tokens(count, body.get("response_format"), facts)
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


def _responses_tool_text(tool: Any) -> str:
    """One Responses tool definition as the model reads it: a function in the namespace
    (`tool_text`), any other type (custom, namespace, hosted) as its JSON."""
    if not isinstance(tool, Mapping):
        return ""
    if tool.get("type", "function") == "function":
        return tool_text(
            str(tool.get("name", "")), str(tool.get("description") or ""), tool.get("parameters")
        )
    return canonical_json(tool)


def openai_responses_positions(body: Mapping[str, Any], *, framing: bool = True) -> list[int]:
    """Prompt tokens of a Responses body, one per position the emulator caches: each entry
    of `tools`, `instructions` when set, then each `input` item (an `additional_tools` item
    counts its tools as `tools` entries count). Reasoning items of earlier
    turns (before the last user message) cost nothing: OpenAI drops them from context
    ("reasoning items from previous turns are discarded", OpenAI reasoning guide); the
    current turn's count their summary text (UNCONFIRMED) and their encrypted content
    (calibrated on its length). Texts are exact; a message item
    is framed as a Chat message (3 plus its role), the rest is calibrated
    (`catalog/tokens.json` `openai_responses`)."""
    facts = token_section("openai_responses", framing)
    count = _Text(body)
    texts = [_responses_tool_text(tool) for tool in body.get("tools") or []]
    system = _has_system(body.get("input"), body.get("instructions"))
    counts: list[int] = _tool_positions(count, texts, facts, system=system)
    if body.get("instructions"):
        role = count("developer") if framing else 0
        counts.append(int(facts["item"]) + role + count(str(body["instructions"])))
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
            tokens = int(facts["item"]) + sum(
                count(_responses_tool_text(t)) + int(facts["tool"]) for t in listed
            )
        elif kind in ("function_call", "custom_tool_call"):
            # A custom tool's call carries its "input ... as plain text" (OpenAI
            # function-calling guide, custom tools); framed like a function call (UNCONFIRMED).
            raw = item.get("arguments") if kind == "function_call" else item.get("input")
            tokens = (
                int(facts["function_call"])
                + count(str(item.get("name", "")))
                + count(_arguments_text(raw))
            )
        elif kind in ("function_call_output", "custom_tool_call_output"):
            text, media = _openai_text(
                item.get("output"), count.model, int(facts["pdf_page_tokens"])
            )
            tokens = int(facts["function_call_output"]) + count(text) + media
        elif kind == "reasoning":
            if k < turn:
                tokens = 0
            else:
                # the turn's reasoning is context again; sent back encrypted (stateless
                # callers: `include: ["reasoning.encrypted_content"]`), its size is only
                # seen through the ciphertext's length (CALIBRATED characters a token)
                text, _ = _openai_text(item.get("summary"))
                sealed = len(str(item.get("encrypted_content") or ""))
                rate = float(facts["encrypted_chars_per_token"])
                tokens = count(text) + (per_chars(sealed, rate) if rate > 0 else 0)
        else:
            text, media = _openai_text(
                item.get("content"), count.model, int(facts["pdf_page_tokens"])
            )
            role = count(str(item.get("role") or "user")) if framing else 0
            tokens = int(facts["item"]) + role + count(text) + media
        counts.append(tokens)
    text_config = body.get("text")
    fmt = text_config.get("format") if isinstance(text_config, Mapping) else None
    extra = int(facts["request"]) + _format_tokens(count, fmt, facts)
    if counts:
        counts[0] += extra
    return counts
