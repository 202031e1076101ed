"""Internal: deliberately broken servers, so the conformance kit can be shown to fail.

Each variant is our real server (`sessiongen.server.create_app` over a `SessionEngine` on
SQLite and the Anthropic adapter) with one small violation of one law, as a real bug
would put it there: an engine subclass that changes what `generate` does, or a request
hook that changes what it sends. `VARIANTS` names each, the law it breaks and every law the
kit fails on it (a generate that stores its exchange also moves the revision: that second
failure is a consequence, not a second bug). Not a public API: the kit's tests and
docs/conformance.md use it.

    python -m sessiongen.agents.conform_broken retries-on-5xx --emulator URL --port 8081

serves one variant in the foreground, for running `sessiongen agents conform` against it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import uvicorn
from fastapi import FastAPI

from ..emulator.server import free_port
from ..errors import ProviderOverloaded, ProviderServerError
from ..llm.client import LLMClient
from ..llm.types import LLMRequest
from ..model import (
    Event,
    InputAdmitted,
    InputPromoted,
    InstructionsCommitted,
    StepSettled,
    StepStarted,
    TextPart,
)
from ..providers.anthropic.adapter import AnthropicLLMClient
from ..sample import SAMPLE_AGENT
from ..server import create_app
from ..session.engine import SessionEngine
from ..session.generate import DEFAULT_TOOLS_POLICY, GenerateResult, ToolsPolicy
from ..session.request import RequestHook, RequestInfo
from ..session.store import SessionStore
from .conform_laws import LAW_NAMES

__all__ = [
    "VARIANTS",
    "AppFactory",
    "BrokenServer",
    "Variant",
    "build_engine",
    "main",
    "serve_variant",
]

AppFactory = Callable[[SessionEngine], FastAPI]
STARTUP_SECONDS = 30.0
API_KEY = "sk-ant-conform-not-a-secret"


class _PersistsGenerate(SessionEngine):
    """Stores the generate's prompt and reply in the history, as if it were a turn."""

    async def generate(self, session_id: str, prompt: str, **options: Any) -> GenerateResult:
        result = await super().generate(session_id, prompt, **options)

        def events(revision: int) -> list[Event]:
            n = f"gen{revision + 1:06d}"
            return [
                InputAdmitted(input_id=f"in_{n}", text=prompt),
                InputPromoted(input_id=f"in_{n}", message_id=f"msg_{n}u"),
                StepStarted(message_id=f"msg_{n}a", step=1, model=result.model),
                StepSettled(
                    message_id=f"msg_{n}a",
                    parts=(TextPart(text=result.text),),
                    finish_reason=result.finish_reason,
                    usage=result.usage,
                ),
            ]

        self.store.append(session_id, events)
        return result


class _BumpsRevision(SessionEngine):
    """Commits the instruction state after a generate, as a Step does (SG-INV-2 forbids
    it): nothing visible changes but the revision."""

    async def generate(self, session_id: str, prompt: str, **options: Any) -> GenerateResult:
        result = await super().generate(session_id, prompt, **options)
        state = self.store.read(session_id).instructions
        values = dict(state.current) if state is not None else {}
        self.store.append(session_id, [InstructionsCommitted(values=values)])
        return result


class _RetriesOn5xx(SessionEngine):
    """Retries a generate the provider failed with a 5xx, up to twice."""

    async def generate(self, session_id: str, prompt: str, **options: Any) -> GenerateResult:
        for attempt in range(3):
            try:
                return await super().generate(session_id, prompt, **options)
            except (ProviderServerError, ProviderOverloaded):
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")


class _DropsTools(SessionEngine):
    """Asked for tool choice none (C), sends no tools at all (B): the old Converse
    lowering's bug, which costs the whole cached prefix."""

    async def generate(
        self,
        session_id: str,
        prompt: str,
        *,
        tools_policy: ToolsPolicy | str = DEFAULT_TOOLS_POLICY,
        **options: Any,
    ) -> GenerateResult:
        if ToolsPolicy.parse(tools_policy) is ToolsPolicy.CHOICE_NONE:
            tools_policy = ToolsPolicy.NO_TOOLS
        return await super().generate(session_id, prompt, tools_policy=tools_policy, **options)


class _EmptyIsError(SessionEngine):
    """Treats a reply with no text (and no tool calls) as a provider failure."""

    async def generate(self, session_id: str, prompt: str, **options: Any) -> GenerateResult:
        result = await super().generate(session_id, prompt, **options)
        if not result.text and not result.tool_calls:
            raise ProviderServerError("the provider returned no output")
        return result


def _system_for_generate(request: LLMRequest, info: RequestInfo) -> LLMRequest:
    """A generate-only line at the end of the system prompt (a plugin that edits only one
    operation's requests; opencode's keep-alive plugin reports this one)."""
    if info.operation != "generate" or not request.system:
        return request
    last = request.system[-1]
    system = (*request.system[:-1], last.model_copy(update={"text": last.text + "\nBe brief."}))
    return request.model_copy(update={"system": system})


def _header_for_generate(request: LLMRequest, info: RequestInfo) -> LLMRequest:
    """A header only generate sends (a gateway that routes by it keys its cache by it)."""
    if info.operation != "generate":
        return request
    return request.model_copy(update={"headers": {**request.headers, "x-request-kind": "generate"}})


@dataclass(frozen=True)
class Variant:
    """One deliberately broken server: what it does wrong, the law it breaks and every law
    the kit fails on it."""

    name: str
    breaks: str
    fails: frozenset[str]
    what: str
    engine: type[SessionEngine] = SessionEngine
    hook: RequestHook | None = None

    def __post_init__(self) -> None:
        unknown = ({self.breaks} | self.fails) - set(LAW_NAMES)
        if unknown or self.breaks not in self.fails:
            raise ValueError(f"variant {self.name}: laws {sorted(unknown)} / {self.breaks}")


_VARIANTS = (
    Variant(
        "persists-generate",
        "no-mutation",
        frozenset({"no-mutation", "revision-unchanged"}),
        "stores the generate's prompt and reply in the history as a turn (so the revision "
        "moves too)",
        engine=_PersistsGenerate,
    ),
    Variant(
        "bumps-revision",
        "revision-unchanged",
        frozenset({"revision-unchanged"}),
        "commits the instruction state after each generate: no visible change but the revision",
        engine=_BumpsRevision,
    ),
    Variant(
        "retries-on-5xx",
        "one-attempt",
        frozenset({"one-attempt"}),
        "retries a generate the provider failed with a 5xx, up to twice",
        engine=_RetriesOn5xx,
    ),
    Variant(
        "drops-tools",
        "tools-per-policy",
        frozenset({"tools-per-policy"}),
        "asked for tools_policy choice_none, sends no tool definitions",
        engine=_DropsTools,
    ),
    Variant(
        "different-prefix",
        "same-prefix",
        frozenset({"same-prefix"}),
        "adds a line to the system prompt of generate requests only",
        hook=_system_for_generate,
    ),
    Variant(
        "different-headers",
        "same-prefix",
        frozenset({"same-prefix"}),
        "sends a header on generate requests that the Step does not send",
        hook=_header_for_generate,
    ),
    Variant(
        "empty-is-error",
        "empty-is-success",
        frozenset({"empty-is-success"}),
        "answers a reply with no text as a provider error (502)",
        engine=_EmptyIsError,
    ),
)
VARIANTS: dict[str, Variant] = {v.name: v for v in _VARIANTS}


def build_engine(variant: Variant | None, store: SessionStore, llm: LLMClient) -> SessionEngine:
    """The sample agent's engine, broken as `variant` says (None: not broken)."""
    if variant is None:
        return SessionEngine(store, llm, [SAMPLE_AGENT])
    hooks = [variant.hook] if variant.hook is not None else []
    return variant.engine(store, llm, [SAMPLE_AGENT], hooks=hooks)


async def serve_variant(
    variant: Variant | None,
    emulator_url: str,
    *,
    host: str = "127.0.0.1",
    port: int,
    workspace: Path | None = None,
    log_level: str = "warning",
    started: list[uvicorn.Server] | None = None,
    make_app: AppFactory | None = None,
) -> None:
    """Serve the variant on `host:port` until stopped, its provider the emulator at
    `emulator_url`, on an in-memory store. `started` receives the uvicorn server;
    `make_app` builds the HTTP app over the engine (our API, `create_app`, by default)."""
    store = SessionStore(":memory:")
    try:
        async with AnthropicLLMClient(base_url=emulator_url, api_key=API_KEY) as llm:
            engine = build_engine(variant, store, llm)
            if make_app is None:
                app = create_app(engine, workspace=workspace)
            else:
                app = make_app(engine)
            config = uvicorn.Config(
                app, host=host, port=port, log_level=log_level, http="h11", ws="none",
                lifespan="on", access_log=False,
            )  # fmt: skip
            server = uvicorn.Server(config)
            if started is not None:
                started.append(server)
            await server.serve()
    finally:
        store.close()


class BrokenServer:
    """A variant (or, with None, the unbroken server) on a free loopback port, served from
    a daemon thread; a context manager. `url` is its base URL. `make_app`: another HTTP API
    over the same engine (a test's facade of another server's routes)."""

    def __init__(
        self,
        variant: str | None,
        emulator_url: str,
        *,
        workspace: Path | None = None,
        make_app: AppFactory | None = None,
    ) -> None:
        self.variant = None if variant is None else VARIANTS[variant]
        self.emulator_url = emulator_url
        self.workspace = workspace
        self.make_app = make_app
        self.port = free_port()
        self._servers: list[uvicorn.Server] = []
        self._thread = threading.Thread(target=self._run, name="conform-broken", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _run(self) -> None:
        asyncio.run(
            serve_variant(
                self.variant,
                self.emulator_url,
                port=self.port,
                workspace=self.workspace,
                started=self._servers,
                make_app=self.make_app,
            )
        )

    def __enter__(self) -> BrokenServer:
        self._thread.start()
        deadline = time.monotonic() + STARTUP_SECONDS
        while not (self._servers and self._servers[0].started):
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the broken server did not start on {self.url}")
            time.sleep(0.01)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._servers:
            self._servers[0].should_exit = True
        self._thread.join(timeout=10)


def main(argv: Sequence[str] | None = None) -> int:
    """Serve one variant in the foreground until Ctrl-C."""
    parser = argparse.ArgumentParser(
        prog="python -m sessiongen.agents.conform_broken",
        description="Serve a deliberately broken sessiongen server (internal, for "
        "`sessiongen agents conform`).",
    )
    parser.add_argument("variant", choices=sorted(VARIANTS))
    parser.add_argument("--emulator", required=True, metavar="URL")
    parser.add_argument("--port", type=int, default=8081)
    args = parser.parse_args(argv)
    variant = VARIANTS[args.variant]
    print(f"{variant.name}: {variant.what}; breaks {variant.breaks}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve_variant(variant, args.emulator, port=args.port, log_level="info"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
