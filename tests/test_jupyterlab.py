"""`uv run jupyter lab notebooks/`, the README's command for opening the notebooks, starts a
JupyterLab that serves them; as root (a container, CI) it needs the README's `--allow-root`.

JupyterLab runs as a child process on a free loopback port with its configuration, data and
runtime directories in a temporary directory (nothing written under the home directory)."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
JUPYTER = Path(sys.executable).with_name("jupyter")
TOKEN = "sessiongen-test"
AS_ROOT = os.geteuid() == 0


def _readme_line() -> str:
    lines = [
        line
        for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
        if line.startswith("uv run jupyter lab")
    ]
    assert len(lines) == 1, lines
    return lines[0]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _lab(tmp: Path, *extra: str) -> tuple[subprocess.Popen[str], str]:
    """The README's command (its arguments after `uv run`), headless, on a free port."""
    command = _readme_line().split("#")[0].split()[2:]  # jupyter lab notebooks/
    assert command == ["jupyter", "lab", "notebooks/"], command
    port = _free_port()
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(tmp / "config"),
        "JUPYTER_DATA_DIR": str(tmp / "data"),
        "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"),
        "JUPYTERLAB_WORKSPACES_DIR": str(tmp / "workspaces"),
    }
    proc = subprocess.Popen(
        [str(JUPYTER), *command[1:], "--no-browser", f"--port={port}", "--ip=127.0.0.1"]
        + [f"--IdentityProvider.token={TOKEN}", *extra],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    return proc, f"http://127.0.0.1:{port}"


def _stop(proc: subprocess.Popen[str]) -> str:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if proc.stderr is None:
        return ""
    with proc.stderr:
        return proc.stderr.read()


def _get(url: str) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers={"Authorization": f"token {TOKEN}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status, response.read()


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[str]:
    """A running JupyterLab from the README's command (with `--allow-root` as root)."""
    proc, base = _lab(tmp_path, *(["--allow-root"] if AS_ROOT else []))
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                pytest.fail(f"jupyter lab exited ({proc.returncode}):\n{_stop(proc)[-2000:]}")
            try:
                if _get(f"{base}/api/status")[0] == 200:
                    break
            except (OSError, urllib.error.HTTPError):
                pass
            assert time.monotonic() < deadline, "jupyter lab did not answer within 120 s"
            time.sleep(0.2)
        yield base
    finally:
        _stop(proc)


def test_jupyter_lab_serves_the_notebooks(lab: str) -> None:
    """The lab page answers, and its contents API (rooted at `notebooks/`, the directory the
    command names) lists every notebook of the repository and opens one as a notebook."""
    status, page = _get(f"{lab}/lab")
    assert status == 200 and b"JupyterLab" in page
    status, body = _get(f"{lab}/api/contents")
    listed = {item["name"] for item in json.loads(body)["content"]}
    expected = {path.name for path in (ROOT / "notebooks").glob("*.ipynb")}
    assert expected and expected <= listed
    status, body = _get(f"{lab}/api/contents/{sorted(expected)[0]}")
    assert json.loads(body)["type"] == "notebook"


@pytest.mark.skipif(not AS_ROOT, reason="JupyterLab refuses only a root user")
def test_as_root_it_refuses_and_the_readme_says_what_to_add(tmp_path: Path) -> None:
    """As root, the README's command alone exits with JupyterLab's refusal, and the README's
    comment on that line names the flag the refusal asks for."""
    proc, _ = _lab(tmp_path)
    try:
        proc.wait(timeout=120)
    finally:
        refusal = _stop(proc)
    assert proc.returncode != 0
    flag = re.search(r"Use (--\S+) to bypass", refusal)
    assert flag is not None, refusal[-2000:]
    assert flag.group(1).rstrip(".") in _readme_line().split("#", 1)[1]
