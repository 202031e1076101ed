"""The plugin context: `ctx.session.generate` is session.generate (the store is unchanged,
SG-INV-1), the context offers no write path, startup is once and historic, and a failing
`turn_settled` plugin neither fails the turn nor silences the others."""

from __future__ import annotations

import dataclasses

import pytest
from sessiongen import ProviderOverloaded
from sessiongen.lab import EmulatorLab
from sessiongen.plugins import PluginContext, hookimpl

from .conftest import host_on, turn


class Keeps:
    """Keeps the context it is started with, as a plugin that generates later does."""

    def __init__(self) -> None:
        self.contexts: list[PluginContext] = []
        self.settled: list[tuple[str, int]] = []

    @hookimpl
    def sessiongen_startup(self, ctx: PluginContext) -> None:
        self.contexts.append(ctx)

    @hookimpl
    def sessiongen_turn_settled(self, session_id: str, revision: int) -> None:
        self.settled.append((session_id, revision))

    @property
    def ctx(self) -> PluginContext:
        (ctx,) = self.contexts
        return ctx


@pytest.mark.clause("SG-INV-1")
@pytest.mark.clause("SG-PLUG-2")
async def test_ctx_session_generate_leaves_the_store_unchanged(lab: EmulatorLab) -> None:
    keeps = Keeps()
    engine, host = host_on(lab, ("keeps", keeps))
    sid = engine.create_session("forge", workspace=lab.workspace).id
    await turn(lab, engine, host, sid)
    before = engine.store.dump()
    revision = keeps.ctx.session.revision(sid)

    result = await keeps.ctx.session.generate(sid, "Give this session a title.", tag="title")
    assert result.revision == revision and result.text
    assert result.usage.cache_read_tokens > 0  # the turn's prefix, read
    lab.faults(status=529)
    with pytest.raises(ProviderOverloaded):
        await keeps.ctx.session.generate(sid, "Again.")
    assert engine.store.dump() == before  # a success and a failure, nothing stored
    assert keeps.ctx.session.get(sid) == engine.store.read(sid)


@pytest.mark.clause("SG-PLUG-2")
async def test_the_context_offers_no_write_path(lab: EmulatorLab) -> None:
    keeps = Keeps()
    engine, _ = host_on(lab, ("keeps", keeps))
    sid = engine.create_session("forge", workspace=lab.workspace).id
    ctx = keeps.ctx
    public = sorted(name for name in dir(ctx.session) if not name.startswith("_"))
    assert public == ["agents", "generate", "get", "in_flight", "revision"]
    assert sorted(f.name for f in dataclasses.fields(ctx)) == ["clock", "session"]
    with pytest.raises(TypeError):
        ctx.session.agents["forge"] = ctx.session.agents["forge"]  # type: ignore[index]
    record = ctx.session.get(sid)  # a copy read in one transaction, frozen
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.calls = 1  # type: ignore[misc]
    assert ctx.clock is lab.emulator.clock


async def test_startup_runs_once_and_reaches_plugins_registered_later(lab: EmulatorLab) -> None:
    first = Keeps()
    engine, host = host_on(lab, ("first", first))
    host.startup()  # a second start does nothing
    late = Keeps()
    host.pm.register(late, name="late")  # registered after the start: started at once
    assert len(first.contexts) == 1 and late.contexts == first.contexts
    assert host.started and host.names() == ["first", "late"]


@pytest.mark.clause("SG-PLUG-2")
async def test_a_failing_turn_plugin_is_reported_and_the_others_still_hear(
    lab: EmulatorLab,
) -> None:
    class Fails:
        @hookimpl
        def sessiongen_turn_settled(self) -> None:
            raise RuntimeError("plugin bug")

    errors: list[tuple[str, str, str]] = []
    keeps = Keeps()
    engine, host = host_on(lab, ("fails", Fails()), ("keeps", keeps))
    host.on_error = lambda plugin, hook, exc: errors.append((plugin, hook, str(exc)))
    sid = engine.create_session("forge", workspace=lab.workspace).id
    await turn(lab, engine, host, sid)
    host.turn_settled(sid, 99)
    revision = engine.store.read(sid).session.revision
    assert keeps.settled == [(sid, revision), (sid, 99)]  # read from the store when not given
    assert errors == [("fails", "sessiongen_turn_settled", "plugin bug")] * 2
