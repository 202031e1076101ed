"""Compaction: when active history would not fit (`ContextBudget.compaction_required`),
summarise it in one provider call and record a durable compaction marker; later history
starts at the summary."""

from __future__ import annotations

from ..llm.client import LLMClient, collect
from ..model import CompactionCompleted, TextPart, UserMessage, message_id
from .context import Snapshot
from .request import SessionModelRequest
from .store import SessionStore

COMPACTION_PROMPT = (
    "Summarise this conversation so that work can continue from the summary alone: the "
    "user's goals and latest request (verbatim), decisions made, files and facts learned, "
    "and what remains to do. Do not call tools."
)


async def compact(
    store: SessionStore, llm: LLMClient, preparation: SessionModelRequest, snapshot: Snapshot
) -> None:
    """Summarise the snapshot's active history through the shared preparation (so the
    compaction call reads the same cached prefix) and commit the marker."""
    request = preparation.prepare(
        snapshot,
        operation="compaction",
        transient=(UserMessage(id="compaction", parts=(TextPart(text=COMPACTION_PROMPT),)),),
    )
    preparation.budget.check_fits(snapshot, request)
    response = await collect(llm.stream(request))
    store.append(
        snapshot.session.id,
        lambda revision: [
            CompactionCompleted(
                message_id=message_id(revision + 1), summary=response.text, usage=response.usage
            )
        ],
    )
