"""The hold gate: `POST /_emulator/hold` keeps the next N `/v1/messages` requests in flight,
before the cache, the script and the log, until `POST /_emulator/release`; no sleeps."""

from __future__ import annotations

import asyncio
from typing import Any

import anthropic
import pytest

from .conftest import MODEL, Emu, text_block, text_of, usage_tuple, user

SYSTEM = [text_block(1100, "held", "5m")]  # above the 1,024-token minimum: it writes
GUARD = 30.0  # seconds; only a broken emulator gets near it


def cacheable(tag: str = "q") -> dict[str, Any]:
    return {"system": SYSTEM, "messages": [user(text_block(5, tag))]}


async def test_a_held_request_waits_for_the_release(emu: Emu) -> None:
    """A held request has no reply, no log entry and no cache entry until the release; then
    it completes normally and is logged once."""
    assert await emu.hold(1) == {"pending": 1, "waiting": 0}
    held = asyncio.create_task(emu.create(**cacheable()))
    await emu.until_waiting(1)
    assert await emu.hold_status() == {"pending": 0, "waiting": 1}
    assert not held.done()
    assert await emu.requests() == []
    assert (await emu.admin.get("/_emulator/cache")).json()["entries"] == []
    assert await emu.release() == 1
    message = await held
    assert usage_tuple(message.usage) == (0, 0, 1100, 5)
    assert await emu.hold_status() == {"pending": 0, "waiting": 0}
    (entry,) = await emu.requests()
    assert (entry["id"], entry["status"]) == (message._request_id, 200)
    assert len((await emu.admin.get("/_emulator/cache")).json()["entries"]) == 1


async def test_a_held_request_has_not_written_the_cache(emu: Emu) -> None:
    """The hold comes before the cache: a later identical request writes the prefix itself;
    released, the held one reads it. The log stays in arrival order."""
    await emu.hold(1)
    held = asyncio.create_task(emu.create(**cacheable()))
    await emu.until_waiting(1)
    second = await emu.create(**cacheable())
    assert usage_tuple(second.usage) == (0, 0, 1100, 5)  # nothing to read: A wrote nothing
    await emu.release()
    first = await held
    assert usage_tuple(first.usage) == (1100, 0, 0, 5)
    logged = await emu.requests()
    assert [e["id"] for e in logged] == ["req_000001", "req_000002"]
    assert [e["usage"]["cache_read_input_tokens"] for e in logged] == [1100, 0]


async def test_only_the_next_n_messages_requests_are_held(emu: Emu) -> None:
    """N holds catch the next N `/v1/messages` requests, streaming ones too; count_tokens and
    later requests pass; the release lets them all go at once."""
    await emu.hold(2)
    count = emu.client.messages.count_tokens(model=MODEL, messages=[user(text_block(5, "c"))])
    counted = await asyncio.wait_for(count, GUARD)  # held by mistake: fail, do not hang
    assert counted.input_tokens == 5
    assert await emu.hold_status() == {"pending": 2, "waiting": 0}
    plain = asyncio.create_task(emu.create(messages=[user(text_block(5, "a"))]))
    streamed = asyncio.create_task(
        emu.client.messages.create(  # headers held too
            model=MODEL, max_tokens=64, messages=[user(text_block(5, "b"))], stream=True
        )
    )
    await emu.until_waiting(2)
    free = await emu.create(messages=[user(text_block(5, "free"))])
    assert free._request_id == "req_000004"
    assert not plain.done() and not streamed.done()
    assert await emu.release() == 2
    assert text_of((await plain).content[0]) == "Emulated reply to: " + text_block(5, "a")["text"]
    events = [event.type async for event in await streamed]
    assert events[0] == "message_start" and events[-1] == "message_stop"
    assert await emu.hold_status() == {"pending": 0, "waiting": 0}
    assert await emu.release() == 0
    assert [e["status"] for e in await emu.requests()] == [200, 200, 200, 200]


async def test_holds_add_up(emu: Emu) -> None:
    """Each `POST /_emulator/hold` adds to the pending holds and answers the status."""
    assert await emu.hold(2) == {"pending": 2, "waiting": 0}
    assert await emu.hold(3) == {"pending": 5, "waiting": 0}


@pytest.mark.parametrize("bad", [{}, {"count": 0}, {"count": -1}, {"count": 1, "extra": 1}])
async def test_hold_body_is_validated(emu: Emu, bad: dict[str, Any]) -> None:
    """count is required and >= 1; unknown fields are rejected (400 in the API's error shape)."""
    response = await emu.admin.post("/_emulator/hold", json=bad)
    assert response.status_code == 400 and response.json()["type"] == "error"
    assert await emu.hold_status() == {"pending": 0, "waiting": 0}


async def test_reset_releases_and_clears_holds(emu: Emu) -> None:
    """A reset lets held requests go with a 500 (they belong to the old state: no log, no
    cache, no script) and drops the holds not yet taken."""
    await emu.hold(3)
    held = asyncio.create_task(emu.create(**cacheable()))
    await emu.until_waiting(1)
    assert (await emu.admin.post("/_emulator/reset")).json() == {"reset": True}
    await emu.script({"text": "For the next request."})
    with pytest.raises(anthropic.InternalServerError, match="reset while this request was held"):
        await held
    assert await emu.hold_status() == {"pending": 0, "waiting": 0}
    assert await emu.requests() == []
    assert (await emu.admin.get("/_emulator/cache")).json()["entries"] == []
    after = await emu.create(messages=[user(text_block(5, "after"))])  # not held
    assert after._request_id == "req_000001"
    assert text_of(after.content[0]) == "For the next request."


async def test_a_cancelled_in_process_request_stops_waiting(emu: Emu) -> None:
    """In-process, the client's task runs the app, so cancelling it cancels the held request:
    it no longer counts as waiting, and the release finds nothing. (Over a socket the server
    does not notice a client that went away; the request stays held until the release.)"""
    if emu.transport != "asgi":
        pytest.skip("only the in-process transport cancels the request with its client")
    await emu.hold(1)
    held = asyncio.create_task(emu.create(messages=[user(text_block(5, "gone"))]))
    await emu.until_waiting(1)
    held.cancel()
    with pytest.raises(asyncio.CancelledError):
        await held
    assert await emu.hold_status() == {"pending": 0, "waiting": 0}
    assert await emu.release() == 0
    assert await emu.requests() == []
