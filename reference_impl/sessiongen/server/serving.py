"""`sessiongen serve`: the HTTP server under uvicorn, with its store and provider.

The provider is the embedded emulator by default (in-process, reached through the official
SDK over an ASGI transport, as the lab does, but on real time so cache TTLs expire as they
would), or Anthropic with the SDK's standard environment (ANTHROPIC_API_KEY,
ANTHROPIC_BASE_URL). The server binds loopback unless it has a token: anyone who can reach
it can run turns on the provider's bill.

Plugins: the built-ins and every installed `sessiongen` entry point (`load_plugins()`). The
engine is built with their request hook, so a third party's `sessiongen_request` sees every
Step and generate, warming pings included (`info.warming`).

Startup recovery: before it binds, the server marks every Step that a previous process left
unsettled (it was killed mid-Step) as interrupted (`recover_interrupted`), so what the API
serves never shows a Step as in flight that no process is running. Recovery runs under each
session's drain lease in the store: a session another live process is draining (a second
server on the same file) is left alone, its open Step is that process's to settle; a lease
left by a killed process (its pid is gone) is free and taken over.

A full disk: a store that cannot open its file for writing opens it read-only
(`SessionStore.read_only`); the server says so once at start, serves every read, and answers
every write 507 `insufficient-storage`. Recovery needs writes, so on a read-only store, or a
disk too full for them, it is left to each session's next Drain and the server starts.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import uvicorn

from .._bind import InsecureBind, check_bind, is_loopback, probe
from .._choices import SERVE_PROVIDERS as PROVIDERS
from .._choices import ServeProvider
from ..emulator import EmulatorState, VirtualClock
from ..emulator.client import inprocess_llm
from ..errors import InsufficientStorage
from ..llm._adapter import DEFAULT_MAX_RETRIES
from ..model import Agent
from ..plugins import PluginHost, load_plugins, request_hook
from ..plugins.warming import WarmingPlugin
from ..providers.anthropic.adapter import AnthropicLLMClient
from ..sample import SAMPLE_AGENT
from ..session.engine import SessionEngine
from ..session.store import SessionStore
from ..warming.keeper import KeeperPolicy, MonotonicClock
from .app import create_app

if TYPE_CHECKING:
    from ..llm._adapter import ProviderAdapter

__all__ = [
    "DEFAULT_DB",
    "DEFAULT_PORT",
    "PROVIDERS",
    "InsecureBind",
    "RealTimeClock",
    "check_bind",
    "is_loopback",
    "recover_interrupted",
    "serve",
]

Provider = ServeProvider
DEFAULT_PORT = 8080
DEFAULT_DB = "sessiongen.db"


class RealTimeClock(VirtualClock):
    """The emulator's clock moving with real (monotonic) time, so its cache entries expire
    after their TTL as the provider's would; `advance` and `set` still move it."""

    def __init__(self) -> None:
        super().__init__()
        self._origin = time.monotonic()

    def now(self) -> float:
        return super().now() + time.monotonic() - self._origin

    def advance(self, seconds: float) -> float:
        super().advance(seconds)
        return self.now()

    def set(self, now: float) -> float:
        super().set(max(0.0, now - (time.monotonic() - self._origin)))
        return self.now()


def recover_interrupted(engine: SessionEngine) -> int:
    """Mark the Steps a dead process left unsettled, in every session, as interrupted (the
    Drain's own recovery, run for all sessions at once); returns how many it marked. A
    session whose drain lease a live process holds is skipped (`SessionRunner.recover`), and
    so is every session when the store cannot write (read-only, its disk full): each
    session's next Drain recovers it."""
    if engine.store.read_only:
        return 0
    recovered = 0
    for session_id in engine.store.session_ids():
        try:
            recovered += engine.runner.recover(session_id)
        except InsufficientStorage:
            return recovered
    return recovered


@asynccontextmanager
async def _llm(provider: Provider) -> AsyncIterator[tuple[ProviderAdapter, str]]:
    """The provider client and a one-line description of it; closed on exit."""

    if provider == "emulator":
        state = EmulatorState(clock=RealTimeClock())
        async with inprocess_llm("anthropic", state, max_retries=DEFAULT_MAX_RETRIES) as llm:
            yield llm, "the embedded emulator (in-process, real-time clock)"
        return
    async with AnthropicLLMClient.from_env() as llm:
        where = str(llm.client.base_url).rstrip("/")
        if llm.client.api_key is None and llm.client.auth_token is None:
            print(
                "sessiongen serve: warning: ANTHROPIC_API_KEY is not set; provider calls "
                "will fail with provider-authentication-error",
                file=sys.stderr,
            )
        yield llm, f"Anthropic at {where}"


async def serve_async(
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    db: str | Path = DEFAULT_DB,
    provider: Provider = "emulator",
    token: str | None = None,
    *,
    workspace: str | Path | None = None,
    log_level: str = "info",
    agents: Sequence[Agent] = (SAMPLE_AGENT,),
    warming_policy: KeeperPolicy | None = None,
) -> None:
    """`serve` on the running event loop: returns when uvicorn stops (Ctrl-C, SIGTERM).
    `agents`: the agents sessions can use (the sample agent by default); `warming_policy`:
    the keeper's policy (`default_policy()` when None)."""
    check_bind(host, token)
    probe(host, port)
    pm = load_plugins()  # before the store: a plugin that fails to load leaves nothing open
    if warming_policy is not None:
        warming = pm.get_plugin("warming")
        if isinstance(warming, WarmingPlugin):
            warming.policy = warming_policy
    store = SessionStore(db)
    if store.read_only:
        print(
            f"sessiongen serve: warning: the store {db} is read-only ({store.read_only_reason}): "
            "reads are served, every write answers 507 insufficient-storage; restart the "
            "server once its disk has room",
            file=sys.stderr,
            flush=True,
        )
    try:
        async with _llm(provider) as (llm, described):
            engine = SessionEngine(store, llm, list(agents), hooks=[request_hook(pm)])
            recovered = recover_interrupted(engine)
            plugins = PluginHost(engine, pm, MonotonicClock())
            plugins.startup()  # a plugin that cannot start stops the server before it binds
            app = create_app(engine, plugins=plugins, token=token, workspace=workspace)
            auth = "bearer token required" if token else "no token (loopback only)"
            tools = (
                f"workspace: {workspace}"
                if workspace is not None
                else "workspace: none (tool calls answer that; --workspace DIR gives one)"
            )
            print(
                f"sessiongen serve: http://{_authority(host, port)} | provider: {described} | "
                f"db: {db} | auth: {auth} | {tools} | plugins: {', '.join(plugins.names())} | "
                f"interrupted Steps recovered: {recovered}",
                file=sys.stderr,
                flush=True,
            )
            config = uvicorn.Config(
                app,
                host=host,
                port=port,
                log_level=log_level,
                http="h11",
                ws="none",
                lifespan="on",
            )
            await uvicorn.Server(config).serve()
    finally:
        store.close()


def serve(
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    db: str | Path = DEFAULT_DB,
    provider: Provider = "emulator",
    token: str | None = None,
    *,
    workspace: str | Path | None = None,
    log_level: str = "info",
    warming_policy: KeeperPolicy | None = None,
) -> None:
    """Serve sessions over HTTP until interrupted (what `sessiongen serve` calls).
    `warming_policy`: the keeper's policy, e.g. `FromPolicy(load_policy(path))` for a policy
    `sessiongen experiment warming --save-policy` fitted (`default_policy()` when None).

    Before serving it raises `InsecureBind` (a ValueError) for a non-loopback `host`
    without `token`, `ValueError` for a port outside 1..65535 or a `workspace` that is not
    a directory, `OSError` when `host:port` cannot be bound and `sqlite3.Error` when `db`
    cannot be opened.
    """
    if not 1 <= port <= 65535:
        raise ValueError(f"port must be from 1 to 65535, got {port}")
    if provider not in PROVIDERS:
        raise ValueError(f"provider must be one of {', '.join(PROVIDERS)}, got {provider!r}")
    if workspace is not None and not Path(workspace).is_dir():
        raise ValueError(f"workspace {str(workspace)!r} is not an existing directory")
    asyncio.run(
        serve_async(
            host,
            port,
            db,
            provider,
            token,
            workspace=workspace,
            log_level=log_level,
            warming_policy=warming_policy,
        )
    )


def _authority(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
