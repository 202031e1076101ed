"""Fixtures of the emulator conformance suite: the official SDK against the emulator, over an
in-process ASGI transport and over a real loopback socket (one uvicorn server per session)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any, Literal

import anthropic
import httpx2
import pytest
from anthropic.types import (
    ContentBlock,
    ContentBlockParam,
    TextBlock,
    TextBlockParam,
    ToolUseBlock,
    UserMessageParam,
)
from sessiongen.emulator import BackgroundServer, EmulatorState, create_app

from tests._filler import filler as filler  # re-exported for the suite

ASGI_URL = "http://emulator"
MODEL = "claude-sonnet-4-6"  # minimum cacheable prompt 1,024 tokens; rejects prefill
PREFILL_MODEL = "claude-haiku-4-5"  # minimum 4,096; accepts prefill; active, no SDK warning
POLL_ROUNDS = 2000  # x POLL_INTERVAL: a generous bound, reached only when a test is broken
POLL_INTERVAL = 0.005


def text_block(tokens: int, tag: str, ttl: Literal["5m", "1h"] | None = None) -> TextBlockParam:
    block: TextBlockParam = {"type": "text", "text": filler(tokens, tag)}
    if ttl is not None:
        block["cache_control"] = {"type": "ephemeral", "ttl": ttl}
    return block


def user(*blocks: ContentBlockParam) -> UserMessageParam:
    return {"role": "user", "content": list(blocks)}


def text_of(block: ContentBlock) -> str:
    """The text of a reply block that must be a text block."""
    assert isinstance(block, TextBlock), block
    return block.text


def tool_use_id(block: ContentBlock) -> str:
    """The id of a reply block that must be a tool_use block."""
    assert isinstance(block, ToolUseBlock), block
    return block.id


def usage_tuple(usage: Any) -> tuple[int, int, int, int]:
    """(read, 1h write, 5m write, uncached input) of an SDK usage object."""
    creation = usage.cache_creation
    return (
        usage.cache_read_input_tokens,
        creation.ephemeral_1h_input_tokens,
        creation.ephemeral_5m_input_tokens,
        usage.input_tokens,
    )


@dataclass
class Emu:
    """The SDK client under test plus the emulator's admin API (over the same transport)."""

    client: anthropic.AsyncAnthropic
    admin: httpx2.AsyncClient
    state: EmulatorState
    transport: str

    async def advance(self, seconds: float) -> float:
        response = await self.admin.post("/_emulator/clock", json={"advance": seconds})
        response.raise_for_status()
        now: float = response.json()["now"]
        return now

    async def set_time(self, seconds: float) -> float:
        response = await self.admin.post("/_emulator/clock", json={"now": seconds})
        response.raise_for_status()
        now: float = response.json()["now"]
        return now

    async def billed(self) -> None:
        """Count as the API bills: template framing and the tool-use system prompt on (the
        emulator's default, which this suite's fixture turns off)."""
        response = await self.admin.post(
            "/_emulator/config", json={"tool_prompt": True, "framing": True}
        )
        response.raise_for_status()

    async def script(self, *responses: dict[str, Any]) -> None:
        response = await self.admin.post("/_emulator/script", json={"responses": list(responses)})
        response.raise_for_status()

    async def faults(self, **spec: Any) -> None:
        response = await self.admin.post("/_emulator/faults", json=spec)
        response.raise_for_status()

    async def hold(self, count: int) -> dict[str, int]:
        response = await self.admin.post("/_emulator/hold", json={"count": count})
        response.raise_for_status()
        status: dict[str, int] = response.json()
        return status

    async def hold_status(self) -> dict[str, int]:
        response = await self.admin.get("/_emulator/hold")
        response.raise_for_status()
        status: dict[str, int] = response.json()
        return status

    async def release(self) -> int:
        response = await self.admin.post("/_emulator/release")
        response.raise_for_status()
        released: int = response.json()["released"]
        return released

    async def until_waiting(self, waiting: int) -> None:
        """Poll `GET /_emulator/hold` until exactly `waiting` requests are held. A poll, not
        a timing guess: each round yields to the event loop so in-process requests advance."""
        for _ in range(POLL_ROUNDS):
            if (await self.hold_status())["waiting"] == waiting:
                return
            await asyncio.sleep(POLL_INTERVAL)
        raise AssertionError(f"never saw {waiting} held requests: {await self.hold_status()}")

    async def requests(self) -> list[dict[str, Any]]:
        response = await self.admin.get("/_emulator/requests")
        response.raise_for_status()
        logged: list[dict[str, Any]] = response.json()["requests"]
        return logged

    async def create(self, **params: Any) -> anthropic.types.Message:
        params.setdefault("model", MODEL)
        params.setdefault("max_tokens", 64)
        message: anthropic.types.Message = await self.client.messages.create(**params)
        return message


@pytest.fixture(scope="session")
def loopback_server() -> Iterator[BackgroundServer]:
    with BackgroundServer() as server:
        yield server


@pytest.fixture(params=["asgi", "loopback"])
async def emu(request: pytest.FixtureRequest) -> AsyncIterator[Emu]:
    if request.param == "asgi":
        state = EmulatorState()
        app = create_app(state)
        base_url = ASGI_URL
        sdk_http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url=base_url)
        admin = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url=base_url)
    else:
        server: BackgroundServer = request.getfixturevalue("loopback_server")
        state = server.state
        base_url = server.url
        sdk_http = httpx2.AsyncClient(base_url=base_url)
        admin = httpx2.AsyncClient(base_url=base_url)
    client = anthropic.AsyncAnthropic(
        api_key="test", base_url=base_url, http_client=sdk_http, max_retries=0
    )
    async with client, admin:
        (await admin.post("/_emulator/reset")).raise_for_status()
        # The suite's arithmetic is the bare byte-based count, 4 bytes a token (`filler`): no
        # template framing, no tool-use system prompt. The billed counting, on by default, is
        # pinned by `test_token_counting.py` and `test_billed_tokens.py`, which turn it on.
        bare = {"tool_prompt": False, "framing": False}
        (await admin.post("/_emulator/config", json=bare)).raise_for_status()
        yield Emu(client, admin, state, request.param)
