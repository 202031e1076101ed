"""Fixtures for session.generate: the engine on the emulator through the official SDK."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from sessiongen import Agent, SessionEngine, SessionStore
from sessiongen.demo import DEMO_AGENT, WORKSPACE_FILES
from sessiongen.emulator import create_app
from sessiongen.llm.anthropic import AnthropicLLMClient
from sessiongen.llm.client import LLMClient

BASE = "http://emulator.test"


@dataclass
class Emulated:
    """The engine wired to an in-process emulator, with its admin API at hand."""

    engine: SessionEngine
    admin: httpx.AsyncClient
    llm: AnthropicLLMClient
    workspace: Path

    async def requests(self) -> list[dict[str, Any]]:
        return list((await self.admin.get("/_emulator/requests")).json()["requests"])

    async def script(self, *responses: dict[str, Any]) -> None:
        (
            await self.admin.post("/_emulator/script", json={"responses": list(responses)})
        ).raise_for_status()

    async def fault(self, **fault: Any) -> None:
        (await self.admin.post("/_emulator/faults", json=fault)).raise_for_status()

    async def advance(self, seconds: float) -> None:
        (await self.admin.post("/_emulator/clock", json={"advance": seconds})).raise_for_status()

    def rebuild(
        self, *, agents: list[Agent] | None = None, llm: LLMClient | None = None, **kw: Any
    ) -> SessionEngine:
        """A second engine over the same store (e.g. with hooks or another LLM wrapper)."""
        return SessionEngine(self.engine.store, llm or self.llm, agents or [DEMO_AGENT], **kw)


@pytest.fixture
def demo_workspace(tmp_path: Path) -> Path:
    root = tmp_path / "demo-workspace"
    for name, text in WORKSPACE_FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


@pytest.fixture
async def emulated(demo_workspace: Path) -> AsyncIterator[Emulated]:
    app = create_app()
    transport = httpx.ASGITransport(app=app)
    async with (
        httpx.AsyncClient(transport=transport, base_url=BASE) as admin,
        AnthropicLLMClient(
            api_key="test",
            http_client=httpx.AsyncClient(transport=transport, base_url=BASE),
            max_retries=0,
        ) as llm,
    ):
        store = SessionStore()
        yield Emulated(SessionEngine(store, llm, [DEMO_AGENT]), admin, llm, demo_workspace)
        store.close()
