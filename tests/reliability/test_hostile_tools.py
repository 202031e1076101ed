"""A prompt-injected model against a real `sessiongen serve` (issue 28, attacks 1 and 2).

The server is the command as a user runs it (`sessiongen serve --provider anthropic
--workspace WS`), its provider the official SDK to an emulator on loopback in this process,
whose script queue plays the hostile model. The workspace holds what an attacker plants: a
named pipe, a link to /dev/zero, a link to a directory outside, a 256 MiB (sparse) file and
a line that makes a backtracking regex engine run for ever. Before the fixes a durable turn
hung on the pipe (and froze every route), policy D copied the outside directory and served
its secret, and /dev/zero was copied until the disk filled.
"""

from __future__ import annotations

import contextlib
import os
import resource
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sessiongen.emulator import BackgroundServer, ScriptedResponse, ScriptedToolCall

from ._figures import record
from ._servers import Worker, serve_command, wait_healthy

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/io").exists() or not hasattr(os, "mkfifo"),
    reason="needs Linux: named pipes, /dev/zero and /proc/PID/io",
)

SECRET = "SECRET-OUTSIDE-TOKEN"
CALLS = [
    ScriptedToolCall(id="pipe", name="read_file", input={"path": "pipe"}),
    ScriptedToolCall(id="zero", name="read_file", input={"path": "zero"}),
    ScriptedToolCall(id="outside", name="read_file", input={"path": "linkdir/secret.txt"}),
    ScriptedToolCall(id="regex", name="grep", input={"pattern": "(a|aa)+$", "path": "aaa.txt"}),
    ScriptedToolCall(id="huge", name="read_file", input={"path": "huge.txt"}),
]
EXPECTED = {
    "pipe": "NotARegularFile",
    "zero": "PathOutsideWorkspace",
    "outside": "PathOutsideWorkspace",
}


def _hostile_workspace(root: Path, outside: Path) -> Path:
    workspace = root / "workspace"
    (workspace / "src").mkdir(parents=True)
    (workspace / "src" / "app.py").write_text("def add(a, b):\n    return a + b\n")
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET + "\n")
    (workspace / "linkdir").symlink_to(outside, target_is_directory=True)
    (workspace / "zero").symlink_to("/dev/zero")
    os.mkfifo(workspace / "pipe")
    (workspace / "aaa.txt").write_text("a" * 60 + "b\n")
    with (workspace / "huge.txt").open("wb") as file:
        file.truncate(256 * 1024 * 1024)
    return workspace


FILE_SIZE_LIMIT = 64 * 1024 * 1024
"""The server may write no file larger: a regression to a copy that follows the /dev/zero
link then fails with EFBIG instead of filling the disk."""


@contextlib.contextmanager
def _file_size_limit(limit: int) -> Iterator[None]:
    """RLIMIT_FSIZE lowered for processes started inside (this one's restored after)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


def _bytes_read(pid: int) -> int:
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError(f"no rchar for {pid}")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[Worker, BackgroundServer, Path]]:
    workspace = _hostile_workspace(tmp_path, tmp_path / "outside")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    with BackgroundServer() as emulator:
        env = {
            **os.environ,
            "ANTHROPIC_API_KEY": "hostile-test-key",
            "ANTHROPIC_BASE_URL": emulator.url,
            "SESSIONGEN_TOKEN": "",
            "TMPDIR": str(scratch),
        }
        log = tmp_path / "server.log"
        with _file_size_limit(FILE_SIZE_LIMIT):  # inherited by the server process only
            worker = Worker(serve_command(tmp_path / "s.db", workspace), env, log)
        try:
            wait_healthy(worker.url, log, alive=lambda: worker.proc.poll() is None)
            yield worker, emulator, scratch
        finally:
            worker.stop()


def _check(results: dict[str, tuple[bool, str]]) -> None:
    for call_id, error in EXPECTED.items():
        is_error, text = results[call_id]
        assert is_error and text.startswith(error), (call_id, text)
    assert results["regex"] == (False, "no matches")
    assert results["huge"] == (False, "\0" * 20_000)
    assert all(SECRET not in text for _, text in results.values())


@pytest.mark.clause("SG-TOOLS-4")
def test_a_hostile_model_in_a_durable_turn_and_in_policy_d(
    server: tuple[Worker, BackgroundServer, Path],
) -> None:
    worker, emulator, scratch = server
    emulator.state.queue_responses(
        [
            ScriptedResponse(text="Looking.", tool_calls=CALLS),
            ScriptedResponse(text="Done."),
            ScriptedResponse(text="", tool_calls=CALLS),
        ]
    )
    with httpx.Client(base_url=worker.url, timeout=120) as client:
        session_id = client.post("/api/session").json()["id"]
        before = _bytes_read(worker.proc.pid)
        started = time.monotonic()
        turn = client.post(f"/api/session/{session_id}/prompt", json={"prompt": "look"})
        turn_seconds = time.monotonic() - started
        assert turn.status_code == 200, turn.text
        read_by_turn = _bytes_read(worker.proc.pid) - before
        messages = client.get(f"/api/session/{session_id}/messages").json()["messages"]
        durable = {
            p["id"]: (p["state"] == "error", p["result"])
            for m in messages
            if m["kind"] == "assistant"
            for p in m["parts"]
            if p["type"] == "tool_call"
        }
        _check(durable)

        before = _bytes_read(worker.proc.pid)
        started = time.monotonic()
        generated = client.post(
            f"/api/session/{session_id}/generate",
            json={"prompt": "again", "tools_policy": "execute_once"},
        )
        generate_seconds = time.monotonic() - started
        assert generated.status_code == 200, generated.text
        read_by_generate = _bytes_read(worker.proc.pid) - before
        isolated = {
            r["call_id"]: (r["is_error"], r["text"]) for r in generated.json()["tool_results"]
        }
        assert isolated == durable
        assert client.get("/api/health").status_code == 200
    assert list(scratch.iterdir()) == []  # no copy of the workspace was ever left behind
    limit = 4 * 1024 * 1024  # the 256 MiB file is read up to 80 KB, never whole
    assert read_by_turn < limit and read_by_generate < limit, (read_by_turn, read_by_generate)
    record(
        "hostile",
        {
            "tools": {
                "hostile calls": len(CALLS),
                "answered as the durable turn (policy D)": len(isolated),
                "secret bytes served": 0,
                "MiB read for a 256 MiB file (turn)": round(read_by_turn / 2**20, 2),
                "turn seconds": round(turn_seconds, 1),
                "generate seconds": round(generate_seconds, 1),
            }
        },
    )
