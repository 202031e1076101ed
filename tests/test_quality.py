"""Lint, format and strict typing are part of the test suite, so CI enforces them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from . import _background

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    "command",
    [
        ["ruff", "check", "."],
        ["ruff", "format", "--check", "."],
    ],
    ids=["ruff-check", "ruff-format"],
)
def test_tool_is_clean(command: list[str]) -> None:
    result = subprocess.run(
        [sys.executable, "-m", *command], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict_is_clean() -> None:
    """Started when collection finishes (tests/_background.py), so it types on the other
    core while the rest of the suite runs; the timeout guards against a hang only."""
    result = _background.result("mypy", _background.MYPY, timeout=1800)
    assert result.returncode == 0, result.stdout
