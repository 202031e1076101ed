"""The built-in `warming` plugin: the `WarmingKeeper` as a plugin.

On `sessiongen_startup` it keeps the context; its keeper is made from that context the
first time it is needed (fitting the default policy costs time an app that never warms need
not pay), and runs on `ctx.clock`. `sessiongen_turn_settled` restarts a watched session's
schedule (`keeper.turn_finished`). The server's warming routes call `watch` / `unwatch` and
read `keeper` (its ledger and schedule); its lifespan runs `run()`.

The keeper is written against `SessionEngine`, but uses only reads, `generate` and
`drain_in_flight`. `KeeperEngine` gives it exactly those, from `ctx.session`, so the plugin
holds no write path either: no store, no admission, no Drain. The one thing it cannot do
is `keeper.run_turn` (a durable turn is a write); the host runs turns and tells the plugin.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NoReturn, cast

from ..errors import SessionNotFound
from ..model import Agent
from ..session.engine import SessionEngine
from ..warming.keeper import KeeperPolicy, WarmingKeeper
from .context import PluginContext, SessionAccess
from .hookspecs import hookimpl

__all__ = ["KeeperEngine", "WarmingPlugin", "plugin"]


class _RecordReader:
    """`keeper.engine.store`: `read` only."""

    __slots__ = ("read",)

    def __init__(self, session: SessionAccess) -> None:
        self.read = session.get


class KeeperEngine:
    """What `WarmingKeeper` uses of a `SessionEngine`, taken from a plugin context: `store.read`,
    `agents`, `generate` and `drain_in_flight`. A duck type, not a subclass; the keeper is
    annotated with `SessionEngine` (a protocol there would make the cast unnecessary)."""

    def __init__(self, session: SessionAccess) -> None:
        self.store = _RecordReader(session)
        self.agents: Mapping[str, Agent] = session.agents
        self.generate = session.generate
        self.drain_in_flight = session.in_flight

    async def run(self, session_id: str, text: str) -> NoReturn:
        raise TypeError(
            "the warming plugin's keeper cannot run durable turns: the host runs them and "
            "calls PluginHost.turn_settled"
        )


class WarmingPlugin:
    """Keeps watched sessions warm between durable turns (contract section 8).

    `policy`: the keeper's policy (`default_policy()` when None). `keeper`: a keeper made
    by the caller, used as given (on its own engine and clock), for hosts that built one
    before plugins existed; otherwise the plugin makes its own from the context.
    """

    def __init__(
        self, *, policy: KeeperPolicy | None = None, keeper: WarmingKeeper | None = None
    ) -> None:
        self.policy = policy
        self._keeper = keeper
        self._ctx: PluginContext | None = None

    @hookimpl
    def sessiongen_startup(self, ctx: PluginContext) -> None:
        if self._ctx is not None and self._ctx is not ctx:
            raise RuntimeError("a WarmingPlugin serves one host; register a new one per host")
        self._ctx = ctx

    @hookimpl
    def sessiongen_turn_settled(self, session_id: str) -> None:
        """Restart a watched session's schedule from the turn that just settled."""
        keeper = self._keeper
        if keeper is None or session_id not in keeper.watched:
            return
        try:
            keeper.turn_finished(session_id)
        except SessionNotFound:
            keeper.unwatch(session_id)

    @property
    def keeper(self) -> WarmingKeeper:
        """The keeper, made from the context on first use (raises `RuntimeError` before the
        host started the plugins)."""
        if self._keeper is None:
            if self._ctx is None:
                raise RuntimeError("the warming plugin has not been started (PluginHost.startup)")
            engine = cast(SessionEngine, KeeperEngine(self._ctx.session))
            self._keeper = WarmingKeeper(engine, clock=self._ctx.clock, policy=self.policy)
        return self._keeper

    def watch(self, session_id: str) -> None:
        """Keep the session warm from its latest settled turn on (raises `SessionNotFound`)."""
        self.keeper.watch(session_id)

    def unwatch(self, session_id: str) -> None:
        """Stop keeping the session warm; its ledger entries stay."""
        if self._keeper is not None:
            self._keeper.unwatch(session_id)

    def watched(self) -> frozenset[str]:
        return frozenset() if self._keeper is None else self._keeper.watched

    async def run(self) -> None:
        """Ping in real time until cancelled (`WarmingKeeper.run`)."""
        await self.keeper.run()


def plugin() -> WarmingPlugin:
    """A fresh built-in warming plugin (one per plugin manager)."""
    return WarmingPlugin()
