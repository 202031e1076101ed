"""`sessiongen serve`: its refusals (in-process, nothing bound) and the real server over real
HTTP in a child process, as a user runs it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from sessiongen.cli import main
from sessiongen.emulator import BackgroundServer, FaultSpec, free_port
from sessiongen.server import InsecureBind, check_bind, is_loopback

FAKE_KEY = "sk-ant-api03-FAKEKEY-e2e-5b9a2f4e6d8c0b1a3f5e7d9c1b7c1d0e"
TOKEN = "e2e-token-0b1a3f5e"


def _one_line(err: str) -> str:
    assert "Traceback" not in err, err
    assert err.endswith("\n") and err.count("\n") == 1, err
    return err.rstrip("\n")


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "", "192.0.2.1", "no-such-host.invalid"])
@pytest.mark.clause("SG-HTTP-3")
def test_a_public_bind_without_a_token_is_refused_before_binding(
    host: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SESSIONGEN_TOKEN", raising=False)
    with pytest.raises(SystemExit) as exited:
        main(["serve", "--host", host, "--db", ":memory:"])
    assert exited.value.code == 2
    out, err = capsys.readouterr()
    line = _one_line(err)
    assert out == "" and line.startswith("sessiongen: error: refusing to bind")
    assert "SESSIONGEN_TOKEN" in line


def test_check_bind_accepts_loopback_or_a_token() -> None:
    for host in ("127.0.0.1", "127.8.9.10", "::1", "[::1]", "localhost"):
        assert is_loopback(host), host
        check_bind(host, None)
    for host in ("0.0.0.0", "::", "10.0.0.1"):
        assert not is_loopback(host)
        with pytest.raises(InsecureBind):
            check_bind(host, None)
        check_bind(host, "a-token")


def test_an_empty_token_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["serve", "--token", "", "--db", ":memory:"])
    assert exited.value.code == 2
    assert "--token: must not be empty" in _one_line(capsys.readouterr().err)


def test_a_port_in_use_is_a_one_line_bind_error(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["serve", "--port", str(port), "--db", ":memory:"]) == 1
    line = _one_line(capsys.readouterr().err)
    assert line.startswith(f"sessiongen: error: cannot bind 127.0.0.1:{port}: "), line


def test_an_unopenable_store_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "missing" / "x.db"
    assert main(["serve", "--port", str(free_port()), "--db", str(db)]) == 1
    line = _one_line(capsys.readouterr().err)
    assert line.startswith(f"sessiongen: error: cannot open the store {db}:"), line


def test_a_missing_workspace_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["serve", "--workspace", str(tmp_path / "nope")])
    assert exited.value.code == 2
    assert "--workspace: must be an existing directory" in _one_line(capsys.readouterr().err)


# --- the real server ---------------------------------------------------------------------


@contextmanager
def _served(
    tmp_path: Path, *args: str, env: dict[str, str], cwd: Path | None = None
) -> Iterator[tuple[str, Path]]:
    """`sessiongen serve` in a child process on a free loopback port; yields its URL and the
    file its output goes to. Stopped with SIGINT (Ctrl-C), which must exit cleanly."""
    port = free_port()
    log = tmp_path / f"serve-{port}.log"
    command = [sys.executable, "-m", "sessiongen.cli", "serve", "--port", str(port), *args]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            command, env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT, cwd=cwd
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180  # a guard against a hang, not a timing check
        while True:
            try:
                if httpx.get(f"{url}/api/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "the server never answered"
            time.sleep(0.05)
        yield url, log
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    assert code == 0, log.read_text()


def test_the_default_server_runs_turns_on_the_embedded_emulator(tmp_path: Path) -> None:
    env = {"SESSIONGEN_TOKEN": ""}
    db = tmp_path / "sessions.db"
    with (
        _served(tmp_path, "--db", str(db), env=env) as (url, log),
        httpx.Client(base_url=url, timeout=30) as http,
    ):
        sid = http.post("/api/session").json()["id"]
        turn = http.post(f"/api/session/{sid}/prompt", json={"prompt": "Hello"}).json()
        result = http.post(f"/api/session/{sid}/generate", json={"prompt": "Title?"}).json()
        assert result["revision"] == turn["revision"]
        assert result["usage"]["cache_read_tokens"] == turn["usage"]["cache_write_5m_tokens"]
    assert db.exists()
    assert "provider: the embedded emulator" in log.read_text()
    # Started without --workspace, it says so, and how to give one.
    assert "workspace: none (tool calls answer that; --workspace DIR gives one)" in log.read_text()


def test_the_real_server_over_http_with_a_token_and_the_anthropic_provider(
    tmp_path: Path,
) -> None:
    """The Anthropic provider configured by the SDK's environment (here the emulator on a
    socket); the key never appears in any answer or in the server's output."""
    with BackgroundServer() as emulator:
        env = {
            "ANTHROPIC_API_KEY": FAKE_KEY,
            "ANTHROPIC_BASE_URL": emulator.url,
            "SESSIONGEN_TOKEN": TOKEN,
        }
        seen: list[str] = []
        with _served(
            tmp_path, "--provider", "anthropic", "--db", str(tmp_path / "s.db"), env=env
        ) as (url, log):
            with httpx.Client(base_url=url, timeout=30) as anonymous:
                refused = anonymous.post("/api/session")
                assert refused.status_code == 401
                assert refused.headers["content-type"] == "application/problem+json"
                seen.append(refused.text)
            auth = {"authorization": f"Bearer {TOKEN}"}
            with httpx.Client(base_url=url, timeout=30, headers=auth) as http:
                created = http.post("/api/session")
                assert created.status_code == 201
                sid = created.json()["id"]
                turn = http.post(f"/api/session/{sid}/prompt", json={"prompt": "Hello"})
                assert turn.status_code == 200, turn.text
                before = http.get(f"/api/session/{sid}/messages").json()
                generated = http.post(f"/api/session/{sid}/generate", json={"prompt": "Hi"})
                assert generated.status_code == 200, generated.text
                assert generated.json()["revision"] == turn.json()["revision"]
                assert http.get(f"/api/session/{sid}/messages").json() == before
                emulator.state.add_fault(FaultSpec(status=529))
                failed = http.post(f"/api/session/{sid}/generate", json={"prompt": "Hi"})
                assert failed.status_code == 503
                assert failed.json()["provider_status"] == 529
                empty = http.post(f"/api/session/{sid}/generate", json={"prompt": " "})
                assert empty.status_code == 422
                assert http.delete(f"/api/session/{sid}").status_code == 204
                for response in (created, turn, generated, failed, empty):
                    seen += [response.text, *response.headers.values()]
        output = log.read_text()
        assert '"POST /api/session/ses_000001/generate HTTP/1.1" 503' in output
        for text in [*seen, output]:
            assert FAKE_KEY not in text and TOKEN not in text
        # The SDK sent the key to the provider: it was in use, not merely absent.
        assert "[redacted]" in emulator.state.requests()[0]["headers"].values()


def test_the_readmes_curl_example_works_as_written(tmp_path: Path) -> None:
    """The README's serve section: its `sessiongen serve` flags and its curl lines, run by a
    shell against a server started with those flags (on a free port instead of 8080)."""
    import json
    import re
    import shutil

    if shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("## Serve sessions over HTTP", 1)[1].split("\n## ", 1)[0]
    serve, curls = re.findall(r"```bash\n(.*?)```", section, re.S)[:2]
    flags = serve.split("#")[0].split()
    assert flags[:4] == ["uv", "run", "sessiongen", "serve"] and "--port" in flags
    args = flags[4:]
    args[args.index("--port") : args.index("--port") + 2] = []
    with _served(tmp_path, *args, env={"SESSIONGEN_TOKEN": ""}, cwd=tmp_path) as (url, log):
        port = url.rsplit(":", 1)[1]
        script = curls.replace("localhost:8080", f"localhost:{port}")
        answers = []
        for command in script.replace("\\\n", " ").strip().splitlines():
            run = subprocess.run(
                ["bash", "-c", command], capture_output=True, text=True, cwd=tmp_path, check=True
            )
            answers.append(json.loads(run.stdout))
        assert "| workspace: . |" in log.read_text()  # the README gives its sessions one
    created, turn, generated, session = answers
    assert created == {"id": "ses_000001"}
    assert generated["revision"] == turn["revision"] == session["revision"]
    assert generated["usage"]["cache_read_tokens"] > 0
    assert (tmp_path / "sessiongen.db").exists()  # the README's --db, relative to the cwd
