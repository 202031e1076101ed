"""SessionContext.select: a read-only snapshot of what the selected agent would see."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from ..errors import AgentNotFound
from ..llm.types import LLMMessage
from ..model import Agent, AssistantMessage, Message, PendingInput, Session
from ..tools import Tool, ToolRegistry
from .instructions import AssembledInstructions, InstructionFiles, assemble, resolve
from .store import SessionStore
from .transcript import ActiveRange, LLMMessages, active_range, join_llm_messages, lower_history

ACTIVE_RANGES = 128
"""How many sessions' active ranges a context keeps."""


@dataclass(frozen=True)
class Snapshot:
    """One session's model context at `revision`, taken in one read transaction.

    `history` is active history (after the latest completed compaction, cut at the first
    unsettled assistant message); pending inputs are not in it, and only the Drain's
    compaction check looks at them.
    """

    session: Session
    agent: Agent
    tools: tuple[Tool[Any], ...]
    instructions: AssembledInstructions
    history: tuple[Message, ...]
    revision: int
    pending: tuple[PendingInput, ...]
    active: ActiveRange | None = field(default=None, repr=False, compare=False)
    """The session's active range `history` was taken from (it owns the lowering)."""

    @cached_property
    def lowered(self) -> LLMMessages:
        """`history` as provider messages: the active range's own lowering (converted once
        per session state, and then only what is new), or converted here."""
        if self.active is not None and self.active.history is self.history:
            return self.active.lowered
        return lower_history(self.history, None)

    def join(self, tail: tuple[LLMMessage, ...]) -> LLMMessages:
        """`join_llm_messages(self.lowered, tail)`: the active range's own join (kept for
        the same tail again), or joined here."""
        if self.active is not None and self.active.history is self.history:
            return self.active.join(tail)
        return join_llm_messages(self.lowered, tail) if tail else self.lowered


class SessionContext:
    """Selects snapshots. It writes nothing, ever."""

    def __init__(self, store: SessionStore, agents: Mapping[str, Agent], tools: ToolRegistry):
        self.store = store
        self.agents = agents
        self.tools = tools
        # Each session's last active range: the next one looks only at changed messages.
        self._ranges: OrderedDict[str, ActiveRange] = OrderedDict()
        self._lock = threading.Lock()
        self.files = InstructionFiles()
        """The instruction files this context read, each read again only when it changed."""

    def _active_range(self, session_id: str, messages: tuple[Message, ...]) -> ActiveRange:
        previous = self._ranges.get(session_id)
        if previous is not None and previous.messages is messages:
            return previous
        current = active_range(messages) if previous is None else previous.advance(messages)
        with self._lock:
            self._ranges[session_id] = current
            self._ranges.move_to_end(session_id)
            while len(self._ranges) > ACTIVE_RANGES:
                self._ranges.popitem(last=False)
        return current

    def unsettled(self, session_id: str) -> tuple[AssistantMessage, ...]:
        """The session's assistant messages that are not settled, in order (read now)."""
        messages = self.store.read(session_id).messages
        found = (messages[i] for i in self._active_range(session_id, messages).unsettled)
        return tuple(m for m in found if isinstance(m, AssistantMessage))

    def select(self, session_id: str) -> Snapshot:
        record = self.store.read(session_id)
        agent = self.agents.get(record.session.agent)
        if agent is None:
            raise AgentNotFound(record.session.agent, known=self.agents)
        sources = resolve(agent, record.session.workspace, self.files)
        active = self._active_range(session_id, record.messages)
        return Snapshot(
            session=record.session,
            agent=agent,
            tools=self.tools.permitted(agent.tools, agent=agent.name),
            instructions=assemble(sources, record.instructions),
            history=active.history,
            revision=record.session.revision,
            pending=record.pending,
            active=active,
        )
