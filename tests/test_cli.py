"""The two user-facing commands: `sessiongen demo` and `sessiongen emulator`."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import anthropic
import pytest
from sessiongen.demo import run_demo
from sessiongen.emulator import free_port


async def test_demo_reads_back_the_prefix_each_turn_wrote(tmp_path: Path) -> None:
    """Turns two and three (and the generate) read exactly the prefix written before."""
    rows = await run_demo(tmp_path, database=tmp_path / "demo.db")
    assert [r.operation for r in rows] == [
        "turn 1 step 1",
        "turn 1 step 2",
        "turn 2 step 1",
        "turn 3 step 1",
        "generate",
    ]
    first = rows[0].usage
    assert first.read == 0 and first.write_5m > 1024  # the prefix passes the minimum
    for previous, current in zip(rows, rows[1:], strict=False):
        assert current.usage.read == previous.usage.read + previous.usage.write_5m
        assert current.usage.write_5m > 0


def test_demo_command_prints_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    from sessiongen.cli import main

    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "embedded emulator" in out and "turn 3 step 1" in out and "generate" in out


def _wait_for_port(port: int, deadline: float) -> None:
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"the emulator never listened on port {port}")


def test_emulator_command_answers_the_sdk_from_another_process() -> None:
    port = free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "sessiongen.cli", "emulator", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for_port(port, time.monotonic() + 30)
        with anthropic.Anthropic(
            api_key="x", base_url=f"http://127.0.0.1:{port}", max_retries=0
        ) as client:
            message = client.messages.create(
                model="claude-sonnet-4-6",
                max_tokens=64,
                messages=[{"role": "user", "content": "Hello"}],
            )
        assert message.content[0].type == "text" and message.stop_reason == "end_turn"
        assert message.usage.input_tokens > 0
    finally:
        proc.terminate()
        proc.wait(timeout=30)
