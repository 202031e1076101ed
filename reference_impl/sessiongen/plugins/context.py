"""PluginContext: what a plugin may do with the engine, and nothing more.

A plugin gets `ctx.session` (generate, read a session, ask whether a turn is in flight, the
agents) and `ctx.clock`. It never gets the store or the engine's write paths (admission,
the Drain, create, delete): `session.generate` leaves the Session as it was (SG-INV-1), so
a plugin cannot change a Session through its context, however it is written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from ..model import Agent
from ..session.engine import SessionEngine
from ..session.generate import DEFAULT_TOOLS_POLICY, GenerateResult, ToolsPolicy
from ..session.store import SessionRecord
from ..warming.keeper import Clock

__all__ = ["PluginContext", "SessionAccess"]


class SessionAccess:
    """`ctx.session`: the read-and-generate surface of one engine.

    The engine is held privately; nothing here returns the store, the engine or a mutable
    view of either.
    """

    __slots__ = ("_agents", "_engine")

    def __init__(self, engine: SessionEngine) -> None:
        self._engine = engine
        self._agents: Mapping[str, Agent] = MappingProxyType(engine.agents)

    async def generate(
        self,
        session_id: str,
        prompt: str,
        *,
        tools_policy: ToolsPolicy | str = DEFAULT_TOOLS_POLICY,
        warming: bool = False,
        tag: str | None = None,
    ) -> GenerateResult:
        """`session.generate` (`SessionEngine.generate`): one transient call; the Session is
        left untouched, and the request hooks see it with this `tag` and `warming`."""
        return await self._engine.generate(
            session_id, prompt, tools_policy=tools_policy, warming=warming, tag=tag
        )

    def get(self, session_id: str) -> SessionRecord:
        """The session as stored now, read in one transaction (raises `SessionNotFound`).
        A frozen record: its `session.revision` tells whether a result is still current."""
        return self._engine.store.read(session_id)

    def revision(self, session_id: str) -> int:
        """The session's current revision (raises `SessionNotFound`)."""
        return self.get(session_id).session.revision

    def in_flight(self, session_id: str) -> bool:
        """Whether the engine is running a durable turn (a Drain) of the session right now:
        a plugin that calls the provider on its own schedule (warming) waits for it."""
        return self._engine.drain_in_flight(session_id)

    @property
    def agents(self) -> Mapping[str, Agent]:
        """The engine's agents by name, read-only (an agent's model and cache TTL)."""
        return self._agents


@dataclass(frozen=True)
class PluginContext:
    """What `sessiongen_startup` and `sessiongen_turn_settled` give a plugin: `session`, the
    narrow engine surface, and `clock`, the host's time (the emulator's virtual clock in
    tests and notebooks, monotonic time when served)."""

    session: SessionAccess
    clock: Clock
