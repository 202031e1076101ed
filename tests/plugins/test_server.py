"""The server hosts the plugins: the engine is built with their request hook, the prompt
route tells them each settled turn, the warming routes go through the warming plugin, and
a plugin's failure after a turn is logged scrubbed without failing the turn."""

from __future__ import annotations

import logging

import pytest
from sessiongen import LLMRequest, RequestInfo
from sessiongen.lab import EmulatorLab
from sessiongen.plugins import PluginHost, WarmingPlugin, hookimpl, load_plugins, request_hook
from sessiongen.server import create_app
from sessiongen.warming import policies
from sessiongen.warming.keeper import FromPolicy, WarmingKeeper

from ..server.conftest import asgi_client, create

TOKEN = "plugin-test-token-7c1d"


class Watcher:
    def __init__(self) -> None:
        self.requests: list[tuple[str, bool, str | None]] = []
        self.settled: list[tuple[str, int]] = []

    @hookimpl
    def sessiongen_request(self, info: RequestInfo) -> None:
        self.requests.append((info.operation, info.warming, info.tag))

    @hookimpl
    def sessiongen_turn_settled(self, session_id: str, revision: int) -> None:
        self.settled.append((session_id, revision))


def _host(lab: EmulatorLab, *plugins: tuple[str, object]) -> tuple[PluginHost, WarmingPlugin]:
    """As `serve` builds it, on the emulator's clock, with a half-hour ping policy; the app
    serves `host.engine`."""
    pm = load_plugins(entry_points=False)
    pm.unregister(name="warming")
    warming = WarmingPlugin(policy=FromPolicy(policies.ttl_aware("5m", 1800.0)))
    pm.register(warming, name="warming")
    for name, plugin in plugins:
        pm.register(plugin, name=name)
    engine = lab.rebuild(hooks=[request_hook(pm)])
    host = PluginHost(engine, pm, lab.emulator.clock)
    host.startup()
    return host, warming


@pytest.mark.clause("SG-KEEP-1")
async def test_the_server_runs_turns_and_warming_through_its_plugins(lab: EmulatorLab) -> None:
    watcher = Watcher()
    host, warming = _host(lab, ("watcher", watcher))
    app = create_app(host.engine, plugins=host, workspace=lab.workspace)
    assert app.state.plugins is host
    async with asgi_client(app) as client:
        sid = await create(client)
        assert (await client.post(f"/api/session/{sid}/warming")).status_code == 200
        assert warming.watched() == {sid}
        turn = (await client.post(f"/api/session/{sid}/prompt", json={"prompt": "Hi"})).json()
        assert watcher.settled == [(sid, turn["revision"])]
        view = (await client.get(f"/api/session/{sid}/warming")).json()
        assert view["next_ping_at"] == 295

        await warming.keeper.advance_to(296)
        ledger = (await client.get(f"/api/session/{sid}/warming")).json()
        assert len(ledger["entries"]) == 1 and ledger["entries"][0]["hit"]
        assert watcher.requests == [("step", False, None), ("generate", True, "warming")]

        assert (await client.delete(f"/api/session/{sid}/warming")).status_code == 204
        assert warming.watched() == frozenset()


@pytest.mark.clause("SG-PLUG-2")
async def test_a_failing_plugin_does_not_fail_the_turn_and_is_logged_scrubbed(
    lab: EmulatorLab, caplog: pytest.LogCaptureFixture
) -> None:
    class Leaky:
        @hookimpl
        def sessiongen_turn_settled(self) -> None:
            raise RuntimeError(f"a plugin bug that formats the token {TOKEN}")

    watcher = Watcher()
    host, _ = _host(lab, ("leaky", Leaky()), ("watcher", watcher))
    app = create_app(host.engine, plugins=host, token=TOKEN)
    auth = {"authorization": f"Bearer {TOKEN}"}
    with caplog.at_level(logging.ERROR, logger="sessiongen.server"):
        async with asgi_client(app, **auth) as client:
            sid = await create(client)
            turn = await client.post(f"/api/session/{sid}/prompt", json={"prompt": "Hi"})
    assert turn.status_code == 200 and watcher.settled == [(sid, turn.json()["revision"])]
    assert "plugin 'leaky' failed in sessiongen_turn_settled" in caplog.text
    assert "a plugin bug that formats the token" in caplog.text and TOKEN not in caplog.text


async def test_a_failed_turn_still_settles_for_the_plugins(lab: EmulatorLab) -> None:
    watcher = Watcher()
    host, _ = _host(lab, ("watcher", watcher))
    app = create_app(host.engine, plugins=host)
    async with asgi_client(app) as client:
        sid = await create(client)
        lab.faults(status=529)
        failed = await client.post(f"/api/session/{sid}/prompt", json={"prompt": "Hi"})
    assert failed.status_code == 503
    assert watcher.settled == [(sid, lab.engine.store.read(sid).session.revision)]


def test_create_app_needs_the_warming_plugin_and_one_keeper(lab: EmulatorLab) -> None:
    bare = load_plugins(entry_points=False, builtins=False)
    with pytest.raises(ValueError, match="need the built-in 'warming' plugin"):
        create_app(lab.engine, plugins=PluginHost(lab.engine, bare))
    host = PluginHost(lab.engine, load_plugins(entry_points=False))
    with pytest.raises(ValueError, match="another engine"):
        create_app(lab.rebuild(), plugins=host)
    keeper = WarmingKeeper(lab.engine, clock=lab.emulator.clock)
    with pytest.raises(ValueError, match="give the keeper to the host's warming plugin"):
        create_app(lab.engine, plugins=host, keeper=keeper)
    app = create_app(lab.engine, keeper=keeper)  # the old way: wrapped in a warming plugin
    warming = app.state.plugins.plugin("warming")
    assert isinstance(warming, WarmingPlugin) and warming.keeper is keeper
    assert app.state.plugins.names() == ["recap", "warming"]


def test_the_plugin_request_type_is_the_engines(lab: EmulatorLab) -> None:
    """A request hook receives the engine's own `LLMRequest` (no copy, no wrapper)."""
    seen: list[object] = []

    class Probe:
        @hookimpl
        def sessiongen_request(self, request: LLMRequest) -> None:
            seen.append(request)

    host, _ = _host(lab, ("probe", Probe()))
    request = LLMRequest(model="claude-sonnet-4-6")
    info = RequestInfo(operation="generate", session_id="ses_1", revision=1)
    assert host.request_hook(request, info) is request and seen == [request]
