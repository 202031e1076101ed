"""Conformance: injected faults give the real error body, type and SDK error class, each call
of a retry-free client is logged exactly once, and a failed request never touches the cache."""

from __future__ import annotations

import anthropic
import httpx2
import pytest
from anthropic.types.message_create_params import MessageCreateParamsBase

from .conftest import MODEL, Emu, text_block, user

CASES = [
    pytest.param(429, "rate_limit_error", anthropic.RateLimitError, id="429"),
    pytest.param(529, "overloaded_error", anthropic.OverloadedError, id="529"),
    pytest.param(500, "api_error", anthropic.InternalServerError, id="500"),
    pytest.param(504, "timeout_error", anthropic.GatewayTimeoutError, id="504"),
    pytest.param(401, "authentication_error", anthropic.AuthenticationError, id="401"),
    pytest.param(403, "permission_error", anthropic.PermissionDeniedError, id="403"),
    pytest.param(413, "request_too_large", anthropic.ContentTooLargeError, id="413"),
]


@pytest.mark.parametrize(("status", "error_type", "error_class"), CASES)
async def test_fault_gives_the_real_error_and_one_logged_request(
    emu: Emu, status: int, error_type: str, error_class: type[anthropic.APIStatusError]
) -> None:
    """Error bodies are `{"type":"error","error":{"type","message"},"request_id":"req_…"}` with
    one `type` per status (AD:api/errors); the SDK maps the status to its error class and
    exposes the request id; with max_retries=0 the emulator sees exactly one request."""
    await emu.faults(status=status, count=1)
    with pytest.raises(error_class) as info:
        await emu.create(messages=[user(text_block(5, "q"))])
    error = info.value
    assert error.status_code == status
    assert isinstance(error.body, dict)
    assert error.body["type"] == "error"
    assert error.body["error"]["type"] == error_type
    assert error.request_id == error.body["request_id"] == "req_000001"
    logged = await emu.requests()
    assert [(r["id"], r["status"], r["usage"]) for r in logged] == [("req_000001", status, None)]
    assert (await emu.create(messages=[user(text_block(5, "q"))])).stop_reason == "end_turn"


async def test_529_is_an_internal_server_error_too(emu: Emu) -> None:
    """529 overloaded_error: the SDK's OverloadedError is also an InternalServerError-style
    5xx (it retries all >= 500 when retries are on)."""
    await emu.faults(status=529)
    with pytest.raises(anthropic.APIStatusError) as info:
        await emu.create(messages=[user(text_block(5, "q"))])
    assert isinstance(info.value, anthropic.OverloadedError)
    assert info.value.status_code == 529


async def test_rate_limit_sends_retry_after(emu: Emu) -> None:
    """429 rate_limit_error comes with a `retry-after` header (AD:api/errors)."""
    await emu.faults(status=429)
    with pytest.raises(anthropic.RateLimitError) as info:
        await emu.create(messages=[user(text_block(5, "q"))])
    assert info.value.response.headers["retry-after"] == "1"


async def test_fault_count_and_extra_headers(emu: Emu) -> None:
    """`count` faults the next N requests; `headers` are added to the error response."""
    await emu.faults(status=529, count=2, headers={"x-should-retry": "false"})
    for _ in range(2):
        with pytest.raises(anthropic.OverloadedError) as info:
            await emu.create(messages=[user(text_block(5, "q"))])
        assert info.value.response.headers["x-should-retry"] == "false"
    assert (await emu.create(messages=[user(text_block(5, "q"))])).stop_reason == "end_turn"
    assert [r["status"] for r in await emu.requests()] == [529, 529, 200]


async def test_retrying_client_shows_every_attempt_in_the_log(emu: Emu) -> None:
    """With retries on, the SDK retries 429 and honours retry-after-ms; each attempt is one
    logged request (here: one failure, then the retry that succeeds)."""
    await emu.faults(status=429, headers={"retry-after-ms": "1"})
    retrying = emu.client.with_options(max_retries=2)
    message = await retrying.messages.create(
        model=MODEL, max_tokens=16, messages=[user(text_block(5, "q"))]
    )
    assert message.stop_reason == "end_turn"
    assert [r["status"] for r in await emu.requests()] == [429, 200]


async def test_faulted_request_does_not_touch_the_cache(emu: Emu) -> None:
    """A faulted request fails before any work: its breakpoint is not written, so the next
    identical request writes (does not read) the prefix."""
    system = [text_block(1100, "faulted", "5m")]
    await emu.faults(status=500)
    with pytest.raises(anthropic.InternalServerError):
        await emu.create(system=system, messages=[user(text_block(5, "q"))])
    message = await emu.create(system=system, messages=[user(text_block(5, "q"))])
    assert message.usage.cache_read_input_tokens == 0
    assert message.usage.cache_creation_input_tokens == 1100


async def test_delay_lets_a_client_timeout_fire(emu: Emu) -> None:
    """`delay` really sleeps before answering, so the SDK's timeout fires (APITimeoutError);
    the request is logged once. Real sockets only: the in-process transport has no timeouts."""
    if emu.transport == "asgi":
        pytest.skip("httpx2.ASGITransport does not enforce timeouts")
    await emu.faults(status=200, delay=1.0)
    with pytest.raises(anthropic.APITimeoutError):
        await emu.client.with_options(timeout=httpx2.Timeout(0.2)).messages.create(
            model=MODEL, max_tokens=16, messages=[user(text_block(5, "q"))]
        )
    assert len(await emu.requests()) == 1


async def test_delay_without_timeout_still_answers(emu: Emu) -> None:
    """A short delay on a 200 only slows the answer down."""
    await emu.faults(status=200, delay=0.05)
    message = await emu.create(messages=[user(text_block(5, "q"))])
    assert message.stop_reason == "end_turn"


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_an_invalid_body_kind_is_a_200_the_sdk_cannot_read(emu: Emu, stream: bool) -> None:
    """`kind: "invalid-body"`: a 200 whose JSON is cut off; the SDK fails to read it (not
    retried: the status was a success), and the request is logged once."""
    await emu.faults(kind="invalid-body")
    with pytest.raises(Exception) as caught:  # the SDK's own decode error
        params: MessageCreateParamsBase = {
            "model": MODEL,
            "max_tokens": 16,
            "messages": [user(text_block(5, "q"))],
        }
        if stream:
            async with emu.client.messages.stream(**params) as events:
                await events.get_final_message()
        else:
            await emu.client.messages.create(**params)
    assert not isinstance(caught.value, anthropic.APIStatusError)
    assert [r["status"] for r in await emu.requests()] == [200]


async def test_a_reset_kind_drops_the_connection_in_process(emu: Emu) -> None:
    """`kind: "reset"`: no byte is answered. In process the SDK sees a connection error and
    retries it like any connection failure (every attempt logged); uvicorn cannot drop an
    ASGI request unanswered and sends a 500 instead."""
    await emu.faults(kind="reset", count=3)
    client = emu.client.with_options(max_retries=0)
    error = (
        anthropic.APIConnectionError if emu.transport == "asgi" else anthropic.InternalServerError
    )
    with pytest.raises(error):
        await client.messages.create(
            model=MODEL, max_tokens=16, messages=[user(text_block(5, "q"))]
        )
