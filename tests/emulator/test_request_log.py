"""The request log's `headers` and `raw_body`: what a request sent, credentials redacted, and
its body bytes exactly as received."""

from __future__ import annotations

import base64
import json

import anthropic
import pytest
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming

from .conftest import MODEL, Emu, text_block, user

API_KEY = "sk-ant-emulator-secret-key-0123456789"
BEARER = "bearer-secret-token-9876543210"
LOG_FIELDS = {
    "id",
    "path",
    "started_at",
    "body",
    "status",
    "usage",
    "stream",
    "headers",
    "raw_body",
    "provider",
}


def raw_body(entry: dict[str, object]) -> bytes:
    encoded = entry["raw_body"]
    assert isinstance(encoded, str)
    return base64.b64decode(encoded, validate=True)


async def test_headers_sent_by_the_sdk_are_logged(emu: Emu) -> None:
    """extra_headers arrive in the log under lower-case names, next to the SDK's own."""
    message = await emu.client.messages.create(
        model=MODEL,
        max_tokens=8,
        messages=[user(text_block(5, "q"))],
        extra_headers={"X-Session-Affinity": "ses_42", "x-trace": "t-1"},
    )
    (entry,) = await emu.requests()
    assert set(entry) == LOG_FIELDS  # the earlier fields are all still there
    assert entry["id"] == message._request_id
    headers = entry["headers"]
    assert headers["x-session-affinity"] == "ses_42"
    assert headers["x-trace"] == "t-1"
    assert headers["content-type"] == "application/json"
    assert headers["anthropic-version"]  # the SDK's own header, as sent
    assert all(name == name.lower() for name in headers)


async def test_credentials_never_appear_in_the_log(emu: Emu) -> None:
    """x-api-key and authorization are logged as "[redacted]", for successful and failed
    requests alike; neither secret occurs anywhere in the log's JSON."""
    # This SDK sends its api_key as "Authorization: Bearer ..."; x-api-key is sent as well.
    client = emu.client.with_options(api_key=BEARER, default_headers={"X-Api-Key": API_KEY})
    await client.messages.create(model=MODEL, max_tokens=8, messages=[user(text_block(5, "ok"))])
    with pytest.raises(anthropic.NotFoundError):
        await client.messages.create(
            model="claude-nope", max_tokens=8, messages=[user(text_block(5, "no"))]
        )
    await client.messages.count_tokens(model=MODEL, messages=[user(text_block(5, "count"))])
    response = await emu.admin.get("/_emulator/requests")
    text = response.text
    assert API_KEY not in text and BEARER not in text
    logged = response.json()["requests"]
    assert [e["status"] for e in logged] == [200, 404, 200]
    for entry in logged:
        assert entry["headers"]["x-api-key"] == "[redacted]"
        assert entry["headers"]["authorization"] == "[redacted]"


async def test_raw_body_is_the_bytes_received(emu: Emu) -> None:
    """raw_body decodes to exactly the bytes sent: key order, spacing and escapes that
    `json.dumps` would not produce survive, while `body` is the parsed value."""
    sent = (
        b'{ "messages" :[ {"content": "h\\u00e9llo",  "role":"user"} ],\n'
        b'  "max_tokens":16 , "model":"claude-sonnet-4-6" }'
    )
    assert sent != json.dumps(json.loads(sent)).encode()  # not what json.dumps would send
    response = await emu.admin.post(
        "/v1/messages", content=sent, headers={"content-type": "application/json"}
    )
    assert response.status_code == 200
    (entry,) = await emu.requests()
    assert raw_body(entry) == sent
    assert entry["body"] == json.loads(sent)


async def test_raw_body_of_a_body_that_is_not_json(emu: Emu) -> None:
    """A body that is not JSON (nor UTF-8) is answered 400 and still logged byte for byte."""
    sent = b"\xff\xfe{not json"
    response = await emu.admin.post("/v1/messages", content=sent)
    assert response.status_code == 400
    (entry,) = await emu.requests()
    assert (entry["status"], raw_body(entry)) == (400, sent)


async def test_two_requests_compare_byte_for_byte(emu: Emu) -> None:
    """The SDK sends the same params as the same bytes, so raw_body tells identical
    requests from ones whose parsed bodies merely compare equal."""
    params: MessageCreateParamsNonStreaming = {
        "model": MODEL,
        "max_tokens": 8,
        "messages": [user(text_block(5, "same"))],
    }
    await emu.client.messages.create(**params)
    await emu.client.messages.create(**params)
    reordered = json.dumps(dict(reversed(list(params.items())))).encode()
    await emu.admin.post(
        "/v1/messages", content=reordered, headers={"content-type": "application/json"}
    )
    first, second, third = await emu.requests()
    assert raw_body(first) == raw_body(second)
    assert third["body"] == first["body"] and raw_body(third) != raw_body(first)


async def test_a_request_without_a_json_body_logs_a_null_body(emu: Emu) -> None:
    """The log keeps bytes and parses them when read; a Gemini `cachedContents` get sends
    no body and is logged with `body` null and an empty `raw_body`."""
    response = await emu.admin.get("/v1beta/cachedContents/nope")
    assert response.status_code == 403
    (entry,) = await emu.requests()
    assert set(entry) == LOG_FIELDS
    assert (entry["provider"], entry["body"], raw_body(entry)) == ("gemini", None, b"")
