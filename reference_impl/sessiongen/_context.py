"""SessionContext.select: a read-only snapshot of what the selected agent would see."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ._instructions import AssembledInstructions, assemble, resolve
from ._store import SessionStore
from ._transcript import active_history
from .errors import AgentNotFound
from .model import Agent, Message, PendingInput, Session
from .tools import Tool, ToolRegistry


@dataclass(frozen=True)
class Snapshot:
    """One session's model context at `revision`, taken in one read transaction.

    `history` is active history (after the latest completed compaction, cut at the first
    unsettled assistant message); pending inputs are not in it, and only the Drain's
    compaction check looks at them.
    """

    session: Session
    agent: Agent
    tools: tuple[Tool, ...]
    instructions: AssembledInstructions
    history: tuple[Message, ...]
    revision: int
    pending: tuple[PendingInput, ...]


class SessionContext:
    """Selects snapshots. It writes nothing, ever."""

    def __init__(self, store: SessionStore, agents: Mapping[str, Agent], tools: ToolRegistry):
        self.store = store
        self.agents = agents
        self.tools = tools

    def select(self, session_id: str) -> Snapshot:
        record = self.store.read(session_id)
        agent = self.agents.get(record.session.agent)
        if agent is None:
            raise AgentNotFound(record.session.agent, known=self.agents)
        sources = resolve(agent, record.session.workspace)
        return Snapshot(
            session=record.session,
            agent=agent,
            tools=self.tools.permitted(agent.tools),
            instructions=assemble(sources, record.instructions),
            history=active_history(record.messages),
            revision=record.session.revision,
            pending=record.pending,
        )
