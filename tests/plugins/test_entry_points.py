"""Third-party plugins are found through the `sessiongen` entry-point group of an installed
distribution (here a dist-info written on sys.path), and their request hooks see the
warming plugin's pings as `generate` calls with `info.warming` and the tag "warming"."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from sessiongen.lab import EmulatorLab
from sessiongen.plugins import PluginHost, WarmingPlugin, load_plugins, request_hook
from sessiongen.sample import SAMPLE_AGENT

from .conftest import turn

MODULE = "sessiongen_thirdparty_probe"
IMPOSTOR = "sessiongen_thirdparty_impostor"
PLUGIN_SOURCE = """
from sessiongen.plugins import hookimpl

SEEN = []


@hookimpl
def sessiongen_request(request, info):
    SEEN.append((info.operation, info.warming, info.tag, request.max_output_tokens))
"""


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """A distribution `sessiongen-thirdparty` with the entry points `thirdparty` (the module
    above) and `warming` (an empty module under a built-in's name)."""
    (tmp_path / f"{MODULE}.py").write_text(PLUGIN_SOURCE)
    (tmp_path / f"{IMPOSTOR}.py").write_text('"""Not the warming plugin."""\n')
    info = tmp_path / "sessiongen_thirdparty-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: sessiongen-thirdparty\nVersion: 0.1\n"
    )
    (info / "entry_points.txt").write_text(
        f"[sessiongen]\nthirdparty = {MODULE}\nwarming = {IMPOSTOR}\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        yield importlib.import_module(MODULE)
    finally:
        sys.modules.pop(MODULE, None)
        sys.modules.pop(IMPOSTOR, None)


@pytest.mark.clause("SG-HOOK-1")
@pytest.mark.clause("SG-KEEP-1")
@pytest.mark.clause("SG-PLUG-1")
@pytest.mark.clause("SG-PLUG-2")
async def test_an_entry_point_plugin_sees_warming_pings_by_their_metadata(
    installed: ModuleType, lab: EmulatorLab
) -> None:
    pm = load_plugins()
    assert pm.get_plugin("thirdparty") is installed
    warming = pm.get_plugin("warming")
    assert isinstance(warming, WarmingPlugin)  # a built-in's name is not taken over
    engine = lab.rebuild(hooks=[request_hook(pm)])
    host = PluginHost(engine, pm, lab.emulator.clock)
    host.startup()
    engine.turn_listeners.append(host.turn_settled)
    assert host.names() == ["warming", "recap", "thirdparty"]

    sid = engine.create_session("forge", workspace=lab.workspace).id
    warming.watch(sid)
    await turn(lab, engine, host, sid)
    pings = await warming.keeper.advance_to(3 * 3600)  # the default policy: Learned
    assert len(pings) >= 1 and all(p.hit for p in pings)
    assert installed.SEEN == [("step", False, None, SAMPLE_AGENT.max_output_tokens)] + [
        ("generate", True, "warming", 0)
    ] * len(pings)


def test_without_entry_points_only_the_builtins_load(installed: ModuleType) -> None:
    assert not load_plugins(entry_points=False).has_plugin("thirdparty")
    without = load_plugins(builtins=False)
    assert without.has_plugin("thirdparty")
    assert getattr(without.get_plugin("warming"), "__name__", None) == IMPOSTOR
    assert load_plugins(entry_points=False, builtins=False).list_name_plugin() == []


def test_a_broken_installed_plugin_is_a_named_one_line_serve_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An installed plugin whose import fails stops `sessiongen serve` with one line naming
    the failure, before anything binds."""
    from sessiongen.cli import main
    from sessiongen.plugins import PluginLoadError

    info = tmp_path / "sessiongen_broken-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: sessiongen-broken\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[sessiongen]\nbroken = sessiongen_no_such_module\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(PluginLoadError, match="sessiongen_no_such_module"):
        load_plugins()
    from sessiongen.emulator.server import free_port

    assert main(["serve", "--port", str(free_port()), "--db", str(tmp_path / "s.db")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "sessiongen_no_such_module" in err[0], err
    assert not (tmp_path / "s.db").exists()
