"""Long external commands the suite needs (mypy, the docs build), started as child processes
as soon as collection finishes, so they run on another core while the in-process tests run;
the tests that need them wait for their result. A command whose test was not collected is
never started; a test whose command was not started runs it itself."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class _Job:
    process: subprocess.Popen[bytes]
    output: Path


_jobs: dict[str, _Job] = {}

MYPY = (sys.executable, "-m", "mypy")
"""Strict typing over the package, the tooling, the tests and the benchmarks (pyproject)."""
SITE_DIR = Path(tempfile.mkdtemp(prefix="sessiongen-site-"))
SITE_BUILD = (sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(SITE_DIR))
"""The docs site, built exactly as CI and a reviewer build it."""
SITE_ENV = {"NO_MKDOCS_2_WARNING": "1"}  # Material's end-of-life banner


def start(name: str, command: Sequence[str], *, env: dict[str, str] | None = None) -> None:
    """Start `command` (from the repository root) under `name`, its output to a file."""
    if name in _jobs:
        return
    handle, path = tempfile.mkstemp(prefix=f"sessiongen-{name}-", suffix=".log")
    with os.fdopen(handle, "wb") as out:
        process = subprocess.Popen(
            list(command),
            cwd=ROOT,
            env={**os.environ, **(env or {})},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    _jobs[name] = _Job(process, Path(path))


def result(
    name: str, command: Sequence[str], *, timeout: float, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The finished run of `command` started under `name`, started now if it was not."""
    start(name, command, env=env)
    job = _jobs[name]
    try:
        code = job.process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        job.process.kill()
        raise
    output = job.output.read_text(encoding="utf-8", errors="replace")
    return subprocess.CompletedProcess(list(command), code, output, "")


def stop_all() -> None:
    """Kill what is still running (an interrupted session) and remove the output files."""
    for job in _jobs.values():
        if job.process.poll() is None:
            job.process.kill()
            job.process.wait()
        job.output.unlink(missing_ok=True)
    _jobs.clear()
    shutil.rmtree(SITE_DIR, ignore_errors=True)
