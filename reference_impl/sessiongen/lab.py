"""The lab: an engine wired to an in-process emulator through the official SDK, with the
emulator's admin API at hand, for notebooks, tests and benchmarks.

Everything runs on the emulator's virtual clock and deterministic responder, so a notebook
that drives a lab reproduces its outputs exactly.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2

from .cache_policy import CachePolicy, opencode_default
from .emulator import create_app
from .engine import SessionEngine
from .llm.anthropic import AnthropicLLMClient
from .llm.client import LLMClient
from .model import Agent
from .request import RequestHook
from .sample import SAMPLE_AGENT, SAMPLE_WORKSPACE
from .store import SessionStore
from .tools import ToolRegistry

BASE_URL = "http://emulator.lab"


@dataclass(frozen=True)
class LoggedUsage:
    """One logged emulator request's usage, flattened for tables."""

    uncached: int
    write_5m: int
    write_1h: int
    read: int
    output: int

    @property
    def total_input(self) -> int:
        return self.uncached + self.write_5m + self.write_1h + self.read

    @staticmethod
    def of(logged: dict[str, Any]) -> LoggedUsage:
        usage = logged.get("usage") or {}
        creation = usage.get("cache_creation") or {}
        return LoggedUsage(
            uncached=usage.get("input_tokens", 0),
            write_5m=creation.get("ephemeral_5m_input_tokens", 0),
            write_1h=creation.get("ephemeral_1h_input_tokens", 0),
            read=usage.get("cache_read_input_tokens", 0),
            output=usage.get("output_tokens", 0),
        )


@dataclass
class EmulatorLab:
    """An engine on the emulator; `admin` talks to the emulator's `/_emulator` endpoints."""

    engine: SessionEngine
    admin: httpx2.AsyncClient
    llm: AnthropicLLMClient
    workspace: Path

    async def requests(self) -> list[dict[str, Any]]:
        response = await self.admin.get("/_emulator/requests")
        return list(response.json()["requests"])

    async def last_usage(self) -> LoggedUsage:
        return LoggedUsage.of((await self.requests())[-1])

    async def script(self, *responses: dict[str, Any]) -> None:
        response = await self.admin.post("/_emulator/script", json={"responses": list(responses)})
        response.raise_for_status()

    async def fault(self, **fault: Any) -> None:
        (await self.admin.post("/_emulator/faults", json=fault)).raise_for_status()

    async def advance(self, seconds: float) -> float:
        response = await self.admin.post("/_emulator/clock", json={"advance": seconds})
        response.raise_for_status()
        return float(response.json()["now"])

    def rebuild(
        self,
        *,
        agents: Sequence[Agent] | None = None,
        llm: LLMClient | None = None,
        hooks: Sequence[RequestHook] = (),
        tools: ToolRegistry | None = None,
        cache_policy: CachePolicy = opencode_default,
    ) -> SessionEngine:
        """Another engine over the same store, e.g. with hooks or a wrapped client."""
        return SessionEngine(
            self.engine.store,
            llm or self.llm,
            list(agents or self.engine.agents.values()),
            hooks=hooks,
            tools=tools,
            cache_policy=cache_policy,
        )


def write_workspace(root: Path, files: dict[str, str] = SAMPLE_WORKSPACE) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


@asynccontextmanager
async def emulator_lab(
    workspace: Path,
    *,
    agents: Iterable[Agent] = (SAMPLE_AGENT,),
    database: str | Path = ":memory:",
    max_retries: int = 0,
) -> AsyncIterator[EmulatorLab]:
    """A lab over a fresh in-process emulator and store; the workspace gets the demo files."""
    write_workspace(workspace)
    app = create_app()
    transport = httpx2.ASGITransport(app=app)
    async with (
        httpx2.AsyncClient(transport=transport, base_url=BASE_URL) as admin,
        AnthropicLLMClient(
            api_key="lab",
            http_client=httpx2.AsyncClient(transport=transport, base_url=BASE_URL),
            max_retries=max_retries,
        ) as llm,
    ):
        store = SessionStore(database)
        try:
            yield EmulatorLab(SessionEngine(store, llm, list(agents)), admin, llm, workspace)
        finally:
            store.close()
