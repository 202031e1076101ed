"""Real processes and sockets for the concurrency and crash tests.

`ToolEmulator`: the emulator on a loopback socket (uvicorn on a daemon thread), whose replies
are decided per request body, so concurrent generates cannot take a Step's scripted reply:
a request whose latest user text starts with `tools:` (and that may call tools) calls one of
the sample agent's tools; any other request gets the emulator's default echo. Requests whose
latest user text starts with `gen:` (the tests' generates) wait `generate_delay` seconds
before they are answered, and are counted while in flight (`max_in_flight`).

`Worker`: a session server in a child process on a free loopback port, killed or stopped by
its own pid. `python -m tests.reliability._servers DB PORT EMULATOR_URL WORKSPACE STEPS` is a
worker with an agent of STEPS steps (the sample agent otherwise), through `serve_async`.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from sessiongen.emulator import EmulatorState, ScriptedResponse, ScriptedToolCall, create_app
from sessiongen.emulator.server import free_port
from starlette.types import Message, Receive, Scope, Send

ROOT = Path(__file__).resolve().parents[2]
STARTUP_SECONDS = 180.0
TOOL_MARK = "tools:"
GENERATE_MARK = "gen:"

_TOOLS = (
    ScriptedToolCall(name="read_file", input={"path": "src/app.py"}),
    ScriptedToolCall(name="grep", input={"pattern": "TODO"}),
    ScriptedToolCall(name="list_files", input={}),
)
_reply: contextvars.ContextVar[ScriptedResponse | None] = contextvars.ContextVar(
    "reply", default=None
)


def latest_user_text(body: Any) -> str:
    """The last text block of the latest user message with text (tool results are not text;
    a transient prompt merged after the previous user text is the last block)."""
    if not isinstance(body, dict):
        return ""
    for message in reversed(body.get("messages") or []):
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        texts = [
            str(b.get("text", ""))
            for b in content or []
            if isinstance(b, dict) and b.get("type") == "text"
        ]
        if texts:
            return texts[-1]
    return ""


class _BodyState(EmulatorState):
    """Takes the reply the ASGI wrapper decided for the request being handled."""

    def pop_response(
        self, model: str = "", tools: Collection[str] = (), headers: Collection[str] = ()
    ) -> ScriptedResponse | None:
        return _reply.get()


class ToolEmulator:
    """The emulator on loopback with body-decided replies (see the module docstring)."""

    def __init__(self, *, delay: float = 0.0, generate_delay: float = 0.0) -> None:
        self.state = _BodyState()
        self.delay = delay
        self.generate_delay = generate_delay
        self.port = free_port()
        self.in_flight = 0
        self.max_in_flight = 0
        self._tools = itertools.cycle(_TOOLS)
        self._lock = threading.Lock()
        inner = create_app(self.state)

        async def app(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http" or scope["path"] != "/v1/messages":
                await inner(scope, receive, send)
                return
            chunks: list[bytes] = []
            while True:
                message = await receive()
                chunks.append(message.get("body", b""))
                if not message.get("more_body", False):
                    break
            raw = b"".join(chunks)
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
            _reply.set(self._decide(body))
            replay: list[Message] = [{"type": "http.request", "body": raw}]

            async def replayed() -> Message:
                return replay.pop() if replay else await receive()

            counted = latest_user_text(body).startswith(GENERATE_MARK)
            with self._lock:
                self.in_flight += counted
                self.max_in_flight = max(self.max_in_flight, self.in_flight)
            try:
                await asyncio.sleep(self.generate_delay if counted else self.delay)
                await inner(scope, replayed, send)
            finally:
                with self._lock:
                    self.in_flight -= counted

        config = uvicorn.Config(
            app, host="127.0.0.1", port=self.port, log_level="warning", http="h11", ws="none",
            lifespan="off", access_log=False,
        )  # fmt: skip
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="emulator", daemon=True)

    def _decide(self, body: Any) -> ScriptedResponse | None:
        if not isinstance(body, dict) or not latest_user_text(body).startswith(TOOL_MARK):
            return None
        choice = body.get("tool_choice") or {}
        if not body.get("tools") or choice.get("type") == "none":
            return ScriptedResponse(text="Done: the repository is inspected.")
        with self._lock:
            call = next(self._tools)
        return ScriptedResponse(text="Looking.", tool_calls=[call])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def requests(self) -> list[dict[str, Any]]:
        return self.state.requests()

    def __enter__(self) -> ToolEmulator:
        self._thread.start()
        deadline = time.monotonic() + STARTUP_SECONDS
        while not self._server.started:
            assert self._thread.is_alive() and time.monotonic() < deadline, "no emulator"
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)


def provider_env(emulator: ToolEmulator) -> dict[str, str]:
    return {
        **os.environ,
        "ANTHROPIC_API_KEY": "reliability-test-key",
        "ANTHROPIC_BASE_URL": emulator.url,
        "SESSIONGEN_TOKEN": "",
    }


def wait_healthy(url: str, log: Path, alive: Callable[[], bool] = lambda: True) -> None:
    """Poll `url`'s health route until it answers 200; fail with the server's log if the
    process died or `STARTUP_SECONDS` passed."""
    deadline = time.monotonic() + STARTUP_SECONDS
    while True:
        try:
            if httpx.get(f"{url}/api/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert alive(), log.read_text()
        assert time.monotonic() < deadline, f"the server never answered\n{log.read_text()}"
        time.sleep(0.02)


class Worker:
    """A server child process on a free loopback port; `command` gets the port appended
    where `{port}` stands. Output goes to `log`."""

    def __init__(self, command: list[str], env: dict[str, str], log: Path) -> None:
        self.port = free_port()
        self.log = log
        argv = [part.replace("{port}", str(self.port)) for part in command]
        with log.open("ab") as out:
            self.proc = subprocess.Popen(
                argv, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT
            )
        self.url = f"http://127.0.0.1:{self.port}"

    def wait_ready(self) -> Worker:
        wait_healthy(self.url, self.log, alive=lambda: self.proc.poll() is None)
        return self

    def kill(self) -> None:
        """SIGKILL: no cleanup, no atexit, no flush."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                return self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()
                raise
        return self.proc.returncode


def serve_args(db: Path, workspace: Path) -> list[str]:
    """`sessiongen serve`'s arguments on the Anthropic provider (the environment points it
    at the emulator)."""
    return [
        "serve", "--port", "{port}", "--db", str(db), "--provider", "anthropic",
        "--workspace", str(workspace),
    ]  # fmt: skip


def serve_command(db: Path, workspace: Path) -> list[str]:
    """The command as a user runs it."""
    return [sys.executable, "-m", "sessiongen.cli", *serve_args(db, workspace)]


def worker_command(db: Path, emulator_url: str, workspace: Path, steps: int) -> list[str]:
    """A worker through `serve_async` with an agent of `steps` steps."""
    return [
        sys.executable, "-m", "tests.reliability._servers", str(db), "{port}", emulator_url,
        str(workspace), str(steps),
    ]  # fmt: skip


class Zygote:
    """A child process that imported `sessiongen serve`'s code once and forks a server per
    `spawn`: each fork runs `sessiongen.cli.main(["serve", ...])`, the command's own code, in
    a process of its own, so a SIGKILL kills a server as it kills `sessiongen serve`, without
    paying the interpreter's start and imports (seconds on a loaded machine) per restart."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.log = log
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.reliability._servers", "--zygote"],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=ROOT,
            text=True,
        )

    def _ask(self, line: str) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline().strip()
        assert answer, "the zygote died"
        return answer

    def spawn(self, argv: list[str]) -> ForkedServer:
        port = free_port()
        args = [a.replace("{port}", str(port)) for a in argv]
        pid = int(self._ask(json.dumps({"argv": args, "log": str(self.log)})))
        return ForkedServer(self, pid, port)

    def reap(self, pid: int) -> int:
        return int(self._ask(json.dumps({"wait": pid})))

    def close(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
        self.proc.stdout.close()


class ForkedServer:
    """One forked `sessiongen serve`: the `Worker` interface over the zygote's child."""

    def __init__(self, zygote: Zygote, pid: int, port: int) -> None:
        self.zygote = zygote
        self.pid = pid
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.log = zygote.log
        self.status: int | None = None

    def wait_ready(self) -> ForkedServer:
        wait_healthy(self.url, self.log)
        return self

    def kill(self) -> None:
        if self.status is None:
            os.kill(self.pid, signal.SIGKILL)
            self.status = self.zygote.reap(self.pid)


def _zygote() -> None:
    """Import the server's code, then fork one `sessiongen serve` per request on stdin."""
    import sessiongen.cli
    import sessiongen.providers.anthropic.adapter
    import sessiongen.server.serving

    for line in sys.stdin:
        request = json.loads(line)
        if "wait" in request:
            _, status = os.waitpid(request["wait"], 0)
            print(status, flush=True)
            continue
        pid = os.fork()
        if pid == 0:
            fd = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
            code = 1
            try:
                code = sessiongen.cli.main(request["argv"])
            finally:
                os._exit(code)
        print(pid, flush=True)


def steps_agent(steps: int) -> Any:
    from sessiongen.sample import SAMPLE_AGENT

    return SAMPLE_AGENT.model_copy(update={"steps": steps})


def _main(db: str, port: str, emulator_url: str, workspace: str, steps: str) -> None:
    from sessiongen.server.serving import serve_async

    os.environ["ANTHROPIC_BASE_URL"] = emulator_url
    os.environ.setdefault("ANTHROPIC_API_KEY", "reliability-test-key")
    with contextlib.suppress(KeyboardInterrupt):  # SIGINT is the way to stop it
        asyncio.run(
            serve_async(
                port=int(port),
                db=db,
                provider="anthropic",
                workspace=workspace,
                log_level="warning",
                agents=[steps_agent(int(steps))],
            )
        )


if __name__ == "__main__":
    if sys.argv[1:] == ["--zygote"]:
        _zygote()
    else:
        _main(*sys.argv[1:])
