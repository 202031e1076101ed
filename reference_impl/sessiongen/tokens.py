"""The token count every provider's counter builds on, and the token facts.

A text costs its tokens under OpenAI's `o200k_base` byte-pair encoding (`bpe-openai`, offline):
exact on OpenAI's models; on Claude and Gemini, whose tokenizers cannot be had offline, the
base a calibrated per-family scale multiplies, which follows their counts far better than
bytes do (measured: benchmarks/token_accuracy.py). JSON values (tool inputs, schemas, blocks
with no text of their own) are counted on their canonical serialisation (sorted keys, no
spaces). On top of that count, each provider's counter (the
`counting.py` of its folder in `sessiongen.providers`) bills what the provider bills and
the texts do not show (`catalog/tokens.json`, read here by `token_section`, each figure marked
documented or calibrated on `benchmarks/data/token_recordings.jsonl`):

* the template framing around messages, tool definitions, tool calls and results, and
  structured-output formats, per provider (`framing=False` leaves it out: the bare count);
* media by the providers' formulas, sized from the bytes' headers (`_media_size`): images,
  PDF pages, audio and video seconds (Claude's here, as a content block's count is the
  Messages wire's; the others' in their providers' counters);
* per model (the catalog): the tokenizer family's multiplier (`scale_tokens`) and, on
  Claude, the tool-use system prompt the API adds when `tools` are present;
* nothing for what the model does not see: prior-turn thinking it strips, blocks before a
  compaction block, deferred tools until a tool reference loads them, OpenAI Responses
  reasoning of earlier turns; and the replayed thoughts of a Gemini 3 thought signature.

The engine counts an `LLMRequest` with its model's provider
(`sessiongen.providers.count_request_tokens`): lowered as that provider lowers it and counted
as its wire is billed, so the engine's overflow check, the emulator's `count_tokens` and
`usage` and the cache's prefix sums agree exactly on every provider.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import Any, Protocol

from ._media_size import decode_base64_prefix, image_size, pdf_pages
from .catalog import ModelInfo, get_model

BYTES_PER_TOKEN = 4
"""About how many UTF-8 bytes one token of English prose or code takes: for sizing a text to
a token budget (the emulator's replies, the experiments' prompts), never for counting."""


def count_text_tokens(text: str) -> int:
    """Tokens of a text under `o200k_base`, the byte-pair encoding every provider's count
    builds on: exact for OpenAI's models, and for Claude and Gemini the base their
    calibrated scales multiply (their own tokenizers cannot be had offline)."""
    return count_bpe_tokens(text)


BPE_ENCODINGS = frozenset({"o200k_base", "cl100k_base"})
"""The byte-pair encodings counted exactly, offline (`bpe-openai` ships their tables)."""


class _Encoding(Protocol):
    """What the counter uses of a `bpe_openai.Encoding` (the package ships no type hints)."""

    def encode_ordinary(self, text: str) -> list[int]: ...


@cache
def _bpe(encoding: str) -> _Encoding:
    # Loaded once per process, on first use, and never changed: a read-only table (0.1 s),
    # like the token facts below.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        # startup: bpe-openai (its tables, 0.1 s) loads with the first count, not with
        # `import sessiongen`; its deprecated importlib call at import warns, silenced here
        import bpe_openai  # type: ignore[import-untyped]

        table: _Encoding = bpe_openai.get_encoding(encoding)
        return table


def count_bpe_tokens(text: str, encoding: str = "o200k_base") -> int:
    """Tokens of a text under an OpenAI byte-pair encoding, exactly as OpenAI's tokenizer
    splits it (special-token spellings in the text count as ordinary text)."""
    if encoding not in BPE_ENCODINGS:
        raise ValueError(f"encoding must be one of {sorted(BPE_ENCODINGS)}, got {encoding!r}")
    table = _bpe(encoding)
    return sum(len(table.encode_ordinary(piece)) for piece in _pieces(text))


_PIECE = 50_000  # characters: bpe-openai refuses one input of more than 200,000 tokens


def _pieces(text: str) -> list[str]:
    """`text` in pieces the encoder takes, each cut before a space or newline where one is
    near: the encoder's pre-tokenizer splits there too, so the count is the whole text's but
    for a run of whitespace cut in two."""
    pieces: list[str] = []
    start = 0
    while len(text) - start > _PIECE:
        end = start + _PIECE
        cut = max(text.rfind(" ", start, end), text.rfind("\n", start, end))
        end = cut if cut > start + _PIECE // 2 else end
        pieces.append(text[start:end])
        start = end
    pieces.append(text[start:])
    return [piece for piece in pieces if piece]


def text_of_tokens(tokens: int, tag: str = "") -> str:
    """An ASCII text of exactly `tokens` base tokens (`count_text_tokens`), unique by `tag`:
    `tag|` and then " x", one token each. For sizing a prompt to the token in experiments and
    tests; `tag|` alone must fit."""
    head = f"{tag}|"
    have = count_text_tokens(head)
    if have > tokens:
        raise ValueError(f"{tokens} tokens are too few to carry the tag {tag!r}")
    text = head + " x" * (tokens - have)
    return text


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
    texts by the base count, images and PDF documents by Anthropic's formulas
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


# --- token facts (catalog/tokens.json) -------------------------------------------------------


@cache
def token_facts() -> dict[str, Any]:
    """The per-provider framing constants and media figures of `catalog/tokens.json`."""
    text = resources.files("sessiongen.catalog").joinpath("tokens.json").read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def token_section(section: str, framing: bool = True) -> Mapping[str, Any]:
    """One section of `token_facts()`; without `framing` (the bare base count), its
    framing constants are 0 and its calibrated scales 1."""
    facts: Mapping[str, Any] = token_facts()[section]
    if framing:
        return facts
    return {
        k: 0 if k in _FRAMING_KEYS else 1.0 if k in _SCALE_KEYS else v for k, v in facts.items()
    }


_SCALE_KEYS = frozenset({"text_scale", "schema_scale"})


# The framing constants of each section (template tokens; `framing=False` drops them).
_FRAMING_KEYS = frozenset(
    {
        "structured_output",
        "thinking",
        "tools_system",
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
    """How many billed tokens one base token (`count_text_tokens`) of plain prompt text makes
    on `model` (`scale_of`). For sizing a text to a token count, as the emulator will bill it."""
    return scale_of(get_model(model))


def scale_of(info: ModelInfo, framing: bool = True) -> float:
    """The model's text scale: its tokenizer family's multiplier (documented ratios between
    one vendor's tokenizers) times its provider's calibrated `text_scale` (1 on OpenAI, where
    the base count is exact; 1 in the bare count, without `framing`)."""
    section = info.provider
    counts_as = (token_facts().get(section) or {}).get("counts_as")  # Bedrock's Claude: Claude's
    section = str(counts_as or section)
    if section not in token_facts():
        return info.token_multiplier
    return info.token_multiplier * float(token_section(section, framing).get("text_scale", 1.0))


def per_chars(chars: int, chars_per_token: float) -> int:
    return math.ceil(chars / chars_per_token) if chars > 0 else 0


# --- media ---------------------------------------------------------------------------------


def b64_bytes(data: Any) -> tuple[bytes, int]:
    """The decoded bytes of a base64 value and the size of the whole file (the value may be a
    prefix of it in the recorded set: then the bytes are its head, the size an estimate)."""

    text = str(data or "")
    raw = decode_base64_prefix(text)
    return raw, max(len(raw), len(text) * 3 // 4)


def anthropic_image_tokens(width: int, height: int) -> int:
    """An image's tokens on Claude: `(width * height) / 750`, after the API scales an image
    whose long edge is over 1568 px, or that is over about 1,600 tokens, down (aspect kept)
    until it fits (AD:build-with-claude/vision)."""
    facts = token_section("anthropic")
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

    facts = token_section("anthropic")
    if source.get("type") != "base64":
        if kind == "image":  # a URL or file id: the size is unknown here; a full-size image
            return int(facts["image_max_tokens"])
        return None
    raw, _ = b64_bytes(source.get("data"))
    if kind == "image":
        size = image_size(raw)
        return anthropic_image_tokens(*size) if size else None
    pages = pdf_pages(raw)
    return pages * int(facts["pdf_page_tokens"]) if pages else None


def scale_tokens(tokens: int, multiplier: float) -> int:
    """`tokens` of the base counter in a tokenizer that makes `multiplier` times as
    many: rounded up, in integer per-mille arithmetic so both sides round alike."""
    per_mille = round(multiplier * 1000)
    return (tokens * per_mille + 999) // 1000
