"""The fault matrix: every provider fault the emulator can inject, through the official
anthropic SDK, on each path that calls the provider, asserting that nothing was lost or
changed.

Paths:

- `generate`: session.generate on a client configured to retry (max_retries=2), which it must
  not: the typed error, exactly one logged request, a byte-identical SQLite dump (SG-INV-1,
  SG-INV-3, SG-FAIL-6).
- `drain`: a durable turn (`engine.run`) with SDK retries off: the typed error, the Step
  marked interrupted keeping what arrived, a contiguous revision, no message duplicated or
  lost, and the next turn works.
- `drain-retrying`: the same with retries on (the SDK client's max_retries=2, which the
  adapter applies by its one retry rule, the SDK's own retries off): where it retries (a
  transient status, a connection that fails before the response, the client's timeout) the
  turn recovers with one more logged request and no duplicate; where the body had begun
  (stream cut, malformed SSE, a 200 whose body is no event stream) nothing is retried and
  the Step is marked interrupted.

The slow response needs a real socket (the in-process ASGI transport enforces no timeout),
so that case runs on a loopback server; everything else runs in-process.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import pytest
from sessiongen import SessionEngine, SessionStore
from sessiongen.emulator import BackgroundServer, EmulatorState, FaultSpec, create_app
from sessiongen.errors import (
    ProviderConnectionError,
    ProviderError,
    ProviderOverloaded,
    ProviderRateLimited,
    ProviderServerError,
    ProviderStreamInterrupted,
    ProviderTimeout,
)
from sessiongen.lab import write_workspace
from sessiongen.model import AssistantMessage, UserMessage
from sessiongen.providers.anthropic.adapter import AnthropicLLMClient
from sessiongen.sample import SAMPLE_AGENT

from ._figures import record

CLIENT_TIMEOUT = 0.25  # seconds, real: only the loopback case waits for it
SLOW_DELAY = 0.75  # the slow response answers after this many real seconds
CUT_AFTER = 5  # message_start, ping, content_block_start and two text deltas


@dataclass(frozen=True)
class Fault:
    """One fault kind: the emulator fault spec, the typed error it must raise, and whether
    the SDK may retry it (the failure came before any response body)."""

    spec: dict[str, Any]
    error: type[ProviderError]
    sdk_retries: bool
    loopback: bool = False
    status: int | None = None  # the provider status the error carries, when there is one
    partial: bool = False  # some text arrived before the fault: the Step keeps it


def _kind(kind: str) -> dict[str, Any]:
    return {"kind": kind}


FAULTS: dict[str, Fault] = {
    # retry-after as the API sends it (whole seconds): the retrying drain really waits 1 s.
    "429-retry-after": Fault(
        {"status": 429, "headers": {"retry-after": "1"}}, ProviderRateLimited, True, status=429
    ),
    "500": Fault({"status": 500}, ProviderServerError, True, status=500),
    "529": Fault({"status": 529}, ProviderOverloaded, True, status=529),
    "504": Fault({"status": 504}, ProviderTimeout, True, status=504),
    "connection-reset": Fault(_kind("reset"), ProviderConnectionError, True),
    "stream-cut": Fault(
        {"status": 200, "cut_after_events": CUT_AFTER},
        ProviderStreamInterrupted,
        False,
        partial=True,
    ),
    "malformed-sse": Fault(
        {**_kind("malformed-sse"), "cut_after_events": CUT_AFTER},
        ProviderStreamInterrupted,
        False,
        partial=True,
    ),
    "slow-vs-timeout": Fault(
        {"status": 200, "delay": SLOW_DELAY}, ProviderTimeout, True, loopback=True
    ),
    "200-invalid-body": Fault(_kind("invalid-body"), ProviderStreamInterrupted, False),
}


@dataclass
class Rig:
    engine: SessionEngine
    state: EmulatorState
    database: Path

    def requests(self) -> list[dict[str, Any]]:
        return self.state.requests()

    def sql_dump(self) -> bytes:
        """Every table, row and schema object of the SQLite file, as SQL text: read over a
        connection of its own, so it does not trust the store's reading code."""
        with sqlite3.connect(self.database) as db:
            return "\n".join(db.iterdump()).encode()


@asynccontextmanager
async def rig(tmp_path: Path, *, max_retries: int, loopback: bool) -> AsyncIterator[Rig]:
    """An engine on a file-backed store and the emulator, through the official SDK."""
    workspace = write_workspace(_fresh(tmp_path / "workspace"))
    state = EmulatorState()
    server = BackgroundServer(state).start() if loopback else None
    try:
        if server is not None:
            http = httpx2.AsyncClient(base_url=server.url)
        else:
            transport = httpx2.ASGITransport(app=create_app(state))
            http = httpx2.AsyncClient(transport=transport, base_url="http://emulator.lab")
        sdk = anthropic.AsyncAnthropic(
            api_key="lab",
            base_url=str(http.base_url),
            http_client=http,
            max_retries=max_retries,
            timeout=httpx2.Timeout(CLIENT_TIMEOUT) if loopback else httpx2.Timeout(30.0),
        )
        store = SessionStore(tmp_path / "store.db")
        try:
            async with sdk, AnthropicLLMClient(sdk) as llm:
                engine = SessionEngine(store, llm, [SAMPLE_AGENT])
                engine.create_session(SAMPLE_AGENT.name, workspace=workspace)
                yield Rig(engine, state, tmp_path / "store.db")
        finally:
            store.close()
    finally:
        if server is not None:
            server.stop()


def _fresh(path: Path) -> Path:
    path.mkdir(parents=True)
    return path


SESSION = "ses_000001"


def _user_texts(engine: SessionEngine) -> list[str]:
    messages = engine.store.read(SESSION).messages
    return ["".join(p.text for p in m.parts) for m in messages if isinstance(m, UserMessage)]


def _assistants(engine: SessionEngine) -> list[AssistantMessage]:
    messages = engine.store.read(SESSION).messages
    return [m for m in messages if isinstance(m, AssistantMessage)]


def _text(message: AssistantMessage) -> str:
    return "".join(getattr(p, "text", "") for p in message.parts if p.type == "text")


def _assert_contiguous(engine: SessionEngine) -> None:
    revisions = [revision for revision, _ in engine.store.events(SESSION)]
    assert revisions == list(range(1, len(revisions) + 1)), revisions
    assert engine.store.read(SESSION).session.revision == revisions[-1]


def _assert_typed(error: BaseException, fault: Fault, logged: dict[str, Any]) -> None:
    assert isinstance(error, fault.error), (type(error), fault.error)
    if fault.status is not None:
        assert error.provider_status == fault.status
        assert error.provider_request_id == logged["id"]


async def _first_turn(engine: SessionEngine) -> None:
    """One settled turn first, so the faulted call carries history."""
    first = await engine.run(SESSION, "first turn: list the files")
    assert first.finish_reason == "end_turn"


@pytest.mark.clause("SG-FAIL-6", "SG-INV-1", "SG-INV-3")
@pytest.mark.parametrize("fault_name", list(FAULTS))
async def test_generate_fault(tmp_path: Path, fault_name: str) -> None:
    """generate on a client that would retry: the typed error, one logged request, a
    byte-identical store, and a working session afterwards."""
    fault = FAULTS[fault_name]
    async with rig(tmp_path, max_retries=2, loopback=fault.loopback) as lab:
        await _first_turn(lab.engine)
        outcome = await _generate_case(lab, fault)
    record("fault_matrix", {"faults": list(FAULTS), "generate": {fault_name: outcome}})


@pytest.mark.parametrize("retries", [0, 2], ids=["drain", "drain-retrying"])
@pytest.mark.parametrize("fault_name", list(FAULTS))
async def test_drain_fault(tmp_path: Path, fault_name: str, retries: int) -> None:
    """A durable turn: recovered by the SDK's retry where it may retry, else the typed error
    and the Step marked interrupted; either way a contiguous revision, every message once,
    and a next turn that works."""
    fault = FAULTS[fault_name]
    async with rig(tmp_path, max_retries=retries, loopback=fault.loopback) as lab:
        await _first_turn(lab.engine)
        outcome = await _drain_case(lab, fault, recovers=retries > 0 and fault.sdk_retries)
    path = "drain-retrying" if retries else "drain"
    record("fault_matrix", {"faults": list(FAULTS), path: {fault_name: outcome}})


async def _generate_case(lab: Rig, fault: Fault) -> dict[str, Any]:
    engine = lab.engine
    before_sql, before_dump = lab.sql_dump(), engine.store.dump()
    logged_before = len(lab.requests())
    lab.state.add_fault(_spec(fault))
    with pytest.raises(ProviderError) as raised:
        await engine.generate(SESSION, "summarise the session in one line")
    logged = lab.requests()[logged_before:]
    assert len(logged) == 1, [r["status"] for r in logged]  # SG-INV-3: one attempt, no retry
    _assert_typed(raised.value, fault, logged[0])
    assert lab.sql_dump() == before_sql  # SG-INV-1: byte-identical
    assert engine.store.dump() == before_dump
    # The session is usable afterwards, and generate still changes nothing.
    result = await engine.generate(SESSION, "summarise the session in one line")
    assert result.finish_reason == "end_turn"
    assert lab.sql_dump() == before_sql
    # The figures, once every check passed: the dump was byte-identical, so nothing changed.
    error = type(raised.value).__name__
    return {"outcome": error, "error": error, "requests": 1, "lost_or_changed_records": 0}


async def _drain_case(lab: Rig, fault: Fault, *, recovers: bool) -> dict[str, Any]:
    engine = lab.engine
    logged_before = len(lab.requests())
    assistants_before = _assistants(engine)
    lab.state.add_fault(_spec(fault))
    if recovers:
        started = time.monotonic()
        result = await engine.run(SESSION, "second turn")
        assert result.finish_reason == "end_turn"
        retry_after = fault.spec.get("headers", {}).get("retry-after")
        if retry_after is not None:  # the SDK waited as told before its retry
            assert time.monotonic() - started >= float(retry_after)
        logged = lab.requests()[logged_before:]
        # the faulted attempt and the SDK's one retry, nothing more
        assert len(logged) == 2, [r["status"] for r in logged]
        new = _assistants(engine)[len(assistants_before) :]
        assert len(new) == 1 and new[0].completed and not new[0].interrupted
        assert _text(new[0]).startswith("Emulated reply to: ")
        outcome: dict[str, Any] = {"outcome": "recovered", "error": None}
    else:
        with pytest.raises(ProviderError) as raised:
            await engine.run(SESSION, "second turn")
        logged = lab.requests()[logged_before:]
        assert len(logged) == 1, [r["status"] for r in logged]
        _assert_typed(raised.value, fault, logged[0])
        new = _assistants(engine)[len(assistants_before) :]
        assert len(new) == 1, new
        step = new[0]
        assert step.interrupted and not step.completed and step.settled
        if fault.partial:
            # what arrived before the fault is kept: a non-empty prefix of the full reply
            assert _text(step) and ("Emulated reply to: second turn").startswith(_text(step))
        outcome = {"outcome": "interrupted", "error": type(raised.value).__name__}
    assert _assistants(engine)[: len(assistants_before)] == assistants_before
    _assert_contiguous(engine)
    assert _user_texts(engine) == ["first turn: list the files", "second turn"]
    assert engine.store.read(SESSION).pending == ()
    # The next turn works and sees the whole history once.
    third = await engine.run(SESSION, "third turn")
    assert third.finish_reason == "end_turn"
    _assert_contiguous(engine)
    assert _user_texts(engine) == ["first turn: list the files", "second turn", "third turn"]
    assistants = _assistants(engine)
    assert len(assistants) == 3 and assistants[-1].completed
    assert len({m.id for m in engine.store.read(SESSION).messages}) == len(
        engine.store.read(SESSION).messages
    )
    sent = lab.requests()[-1]["body"]["messages"]
    user_turns = [m for m in sent if m["role"] == "user" and _has_text(m, "second turn")]
    assert len(user_turns) == 1  # the interrupted turn's prompt reaches the model once
    # The figures, once every check passed: earlier messages equal, every message once.
    return {**outcome, "requests": len(logged), "lost_or_changed_records": 0}


def _has_text(message: dict[str, Any], text: str) -> bool:
    content = message["content"]
    if isinstance(content, str):
        return text in content
    return any(b.get("type") == "text" and text in b.get("text", "") for b in content)


def _spec(fault: Fault) -> FaultSpec:
    return FaultSpec.model_validate(fault.spec)
