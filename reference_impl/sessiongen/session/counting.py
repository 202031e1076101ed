"""How many input tokens a prepared request holds: counted exactly, and decided cheaply.

`RequestCounter.count` is `count_request_tokens` (the request lowered and counted as its
provider's wire is billed) without counting again what it counted before. `ContextBudget`
decides overflow as opencode's `overflow.ts` does: from the usage the provider reported for
the session's latest Step plus an estimate of what was added since, and counts exactly only
when that estimate comes near the limit. Both are plain objects owned by whoever counts (the
engine's request preparation, a scripted provider); nothing is kept on the messages or in
the module.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from itertools import accumulate, compress, count
from operator import is_not

from ..catalog import ModelInfo, UnknownModel, get_model, is_known_model
from ..errors import ContextOverflow
from ..llm.types import Content, LLMMessage, LLMRequest, ToolCallContent, Usage
from ..model import (
    AssistantMessage,
    CompactionMessage,
    InstructionMessage,
    Message,
    ToolCallPart,
    UserMessage,
)
from ..providers import count_request_tokens, provider_of
from ..providers.anthropic import wire as anthropic_wire
from ..providers.anthropic.counting import count_model_body_tokens
from ..tokens import (
    THINKING_KINDS,
    count_text_tokens,
    count_tool_call_tokens,
    scale_of,
    scale_tokens,
)
from .context import Snapshot
from .transcript import block_count


def counting_key(model: str) -> Hashable:
    """What a count depends on besides the content: the model's catalogued facts (its
    tokenizer multiplier, tool-use prompt, thinking rules), as values. A count kept under
    them is never served after they change (`override_model`, an alias); an id the catalog
    does not know is its own key."""
    try:
        return get_model(model)
    except UnknownModel:
        return model


logger = logging.getLogger("sessiongen.engine")


def below_cache_minimum(request: LLMRequest, usage: Usage) -> bool:
    """Whether the prompt of a call (its whole input, as the provider billed it in `usage`)
    was under the model's minimum cacheable length (`ModelInfo.below_cache_minimum`, from
    the catalog), so nothing of it was cached: its cache reads are 0 and will stay 0 however
    often it is sent. Said, when it was, as a warning on the `sessiongen.engine` logger."""
    if not is_known_model(request.model):
        return False  # a hook sent it to a model the catalog does not know: no minimum known
    info = get_model(request.model)
    tokens = usage.total_input_tokens
    if not info.below_cache_minimum(tokens):
        return False
    logger.warning(
        "the prompt (%d tokens) is under %s's minimum cacheable length (%d tokens): nothing "
        "of it is cached, so it reads 0 from the cache and a warming ping would keep nothing",
        tokens,
        info.id,
        info.min_cacheable_tokens,
    )
    return True


def context_window(request: LLMRequest) -> int:
    """The context window of the model `request` goes to, from the model catalog: the one
    source, which the emulator's "prompt is too long" check reads too."""
    return get_model(request.model).context_window


# --- exact counts ---------------------------------------------------------------------------
#
# A Messages-body count is a sum over wire positions, each counted and scaled by the model
# alone, except that prior-turn thinking may be dropped (which depends on what follows). So
# a request without thinking counts as its head (system, tools, tool choice) plus each of
# its messages counted on its own. The counter remembers the last requests it counted, as
# their messages and the running sum of their counts; a new request counts only the messages
# after the longest prefix it shares with one of them. Prefixes are compared by value (tuple
# equality; CPython compares each pair by identity first, so an unchanged message costs a
# pointer compare and a changed one is never taken for the old).

_WHOLE_BODY_KEYS = frozenset({"model", "messages", "system", "tools"})
"""Provider options that rewrite these body fields make a request counted whole."""
REMEMBERED = 8
"""How many counted requests a counter remembers (a session's Step and its generate tails,
a few sessions at once)."""
FEW = 4
"""A prefix that leaves at most this many messages to count ends the search."""
TAIL = 16
"""How many trailing messages `_shared_prefix` compares one by one."""


@dataclass(frozen=True)
class _Counted:
    key: Hashable
    messages: tuple[LLMMessage, ...]
    sums: tuple[int, ...]
    """`sums[i]`: the tokens of `messages[:i]` (so one longer than `messages`)."""


def _shared_prefix(a: tuple[LLMMessage, ...], b: tuple[LLMMessage, ...]) -> int:
    """How many leading messages `a` and `b` share by value. Two requests of one session
    differ, if at all, near their ends (a new turn, moved cache marks): the head is compared
    in one C-level tuple comparison, the last few one by one."""
    n = min(len(a), len(b))
    head = max(n - TAIL, 0)
    if a[:head] == b[:head]:
        for i in range(head, n):
            if a[i] is not b[i] and a[i] != b[i]:
                return i
        return n
    for i in compress(count(), map(is_not, a, b)):  # identical ones are equal: skipped
        if a[i] != b[i]:
            return i
    return n


class RequestCounter:
    """Exact input-token counts of requests, each message counted once while remembered."""

    def __init__(self, remembered: int = REMEMBERED) -> None:
        # startup: cachetools (13 ms) loads with the first engine, not with `import sessiongen`
        from cachetools import LRUCache

        self.remembered = remembered
        self._counted: tuple[_Counted, ...] = ()
        # Keyed by the values a head's count depends on; bounded; owned by this counter.
        self._heads: LRUCache[Hashable, int] = LRUCache(maxsize=HEADS)
        self._lock = threading.Lock()

    def count(self, request: LLMRequest) -> int:
        """`count_request_tokens(request)`."""
        if not provider_of(request.model).messages_wire:  # OpenAI, Gemini: counted whole
            return count_request_tokens(request)
        options = request.provider_options.get("anthropic")
        if options is not None and (
            not isinstance(options, Mapping) or not _WHOLE_BODY_KEYS.isdisjoint(options)
        ):
            return count_request_tokens(request)
        key = counting_key(request.model)
        messages = tuple(request.messages)
        shared = 0
        sums: tuple[int, ...] = (0,)
        for counted in self._counted:  # the latest first
            if counted.key != key or len(counted.messages) <= shared:
                continue
            k = _shared_prefix(counted.messages, messages)
            if k > shared:
                shared, sums = k, counted.sums[: k + 1]
            if k >= len(messages) - FEW:
                break  # at most a few messages left to count: no older one saves more
        added: list[int] = []
        for message in messages[shared:]:
            tokens = _message_tokens(message, request.model)
            if tokens is None:  # thinking: its count depends on what follows
                return count_request_tokens(request)
            added.append(tokens)
        total = tuple(accumulate(added, initial=sums[-1]))
        remembered = _Counted(key, messages, sums + total[1:])
        with self._lock:  # replaced whole, so a reader never sees it half made
            self._counted = (remembered, *self._counted)[: self.remembered]
        return self._head_tokens(request, key) + total[-1]

    def _head_tokens(self, request: LLMRequest, key: Hashable) -> int:
        """The tokens of the request's tools and system parts (its positions before the
        messages): a function of the model, the system texts, each tool's name,
        description and schema, and the tool choice's type alone (marks cost nothing)."""
        choice = request.tool_choice
        head = (
            key,
            tuple(part.text for part in request.system),
            tuple(t.content_key() for t in request.tools),
            None if choice is None else choice.type,
        )
        with self._lock:
            tokens = self._heads.get(head)
        if tokens is None:
            tokens = count_request_tokens(request.model_copy(update={"messages": ()}))
            with self._lock:
                self._heads[head] = tokens
        return tokens


HEADS = 64
"""How many heads (system, tools, tool choice, model) a counter keeps counts of."""


def _message_tokens(message: LLMMessage, model: str) -> int | None:
    """One message's tokens as part of a request to `model`; None if it lowers to thinking.
    Its body is a request with this message alone, as `lower_request` lowers it (its
    `max_tokens` counts nothing, so it is left out)."""
    lowered = anthropic_wire.lower_message(message)
    if any(block.get("type") in THINKING_KINDS for block in lowered["content"]):
        return None
    return count_model_body_tokens({"model": model, "messages": [lowered]}, once=False)


# --- overflow, decided cheaply ----------------------------------------------------------------

ESTIMATE_MARGIN = 0.1
"""How near the limit an estimate may come (a tenth of the limit) before the request is
counted exactly. The estimate misses what changed in the head since the reported Step (a
new instruction baseline, other tools); a change larger than the margin is caught by the
provider's own "prompt is too long", mapped to `ContextOverflow` like this check's."""


class ContextBudget:
    """Whether a request fits: decided from the provider's reported usage of the session's
    latest Step plus an estimate of what was added since, and counted exactly (`counter`)
    only when that comes within `ESTIMATE_MARGIN` of the limit, where the larger of the two
    decides (a provider that bills more than the count is believed)."""

    def __init__(self, counter: RequestCounter | None = None) -> None:
        self.counter = RequestCounter() if counter is None else counter

    def estimate(self, snapshot: Snapshot, request: LLMRequest) -> int | None:
        """The request's input tokens as reported for the latest Step on its model (input
        and output) plus the tokens of what follows that Step's request: its tool results,
        the messages after it, and the request's transient messages. None without such a
        Step (a new session, right after a compaction, another model)."""
        history = snapshot.history
        for at in range(len(history) - 1, -1, -1):
            anchor = history[at]
            if isinstance(anchor, AssistantMessage) and anchor.usage.total_input_tokens > 0:
                break
        else:
            return None
        if anchor.model != request.model:
            return None
        reported = anchor.usage.total_input_tokens + anchor.usage.output_tokens
        # The anchor's own output is in `reported`; its tool results and all after are new.
        new = sum(_result_tokens(p) for p in anchor.parts if isinstance(p, ToolCallPart))
        new += sum(map(_message_estimate, history[at + 1 :]))
        added = block_count(request.messages) - snapshot.lowered.blocks
        for message in reversed(request.messages):  # the request's transient blocks
            if added <= 0:
                break
            transient = message.content[-added:]
            new += sum(map(_block_estimate, transient))
            added -= len(transient)
        key = counting_key(request.model)
        multiplier = scale_of(key) if isinstance(key, ModelInfo) else 1.0
        return reported + scale_tokens(new, multiplier)

    def input_tokens(self, snapshot: Snapshot, request: LLMRequest, *, limit: float) -> int:
        """The request's input tokens: the estimate while it stays clear of `limit`; near
        it, the larger of the estimate and the exact count (the provider's report stands
        for what it bills, the count for what changed since: either may be the larger)."""
        estimate = self.estimate(snapshot, request)
        if estimate is not None and estimate <= limit * (1 - ESTIMATE_MARGIN):
            return estimate
        return max(estimate or 0, self.counter.count(request))

    def compaction_required(self, snapshot: Snapshot, request: LLMRequest) -> bool:
        """Whether the request and its output would pass the agent's compaction threshold
        of the context window."""
        window = context_window(request) * snapshot.agent.compaction_threshold
        limit = window - request.max_output_tokens
        return self.input_tokens(snapshot, request, limit=limit) > limit

    def check_fits(self, snapshot: Snapshot, request: LLMRequest) -> None:
        """Raise `ContextOverflow` when the request cannot fit the model's context window."""
        window = context_window(request)
        tokens = self.input_tokens(snapshot, request, limit=window)
        if tokens > window:
            raise ContextOverflow(
                f"the request needs {tokens} input tokens; the context window is {window}",
                tokens=tokens,
                limit=window,
            )


BLOCK_FRAMING = 4
"""Template tokens an estimate adds for each content block (a Messages block's framing is
3 to 8: `catalog/tokens.json`)."""


def _block_estimate(block: Content) -> int:
    """A provider content block's tokens, by its text (no lowering, no model)."""
    if isinstance(block, ToolCallContent):
        return count_tool_call_tokens(block.name, block.input) + BLOCK_FRAMING
    return count_text_tokens(block.text) + BLOCK_FRAMING


def _result_tokens(part: ToolCallPart) -> int:
    return count_text_tokens(part.result or "") + BLOCK_FRAMING


def _message_estimate(message: Message) -> int:
    """A session message's tokens as its provider blocks would hold them (`_block_estimate`)."""
    if isinstance(message, UserMessage):
        return sum(count_text_tokens(p.text) + BLOCK_FRAMING for p in message.parts)
    if isinstance(message, InstructionMessage):
        return count_text_tokens(message.text) + BLOCK_FRAMING
    if isinstance(message, CompactionMessage):
        return count_text_tokens(message.summary) + BLOCK_FRAMING
    tokens = 0
    for part in message.parts:
        if isinstance(part, ToolCallPart):
            tokens += count_tool_call_tokens(part.name, part.input) + BLOCK_FRAMING
            tokens += _result_tokens(part)
        else:
            tokens += count_text_tokens(part.text) + BLOCK_FRAMING
    return tokens
