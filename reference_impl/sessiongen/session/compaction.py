"""Compaction: when active history would not fit, summarise it in one provider call and
record a durable compaction marker; later history starts at the summary."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

from ..errors import ContextOverflow
from ..llm.client import LLMClient, collect
from ..llm.types import LLMMessage, LLMRequest
from ..model import CompactionCompleted, TextPart, UserMessage, message_id
from ..tokens import count_model_body_tokens, count_request_tokens, provider_of
from .context import Snapshot
from .request import SessionModelRequest
from .store import SessionStore
from .transcript import LLMMessages, message_counts

COMPACTION_PROMPT = (
    "Summarise this conversation so that work can continue from the summary alone: the "
    "user's goals and latest request (verbatim), decisions made, files and facts learned, "
    "and what remains to do. Do not call tools."
)


def context_window(request: LLMRequest) -> int:
    """The context window of the model `request` goes to, from the model catalog: the one
    source, which the emulator's "prompt is too long" check reads too."""
    from ..cache.catalog import get_model  # the cache package is imported when first needed

    return get_model(request.model).context_window


# --- counting a request, one message at a time ---------------------------------------------
#
# `count_request_tokens` lowers and counts a whole request. Its count is a sum over wire
# positions, each counted and scaled by the model alone, except that prior-turn thinking
# may be dropped (which depends on the messages after it). So for a request without thinking
# blocks the count is the request without messages plus each message counted on its own.
# A message's count never changes: the (immutable) message keeps it, by model
# (`message_counts`); a message tuple keeps its total (`LLMMessages.tokens`), and one made
# from another (a history with a transient tail, a history one turn longer) is counted as
# that one's total with its own few messages changed. Anything else is counted whole.

_THINKING = frozenset({"thinking", "redacted_thinking"})
_WHOLE_BODY_KEYS = frozenset({"model", "messages", "system", "tools"})


def counting_key(model: str) -> Hashable:
    """What a count depends on besides the content: the model's catalogued facts (its
    tokenizer multiplier, tool-use prompt, thinking rules), as values. A count kept under
    them is never served after they change (`override_model`, an alias); an id the catalog
    does not know is its own key."""
    from ..cache.catalog import UnknownModel, get_model  # as `context_window` imports it

    try:
        return get_model(model)
    except UnknownModel:
        return model


def _count_message(message: LLMMessage, model: str) -> int | None:
    """One message's tokens as part of a request to `model`; None if it lowers to thinking."""
    counts = message_counts(message)
    key = counting_key(model)
    if key in counts:
        return counts[key]
    from ..llm.anthropic_wire import lower_message  # as `count_request_tokens` imports it

    # The body of a request with this message alone (as `lower_request` lowers it; its
    # `max_tokens` counts nothing, so it is left out).
    body: dict[str, Any] = {"model": model, "messages": [lower_message(message)]}
    thinking = any(b.get("type") in _THINKING for m in body["messages"] for b in m["content"])
    tokens = None if thinking else count_model_body_tokens(body)
    counts[key] = tokens
    return tokens


_MESSAGES_LOWERING = frozenset({"anthropic", "bedrock"})
"""The providers whose requests are counted as the Messages body (`anthropic_wire`), the
lowering the per-message memo below counts with."""


def request_tokens(request: LLMRequest) -> int:
    """`count_request_tokens(request)`, counting only messages not counted before (on the
    providers counted as a Messages body; the others are counted whole)."""
    if provider_of(request.model) not in _MESSAGES_LOWERING:
        return count_request_tokens(request)
    options = request.provider_options.get("anthropic")
    if options is not None and (
        not isinstance(options, Mapping) or not _WHOLE_BODY_KEYS.isdisjoint(options)
    ):
        return count_request_tokens(request)
    tokens = _messages_tokens(request.messages, request.model)
    if tokens is None:  # thinking: its count depends on what follows
        return count_request_tokens(request)
    return _head_tokens(request) + tokens


HEADS = 64
_heads: dict[tuple[object, ...], int] = {}


def _head_tokens(request: LLMRequest) -> int:
    """The tokens of the request's tools and system parts (its positions before the
    messages): a function of the model, the system texts, each tool's name, description
    and schema, and the tool choice (the tool-use system prompt depends on its type) alone
    (marks cost nothing), so kept by those."""
    choice = request.tool_choice
    key = (
        counting_key(request.model),
        tuple(part.text for part in request.system),
        tuple(t.content_key() for t in request.tools),
        None if choice is None else choice.type,
    )
    tokens = _heads.get(key)
    if tokens is None:
        tokens = count_request_tokens(request.model_copy(update={"messages": ()}))
        _heads[key] = tokens
        while len(_heads) > HEADS:
            del _heads[next(iter(_heads))]
    return tokens


def _messages_tokens(messages: tuple[LLMMessage, ...], model: str) -> int | None:
    """The sum of the messages' own counts; None if one lowers to thinking. An
    `LLMMessages` keeps its sum, and derives it from what it was made from."""
    if not isinstance(messages, LLMMessages):
        return _sum_messages(messages, model)
    totals = messages.tokens
    key = counting_key(model)
    if key in totals:
        return totals[key]
    total: int | None
    if messages.base is not None:
        base, keep = messages.base, messages.keep
        total = _changed(_messages_tokens(base, model), base[keep:], messages[keep:], model)
    elif messages.carried is not None and key in messages.carried[0]:
        before, removed, added = messages.carried
        total = _changed(before[key], removed, added, model)
    else:
        total = _sum_messages(messages, model)
    totals[key] = total
    return total


def _changed(
    total: int | None,
    removed: tuple[LLMMessage, ...],
    added: tuple[LLMMessage, ...],
    model: str,
) -> int | None:
    """`total` without the counts of `removed` and with those of `added`."""
    if total is None:
        return None
    for sign, group in ((-1, removed), (1, added)):
        for message in group:
            tokens = _count_message(message, model)
            if tokens is None:
                return None
            total += sign * tokens
    return total


def _sum_messages(messages: tuple[LLMMessage, ...], model: str) -> int | None:
    return _changed(0, (), messages, model)


def compaction_required(snapshot: Snapshot, request: LLMRequest) -> bool:
    limit = context_window(request) * snapshot.agent.compaction_threshold
    return request_tokens(request) + request.max_output_tokens > limit


def check_fits(snapshot: Snapshot, request: LLMRequest) -> None:
    """Raise ContextOverflow when the request cannot fit the model's context window."""
    tokens = request_tokens(request)
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
