"""The Drain: promote -> select -> compact if required -> prepare -> attempt -> settle,
continuing while the model calls tools, up to the agent's step limit. Orchestration only.

A turn's prompt (`drain(session_id, prompt)`) is stored with its Step or not at all: its
admission, the promotion of everything pending and the first Step's opening are one
transaction, so a turn refused before its Step opened (a full disk, a provider error while
compacting) leaves no prompt behind that a retry would duplicate.

A Drain holds the session's drain lease in the store (`SessionStore.acquire_drain_lease`)
from before its recovery to its end, error and cancellation included, so processes sharing
one store file never drain a session at once: a Drain of a session another live process is
draining raises `SessionBusy` before it writes anything. Recovery runs under the lease too,
so it only interrupts Steps no live process is running.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

from ..errors import SessionBusy
from ..llm.client import LLMClient
from ..llm.types import FinishReason, Usage
from ..model import (
    AssistantMessage,
    Event,
    InputAdmitted,
    PendingInput,
    StepInterrupted,
    StepStarted,
    TextPart,
    UserMessage,
    message_id,
)
from ..tools import ToolRegistry
from .admission import admission_events, promotion_events
from .compaction import compact
from .context import SessionContext, Snapshot
from .counting import below_cache_minimum
from .instructions import commit_event
from .request import SessionModelRequest
from .settlement import execute_tools, settle_stream
from .store import SessionStore

INTERRUPTED_BY_EXIT = "the process ended before the Step settled"


@dataclass(frozen=True)
class DrainResult:
    """What one drain did: the steps it ran, the last finish reason, the summed usage, the
    session's revision when it ended (what a later `generate` reports unchanged), its
    Steps' messages as they settled, and `text`, the model's answer."""

    steps: int
    finish_reason: FinishReason | None
    usage: Usage = field(default_factory=Usage)
    revision: int = 0
    messages: tuple[AssistantMessage, ...] = ()
    below_cache_minimum: bool = False
    """A Step's prompt was under the model's minimum cacheable length (the model catalog's
    `min_cacheable_tokens`): nothing of it was cached (also logged as a warning on the
    `sessiongen.engine` logger)."""

    @property
    def text(self) -> str:
        """The turn's answer: the text of its last Step (the earlier Steps' text came with
        their tool calls; each is in `messages`). "" when that Step said nothing."""
        if not self.messages:
            return ""
        return "".join(p.text for p in self.messages[-1].parts if isinstance(p, TextPart))


@dataclass
class SessionRunner:
    store: SessionStore
    llm: LLMClient
    context: SessionContext
    preparation: SessionModelRequest
    tools: ToolRegistry

    @contextmanager
    def leased(self, session_id: str) -> Iterator[None]:
        """Hold the session's drain lease for the block, released when it ends however it
        ends. Raises `SessionBusy` (before the block runs) when another live process holds
        it; re-entrant within this store."""
        self.store.acquire_drain_lease(session_id)
        try:
            yield
        finally:
            self.store.release_drain_lease(session_id)

    def recover(self, session_id: str) -> int:
        """Mark Steps left unsettled by a dead process as interrupted; returns how many.

        Only under the session's drain lease: when another live process holds it, its Drain
        is running the unsettled Step, so nothing is marked (0). A lease left by a dead
        process is taken over."""
        try:
            with self.leased(session_id):
                return self._recover(session_id)
        except SessionBusy:
            return 0

    def _recover(self, session_id: str) -> int:
        """`recover` for a caller holding the lease."""
        stale = self.context.unsettled(session_id)
        if stale:
            self.store.append(
                session_id,
                [StepInterrupted(message_id=m.id, reason=INTERRUPTED_BY_EXIT) for m in stale],
            )
        return len(stale)

    def _commit_instructions(self, snapshot: Snapshot) -> bool:
        """Commit the assembled instruction state if it changed; True if it wrote."""
        assembled = snapshot.instructions
        if not assembled.needs_commit:
            return False
        self.store.append(
            snapshot.session.id,
            lambda revision: [commit_event(assembled, message_id(revision + 1))],
        )
        return True

    async def drain(self, session_id: str, prompt: str | None = None) -> DrainResult:
        """Recover, then run Steps until the model stops calling tools or the agent's step
        limit; all of it under the session's drain lease (`SessionBusy` when another live
        process holds it, with nothing written). `prompt`, a turn's (validated), is admitted
        in the transaction that opens the first Step."""
        with self.leased(session_id):
            return await self._drain(session_id, prompt)

    async def _drain(self, session_id: str, prompt: str | None = None) -> DrainResult:
        self._recover(session_id)
        usage = Usage()
        finish: FinishReason | None = None
        step = 0
        step_ids: set[str] = set()  # the Steps this Drain opened
        uncacheable = False
        while True:
            step += 1
            # Instructions before promotion, so an update sits before the prompt it
            # accompanies, exactly where session.generate puts its transient update.
            snapshot = self.context.select(session_id)
            if self._commit_instructions(snapshot):
                snapshot = self.context.select(session_id)
            # Compact before promotion, so the new prompt stays verbatim after the summary.
            pending = snapshot.pending
            waiting = pending if prompt is None else (*pending, PendingInput(id="", text=prompt))
            incoming = tuple(UserMessage(id=p.id, parts=(TextPart(text=p.text),)) for p in waiting)
            probe = self.preparation.build(
                snapshot, operation="step", step=step, transient=incoming
            )
            compacted = self.preparation.budget.compaction_required(snapshot, probe)
            if compacted:
                await compact(self.store, self.llm, self.preparation, snapshot)
            model = snapshot.agent.model.id

            def opening(
                revision: int,
                step: int = step,
                model: str = model,
                prompt: str | None = prompt,
                pending: tuple[PendingInput, ...] = pending,
            ) -> list[Event]:
                """The prompt admitted, everything pending promoted, the Step opened."""
                events: list[Event] = [] if prompt is None else admission_events(prompt, revision)
                admitted = [*pending]
                admitted += (
                    PendingInput(id=e.input_id, text=e.text)
                    for e in events
                    if isinstance(e, InputAdmitted)
                )
                events += promotion_events(admitted, revision + len(events))
                opened = message_id(revision + len(events) + 1)
                return [*events, StepStarted(message_id=opened, step=step, model=model)]

            revision = self.store.append(session_id, opening)
            prompt = None
            step_message = message_id(revision)
            step_ids.add(step_message)
            # Prepared from the history the Step opened on (its open message is cut from it),
            # at the revision before its opening, as when the Step was a write of its own.
            snapshot = replace(self.context.select(session_id), revision=revision - 1)
            request = self.preparation.prepare(snapshot, operation="step", step=step)
            settled = await settle_stream(
                self.store, session_id, step_message, self.llm.stream(request)
            )
            usage = usage + settled.usage
            uncacheable = below_cache_minimum(request, settled.usage) or uncacheable
            finish = settled.finish_reason
            await execute_tools(
                self.store,
                session_id,
                step_message,
                settled.tool_calls,
                self.tools,
                snapshot.agent.tools,
                snapshot.session.workspace,
            )
            if not settled.tool_calls or step >= snapshot.agent.steps:
                record = self.store.read(session_id)
                ran: list[AssistantMessage] = []
                for message in reversed(record.messages):  # its Steps are the latest ones
                    if isinstance(message, AssistantMessage) and message.id in step_ids:
                        ran.insert(0, message)
                        if len(ran) == len(step_ids):
                            break
                revision = record.session.revision
                return DrainResult(step, finish, usage, revision, tuple(ran), uncacheable)
