"""Conformance: the 400/404 answers, their error bodies, and that a rejected request leaves
the cache alone. Messages quoted verbatim from API answers in public issues unless marked."""

from __future__ import annotations

from typing import Any

import anthropic
import httpx2
import pytest

from .conftest import MODEL, PREFILL_MODEL, Emu, filler, text_block, user

TOOL = {"name": "read_file", "description": "Read a file.", "input_schema": {"type": "object"}}


async def bad_request(emu: Emu, **params: Any) -> anthropic.BadRequestError:
    with pytest.raises(anthropic.BadRequestError) as info:
        await emu.create(**params)
    error = info.value
    assert error.status_code == 400
    assert isinstance(error.body, dict)
    assert error.body["type"] == "error"
    assert error.body["error"]["type"] == "invalid_request_error"
    assert error.body["request_id"] == error.request_id
    assert error.response.headers["request-id"] == error.request_id
    return error


def message_of(error: anthropic.APIStatusError) -> str:
    assert isinstance(error.body, dict)
    message: str = error.body["error"]["message"]
    return message


async def test_tool_use_without_tool_result_is_rejected(emu: Emu) -> None:
    """ "messages.N: `tool_use` ids were found without `tool_result` blocks immediately after:
    toolu_…. Each `tool_use` block must have a corresponding `tool_result` block in the next
    message." (AD:…/troubleshooting-tool-use; text from anthropics/claude-code#5060)"""
    messages = [
        user(text_block(5, "q")),
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_a", "name": "read_file", "input": {}}],
        },
        user(text_block(5, "no result")),
    ]
    error = await bad_request(emu, tools=[TOOL], messages=messages)
    assert message_of(error) == (
        "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: "
        "toolu_a. Each `tool_use` block must have a corresponding `tool_result` block in the "
        "next message."
    )


async def test_stray_tool_result_is_rejected(emu: Emu) -> None:
    """ "messages.N.content.M: unexpected `tool_use_id` found in `tool_result` blocks: toolu_….
    Each `tool_result` block must have a corresponding `tool_use` block in the previous
    message." (anthropics/claude-code#13460)"""
    messages = [user({"type": "tool_result", "tool_use_id": "toolu_ghost", "content": "x"})]
    error = await bad_request(emu, tools=[TOOL], messages=messages)
    assert message_of(error) == (
        "messages.0.content.0: unexpected `tool_use_id` found in `tool_result` blocks: "
        "toolu_ghost. Each `tool_result` block must have a corresponding `tool_use` block in "
        "the previous message."
    )


async def test_fifth_breakpoint_is_rejected(emu: Emu) -> None:
    """ "Max 4 breakpoints per request": "A maximum of 4 blocks with cache_control may be
    provided. Found 5." (tghamm/Anthropic.SDK#50)"""
    blocks = [text_block(10, f"b{i}", "5m") for i in range(5)]
    error = await bad_request(emu, messages=[user(*blocks)])
    assert message_of(error) == "A maximum of 4 blocks with cache_control may be provided. Found 5."


async def test_four_explicit_breakpoints_plus_automatic_is_rejected(emu: Emu) -> None:
    """ "If 4 explicit block-level breakpoints already exist, the API returns a 400 error (no
    slots left for automatic caching)." (automatic caching, edge cases)"""
    blocks = [text_block(10, f"b{i}", "5m") for i in range(4)]
    error = await bad_request(emu, messages=[user(*blocks)], cache_control={"type": "ephemeral"})
    assert message_of(error) == "A maximum of 4 blocks with cache_control may be provided. Found 5."


async def test_1h_breakpoint_after_5m_is_rejected(emu: Emu) -> None:
    """ "Cache entries with longer TTL must appear before shorter TTLs"; the API's answer
    (cnighswonger/claude-code-cache-fix#44) names the offending block."""
    error = await bad_request(
        emu,
        system=[text_block(10, "s", "5m")],
        messages=[user(text_block(10, "m0"), text_block(10, "m1", "1h"))],
    )
    assert message_of(error) == (
        "messages.0.content.1.cache_control.ttl: a ttl='1h' cache_control block must not come "
        "after a ttl='5m' cache_control block. Note that blocks are processed in the following "
        "order: `tools`, `system`, `messages`."
    )


async def test_automatic_caching_with_a_different_ttl_on_the_last_block_is_rejected(
    emu: Emu,
) -> None:
    """ "If the last block has an explicit cache_control with a different TTL, the API returns
    a 400 error." (message text UNCONFIRMED)"""
    error = await bad_request(
        emu,
        messages=[user(text_block(10, "last", "5m"))],
        cache_control={"type": "ephemeral", "ttl": "1h"},
    )
    assert "ttl" in message_of(error)


async def test_prefill_is_rejected_on_models_that_do_not_support_it(emu: Emu) -> None:
    """ "This model does not support assistant message prefill. The conversation must end with
    a user message." (AD:api/errors; 4.6+ models)"""
    messages = [user(text_block(5, "q")), {"role": "assistant", "content": "The answer is"}]
    error = await bad_request(emu, model=MODEL, messages=messages)
    assert message_of(error) == (
        "This model does not support assistant message prefill. The conversation must end "
        "with a user message."
    )


async def test_prefill_is_accepted_on_older_models(emu: Emu) -> None:
    """Prefill is only rejected "on 4.6+ models": Haiku 4.5 continues the assistant turn."""
    messages = [user(text_block(5, "q")), {"role": "assistant", "content": "The answer is"}]
    message = await emu.create(model=PREFILL_MODEL, messages=messages)
    assert message.stop_reason == "end_turn"


async def test_prompt_too_long_is_rejected(emu: Emu) -> None:
    """ "prompt is too long: 200082 tokens > 200000 maximum" (AD:…/context-windows; observed
    text in RipperTs/claude-code-relay#23)."""
    error = await bad_request(
        emu, model="claude-haiku-4-5", messages=[user(text_block(200_001, "long"))]
    )
    assert message_of(error) == "prompt is too long: 200001 tokens > 200000 maximum"


@pytest.mark.parametrize(
    "extra",
    [
        pytest.param({"stream": True}, id="stream"),
        pytest.param({"tools": [TOOL], "tool_choice": {"type": "any"}}, id="tool_choice-any"),
        pytest.param(
            {"tools": [TOOL], "tool_choice": {"type": "tool", "name": "read_file"}},
            id="tool_choice-tool",
        ),
        pytest.param({"thinking": {"type": "enabled", "budget_tokens": 1024}}, id="thinking"),
    ],
)
async def test_prewarm_rejects_settings_that_imply_output(emu: Emu, extra: dict[str, Any]) -> None:
    """ "A max_tokens: 0 request is rejected with an invalid_request_error if any of the
    following are set ... stream: true, Extended thinking, ... tool_choice of
    {"type": "tool", ...} or {"type": "any"}" (pre-warming, limitations)."""
    params = {"max_tokens": 0, "messages": [user(text_block(5, "warmup"))], **extra}
    if extra.get("stream"):
        params.pop("stream")
        with pytest.raises(anthropic.BadRequestError) as info:
            async with emu.client.messages.stream(model=MODEL, **params) as stream:
                await stream.get_final_message()
        error = info.value
    else:
        error = await bad_request(emu, **params)
    assert "max_tokens" in message_of(error)
    assert await emu.requests() and (await emu.requests())[-1]["status"] == 400


async def test_forced_tool_choice_with_thinking_is_rejected(emu: Emu) -> None:
    """ "With manual extended thinking (thinking.type: "enabled") they [any/tool] are an error;
    only auto and none are allowed." (AD:…/define-tools)"""
    error = await bad_request(
        emu,
        max_tokens=2048,
        tools=[TOOL],
        tool_choice={"type": "any"},
        thinking={"type": "enabled", "budget_tokens": 1024},
        messages=[user(text_block(5, "q"))],
    )
    assert "tool_choice" in message_of(error)


async def test_unknown_model_is_not_found(emu: Emu) -> None:
    """Unknown model -> 404 not_found_error, body "model: <id>" (AD:api/errors), to which
    the emulator adds the nearest known ids (tests/emulator/test_model_aliases.py)."""
    with pytest.raises(anthropic.NotFoundError) as info:
        await emu.create(model="claude-nonexistent-9", messages=[user(text_block(5, "q"))])
    assert info.value.status_code == 404
    assert isinstance(info.value.body, dict)
    error = info.value.body["error"]
    assert error["type"] == "not_found_error"
    assert error["message"].startswith("model: claude-nonexistent-9 [emulator: nearest known: ")
    assert info.value.request_id == info.value.body["request_id"]


async def test_max_tokens_above_the_model_limit_is_rejected(emu: Emu) -> None:
    """max_tokens beyond the model's output limit (Sonnet 4.6: 128k, "A single request to any
    model with a 1M-token context window can generate up to 128k output tokens") is an
    invalid_request_error."""
    error = await bad_request(
        emu, max_tokens=128_001, messages=[user(text_block(5, "q"))], timeout=60
    )
    assert message_of(error) == (
        "max_tokens: 128001 > 128000, which is the maximum allowed number of output tokens for "
        "claude-sonnet-4-6"
    )


@pytest.mark.parametrize(
    ("body", "message"),
    [
        pytest.param({"model": MODEL, "messages": []}, "max_tokens: Field required", id="max"),
        pytest.param({"model": MODEL, "max_tokens": 5}, "messages: Field required", id="msgs"),
        pytest.param({"max_tokens": 5, "messages": []}, "model: Field required", id="model"),
        pytest.param(
            {"model": MODEL, "max_tokens": 5, "messages": [{"role": "robot", "content": "x"}]},
            "messages.0.role: Input should be 'user' or 'assistant'",
            id="role",
        ),
        pytest.param(
            {"model": MODEL, "max_tokens": -1, "messages": []},
            "max_tokens: Input should be greater than or equal to 0",
            id="negative",
        ),
        pytest.param(
            {"model": MODEL, "max_tokens": 5, "messages": []},
            "messages: at least one message is required",
            id="empty",
        ),
    ],
)
async def test_missing_or_invalid_fields_are_rejected(
    emu: Emu, body: dict[str, Any], message: str
) -> None:
    """Missing or invalid fields are 400 invalid_request_error (sent with the SDK's low-level
    `post`, since `messages.create` refuses to build such bodies)."""
    with pytest.raises(anthropic.BadRequestError) as info:
        await emu.client.post("/v1/messages", body=body, cast_to=httpx2.Response)
    assert message_of(info.value) == message


async def test_rejected_request_is_logged_and_touches_no_cache(emu: Emu) -> None:
    """Validation happens "before the cache is touched": a request rejected for a 5th
    breakpoint writes nothing, so the same prefix is a fresh write afterwards."""
    blocks = [text_block(400, f"b{i}", "5m") for i in range(5)]
    await bad_request(emu, messages=[user(*blocks)])
    ok = await emu.create(messages=[user(*blocks[:4])])
    assert ok.usage.cache_read_input_tokens == 0
    logged = await emu.requests()
    assert [(r["status"], r["usage"]) for r in logged][0] == (400, None)
    assert logged[1]["status"] == 200


async def test_text_sizes_count_with_the_shared_counter(emu: Emu) -> None:
    """count_tokens answers {"input_tokens": N} with the shared counter (tokens.py)."""
    counted = await emu.client.messages.count_tokens(
        model=MODEL, messages=[user({"type": "text", "text": filler(123, "c")})]
    )
    assert counted.input_tokens == 123


async def test_unparseable_body_is_rejected_and_logged_as_received(emu: Emu) -> None:
    """A body that is not JSON is a 400 invalid_request_error; the log keeps its raw text."""
    response = await emu.admin.post(
        "/v1/messages", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"
    (logged,) = await emu.requests()
    assert (logged["body"], logged["status"], logged["usage"]) == ("{not json", 400, None)
