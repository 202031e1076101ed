"""The one token counter, shared by the engine and the emulator, for every provider wire.

A text costs one token per started group of four UTF-8 bytes; JSON values (tool inputs,
schemas, blocks with no text of their own) are counted on their canonical serialisation
(sorted keys, no spaces). On top of that byte-based count, the counter bills what the
providers bill and bytes cannot show (`catalog/tokens.json`, each figure marked documented or
calibrated on `benchmarks/data/token_recordings.jsonl`):

* the template framing around messages, tool definitions, tool calls and results, and
  structured-output formats, per provider (`framing=False` leaves it out: the bare count);
* media by the providers' formulas, sized from the bytes' headers (`_media_size`): images,
  PDF pages, audio and video seconds;
* per model (the catalog): the tokenizer family's multiplier and, on Claude, the tool-use
  system prompt the API adds when `tools` are present (on by default, as billed);
* nothing for what the model does not see: prior-turn thinking it strips, blocks before a
  compaction block, deferred tools until a tool reference loads them, OpenAI Responses
  reasoning of earlier turns; and the replayed thoughts of a Gemini 3 thought signature.

Counting is defined on each wire body, position by position (the positions the emulator's
cache model flattens). On the Messages wire `count_tool_definition_tokens` counts one entry
of `tools` and `count_content_tokens` one content block (the byte-based part), and
`model_positions` adds the model's share. The OpenAI and Gemini wires are counted by
`openai_chat_positions`, `openai_responses_positions` and `gemini_positions`, one count per
cached position. The engine counts an `LLMRequest` by lowering it as the provider of its
model does (the catalog says which) and counting that body (`count_request_tokens`), so the
engine's overflow check, the emulator's `count_tokens` and `usage` and the cache's prefix
sums agree exactly on every provider; whatever the lowering drops (for example reasoning
without a signature) costs nothing on either side.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

from ._media_size import audio_seconds, decode_base64_prefix, image_size, pdf_pages, video_seconds
from .catalog import UnknownModel, get_model
from .llm import anthropic_wire, gemini_wire, openai_wire

if TYPE_CHECKING:
    from .llm.types import LLMRequest

BYTES_PER_TOKEN = 4


def count_text_tokens(text: str) -> int:
    """Tokens of a text: ceil(utf8 bytes / 4)."""
    size = len(text.encode("utf-8"))
    return (size + BYTES_PER_TOKEN - 1) // BYTES_PER_TOKEN


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def count_json_tokens(value: Any) -> int:
    return count_text_tokens(canonical_json(value))


def count_tool_tokens(name: str, description: str, input_schema: dict[str, Any]) -> int:
    return (
        count_text_tokens(name) + count_text_tokens(description) + count_json_tokens(input_schema)
    )


def count_tool_call_tokens(name: str, tool_input: dict[str, Any]) -> int:
    return count_text_tokens(name) + count_json_tokens(tool_input)


def without_cache_control(block: Mapping[str, Any]) -> dict[str, Any]:
    """`block` without its breakpoint marker: a marker is an instruction, not content, so it
    costs nothing and is no part of the prefix."""
    return {k: v for k, v in block.items() if k != "cache_control"}


THINKING_KINDS = frozenset({"thinking", "redacted_thinking"})
"""The block types of extended thinking (a model may drop them from context)."""


def content_blocks(content: Any) -> list[dict[str, Any]]:
    """The content blocks of a wire `content` or `system` value: a plain string is one text
    block (so both spellings count and hash the same); None is none."""
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [dict(b) for b in content]


def count_content_tokens(block: Mapping[str, Any]) -> int:
    """Tokens of one wire content block (a system block, a message block, a reply block):
    texts by the byte-based count, images and PDF documents by Anthropic's formulas
    (`anthropic_image_tokens`, `anthropic_pdf_tokens`), anything else by its canonical JSON."""
    kind = block.get("type", "text")
    if kind == "text":
        return count_text_tokens(str(block.get("text", "")))
    if kind in ("tool_use", "server_tool_use"):
        return count_tool_call_tokens(str(block.get("name", "")), dict(block.get("input") or {}))
    if kind == "tool_result":
        return sum(count_content_tokens(sub) for sub in content_blocks(block.get("content")))
    if kind == "thinking":
        return count_text_tokens(str(block.get("thinking", "")))
    if kind == "redacted_thinking":
        return count_text_tokens(str(block.get("data", "")))
    if kind == "compaction":
        return count_text_tokens(str(block.get("content") or ""))
    source = block.get("source")
    if kind == "document" and isinstance(source, Mapping) and source.get("type") == "text":
        return count_text_tokens(str(source.get("data", "")))
    if kind in ("image", "document") and isinstance(source, Mapping):
        media = _anthropic_media_tokens(kind, source)
        if media is not None:
            return media
    # Everything else: the canonical JSON of the block.
    return count_json_tokens(without_cache_control(block))


def count_tool_definition_tokens(tool: Mapping[str, Any]) -> int:
    """Tokens of one wire `tools` entry: name, description and schema of a custom tool, the
    canonical JSON of anything else (server tools)."""
    if "input_schema" in tool:
        return count_tool_tokens(
            str(tool.get("name", "")),
            str(tool.get("description") or ""),
            dict(tool["input_schema"]),
        )
    return count_json_tokens(without_cache_control(tool))


def provider_of(model: str) -> str:
    """The provider a model id goes to, from the catalog; Anthropic for an id it does not
    know (a scripted test double's)."""

    try:
        return get_model(model).provider
    except UnknownModel:
        return "anthropic"


def count_request_tokens(request: LLMRequest) -> int:
    """Input tokens of a provider-neutral request: lowered as the provider of its model
    lowers it, and counted as that provider's wire is billed (framing and the tool-use
    system prompt included). Bedrock's Converse bills Claude as the Messages API does."""

    provider = provider_of(request.model)
    if provider == "openai":
        return sum(openai_chat_positions(openai_wire.lower_request(request)))
    if provider == "gemini":
        body = gemini_wire.rest_body(gemini_wire.lower_request(request))
        return sum(gemini_positions(body, declarations_of(body), request.model))
    return count_model_body_tokens(anthropic_wire.lower_request(request))


def declarations_of(body: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The function declarations of a generateContent body's tools."""
    tools = body.get("tools") or []
    return [d for tool in tools for d in tool.get("functionDeclarations") or []]


# --- token facts (catalog/tokens.json) -------------------------------------------------------


@cache
def token_facts() -> dict[str, Any]:
    """The per-provider framing constants and media figures of `catalog/tokens.json`."""
    text = resources.files("sessiongen.catalog").joinpath("tokens.json").read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def _facts(section: str, framing: bool = True) -> Mapping[str, Any]:
    """One section of `token_facts()`; without `framing` (the bare byte-based count), its
    framing constants are 0 and its calibrated scales 1."""
    facts: Mapping[str, Any] = token_facts()[section]
    if framing:
        return facts
    return {
        k: 0 if k in _FRAMING_KEYS else 1.0 if k in _SCALE_KEYS else v for k, v in facts.items()
    }


_SCALE_KEYS = frozenset({"text_scale", "schema_scale", "format_scale"})


# The framing constants of each section (template tokens; `framing=False` drops them).
_FRAMING_KEYS = frozenset(
    {
        "message",
        "system",
        "tool",
        "tool_use",
        "tool_result",
        "request",
        "name",
        "tools",
        "tool_call",
        "format",
        "item",
        "function_call",
        "function_call_output",
        "content",
        "declarations",
        "declaration",
        "function_response",
    }
)


def text_scale(model: str) -> float:
    """How many billed tokens one byte-counter token of plain prompt text makes on `model`:
    its tokenizer family's multiplier times its provider's calibrated text scale (Gemini's;
    1 elsewhere). For sizing a text to a token count, as the emulator will bill it."""

    info = get_model(model)
    provider = "gemini" if info.provider == "gemini" else None
    scale = float(_facts(provider, True).get("text_scale", 1.0)) if provider else 1.0
    return info.token_multiplier * scale


def _per(chars: int, chars_per_token: float) -> int:
    return math.ceil(chars / chars_per_token) if chars > 0 else 0


# --- media ---------------------------------------------------------------------------------


def _b64_bytes(data: Any) -> tuple[bytes, int]:
    """The decoded bytes of a base64 value and the size of the whole file (the value may be a
    prefix of it in the recorded set: then the bytes are its head, the size an estimate)."""

    text = str(data or "")
    raw = decode_base64_prefix(text)
    return raw, max(len(raw), len(text) * 3 // 4)


def anthropic_image_tokens(width: int, height: int) -> int:
    """An image's tokens on Claude: `(width * height) / 750`, after the API scales an image
    whose long edge is over 1568 px, or that is over about 1,600 tokens, down (aspect kept)
    until it fits (AD:build-with-claude/vision)."""
    facts = _facts("anthropic")
    per = float(facts["image_pixels_per_token"])
    edge, cap = float(facts["image_max_edge"]), float(facts["image_max_tokens"])
    w, h = float(width), float(height)
    scale = min(1.0, edge / max(w, h, 1.0))
    w, h = w * scale, h * scale
    if w * h / per > cap:
        shrink = math.sqrt(cap * per / (w * h))
        w, h = w * shrink, h * shrink
    return max(1, math.ceil(math.floor(w) * math.floor(h) / per))


def _anthropic_media_tokens(kind: str, source: Mapping[str, Any]) -> int | None:

    facts = _facts("anthropic")
    if source.get("type") != "base64":
        if kind == "image":  # a URL or file id: the size is unknown here; a full-size image
            return int(facts["image_max_tokens"])
        return None
    raw, _ = _b64_bytes(source.get("data"))
    if kind == "image":
        size = image_size(raw)
        return anthropic_image_tokens(*size) if size else None
    pages = pdf_pages(raw)
    return pages * int(facts["pdf_page_tokens"]) if pages else None


def openai_image_tokens(width: int, height: int, detail: str | None = "auto") -> int:
    """An image's tokens on GPT-4o-class models: 85 at `detail: low`; otherwise the image is
    scaled to fit 2048 x 2048, then its shortest side to 768 px, and costs 85 plus 170 per
    512 px tile (OpenAI vision guide, "Calculating costs")."""
    facts = _facts("openai_images")
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

    facts = _facts("openai_images")
    size = image_size(decode_base64_prefix(url)) if url.startswith("data:") else None
    if size is None:
        size = tuple(facts["unknown_size"])
    return openai_image_tokens(int(size[0]), int(size[1]), detail)


def _gemini_family_3(model: str) -> bool:
    return any(model.startswith(p) for p in _facts("gemini")["signature_models"])


def gemini_image_tokens(width: int, height: int, model: str = "") -> int:
    """An image's tokens on Gemini: 258 when both dimensions are at most 384 px; a larger one
    is cropped and scaled into tiles of 258 tokens each (ai.google.dev/gemini-api/docs/tokens;
    the crop unit, the shorter side / 1.5, and the overview tile are calibrated). Gemini 3
    bills 1,120 per image at its default media resolution (UNCONFIRMED)."""
    facts = _facts("gemini")
    if _gemini_family_3(model):
        return int(facts["gemini3_image_tokens"])
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
    facts = _facts("gemini")
    raw, total = _b64_bytes(data)
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
    return None


def gemini_signature_tokens(signature: str, model: str) -> int:
    """The prompt tokens a replayed thought signature costs: none before Gemini 3 (a Gemini
    2.5 signature is free), on Gemini 3 the thoughts it carries back, estimated from the
    signature's decoded size (calibrated on the recorded set)."""

    if not signature or not _gemini_family_3(model):
        return 0
    facts = _facts("gemini")
    size = len(decode_base64_prefix(signature))
    over = size - int(facts["signature_offset_bytes"])
    return max(0, math.ceil(over * float(facts["signature_tokens_per_byte"])))


# --- Anthropic Messages: positions and framing ----------------------------------------------


def stripped_thinking(body: Mapping[str, Any]) -> frozenset[tuple[int, int]]:
    """The (message index, block index) of the thinking blocks the model drops from context.

    On a "keep the last turn only" model (`strips_prior_thinking`), "once you send a user
    message that isn't a tool result, all previous thinking blocks are stripped from
    context" (AD:build-with-claude/thinking#thinking-and-prompt-caching): every thinking or
    redacted_thinking block before the last user message with any block that is not a
    `tool_result` (a user message mixing tool results and text counts as such, since the
    cache "remains valid when only tool results are provided as user messages"). The
    thinking of the current tool-use loop, after that message, stays. Whether the request's
    own thinking config matters is UNCONFIRMED; this model strips regardless of it."""

    try:
        strips = get_model(str(body.get("model", ""))).strips_prior_thinking
    except UnknownModel:
        return frozenset()
    if not strips:
        return frozenset()
    messages = list(body.get("messages") or [])
    turn_start = next(
        (
            i
            for i in range(len(messages) - 1, -1, -1)
            if messages[i].get("role") == "user"
            and any(
                b.get("type") != "tool_result" for b in content_blocks(messages[i].get("content"))
            )
        ),
        None,
    )
    if turn_start is None:
        return frozenset()
    return frozenset(
        (i, j)
        for i, message in enumerate(messages[:turn_start])
        if message.get("role") == "assistant"
        for j, block in enumerate(content_blocks(message.get("content")))
        if block.get("type") in THINKING_KINDS
    )


def dropped_blocks(body: Mapping[str, Any]) -> frozenset[tuple[int, int]]:
    """The (message, block) indexes the model does not see: prior-turn thinking on a model
    that strips it (`stripped_thinking`), and every message block before the
    last `compaction` block ("the API automatically drops all message blocks prior to the
    compaction block", AD:build-with-claude/compaction)."""
    dropped = set(stripped_thinking(body))
    last: tuple[int, int] | None = None
    messages = list(body.get("messages") or [])
    for i, message in enumerate(messages):
        for j, block in enumerate(content_blocks(message.get("content"))):
            if block.get("type") == "compaction":
                last = (i, j)
    if last is not None:
        for i, message in enumerate(messages[: last[0] + 1]):
            for j, _ in enumerate(content_blocks(message.get("content"))):
                if (i, j) < last:
                    dropped.add((i, j))
    return frozenset(dropped)


def body_layout(body: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any], bool]]:
    """The positions of a Messages wire body in prefix order, as `(section, block, opens)`:
    each tool definition, system block and message content block the model sees (a dropped
    block stays a position only when it carries a breakpoint, as `cache.prefix` keeps it);
    `opens` marks the first position of its section or message."""
    layout: list[tuple[str, Mapping[str, Any], bool]] = []
    for i, tool in enumerate(body.get("tools") or []):
        layout.append(("tools", tool, i == 0))
    for i, block in enumerate(content_blocks(body.get("system"))):
        layout.append(("system", block, i == 0))
    dropped = dropped_blocks(body)
    for i, message in enumerate(body.get("messages") or []):
        opened = False
        for j, block in enumerate(content_blocks(message.get("content"))):
            if (i, j) in dropped and block.get("cache_control") is None:
                continue
            layout.append(("messages", block, not opened))
            opened = True
    return layout


def body_positions(body: Mapping[str, Any]) -> list[int]:
    """The byte-based count of each position of a Messages wire body, in prefix order (one
    per tool definition, system block and message content block, `body_layout`): the
    positions the cache model flattens, in the order their tokens are counted."""
    return _layout_counts(body_layout(body))


def _layout_counts(layout: list[tuple[str, Mapping[str, Any], bool]]) -> list[int]:
    return [
        count_tool_definition_tokens(block) if section == "tools" else count_content_tokens(block)
        for section, block, _ in layout
    ]


_UNSCALED_KINDS = frozenset({"image", "document"})  # media: their formula, not the tokenizer's


def _framing(section: str, block: Mapping[str, Any], opens: bool) -> int:
    """The template tokens the API puts around one position (calibrated, `catalog/tokens.json`
    `anthropic`): per tool definition, per system prompt, per message, per tool call and
    tool result, whose ids are prompt text too."""
    facts = _facts("anthropic")
    if section == "tools":
        return int(facts["tool"])
    extra = int(facts[section if section == "system" else "message"]) if opens else 0
    kind = block.get("type")
    rate = float(facts["id_chars_per_token"])
    if kind in ("tool_use", "server_tool_use"):
        extra += int(facts["tool_use"]) + _per(len(str(block.get("id") or "")), rate)
    elif kind == "tool_result" or str(kind).endswith("_tool_result"):
        extra += int(facts["tool_result"]) + _per(len(str(block.get("tool_use_id") or "")), rate)
    return extra


def _defined_tool_tokens(tool: Mapping[str, Any]) -> int | None:
    """The documented fixed cost of an Anthropic-defined tool's definition (`bash_*`: 245,
    `text_editor_*`: 700, `computer_*`: 735, AD:agents-and-tools/tool-use), None for others."""
    kind = str(tool.get("type") or "")
    for prefix, tokens in _facts("anthropic")["defined_tools"].items():
        if kind.startswith(prefix):
            return int(tokens)
    return None


# --- per-model adjustments (the model catalog's tokenizer family and tool-use prompt) -----


def scale_tokens(tokens: int, multiplier: float) -> int:
    """`tokens` of the byte-based counter in a tokenizer that makes `multiplier` times as
    many: rounded up, in integer per-mille arithmetic so both sides round alike."""
    per_mille = round(multiplier * 1000)
    return (tokens * per_mille + 999) // 1000


def model_positions(
    counts: list[int], body: Mapping[str, Any], *, tool_prompt: bool = True, framing: bool = True
) -> list[int]:
    """`counts` (one per position of `body`, `body_layout`) as the model named by
    `body["model"]` bills them: each text count scaled by its tokenizer family's multiplier
    (media keep their formula's count), plus the template's framing (`_framing`); with
    `tool_prompt` (the API's behaviour, so the default), the first position also carries the
    tool-use system prompt the API adds when `tools` are present (AD:about-claude/pricing,
    "Tool use system prompt token count"; its place in the prefix is UNCONFIRMED: at the
    start, it counts toward every prefix, so toward the minimum cacheable length). Without
    `framing` the template's tokens are left out (the bare byte-based count: "4 bytes a
    token" arithmetic, for experiments and tests that need it). An unknown model is counted
    unscaled and without a tool prompt."""
    return _model_positions(counts, body_layout(body), body, tool_prompt, framing)


def _model_positions(
    counts: list[int],
    layout: list[tuple[str, Mapping[str, Any], bool]],
    body: Mapping[str, Any],
    tool_prompt: bool,
    framing: bool,
) -> list[int]:
    """`model_positions` with the body's layout (`body_layout`) already made."""

    if len(layout) != len(counts):  # not this body's positions: scale only
        layout = [("messages", {}, False)] * len(counts)
    try:
        info = get_model(str(body.get("model", "")))
    except UnknownModel:
        info = None
    multiplier = info.token_multiplier if info is not None else 1.0
    deferred = {
        str(t.get("name")): t
        for t in body.get("tools") or []
        if isinstance(t, Mapping) and t.get("defer_loading")
    }
    adjusted = []
    for n, (section, block, opens) in zip(counts, layout, strict=True):
        kind = block.get("type")
        if section == "tools" and block.get("defer_loading"):
            # A deferred tool is not in the prompt until a tool search loads it: "tools
            # marked defer_loading are not loaded into context initially"
            # (AD:agents-and-tools/tool-use/tool-search-tool); its `tool_reference` then is.
            adjusted.append(0)
            continue
        defined = _defined_tool_tokens(block) if section == "tools" and framing else None
        if defined is not None:
            adjusted.append(defined)
            continue
        scaled = n if kind in _UNSCALED_KINDS else scale_tokens(n, multiplier)
        extra = _framing(section, block, opens) if block and framing else 0
        if kind == "tool_result" and deferred:
            for sub in content_blocks(block.get("content")):
                tool = (
                    deferred.get(str(sub.get("tool_name")))
                    if sub.get("type") == "tool_reference"
                    else None
                )
                if tool is not None:
                    extra += scale_tokens(count_tool_definition_tokens(tool), multiplier)
                    extra += _framing("tools", tool, False) if framing else 0
        adjusted.append(scaled + extra)
    if info is not None and tool_prompt and body.get("tools") and adjusted:
        choice = body.get("tool_choice")
        choice_type = choice.get("type") if isinstance(choice, Mapping) else None
        adjusted[0] += info.tool_prompt_tokens(choice_type)
    return adjusted


def count_model_body_tokens(
    body: Mapping[str, Any], *, tool_prompt: bool = True, framing: bool = True
) -> int:
    """Input tokens of a Messages wire body for its model (`model_positions`): what the
    emulator's `count_tokens` answers and its `usage` adds up to (with the same
    `tool_prompt` and `framing` settings)."""
    layout = body_layout(body)  # made once, for the counts and the model's share
    return sum(_model_positions(_layout_counts(layout), layout, body, tool_prompt, framing))


# Server tools: run on the provider's side, their results billed as input of the same request.
_SERVER_TOOL_PREFIXES = ("web_search", "web_fetch", "code_execution", "tool_search_tool")
_HOSTED_TOOL_TYPES = frozenset(
    {"web_search", "web_search_preview", "file_search", "code_interpreter", "image_generation"}
)


def forced_server_tool(body: Mapping[str, Any]) -> str | None:
    """The server tool a request forces (Anthropic `tool_choice: {"type": "tool"}` naming a
    server tool, OpenAI Responses `tool_choice` of a hosted tool type, or `required` with
    hosted tools only), or None. The API would run it and bill what it fetched as input of
    the same request, which the emulator does not model."""
    choice = body.get("tool_choice")
    tools = [t for t in body.get("tools") or [] if isinstance(t, Mapping)]
    if isinstance(choice, Mapping) and choice.get("type") == "tool":
        for tool in tools:
            kind = str(tool.get("type") or "")
            if tool.get("name") == choice.get("name") and kind.startswith(_SERVER_TOOL_PREFIXES):
                return kind
    if isinstance(choice, Mapping) and str(choice.get("type")) in _HOSTED_TOOL_TYPES:
        return str(choice["type"])
    hosted = [str(t.get("type")) for t in tools if str(t.get("type")) in _HOSTED_TOOL_TYPES]
    if choice == "required" and hosted and len(hosted) == len(tools):
        return hosted[0]
    return None


def server_tool_refusal(kind: str) -> str:
    """The message of the 400 for a forced server tool (one wording for every wire)."""
    return (
        f"server tool {kind!r} is not modelled by the emulator: this request forces it, and "
        "the API would run it and bill what it fetched as input of this request"
    )


COMPACTION_TRIGGER_DEFAULT = 150_000  # AD:build-with-claude/compaction, the default trigger


def compaction_trigger(body: Mapping[str, Any]) -> int | None:
    """The input-token threshold of a compaction edit in `context_management.edits` (its
    `trigger.value`, 150,000 by default), or None without one."""
    management = body.get("context_management")
    edits = management.get("edits") if isinstance(management, Mapping) else None
    for edit in edits or []:
        if isinstance(edit, Mapping) and str(edit.get("type", "")).startswith("compact"):
            trigger = edit.get("trigger")
            value = trigger.get("value") if isinstance(trigger, Mapping) else None
            return int(value) if isinstance(value, int) else COMPACTION_TRIGGER_DEFAULT
    return None


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
    facts = _facts("openai_images")
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
    facts = _facts("openai_chat", framing)
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
    facts = _facts("openai_responses", framing)
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


# --- Gemini generateContent ---------------------------------------------------------------


def gemini_part_tokens(part: Mapping[str, Any], model: str = "", *, framing: bool = True) -> int:
    """Prompt tokens of one Gemini content part (camelCase keys): text, function calls and
    responses (with framing), inline media by `gemini_media_tokens`, plus a Gemini 3 thought
    signature's replayed thoughts (`gemini_signature_tokens`)."""
    facts = _facts("gemini", framing)
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
    facts = _facts("gemini", framing)
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
    facts = _facts("gemini", framing)
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
