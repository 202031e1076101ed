"""A hostile model's tool calls (issue 28): special files, catastrophic patterns, huge files
and stuck calls are typed tool errors or bounded answers, run off the event loop; policy D
runs under exactly the durable tools' confinement, without copying the workspace."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from sessiongen import (
    InvalidToolArguments,
    NotARegularFile,
    PathOutsideWorkspace,
    ToolExecutionFailed,
    ToolsPolicy,
    ToolTimedOut,
)
from sessiongen.llm.types import ToolCall
from sessiongen.model import Agent, AssistantMessage, ToolCallPart
from sessiongen.server import create_app
from sessiongen.testing import ScriptedReply
from sessiongen.tools import (
    BUILTIN_TOOLS,
    MAX_OUTPUT_CHARS,
    Tool,
    ToolLimits,
    ToolRegistry,
    Workspace,
    run_tool_call,
)

from .test_tools import HOSTILE_CALLS, _hostile

EVERY_TOOL = tuple(BUILTIN_TOOLS)
CATASTROPHIC = "(a|aa)+$"
"""Python's backtracking `re` takes about fib(n) steps on n "a"s then a "b": for 60, ~1e12."""


def _bytes_read() -> int:
    """Bytes this process has read through read(2) and friends (Linux's rchar)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


needs_proc_io = pytest.mark.skipif(
    not Path("/proc/self/io").exists(), reason="reads are counted with Linux's /proc/self/io"
)


def _call(name: str, **arguments: Any) -> ToolCall:
    return ToolCall(id="t1", name=name, input=arguments)


async def _run(
    workspace: Path | Workspace, name: str, limits: ToolLimits | None = None, **args: Any
) -> tuple[str, bool]:
    registry = ToolRegistry(limits=limits)
    view = workspace if isinstance(workspace, Workspace) else Workspace(workspace)
    outcome = await run_tool_call(registry, _call(name, **args), EVERY_TOOL, view)
    return outcome.text, outcome.is_error


@pytest.mark.clause("SG-TOOLS-4")
async def test_a_named_pipe_is_refused_before_it_can_block(workspace: Path) -> None:
    """read_file on a FIFO with no writer would wait for ever; it is NotARegularFile at once,
    and grep and list_files pass it by. write_file onto it is refused too."""
    os.mkfifo(workspace / "pipe")
    text, is_error = await _run(workspace, "read_file", ToolLimits(seconds=5), path="pipe")
    assert is_error and text.startswith("NotARegularFile"), text
    text, is_error = await _run(workspace, "write_file", path="pipe", content="x")
    assert is_error and text.startswith("NotARegularFile"), text
    assert await _run(workspace, "grep", pattern="x", path="pipe") == ("no matches", False)
    listed, _ = await _run(workspace, "list_files")
    assert "pipe" not in listed.splitlines()


@pytest.mark.clause("SG-TOOLS-4")
def test_a_catastrophic_pattern_answers_at_once(workspace: Path) -> None:
    """RE2 matches in time linear in the line: the pattern that stalls Python's `re` for ever
    (holding the GIL, so no thread or deadline could cut it) answers 'no matches'. Run in a
    child process, so a regression fails here in seconds instead of hanging the suite."""
    (workspace / "aaa.txt").write_text("a" * 60 + "b\n")
    script = (
        "import sys; from sessiongen.tools import BUILTIN_TOOLS as T; "
        "print(T['grep'].execute(sys.argv[1], {'pattern': sys.argv[2]}))"
    )
    answers = [
        subprocess.run(
            [sys.executable, "-c", script, str(workspace), pattern],
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout.strip()
        for pattern in (CATASTROPHIC, "a+b$")
    ]
    assert answers == ["no matches", "aaa.txt:1: " + "a" * 60 + "b"]


@pytest.mark.clause("SG-TOOLS-4")
async def test_a_bad_pattern_is_a_typed_error_and_logs_nothing(
    workspace: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    text, is_error = await _run(workspace, "grep", pattern="(a)\\1")
    assert is_error and text.startswith("InvalidToolArguments: grep: bad pattern"), text
    assert capfd.readouterr().err == ""
    with pytest.raises(InvalidToolArguments):
        BUILTIN_TOOLS["grep"].execute(workspace, {"pattern": "("})


@needs_proc_io
@pytest.mark.clause("SG-TOOLS-4")
def test_read_file_reads_what_it_answers_not_the_whole_file(workspace: Path) -> None:
    """A 256 MiB file: read_file answers its first MAX_OUTPUT_CHARS characters and reads at
    most four bytes a character (not 256 MiB into memory)."""
    with (workspace / "huge.txt").open("wb") as file:
        file.truncate(256 * 1024 * 1024)  # sparse: costs no disk
    before = _bytes_read()
    text = BUILTIN_TOOLS["read_file"].execute(workspace, {"path": "huge.txt"})
    read = _bytes_read() - before
    assert text == "\0" * MAX_OUTPUT_CHARS
    assert read <= 4 * MAX_OUTPUT_CHARS + 64 * 1024, read


@needs_proc_io
@pytest.mark.clause("SG-TOOLS-4")
def test_grep_stops_at_its_read_budget(workspace: Path) -> None:
    """grep over 8 MiB with a 1 MiB budget: it reads about 1 MiB and says it stopped."""
    line = b"x" * 1023 + b"\n"
    (workspace / "big.txt").write_bytes(line * 8192)
    (workspace / "zz.txt").write_text("needle\n")  # after big.txt: never reached
    budget = 1024 * 1024
    before = _bytes_read()
    text = BUILTIN_TOOLS["grep"].execute(
        workspace, {"pattern": "needle"}, ToolLimits(read_bytes=budget)
    )
    read = _bytes_read() - before
    assert text == f"[grep stopped after reading {budget:,} bytes]"
    assert read <= budget + 256 * 1024, read


@pytest.mark.clause("SG-TOOLS-4")
def test_a_line_longer_than_a_chunk_keeps_its_number(workspace: Path) -> None:
    (workspace / "long.txt").write_text("x" * 200_000 + "needle\nsecond\n")
    found = BUILTIN_TOOLS["grep"].execute(workspace, {"pattern": "needle|second"})
    assert [hit.split(":")[:2] for hit in found.splitlines()] == [
        ["long.txt", "1"],
        ["long.txt", "2"],
    ]


@pytest.mark.clause("SG-TOOLS-4")
def test_a_slow_walk_is_cut_at_the_deadline(workspace: Path) -> None:
    """The deadline is checked while the call works, not only around it: a grep over
    ~200k lines under a 10 ms limit is ToolTimedOut, not a full scan."""
    (workspace / "many.txt").write_text("line\n" * 200_000)
    with pytest.raises(ToolTimedOut):
        BUILTIN_TOOLS["grep"].execute(workspace, {"pattern": "zzz"}, ToolLimits(seconds=0.01))


def _blocking_tool(started: threading.Event, release: threading.Event) -> Tool[Any]:
    def run(scope: Any, args: Any) -> str:
        started.set()
        release.wait(timeout=10)
        return "released"

    return Tool("list_files", "List files.", BUILTIN_TOOLS["list_files"].args, run)


@pytest.mark.clause("SG-TOOLS-4")
async def test_a_stuck_call_is_cut_at_its_limit_and_the_turn_goes_on(
    make_engine: Any, agent: Agent, workspace: Path
) -> None:
    """A call stuck where no deadline check can reach it (one blocking system call) is
    abandoned at the limit (and a grace second): its result is ToolTimedOut, the turn
    settles, and the thread left behind cannot keep the process alive (daemon)."""
    started, release = threading.Event(), threading.Event()
    tools = ToolRegistry(
        [_blocking_tool(started, release), BUILTIN_TOOLS["read_file"], BUILTIN_TOOLS["grep"]],
        limits=ToolLimits(seconds=0.2),
    )
    engine, scripted, _ = make_engine(tools=tools)
    scripted.queue([ScriptedReply.calling(("t1", "list_files", {})), ScriptedReply(text="done")])
    session = engine.create_session("build", workspace=workspace)
    try:
        await engine.run(session.id, "look")
        stuck = [t for t in threading.enumerate() if t.name == "tool-list_files"]
        assert stuck and all(t.daemon for t in stuck)
    finally:
        release.set()
    step = next(
        m for m in engine.store.read(session.id).messages if isinstance(m, AssistantMessage)
    )
    (part,) = [p for p in step.parts if isinstance(p, ToolCallPart)]
    assert part.state == "error" and (part.result or "").startswith("ToolTimedOut"), part


@pytest.mark.clause("SG-TOOLS-4")
async def test_the_server_answers_while_a_tool_runs(
    make_engine: Any, agent: Agent, workspace: Path
) -> None:
    """A tool call runs off the event loop: while one is running inside a prompt, the
    server's health route answers; with the tool on the loop, nothing would until it ends."""
    started, release = threading.Event(), threading.Event()
    tools = ToolRegistry(
        [_blocking_tool(started, release), BUILTIN_TOOLS["read_file"], BUILTIN_TOOLS["grep"]]
    )
    engine, scripted, _ = make_engine(tools=tools)
    scripted.queue([ScriptedReply.calling(("t1", "list_files", {})), ScriptedReply(text="done")])
    app = create_app(engine, workspace=workspace)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        session_id = (await client.post("/api/session")).json()["id"]
        prompt = asyncio.create_task(
            client.post(f"/api/session/{session_id}/prompt", json={"prompt": "look"})
        )
        deadline = time.monotonic() + 30
        while not started.is_set():
            assert time.monotonic() < deadline and not prompt.done(), "the tool never started"
            await asyncio.sleep(0.01)
        health = await client.get("/api/health")
        still_running = not release.is_set() and not prompt.done()
        release.set()
        answered = await prompt
    assert health.status_code == 200 and still_running
    assert answered.status_code == 200, answered.text


# Policy D: the same confinement as a durable turn, without a copy.


async def _step_results(engine: Any, session_id: str) -> dict[str, tuple[bool, str]]:
    step = next(
        m
        for m in reversed(engine.store.read(session_id).messages)
        if isinstance(m, AssistantMessage) and any(isinstance(p, ToolCallPart) for p in m.parts)
    )
    return {
        p.id: (p.state == "error", p.result or "")
        for p in step.parts
        if isinstance(p, ToolCallPart)
    }


@pytest.mark.clause("SG-TOOLS-4")
async def test_policy_d_answers_every_hostile_call_as_a_durable_turn_does(
    make_engine: Any, agent: Agent, workspace: Path, tmp_path: Path
) -> None:
    """The hostile workspace of test_tools (links out of it, a link looping back, `..` in
    paths) plus a named pipe and a directory link out: each call that generate's policy D
    runs answers exactly what the same call in a durable turn answers, and nothing outside
    the workspace is read. (A link to /dev/zero is tried only through the real server, under
    a file-size limit: a regression to a copy that follows links would fill the disk.)"""
    outside = tmp_path / "outside"
    _hostile(workspace, outside)
    (workspace / "linkdir").symlink_to(outside, target_is_directory=True)
    os.mkfifo(workspace / "pipe")
    calls: list[tuple[str, str, dict[str, object]]] = [
        *HOSTILE_CALLS,
        ("t12", "read_file", {"path": "linkdir/secret.txt"}),
        ("t14", "read_file", {"path": "pipe"}),
        ("t15", "grep", {"pattern": "SECRET", "path": "linkdir"}),
    ]
    every_tool = agent.model_copy(update={"tools": EVERY_TOOL})
    engine, scripted, _ = make_engine(agents=[every_tool])
    session = engine.create_session("build", workspace=workspace)
    scripted.queue([ScriptedReply.calling(*calls), ScriptedReply(text="done")])
    await engine.run(session.id, "look around")
    durable = await _step_results(engine, session.id)
    scripted.queue([ScriptedReply.calling(*calls)])
    result = await engine.generate(session.id, "again", tools_policy=ToolsPolicy.EXECUTE_ONCE)
    isolated = {r.call_id: (r.is_error, r.text) for r in result.tool_results}
    assert isolated == durable
    assert all("SECRET-OUTSIDE" not in text for _, text in isolated.values())
    assert isolated["t12"][1].startswith("PathOutsideWorkspace")
    assert isolated["t14"][1].startswith("NotARegularFile")


@pytest.mark.clause("SG-TOOLS-4")
async def test_policy_d_copies_nothing_and_keeps_its_writes_in_memory(
    make_engine: Any, agent: Agent, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No copy of the workspace: while the calls run, the temporary directory is empty; the
    workspace is byte-identical afterwards, and the generate's later calls see its own
    writes."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    seen: list[list[str]] = []
    lister = BUILTIN_TOOLS["list_files"]

    def watching(scope: Any, args: Any) -> str:
        seen.append(os.listdir(scratch))
        return lister.run(scope, args)

    tools = ToolRegistry(
        [
            *(t for t in BUILTIN_TOOLS.values() if t is not lister),
            Tool("list_files", lister.description, lister.args, watching),
        ]
    )
    writer = agent.model_copy(update={"tools": EVERY_TOOL})
    engine, scripted, _ = make_engine(agents=[writer], tools=tools)
    session = engine.create_session("build", workspace=workspace)
    before = {p: p.read_bytes() for p in workspace.rglob("*") if p.is_file()}
    scripted.queue(
        [
            ScriptedReply.calling(
                ("w1", "write_file", {"path": "src/app.py", "content": "gone\n"}),
                ("w2", "write_file", {"path": "new/NEW.md", "content": "new\n"}),
                ("r1", "read_file", {"path": "src/app.py"}),
                ("l1", "list_files", {}),
                ("g1", "grep", {"pattern": "new|gone"}),
            )
        ]
    )
    result = await engine.generate(session.id, "write", tools_policy=ToolsPolicy.EXECUTE_ONCE)
    texts = {r.call_id: r.text for r in result.tool_results}
    assert not any(r.is_error for r in result.tool_results), result.tool_results
    assert texts["r1"] == "gone\n"
    assert texts["l1"].splitlines() == ["AGENTS.md", "new/NEW.md", "src/app.py", "src/util.py"]
    assert texts["g1"].splitlines() == ["new/NEW.md:1: new", "src/app.py:1: gone"]
    assert {p: p.read_bytes() for p in workspace.rglob("*") if p.is_file()} == before
    assert seen == [[]]


@pytest.mark.clause("SG-TOOLS-4")
def test_the_isolated_view_refuses_what_the_durable_one_refuses(
    workspace: Path, tmp_path: Path
) -> None:
    (tmp_path / "secret.txt").write_text("secret")
    (workspace / "out").symlink_to(tmp_path, target_is_directory=True)
    isolated = Workspace.isolated(workspace)
    for view in (Workspace(workspace), isolated):
        with pytest.raises(PathOutsideWorkspace):
            BUILTIN_TOOLS["write_file"].execute(view, {"path": "out/secret.txt", "content": "x"})
        with pytest.raises(NotARegularFile):
            BUILTIN_TOOLS["write_file"].execute(view, {"path": "src", "content": "x"})
    assert (tmp_path / "secret.txt").read_text() == "secret"


@pytest.mark.clause("SG-TOOLS-4")
def test_a_write_that_fails_halfway_leaves_the_old_file(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """write_file replaces a file whole: a disk that fills during the write (here, a write
    that raises ENOSPC after half the bytes) leaves the old text and no scratch file."""
    target = workspace / "src" / "app.py"
    before = target.read_bytes()
    before_mode = target.stat().st_mode
    real_write = os.write

    def fill_halfway(fd: int, data: Any) -> int:
        real_write(fd, bytes(data)[: len(data) // 2])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", fill_halfway)
    with pytest.raises(ToolExecutionFailed, match="No space left"):
        BUILTIN_TOOLS["write_file"].execute(
            workspace, {"path": "src/app.py", "content": "x = 1\n" * 10_000}
        )
    monkeypatch.undo()
    assert target.read_bytes() == before and target.stat().st_mode == before_mode
    assert sorted(p.name for p in target.parent.iterdir()) == ["app.py", "util.py"]
    BUILTIN_TOOLS["write_file"].execute(workspace, {"path": "src/app.py", "content": "new\n"})
    assert target.read_text() == "new\n" and target.stat().st_mode == before_mode
