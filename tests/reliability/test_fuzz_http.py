"""The HTTP API fuzzed from its OpenAPI document (docs/openapi.json) with schemathesis.

The server is the app `sessiongen serve` runs (the embedded emulator, a SQLite file) under
uvicorn on loopback, on a thread of this process. Schemathesis generates cases for every
operation, in its positive mode (valid by the schema) and its negative mode (invalid: wrong
types, missing or unknown fields, bad paths), each mode once with generated session ids and
once aimed at a live session (a case's `session_id` replaced by the current session, which
a generated DELETE may end; the next case then gets a new one). For every case:

- no 5xx;
- every 4xx is application/problem+json with type, title, status (the answer's), detail
  and instance;
- a rejected call (4xx) changes nothing: the store's dump (every row of every table) is the
  same after it as before.

`EXAMPLES` cases per strategy by default (four strategies); `SESSIONGEN_LONG=1` runs
`LONG_EXAMPLES` each. `SESSIONGEN_RELIABILITY_FIGURES=path.json` adds the counts to that file.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
import uvicorn
from hypothesis import HealthCheck, Phase, given, seed, settings
from schemathesis import GenerationMode
from sessiongen import SessionEngine, SessionStore
from sessiongen.emulator.server import free_port
from sessiongen.lab import write_workspace
from sessiongen.sample import SAMPLE_AGENT
from sessiongen.server import create_app
from sessiongen.server.problems import PROBLEM_MEDIA_TYPE
from sessiongen.server.serving import _llm

from ._figures import record

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = 250
LONG_EXAMPLES = 2_500
SEED = 20261130
LIVE = "live-session"  # replaced by the current live session's id before the call


def examples() -> int:
    return LONG_EXAMPLES if os.environ.get("SESSIONGEN_LONG") == "1" else EXAMPLES


class ThreadServer:
    """The app `serve` builds (embedded emulator, SQLite file), under uvicorn on a thread."""

    def __init__(self, db: Path, workspace: Path) -> None:
        self.db = db
        self.workspace = workspace
        self.port = free_port()
        self.server: uvicorn.Server | None = None
        self.thread = threading.Thread(target=lambda: asyncio.run(self._serve()), daemon=True)

    async def _serve(self) -> None:
        store = SessionStore(self.db)
        try:
            async with _llm("emulator") as (llm, _):
                engine = SessionEngine(store, llm, [SAMPLE_AGENT])
                app = create_app(engine, workspace=self.workspace)
                config = uvicorn.Config(
                    app, host="127.0.0.1", port=self.port, log_level="warning", http="h11",
                    ws="none", lifespan="on", access_log=False,
                )  # fmt: skip
                self.server = uvicorn.Server(config)
                await self.server.serve()
        finally:
            store.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> ThreadServer:
        self.thread.start()
        deadline = time.monotonic() + 60
        while self.server is None or not self.server.started:
            assert self.thread.is_alive() and time.monotonic() < deadline, "no server"
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.should_exit = True
        self.thread.join(timeout=30)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadServer]:
    root = tmp_path_factory.mktemp("fuzz")
    with ThreadServer(root / "fuzz.db", write_workspace(root / "workspace")) as server:
        yield server


@pytest.fixture(scope="module")
def tally() -> Iterator[Counter[str]]:
    counts: Counter[str] = Counter()
    yield counts
    record("fuzz", dict(sorted(counts.items())))


SCHEMA = schemathesis.openapi.from_path(ROOT / "docs" / "openapi.json")


class Checker:
    """Sends cases to the server and checks each answer and the store around it."""

    def __init__(self, served: ThreadServer, tally: Counter[str]) -> None:
        self.http = httpx.Client(base_url=served.url, timeout=60)
        self.store = SessionStore(served.db)  # a second connection: reads what the server wrote
        self.tally = tally
        self.live = self._new_session()

    def _new_session(self) -> str:
        created = self.http.post("/api/session")
        assert created.status_code == 201, created.text
        sid: str = created.json()["id"]
        return sid

    def close(self) -> None:
        self.http.close()
        self.store.close()

    def run(self, case: Any) -> None:
        params = case.path_parameters or {}
        target = "live" if params.get("session_id") == LIVE else "generated"
        if target == "live":
            if not self.store.exists(self.live):
                self.live = self._new_session()
            # A new dict: the strategy shares its fixed path parameters between cases.
            case.path_parameters = {**params, "session_id": self.live}
        before = self.store.dump()
        kwargs = case.as_transport_kwargs(base_url=self.http.base_url.__str__().rstrip("/"))
        # HTTP/1.1 strips a header value's surrounding whitespace (RFC 9110 5.5); httpx
        # refuses to send it unstripped, so it goes as the server would read it.
        headers = {k: v.strip() for k, v in (kwargs.get("headers") or {}).items()}
        try:
            response = self.http.request(
                kwargs["method"],
                kwargs["url"],
                headers=headers,
                params=kwargs.get("params"),
                content=_content(kwargs),
            )
        except httpx.LocalProtocolError:
            self.tally["unsendable"] += 1  # no HTTP/1.1 client can send it (e.g. a CR in a name)
            return
        status = response.status_code
        label = f"{case.method.upper()} {case.path}"
        self.tally["cases"] += 1
        self.tally[f"status_{status // 100}xx"] += 1
        self.tally[f"status_{status}"] += 1
        self.tally[f"{target}_{case.method.upper()} {case.path}_{status}"] += 1
        assert status < 500, f"{label}: {status} {response.text}"
        if status >= 400:
            assert response.headers["content-type"] == PROBLEM_MEDIA_TYPE, (label, response.text)
            body = response.json()
            assert {"type", "title", "status", "detail", "instance"} <= set(body), body
            assert body["status"] == status, body
            assert self.store.dump() == before, f"{label}: a rejected call ({status}) wrote"
            self.tally["rejected_unchanged"] += 1


def _content(kwargs: dict[str, Any]) -> bytes | None:
    """The body as bytes, however the transport serialized it (json, data or content)."""
    import json

    if "json" in kwargs and kwargs["json"] is not None:
        return json.dumps(kwargs["json"]).encode()
    for key in ("content", "data"):
        value = kwargs.get(key)
        if isinstance(value, bytes):
            return value
        if isinstance(value, str):
            return value.encode()
    return None


@pytest.mark.parametrize("live", [False, True], ids=["generated-ids", "live-session"])
@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_fuzzed_calls_never_5xx_and_rejections_change_nothing(
    served: ThreadServer, tally: Counter[str], mode: GenerationMode, live: bool
) -> None:
    checker = Checker(served, tally)
    strategy = (
        SCHEMA.as_strategy(mode, path_parameters={"session_id": LIVE})
        if live
        else SCHEMA.as_strategy(mode)
    )

    @seed(SEED)
    @settings(
        max_examples=examples(),
        deadline=None,
        database=None,
        phases=[Phase.generate, Phase.shrink],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=strategy)
    def fuzz(case: Any) -> None:
        checker.run(case)

    try:
        fuzz()
    finally:
        checker.close()
