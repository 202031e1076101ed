"""The one deterministic token counter, shared by the engine and the emulator.

It is an approximation, not a real tokenizer: a text costs one token per started group of
four UTF-8 bytes. JSON values (tool inputs, input schemas) are counted on their canonical
serialisation (sorted keys, no spaces). Every block of a request is counted on its own, so
the cache model's per-block prefix sums and the engine's overflow check agree exactly.
"""

from __future__ import annotations

import json
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


def count_request_tokens(request: LLMRequest) -> int:
    """Input tokens of a provider-neutral request, block by block."""
    total = sum(count_tool_tokens(t.name, t.description, t.input_schema) for t in request.tools)
    total += sum(count_text_tokens(part.text) for part in request.system)
    for message in request.messages:
        for block in message.content:
            if block.type == "tool_call":
                total += count_tool_call_tokens(block.name, block.input)
            else:
                total += count_text_tokens(block.text)
    return total
