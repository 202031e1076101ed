"""Conformance: content block validation. A block's `type` must be one the API knows, and a
text block's `text` a string, in a message and in `system`; each violation is a 400
invalid_request_error answered before the cache is touched. Messages as quoted from API
answers in public reports unless marked UNCONFIRMED."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anthropic
import httpx2
import pytest
from sessiongen.emulator.errors import APIError
from sessiongen.emulator.validation import BLOCK_TYPES, validate_count_tokens

from .conftest import MODEL, Emu, text_block, user

EXPECTED_TAGS = (
    "'bash_code_execution_tool_result', 'code_execution_tool_result', 'container_upload', "
    "'document', 'image', 'redacted_thinking', 'search_result', 'server_tool_use', 'text', "
    "'text_editor_code_execution_tool_result', 'thinking', 'tool_result', "
    "'tool_search_tool_result', 'tool_use', 'web_fetch_tool_result', 'web_search_tool_result'"
)


def body(*messages: Mapping[str, Any], **fields: Any) -> dict[str, Any]:
    return {"model": MODEL, "max_tokens": 32, "messages": list(messages), **fields}


async def rejected(emu: Emu, payload: dict[str, Any], path: str = "/v1/messages") -> str:
    """The message of the 400 invalid_request_error `payload` earns (sent with the SDK's
    low-level `post`, since `messages.create` refuses to build such bodies)."""
    with pytest.raises(anthropic.BadRequestError) as info:
        await emu.client.post(path, body=payload, cast_to=httpx2.Response)
    error = info.value
    assert error.status_code == 400
    assert isinstance(error.body, dict)
    assert error.body["type"] == "error"
    assert error.body["error"]["type"] == "invalid_request_error"
    message: str = error.body["error"]["message"]
    return message


async def test_unknown_block_type_is_rejected(emu: Emu) -> None:
    """ "messages.N.content.M: Input tag '<type>' found using 'type' does not match any of
    the expected tags: 'bash_code_execution_tool_result', …" (the wording and the first tag
    as quoted in public reports of API answers; the rest of the tag list UNCONFIRMED: here the
    `ContentBlockParam` union of the SDK, sorted)."""
    message = await rejected(emu, body(user({"type": "bogus", "text": "hi"})))  # type: ignore[typeddict-item]
    assert message == (
        "messages.0.content.0: Input tag 'bogus' found using 'type' does not match any of the "
        f"expected tags: {EXPECTED_TAGS}"
    )


async def test_unknown_block_type_in_a_later_assistant_block_names_its_path(emu: Emu) -> None:
    """The same rule for every message and block: the path names message 1, block 1."""
    payload = body(
        user(text_block(5, "q")),
        {"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "input_text"}]},
        user(text_block(5, "r")),
    )
    message = await rejected(emu, payload)
    assert message.startswith(
        "messages.1.content.1: Input tag 'input_text' found using 'type' does not match"
    )


async def test_text_block_without_text_is_rejected(emu: Emu) -> None:
    """ "messages.N.content.M.text.text: Field required" (the union's tag in the path; quoted
    in public reports of API answers)."""
    message = await rejected(emu, body(user({"type": "text"})))  # type: ignore[arg-type]
    assert message == "messages.0.content.0.text.text: Field required"


@pytest.mark.parametrize("text", [None, 5, ["x"]], ids=["null", "int", "list"])
async def test_text_block_with_a_non_string_text_is_rejected(emu: Emu, text: Any) -> None:
    """ "messages.0.content.1.text.text: Input should be a valid string", the API's answer
    to a null `text` (simonw/llm-anthropic#23); any other non-string likewise."""
    message = await rejected(emu, body(user(text_block(5, "q"), {"type": "text", "text": text})))
    assert message == "messages.0.content.1.text.text: Input should be a valid string"


@pytest.mark.parametrize(
    ("block", "message"),
    [
        pytest.param(
            {"type": "text", "text": 5}, "system.0.text: Input should be a valid string", id="int"
        ),
        pytest.param(
            {"type": "text", "text": None},
            "system.0.text: Input should be a valid string",
            id="null",
        ),
        pytest.param({"type": "text"}, "system.0.text: Field required", id="missing"),
    ],
)
async def test_system_block_text_must_be_a_string(
    emu: Emu, block: dict[str, Any], message: str
) -> None:
    """ "system.0.text: Input should be a valid string" (quoted as an API answer in public
    code; `system` is a list of text blocks, no tag in the path); "Field required" for an
    absent one is UNCONFIRMED (the same validator's wording)."""
    payload = body(user(text_block(5, "q")), system=[block])
    assert await rejected(emu, payload) == message


async def test_count_tokens_applies_the_same_rules(emu: Emu) -> None:
    """`count_tokens` validates its messages like `/v1/messages` (UNCONFIRMED: the docs give
    the two endpoints the same `messages` parameter)."""
    payload = {"model": MODEL, "messages": [user({"type": "text", "text": None})]}  # type: ignore[typeddict-item]
    message = await rejected(emu, payload, "/v1/messages/count_tokens")
    assert message == "messages.0.content.0.text.text: Input should be a valid string"


async def test_rejected_block_leaves_the_cache_and_logs_a_400(emu: Emu) -> None:
    """Validation happens before the cache is touched: a cacheable prefix followed by a bad
    block writes nothing, so the valid request afterwards writes it fresh."""
    prefix = text_block(1100, "p", "5m")
    await rejected(emu, body(user(prefix, {"type": "text"})))  # type: ignore[arg-type]
    ok = await emu.client.messages.create(
        model=MODEL, max_tokens=32, messages=[user(prefix, text_block(5, "q"))]
    )
    assert ok.usage.cache_read_input_tokens == 0
    assert ok.usage.cache_creation_input_tokens is not None
    assert ok.usage.cache_creation_input_tokens > 0
    logged = await emu.requests()
    assert [(r["status"], r["usage"]) for r in logged][0] == (400, None)


@pytest.mark.parametrize(
    "kind",
    [
        *BLOCK_TYPES,
        "compaction",
        "mcp_tool_use",
        "mcp_tool_result",
        "advisor_tool_result",
        "some_future_tool_result",
    ],
)
def test_known_block_types_pass_the_type_check(kind: str) -> None:
    """Every listed type, the beta ones (their headers not modelled) and every server tool's
    `*_tool_result` (as the cache model treats them) get past the tag check: whatever else
    such a bare block earns, it is not the unknown-tag answer."""
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [{"type": kind}]},
        {"role": "user", "content": "r"},
    ]
    try:
        validate_count_tokens({"model": MODEL, "messages": messages})
    except APIError as error:
        assert "Input tag" not in str(error), error
