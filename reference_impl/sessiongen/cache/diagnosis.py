"""Why a call missed the cache: the one rule that names a miss's cause, for the trace replay
and its calibration (`warming.study.calibration`) and for the runs of real agent clients
(`sessiongen agents run`).

The vocabulary is the one Claude Code shows its users: `ttl_expired_5m`, `ttl_expired_1h`,
`tools_changed`, `model_changed`, `messages_rewritten` (history edited),
`system_prompt_changed`, `cold_start`, `below_minimum`, `likely_server_side`, `unknown`.

A call *misses* when it reads less than its session's previous call left cached, to within
`MISS_SLACK` tokens (Claude Code's next call reads the previous prompt less its last few
uncached tokens), or, for a session's first call, when it reads nothing. The cause is the
first of these that holds, in this order, each comparing the call with its session's
previous call:

1. no previous call: `cold_start` (or `below_minimum` for a prompt the model never caches);
2. the prompt is below the model's minimum cacheable length: `below_minimum`;
3. another model (caches are per model): `model_changed`;
4. other tools, then another system prompt (each compared only where known):
   `tools_changed`, `system_prompt_changed`;
5. the previous call's messages are not a prefix of this call's (an edited history: Claude
   Code clears old tool results): `messages_rewritten`;
6. the gap from the previous call's start to this call's start is over the TTL it was
   written or last read with, less `tolerance`: `ttl_expired_5m` / `ttl_expired_1h`. An
   entry lives its TTL from the start of the request that last wrote or read it
   (`CacheEntry`), so starts are compared; `tolerance` is how far the log's times may be
   off (docs/traces.md);
7. everything the call is compared on is the same and the entry was alive: the provider
   dropped it, `likely_server_side`; `unknown` when the messages are not known at all.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Literal, get_args

from .prefix import TTL
from .store import TTL_SECONDS

MissCause = Literal[
    "ttl_expired_5m",
    "ttl_expired_1h",
    "tools_changed",
    "model_changed",
    "messages_rewritten",
    "system_prompt_changed",
    "cold_start",
    "below_minimum",
    "likely_server_side",
    "unknown",
]
MISS_CAUSES: tuple[MissCause, ...] = get_args(MissCause)
"""Every cause, in the order reports list them."""

MISS_SLACK = 16
"""Tokens a call may read short of what its session's previous call left and still count as
having read it all: a read stops at the previous call's breakpoint, its last few uncached
tokens short of that prompt's end (in a real 2.1 log: prompt 165,509, next read 165,508)."""


@dataclass(frozen=True, slots=True)
class CallShape:
    """What a diagnosis compares between a call and its session's previous call. `tools`,
    `system` and `messages` are fingerprints (equal means the same content; None: not
    known, not compared); `messages` is one fingerprint per message (or per prefix
    block), in order."""

    at: float
    """The request's start, seconds."""
    model: str
    prompt_tokens: int
    tools: Hashable | None = None
    system: Hashable | None = None
    messages: tuple[Hashable, ...] | None = None
    ttl: TTL | None = None
    """The TTL of the entry this call wrote or read (None: it cached nothing)."""


def is_miss(read: int, left: int, first: bool) -> bool:
    """Whether a call that read `read` tokens missed: a first call that read nothing, or a
    later one that read less than the `left` tokens its session's previous call left cached
    (less `MISS_SLACK`)."""
    if first:
        return read == 0
    return read + MISS_SLACK < left


def miss_cause(
    call: CallShape,
    previous: CallShape | None,
    *,
    min_tokens: int,
    tolerance: float = 0.0,
) -> MissCause:
    """The cause of a miss of `call` (the module's rule; call it only for a miss,
    `is_miss`), `previous` being its session's previous call."""
    if previous is None:
        return "below_minimum" if call.prompt_tokens < min_tokens else "cold_start"
    if call.prompt_tokens < min_tokens:
        return "below_minimum"
    if call.model != previous.model:
        return "model_changed"
    if _changed(call.tools, previous.tools):
        return "tools_changed"
    if _changed(call.system, previous.system):
        return "system_prompt_changed"
    if call.messages is not None and previous.messages is not None:
        before = previous.messages
        if call.messages[: len(before)] != before:
            return "messages_rewritten"
    ttl = previous.ttl or "5m"
    if call.at - previous.at > TTL_SECONDS[ttl] - tolerance:
        return "ttl_expired_1h" if ttl == "1h" else "ttl_expired_5m"
    if call.messages is None or previous.messages is None:
        return "unknown"
    return "likely_server_side"


def _changed(now: Hashable | None, before: Hashable | None) -> bool:
    return now is not None and before is not None and now != before


def count_causes(causes: Mapping[str, int] | list[str]) -> str:
    """`ttl_expired_5m 3, cold_start 5`: the causes that occur, with their counts, in the
    order of `MISS_CAUSES`; `none` when there are none."""
    counts: dict[str, int] = {}
    if isinstance(causes, Mapping):
        counts = {k: v for k, v in causes.items() if v}
    else:
        for cause in causes:
            if cause:
                counts[cause] = counts.get(cause, 0) + 1
    parts = [f"{cause} {counts[cause]:,}" for cause in MISS_CAUSES if cause in counts]
    return ", ".join(parts) if parts else "none"
