"""Client processes: each in its own process group, killed whole when it is done with or past
its time limit, its output kept in a log cut at LOG_BYTES."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

LOG_BYTES = 4 * 1024 * 1024
"""A turn's stdout or stderr kept in `logs/`, at most."""


@dataclass(frozen=True)
class Workspace:
    """Where a client's turns run: its program, the project, its environment and the time
    one turn may take."""

    binary: Path
    project: Path
    env: Mapping[str, str]
    timeout: float


@contextmanager
def started(argv: Sequence[str], work: Workspace, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """`argv` running in the project, its output to `log`.stdout and `log`.stderr; on exit
    its whole process group is killed and each log cut at LOG_BYTES."""
    with (
        open(log.with_suffix(".stdout"), "wb") as stdout,
        open(log.with_suffix(".stderr"), "wb") as stderr,
    ):
        process = subprocess.Popen(
            list(argv),
            cwd=work.project,
            env=dict(work.env),
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
        )
        try:
            yield process
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            for stream in (stdout, stderr):
                if stream.tell() > LOG_BYTES:
                    stream.truncate(LOG_BYTES)


def run_process(argv: Sequence[str], work: Workspace, log: Path) -> int | None:
    """Run one turn to its end; its exit status, or None when it ran past the time limit
    (and was killed)."""
    with started(argv, work, log) as process:
        try:
            return process.wait(timeout=work.timeout)
        except subprocess.TimeoutExpired:
            return None
