"""Request traces: what the replay engine and the policies read.

A trace is a time-ordered list of provider requests. Each request is a prompt made of prefix
blocks: equal block ids at equal positions mean two requests share that prefix, which is what
a prompt cache can reuse. Every importer and the generator produce this one shape.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Literal, Self

from pydantic import ValidationError

from ...cache import MAX_BREAKPOINTS, TTL
from . import bounded_json


@dataclass(frozen=True, slots=True)
class RecordedUsage:
    """What the provider billed for one request, as the client's log recorded it: the
    ground truth a replay is calibrated against.

    `input_tokens` is the uncached input (Anthropic's meaning: cached tokens excluded), so the
    prompt is `input_tokens + cache_read_tokens + cache_write_5m_tokens +
    cache_write_1h_tokens`. `output_tokens` is None when the log's figure is not the real
    count (Claude Code 2.x logs a start-of-message placeholder).
    """

    input_tokens: int
    cache_read_tokens: int
    cache_write_5m_tokens: int
    cache_write_1h_tokens: int
    output_tokens: int | None

    @property
    def cache_write_tokens(self) -> int:
        return self.cache_write_5m_tokens + self.cache_write_1h_tokens

    @property
    def prompt_tokens(self) -> int:
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    @property
    def ttl(self) -> TTL | None:
        """The TTL the client wrote with, as the usage shows it: 1h when any write was 1h,
        5m when any was 5m, None when nothing was written."""
        if self.cache_write_1h_tokens:
            return "1h"
        return "5m" if self.cache_write_5m_tokens else None


@dataclass(frozen=True, slots=True)
class TraceRequest:
    """One provider request of a trace.

    `blocks` are the prompt's prefix block ids in order and `block_tokens` the tokens of each
    (the same length); their sum is the prompt's input tokens. `session` names the
    conversation the request belongs to (importers that have no session ids infer it from the
    prefix chain). `at` is seconds from the start of the trace.

    `breakpoints` are the block indexes the client marks for caching, ascending (at most the
    provider's maximum, 4); empty means the replay's default, the last block only. The last
    block is always marked by the replay whatever is given, since a policy's TTL is written
    there. `recorded` is the provider's real usage when the log has it. `output_known` is
    False when `output_tokens` is not the real count (a placeholder in the log).

    `model` is the model the log names for this request (None: the replay's model); the
    replay caches and prices each request at its own model. `ttft` is how long after `at`
    the response began, as far as the log shows it: what this request writes is readable
    only from then (`CacheEntry.available_at`), so requests sent together (a subagent
    fan-out) each write.
    """

    session: str
    at: float
    blocks: tuple[int, ...]
    block_tokens: tuple[int, ...]
    output_tokens: int
    breakpoints: tuple[int, ...] = ()
    recorded: RecordedUsage | None = None
    output_known: bool = True
    model: str | None = None
    ttft: float = 0.0

    def __post_init__(self) -> None:
        if len(self.blocks) != len(self.block_tokens):
            raise ValueError(
                f"a request has {len(self.blocks)} blocks but {len(self.block_tokens)} "
                "block token counts"
            )
        if self.breakpoints:
            if list(self.breakpoints) != sorted(set(self.breakpoints)):
                raise ValueError(f"breakpoints {self.breakpoints} must be ascending and unique")
            if self.breakpoints[0] < 0 or self.breakpoints[-1] >= len(self.blocks):
                raise ValueError(
                    f"breakpoints {self.breakpoints} must index the request's "
                    f"{len(self.blocks)} blocks"
                )
            if len(self.marks) > MAX_BREAKPOINTS:
                raise ValueError(
                    f"a request carries at most {MAX_BREAKPOINTS} breakpoints, got "
                    f"{len(self.marks)} (the last block is always one)"
                )

    @property
    def marks(self) -> tuple[int, ...]:
        """The block indexes the replay marks: the given breakpoints plus the last block."""
        last = len(self.blocks) - 1
        if not self.breakpoints or self.breakpoints[-1] != last:
            return (*self.breakpoints, last)
        return self.breakpoints

    @property
    def input_tokens(self) -> int:
        return sum(self.block_tokens)


WarmKind = Literal["account", "ttl_boundary", "missing_calls"]
WARM_KINDS: tuple[WarmKind, ...] = ("account", "ttl_boundary", "missing_calls")

TTL_TOLERANCE = 10.0
"""Seconds a gap may be past an entry's TTL, by the log's clock, and still be taken as within
it (docs/traces.md, "Gaps near a TTL"). A log's times are when lines were written: a
request's start is estimated (the line it answers, else its own first line less the log's
usual time to a first line), and the provider starts an entry's lifetime when the request
reaches it, so two starts a log puts 303.4 s apart can be 300 s apart at the provider. In
the real 2.1 logs a response's first line comes a median 3 to 5 s after the line it answers
(p90 7 to 25 s)."""


@dataclass(frozen=True, slots=True)
class WarmEntry:
    """A prefix the record shows cached where the log's own calls cannot have kept it:
    request `request` really read its prompt up to block `block`, and no earlier request of
    the trace wrote it, or none used it within its TTL before. A replay puts it in the cache,
    unbilled, just before that request, with `ttl`.

    `kind` says why: `account` (a prefix no call of the log wrote, such as an agent's system
    prompt written by a session the log does not hold, or one read after the log's own use
    of it had expired: kept warm by other sessions of the account), `ttl_boundary` (read at
    a gap at most `TTL_TOLERANCE` past the TTL: the log's times are when lines were written,
    not when requests reached the provider) or `missing_calls` (a read longer than any
    prompt the log shows could have written: calls missing from the log wrote it)."""

    request: int
    block: int
    ttl: TTL
    kind: WarmKind = "account"


@dataclass(frozen=True, slots=True)
class Trace:
    """A named, time-ordered sequence of requests, and the prefixes the record shows cached
    before it began (`warm`, from importers that read real usage)."""

    name: str
    requests: tuple[TraceRequest, ...]
    warm: tuple[WarmEntry, ...] = ()

    @classmethod
    def ordered(cls, name: str, requests: Iterable[TraceRequest]) -> Trace:
        """A trace of `requests` sorted by time; equal times keep their given order."""
        return cls(name, tuple(sorted(requests, key=lambda r: r.at)))

    def sessions(self) -> dict[str, tuple[TraceRequest, ...]]:
        """Each session's requests in time order, sessions in order of their first request."""
        grouped: dict[str, list[TraceRequest]] = {}
        for request in self.requests:
            grouped.setdefault(request.session, []).append(request)
        return {session: tuple(requests) for session, requests in grouped.items()}

    def split(self, fraction: float) -> tuple[Trace, Trace]:
        """The trace cut by session in time order: the sessions that start first, holding
        at most `fraction` of the requests, then the rest (`name-fit`, `name-held-back`).
        No session is cut; the held-back part keeps at least one session. Warm entries go
        with their request."""
        if not 0.0 <= fraction < 1.0:
            raise ValueError(f"the fit fraction must be in [0, 1), got {fraction!r}")
        sizes: dict[str, int] = {}
        for request in self.requests:  # in time order, so sessions in order of their start
            sizes[request.session] = sizes.get(request.session, 0) + 1
        budget = fraction * len(self.requests)
        fitted: set[str] = set()
        taken = 0
        for session, size in list(sizes.items())[:-1]:
            if taken + size > budget:
                break
            fitted.add(session)
            taken += size
        parts: tuple[list[int], list[int]] = ([], [])
        for i, request in enumerate(self.requests):
            parts[request.session not in fitted].append(i)
        fit, held = (
            self._subset(f"{self.name}-{tag}", part)
            for tag, part in zip(("fit", "held-back"), parts, strict=True)
        )
        return fit, held

    def _subset(self, name: str, indexes: list[int]) -> Trace:
        position = {old: new for new, old in enumerate(indexes)}
        warm = tuple(
            WarmEntry(position[w.request], w.block, w.ttl, w.kind)
            for w in self.warm
            if w.request in position
        )
        return Trace(name, tuple(self.requests[i] for i in indexes), warm)

    def reuse_gaps(self) -> tuple[float | None, ...]:
        """For each request (aligned with `requests`), the seconds until the next request of
        its session, or None for a session's last request: how long its prefix must stay
        cached to be reused."""
        gaps: list[float | None] = [None] * len(self.requests)
        next_at: dict[str, float] = {}
        for index in range(len(self.requests) - 1, -1, -1):
            request = self.requests[index]
            later = next_at.get(request.session)
            gaps[index] = None if later is None else later - request.at
            next_at[request.session] = request.at
        return tuple(gaps)


def unix_micros(moment: datetime | float) -> int:
    """A timestamp (an aware datetime, a naive one taken as UTC, or Unix seconds) as whole
    microseconds since the epoch: importers subtract these, so `at` comes out as written
    (5.4 s, not the 5.400000095 that subtracting two float epoch seconds gives)."""
    if not isinstance(moment, datetime):
        return round(moment * 1_000_000)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // timedelta(microseconds=1)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def trace_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """The non-blank lines of a JSON Lines trace, numbered from 1, each at most
    `bounded_json.MAX_LINE_BYTES` (a longer one is a TraceFormatError naming it)."""
    try:
        yield from bounded_json.lines(path)
    except bounded_json.LineProblem as problem:
        raise TraceFormatError(path, str(problem), problem.line) from None


class TraceFormatError(ValueError):
    """A trace file that does not follow its format: names the file, the line (1-based, for
    line-oriented formats) and what is wrong."""

    def __init__(self, path: Path | str, problem: str, line: int | None = None) -> None:
        self.path = Path(path)
        self.line = line
        self.problem = problem
        where = f"{self.path}" if line is None else f"{self.path}:{line}"
        super().__init__(f"{where}: {problem}")

    @classmethod
    def invalid(cls, path: Path | str, error: ValidationError, line: int | None = None) -> Self:
        """The error for a record that failed its pydantic model: each failing field and why."""
        problem = "; ".join(
            f"{'.'.join(str(part) for part in item['loc']) or 'record'}: {item['msg']}"
            for item in error.errors(include_url=False)
        )
        return cls(path, problem, line)
