"""Compaction: when active history would not fit, summarise it in one provider call and
record a durable compaction marker; later history starts at the summary."""

from __future__ import annotations

from ._context import Snapshot
from ._request import SessionModelRequest
from ._store import SessionStore
from .cache.catalog import get_model
from .errors import ContextOverflow
from .llm.client import LLMClient, collect
from .llm.types import LLMRequest
from .model import CompactionCompleted, TextPart, UserMessage, message_id
from .tokens import count_request_tokens

COMPACTION_PROMPT = (
    "Summarise this conversation so that work can continue from the summary alone: the "
    "user's goals and latest request (verbatim), decisions made, files and facts learned, "
    "and what remains to do. Do not call tools."
)


def context_window(request: LLMRequest) -> int:
    """The context window of the model `request` goes to, from the model catalog: the one
    source, which the emulator's "prompt is too long" check reads too."""
    return get_model(request.model).context_window


def compaction_required(snapshot: Snapshot, request: LLMRequest) -> bool:
    limit = context_window(request) * snapshot.agent.compaction_threshold
    return count_request_tokens(request) + request.max_output_tokens > limit


def check_fits(snapshot: Snapshot, request: LLMRequest) -> None:
    """Raise ContextOverflow when the request cannot fit the model's context window."""
    tokens = count_request_tokens(request)
    window = context_window(request)
    if tokens > window:
        raise ContextOverflow(
            f"the request needs {tokens} input tokens; the context window is {window}",
            tokens=tokens,
            limit=window,
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
    check_fits(snapshot, request)
    response = await collect(llm.stream(request))
    store.append(
        snapshot.session.id,
        lambda revision: [
            CompactionCompleted(
                message_id=message_id(revision + 1), summary=response.text, usage=response.usage
            )
        ],
    )
