"""Fixtures for plugins: a lab (in-process emulator on its virtual clock, SQLite) and a host
over an engine built with the plugins' request hook, as `sessiongen serve` builds it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sessiongen import SessionEngine
from sessiongen.lab import EmulatorLab, emulator_lab
from sessiongen.plugins import PluginHost, load_plugins, request_hook

ANSWER = {"text": "src/app.py defines add() and mean()."}


@pytest.fixture
async def lab() -> AsyncIterator[EmulatorLab]:
    async with emulator_lab() as lab:
        yield lab


def host_on(
    lab: EmulatorLab, *plugins: tuple[str, object], builtins: bool = False
) -> tuple[SessionEngine, PluginHost]:
    """Register `plugins` (name, plugin) in order after the built-ins (when asked for), build
    an engine with their request hook over the lab's store, and start a host on the
    emulator's clock."""
    pm = load_plugins(entry_points=False, builtins=builtins)
    for name, plugin in plugins:
        pm.register(plugin, name=name)
    engine = lab.rebuild(hooks=[request_hook(pm)])
    host = PluginHost(engine, pm, lab.emulator.clock)
    host.startup()
    engine.turn_listeners.append(host.turn_settled)
    return engine, host


async def turn(lab: EmulatorLab, engine: SessionEngine, host: PluginHost, sid: str) -> None:
    """A durable turn as a host runs it: the engine tells the host it ended."""
    lab.script(ANSWER)
    await engine.run(sid, "What is in src/app.py?")
