"""Fixtures for session.generate: the engine on the emulator through the official SDK."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sessiongen.lab import EmulatorLab, emulator_lab


@pytest.fixture
async def emulated(tmp_path: Path) -> AsyncIterator[EmulatorLab]:
    async with emulator_lab(tmp_path / "workspace") as lab:
        yield lab
