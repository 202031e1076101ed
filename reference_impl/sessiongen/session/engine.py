"""SessionEngine: the public façade wiring store, context, preparation, runner and generate."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager, suppress
from pathlib import Path
from typing import TYPE_CHECKING

from ..catalog import is_known_model, list_models
from ..errors import AgentNotFound, InsufficientStorage, InvalidArgument, SessionNotFound
from ..llm.client import LLMClient
from ..model import Agent, Session, UserMessage
from ..tools import ToolRegistry
from .admission import admission_events, validate_prompt
from .breakpoints import DEFAULT_CACHE_POLICY, CachePolicy
from .context import SessionContext, Snapshot
from .generate import (
    DEFAULT_TOOLS_POLICY,
    GenerateOptions,
    GenerateResult,
    PreparedGenerate,
    SessionGenerate,
    ToolsPolicy,
)
from .request import RequestHook, SessionModelRequest
from .runner import DrainResult, SessionRunner
from .store import SessionRecord, SessionStore

if TYPE_CHECKING:
    import asyncio

TurnListener = Callable[[str, "int | None"], None]
"""Told `(session id, revision)` when a durable turn (`SessionEngine.run`) ends: the revision
it left, or None when it failed (the listener reads the store's). `PluginHost.turn_settled`
is one."""


class SessionEngine:
    """A durable Session engine and session.generate over one store and one LLM client."""

    def __init__(
        self,
        store: SessionStore,
        llm: LLMClient,
        agents: Iterable[Agent] | Mapping[str, Agent],
        *,
        tools: ToolRegistry | None = None,
        hooks: Sequence[RequestHook] = (),
        cache_policy: CachePolicy = DEFAULT_CACHE_POLICY,
    ) -> None:
        self.store = store
        self.llm = llm
        self.agents: dict[str, Agent] = (
            dict(agents) if isinstance(agents, Mapping) else {a.name: a for a in agents}
        )
        self.tools = tools or ToolRegistry()
        for agent in self.agents.values():
            _check_model(agent)
            self.tools.permitted(agent.tools, agent=agent.name)  # ToolNotRegistered, now
        self.context = SessionContext(store, self.agents, self.tools)
        self.preparation = SessionModelRequest(hooks=list(hooks), cache_policy=cache_policy)
        self.runner = SessionRunner(store, llm, self.context, self.preparation, self.tools)
        self.generator = SessionGenerate(self.context, self.preparation, llm, self.tools)
        self._turns: dict[str, asyncio.Lock] = {}
        self.turn_listeners: list[TurnListener] = []
        """Told when each turn of this engine ends (`create_app` adds its plugins' host)."""

    def create_session(
        self,
        agent: str,
        *,
        workspace: str | Path | None = None,
        session_id: str | None = None,
        parent_id: str | None = None,
    ) -> Session:
        """A new Session (a fork when `parent_id` is given). The workspace must be an existing
        directory; the id is allocated in the write transaction unless one is given."""
        if agent not in self.agents:
            raise AgentNotFound(agent, known=self.agents)
        if workspace is not None and not Path(workspace).is_dir():
            raise InvalidArgument(f"workspace {str(workspace)!r} is not an existing directory")
        sid = self.store.create(
            agent=agent,
            workspace=None if workspace is None else str(workspace),
            parent_id=parent_id,
            session_id=session_id,
        )
        return self.store.read(sid).session

    def prompt(self, session_id: str, text: str) -> int:
        """Admission: the prompt becomes a pending input. Returns the new revision."""
        return self.store.append(session_id, lambda revision: admission_events(text, revision))

    def lease(self, session_id: str) -> AbstractContextManager[None]:
        """The session's drain lease, held for a `with` block (see `SessionRunner.leased`):
        `SessionBusy` when another live process is draining the session. Re-entrant, so a
        turn can hold it around its admission and its Drain."""
        return self.runner.leased(session_id)

    def turn_lock(self, session_id: str) -> asyncio.Lock:
        """One turn or Drain of a session at a time in this engine, so each Drain settles
        exactly the prompt its turn admitted (`SessionNotFound` for an unknown session,
        which then leaves nothing behind). Across processes, the store's drain lease."""
        import asyncio  # startup: imported with the first drain, not with the package

        if not self.store.exists(session_id):
            raise SessionNotFound(session_id)
        return self._turns.setdefault(session_id, asyncio.Lock())

    def forget(self, session_id: str) -> None:
        """Drop a deleted session's turn lock."""
        self._turns.pop(session_id, None)

    async def drain(self, session_id: str) -> DrainResult:
        """Run the Drain; one at a time per session in this engine, and, through the
        session's drain lease in the store, across processes sharing the store file: a
        session another live process is draining raises `SessionBusy`, nothing written."""
        async with self.turn_lock(session_id):
            return await self.runner.drain(session_id)

    async def run(self, session_id: str, text: str) -> DrainResult:
        """A durable turn: admit, then drain, under the session's drain lease taken before
        the admission, so a session another live process is draining refuses the turn with
        `SessionBusy` and nothing admitted; then each of `turn_listeners` is told it ended.

        The prompt is stored with its Step or not at all: the Drain admits it in the
        transaction that opens its first Step. A turn refused before (`InsufficientStorage`
        on a full disk, a provider error while compacting) leaves no trace of the prompt, so
        sending it again is safe; one refused after (the disk filled while the Step ran)
        raises `InsufficientStorage` saying the prompt was stored, its Step to be marked
        interrupted by the session's next Drain, as a provider failure mid-Step leaves it."""
        validate_prompt(text)  # a caller mistake is reported before a busy session
        async with self.turn_lock(session_id):
            try:
                drained = await self._admit_and_drain(session_id, text)
            except BaseException:
                # A failed turn ends too: a listener restarts from what the store has.
                for listener in self.turn_listeners:
                    with suppress(Exception):  # never mask the turn's own error
                        listener(session_id, None)
                raise
            for listener in self.turn_listeners:
                listener(session_id, drained.revision)
        return drained

    async def _admit_and_drain(self, session_id: str, text: str) -> DrainResult:
        with self.lease(session_id):
            before = len(self.store.read(session_id).messages)
            try:
                return await self.runner.drain(session_id, text)
            except InsufficientStorage as error:
                added = self.store.read(session_id).messages[before:]
                if not any(isinstance(m, UserMessage) for m in added):
                    raise  # refused before the Step opened: nothing of the turn was stored
                written = str(error).removesuffix("; nothing was written")
                raise InsufficientStorage(
                    f"{written}; the prompt had been stored with its Step, which did not settle "
                    "and is marked interrupted at the session's next turn: do not send the "
                    "prompt again"
                ) from error

    def drain_in_flight(self, session_id: str) -> bool:
        """Whether this engine is running a Drain of the session right now."""
        lock = self._turns.get(session_id)
        return lock is not None and lock.locked()

    def get_session(self, session_id: str) -> SessionRecord:
        """The session as stored, read in one transaction: `session` (its revision, agent,
        workspace), `messages`, `pending` inputs, `usage` totals and provider `calls`.
        Raises `SessionNotFound`. A `generate` leaves every field of it as it was."""
        return self.store.read(session_id)

    def select(self, session_id: str) -> Snapshot:
        """The read-only snapshot a Step or a `generate` would prepare its request from: the
        session's committed messages, its agent and instructions, at one revision."""
        return self.context.select(session_id)

    async def generate(
        self,
        session_id: str,
        prompt: str,
        *,
        tools_policy: ToolsPolicy | str = DEFAULT_TOOLS_POLICY,
        warming: bool = False,
        tag: str | None = None,
    ) -> GenerateResult:
        """session.generate: one transient call; the Session is left untouched."""
        options = GenerateOptions(prompt, ToolsPolicy.parse(tools_policy), warming, tag)
        return await self.generator.generate(session_id, options)

    def prepare_generate(
        self,
        session_id: str,
        prompt: str,
        *,
        tools_policy: ToolsPolicy | str = DEFAULT_TOOLS_POLICY,
        warming: bool = False,
        tag: str | None = None,
    ) -> PreparedGenerate:
        """The request `generate` would send with these arguments, without sending it (and
        the snapshot's revision, workspace and permitted tools)."""
        options = GenerateOptions(prompt, ToolsPolicy.parse(tools_policy), warming, tag)
        return self.generator.prepare(session_id, options)


def _check_model(agent: Agent) -> None:
    """The engine needs each model's facts (its context window) from the model catalog, so an
    uncatalogued model is refused when the engine is built, not at its first overflow check."""

    if not is_known_model(agent.model.id):
        known = ", ".join(info.id for info in list_models())
        raise InvalidArgument(
            f"agent {agent.name!r} uses model {agent.model.id!r}, which is not in the model "
            f"catalog (sessiongen/catalog/models.json); known: {known}"
        )
