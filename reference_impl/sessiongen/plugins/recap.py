"""The built-in `recap` plugin: one-sentence recaps of a session, outside the core.

It is the contract's second caller (ephemeral recaps, SG-PURPOSE-1) written as any
third-party plugin would be: it uses only `ctx.session` and `ctx.clock`. A recap is one
`ctx.session.generate(session_id, RECAP_PROMPT, tag="recap")`; because generate reports the
revision of the snapshot it read (SG-RESULT-3), the plugin compares it with the session's
revision after the call and suppresses the recap (None) when a turn landed meanwhile: a
recap of the session as it no longer is would mislead whoever shows it.

On idle (opt-in, `idle_after` seconds): each settled turn schedules a recap on `ctx.clock`
and a new turn moves it later; the host drives it with `run_due()` (a periodic task, or a
test stepping the emulator's virtual clock). Off by default, since each recap is a
provider call.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ..errors import SessiongenError, SessionNotFound
from ..llm.types import Usage
from .context import PluginContext
from .hookspecs import hookimpl

__all__ = ["RECAP_PROMPT", "RECAP_TAG", "Recap", "RecapPlugin", "plugin"]

logger = logging.getLogger("sessiongen.plugins.recap")

RECAP_PROMPT = "Recap this session in one sentence."
RECAP_TAG = "recap"


@dataclass(frozen=True)
class Recap:
    """A recap that was current when it was made: the session was still at `revision`."""

    session_id: str
    revision: int
    text: str
    """The model's text; empty when it answered with a tool call instead (the default tools
    policy returns calls and never runs them)."""
    at: float
    """When it was made, on the host's clock."""
    usage: Usage


class RecapPlugin:
    """Recaps on demand (`recap`) and, with `idle_after`, after a session has been idle
    that long since its last turn (`due`, `run_due`)."""

    def __init__(
        self,
        *,
        idle_after: float | None = None,
        prompt: str = RECAP_PROMPT,
        tag: str = RECAP_TAG,
    ) -> None:
        if idle_after is not None and idle_after < 0:
            raise ValueError(f"idle_after must be >= 0 seconds, got {idle_after}")
        self.idle_after = idle_after
        self.prompt = prompt
        self.tag = tag
        self.recaps: dict[str, Recap] = {}
        """The latest current recap of each session; a new turn drops it."""
        self._due: dict[str, float] = {}
        self._ctx: PluginContext | None = None

    @hookimpl
    def sessiongen_startup(self, ctx: PluginContext) -> None:
        if self._ctx is not None and self._ctx is not ctx:
            raise RuntimeError("a RecapPlugin serves one host; register a new one per host")
        self._ctx = ctx

    @hookimpl
    def sessiongen_turn_settled(self, ctx: PluginContext, session_id: str) -> None:
        """The session moved on: its recap is stale, and the idle timer starts again."""
        self.recaps.pop(session_id, None)
        if self.idle_after is not None:
            self._due[session_id] = ctx.clock.now() + self.idle_after

    @property
    def context(self) -> PluginContext:
        if self._ctx is None:
            raise RuntimeError("the recap plugin has not been started (PluginHost.startup)")
        return self._ctx

    async def recap(self, session_id: str) -> Recap | None:
        """A one-sentence recap of the session, or None when the session's revision moved
        while the recap ran (or the session was deleted meanwhile). An unknown session raises
        `SessionNotFound` before any call; provider faults propagate."""
        ctx = self.context
        ctx.session.revision(session_id)  # an unknown session raises here, before any call
        try:
            result = await ctx.session.generate(session_id, self.prompt, tag=self.tag)
            current = ctx.session.revision(session_id)
        except SessionNotFound:
            return None  # deleted while the recap ran
        if current != result.revision:
            return None
        made = Recap(session_id, result.revision, result.text, ctx.clock.now(), result.usage)
        self.recaps[session_id] = made
        return made

    def due(self, now: float | None = None) -> list[str]:
        """The sessions whose idle recap is due at `now` (the clock's now when None),
        earliest first."""
        at = self.context.clock.now() if now is None else now
        return [sid for sid, when in sorted(self._due.items(), key=lambda i: i[1]) if when <= at]

    async def run_due(self) -> list[Recap]:
        """Make every due recap; answers those that were still current. A suppressed one is
        not retried: the turn that made it stale schedules the next. A failed one is logged
        and dropped, so one session cannot stop the others' recaps."""
        made: list[Recap] = []
        for session_id in self.due():
            self._due.pop(session_id, None)
            try:
                recap = await self.recap(session_id)
            except SessionNotFound:
                continue
            except SessiongenError as exc:
                logger.warning("recap of %s failed: %s", session_id, exc)
                continue
            if recap is not None:
                made.append(recap)
        return made

    def scheduled(self, session_id: str) -> float | None:
        """When the session's idle recap is due, if one is scheduled."""
        return self._due.get(session_id)


def plugin() -> RecapPlugin:
    """A fresh built-in recap plugin (one per plugin manager); recaps on demand only."""
    return RecapPlugin()
