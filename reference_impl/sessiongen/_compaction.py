"""Compaction: when active history would not fit, summarise it in one provider call and
record a durable compaction marker; later history starts at the summary."""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from functools import partial

from ._context import Snapshot
from ._request import SessionModelRequest
from ._store import SessionStore
from ._transcript import Messages, derivation
from .errors import ContextOverflow
from .llm.client import LLMClient, collect
from .llm.types import LLMMessage, LLMRequest
from .model import CompactionCompleted, TextPart, UserMessage, message_id
from .tokens import count_model_body_tokens, count_request_tokens

COMPACTION_PROMPT = (
    "Summarise this conversation so that work can continue from the summary alone: the "
    "user's goals and latest request (verbatim), decisions made, files and facts learned, "
    "and what remains to do. Do not call tools."
)


def context_window(request: LLMRequest) -> int:
    """The context window of the model `request` goes to, from the model catalog: the one
    source, which the emulator's "prompt is too long" check reads too."""
    from .cache.catalog import get_model  # the cache package is imported when first needed

    return get_model(request.model).context_window


# --- counting a request, one message at a time ---------------------------------------------
#
# `count_request_tokens` lowers and counts a whole request. Its count is a sum over wire
# positions, each counted and scaled by the model alone, except that prior-turn thinking
# may be dropped (which depends on the messages after it). So for a request without thinking
# blocks the count is the request without messages plus each message counted on its own,
# and a message's count never changes: it is kept, by model, for as long as the (immutable)
# message lives. Anything else is counted whole.

_THINKING = frozenset({"thinking", "redacted_thinking"})
_WHOLE_BODY_KEYS = frozenset({"model", "messages", "system", "tools"})
_counts: dict[str, dict[int, int]] = {}  # model -> id(message) -> tokens
_thinking: set[int] = set()  # ids of messages that lower to thinking blocks
_watched: dict[int, weakref.ref[LLMMessage]] = {}  # forgets a message when it dies


def _forget(key: int, ref: weakref.ref[LLMMessage]) -> None:
    if _watched.get(key) is ref:
        del _watched[key]
        _thinking.discard(key)
        for counts in _counts.values():
            counts.pop(key, None)


def _count_message(message: LLMMessage, model: str) -> int | None:
    """One message's tokens as part of a request to `model`; None if it lowers to thinking."""
    key = id(message)
    ref = _watched.get(key)
    if ref is None or ref() is not message:
        _watched[key] = weakref.ref(message, partial(_forget, key))
        _thinking.discard(key)
        for counts in _counts.values():
            counts.pop(key, None)
    by_id = _counts.setdefault(model, {})
    if key in by_id:
        return None if key in _thinking else by_id[key]
    from .llm.anthropic_wire import lower_request  # as `count_request_tokens` imports it

    body = lower_request(LLMRequest(model=model, messages=(message,)))
    if any(b.get("type") in _THINKING for m in body["messages"] for b in m["content"]):
        _thinking.add(key)
    by_id[key] = count_model_body_tokens(body)
    return None if key in _thinking else by_id[key]


def request_tokens(request: LLMRequest) -> int:
    """`count_request_tokens(request)`, counting only messages not counted before."""
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
    messages): a function of the model, the system texts and each tool's name, description
    and schema alone (marks cost nothing), so kept by those."""
    key = (
        request.model,
        tuple(part.text for part in request.system),
        tuple((t.name, t.description, repr(t.input_schema)) for t in request.tools),
    )
    tokens = _heads.get(key)
    if tokens is None:
        tokens = count_request_tokens(request.model_copy(update={"messages": ()}))
        _heads[key] = tokens
        while len(_heads) > HEADS:
            del _heads[next(iter(_heads))]
    return tokens


TOTALS = 32
_totals: dict[int, tuple[Messages, str, int | None]] = {}


def _messages_tokens(messages: Messages, model: str) -> int | None:
    """The sum of the messages' own counts; None if one lowers to thinking. Taken from a
    noted derivation when there is one, else message by message."""
    known = _totals.get(id(messages))
    if known is not None and known[0] is messages and known[1] == model:
        _totals[id(messages)] = _totals.pop(id(messages))  # the last used go last
        return known[2]
    derived = derivation(messages)
    total: int | None
    if derived is not None:
        total = _messages_tokens(derived.source, model)
        if total is not None and not derived.marks_only:
            for sign, group in ((-1, derived.removed), (1, derived.added)):
                for message in group:
                    tokens = _count_message(message, model)
                    if tokens is None:
                        return None
                    total += sign * tokens
    else:
        total = _sum_messages(messages, model)
    _totals.pop(id(messages), None)
    _totals[id(messages)] = (messages, model, total)
    while len(_totals) > TOTALS:
        del _totals[next(iter(_totals))]
    return total


def _sum_messages(messages: Messages, model: str) -> int | None:
    ids = list(map(id, messages))
    if _thinking and not _thinking.isdisjoint(ids):
        return None
    known = list(map(_counts.get(model, {}).get, ids))
    if None in known:
        for i, tokens in enumerate(known):
            if tokens is None:
                tokens = _count_message(messages[i], model)
                if tokens is None:
                    return None
                known[i] = tokens
    return sum(known)  # type: ignore[arg-type]


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
