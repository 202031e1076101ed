"""The one deterministic token counter, shared by the engine and the emulator.

It is an approximation, not a real tokenizer: a text costs one token per started group of
four UTF-8 bytes. JSON values (tool inputs, input schemas, blocks with no text of their own
such as images) are counted on their canonical serialisation (sorted keys, no spaces).

Counting is defined on the Messages wire body, position by position: `count_tool_definition_
tokens` for one entry of `tools`, `count_content_tokens` for one system or message content
block (the only function that counts a content block). The cache model's flattening counts
every position with these, and the engine counts an `LLMRequest` by lowering it to that wire
body first (`count_request_tokens`), so the engine's overflow check, the emulator's
`count_tokens` and the cache's prefix sums agree exactly; whatever the lowering drops (for
example reasoning without a signature) costs nothing on either side.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

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


def content_blocks(content: Any) -> list[dict[str, Any]]:
    """The content blocks of a wire `content` or `system` value: a plain string is one text
    block (so both spellings count and hash the same); None is none."""
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [dict(b) for b in content]


def count_content_tokens(block: Mapping[str, Any]) -> int:
    """Tokens of one wire content block (a system block, a message block, a reply block)."""
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
    source = block.get("source")
    if kind == "document" and isinstance(source, Mapping) and source.get("type") == "text":
        return count_text_tokens(str(source.get("data", "")))
    # Images and everything else: the canonical JSON of the block (no pixel-based estimate).
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


def count_body_tokens(body: Mapping[str, Any]) -> int:
    """Input tokens of a Messages wire body: the sum over its positions, tools then system
    blocks then message content blocks (what `count_tokens` answers)."""
    return sum(body_positions(body))


def count_request_tokens(request: LLMRequest) -> int:
    """Input tokens of a provider-neutral request: its lowered wire body, counted."""
    # Imported here: the llm package imports this module (the scripted client counts usage).
    from .llm.anthropic_wire import lower_request  # Anthropic is the only provider today

    return count_model_body_tokens(lower_request(request))


def total_input_tokens(uncached: int, cache_read: int, cache_write: int) -> int:
    """Total input, as Anthropic defines it: `cache_read_input_tokens +
    cache_creation_input_tokens + input_tokens`. The one definition; usage types call it."""
    return uncached + cache_read + cache_write


# --- per-model adjustments (the model catalog's tokenizer family and tool-use prompt) -----


def scale_tokens(tokens: int, multiplier: float) -> int:
    """`tokens` of the byte-based counter in a tokenizer that makes `multiplier` times as
    many: rounded up, in integer per-mille arithmetic so both sides round alike."""
    per_mille = round(multiplier * 1000)
    return (tokens * per_mille + 999) // 1000


def body_positions(body: Mapping[str, Any]) -> list[int]:
    """The byte-based count of each position of a Messages wire body, in prefix order (one
    per tool definition, system block and message content block): the positions the cache
    model flattens, so `sum(body_positions(b)) == count_body_tokens(b)`. Prior-turn thinking
    the model strips from context is no position (`cache.prefix.stripped_thinking`)."""
    from .cache.prefix import stripped_thinking  # the cache package imports this one

    stripped = stripped_thinking(body)
    counts = [count_tool_definition_tokens(tool) for tool in body.get("tools") or []]
    counts += [count_content_tokens(block) for block in content_blocks(body.get("system"))]
    for i, message in enumerate(body.get("messages") or []):
        blocks = content_blocks(message.get("content"))
        counts += [count_content_tokens(b) for j, b in enumerate(blocks) if (i, j) not in stripped]
    return counts


def model_positions(
    counts: list[int], body: Mapping[str, Any], *, tool_prompt: bool = False
) -> list[int]:
    """`counts` (one per position of `body`) as the model named by `body["model"]` counts
    them: each scaled by its tokenizer family's multiplier; with `tool_prompt`, the first also
    carries the tool-use system prompt the API adds when `tools` are present (its place in
    the prefix is UNCONFIRMED; at the start, it counts toward every prefix, so toward the
    minimum cacheable length). An unknown model is counted unadjusted."""
    from .cache.catalog import UnknownModel, get_model  # the cache package imports this one

    try:
        info = get_model(str(body.get("model", "")))
    except UnknownModel:
        return list(counts)
    adjusted = [scale_tokens(n, info.token_multiplier) for n in counts]
    if tool_prompt and body.get("tools") and adjusted:
        choice = body.get("tool_choice")
        choice_type = choice.get("type") if isinstance(choice, Mapping) else None
        adjusted[0] += info.tool_prompt_tokens(choice_type)
    return adjusted


def count_model_body_tokens(body: Mapping[str, Any], *, tool_prompt: bool = False) -> int:
    """Input tokens of a Messages wire body for its model (`model_positions`): what the
    emulator's `count_tokens` answers and its `usage` adds up to (with the same
    `tool_prompt` setting)."""
    return sum(model_positions(body_positions(body), body, tool_prompt=tool_prompt))
