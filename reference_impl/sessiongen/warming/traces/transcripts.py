"""Traces from agent transcripts already on disk: Claude Code session logs and opencode session
exports, one provider request per model call, prompt blocks inferred from token usage.

Neither format records which prompt blocks a call sent, only how many tokens: the prompt is
input + cache write + cache read tokens, and it is taken to share the session's whole
previous prompt when at least as long (one new block for the growth), else to have been
reset (compaction, a cleared context: one new block after the shared system prefix).

Sessions of one agent (one model, main conversation or subagent) share their system + tools
prefix: its size is read off the real usage, the smallest first cache read of the agent's
sessions (a session's first call can only read what an earlier session wrote). A session
whose first read is, to within `FORK_SLACK` tokens, the latest prompt of another session of
the same model (a compaction agent forking the conversation) shares that whole prompt
instead. Every request carries the provider's recorded usage and the breakpoints the client
placed, and says whether its output count is real.
docs/traces.md lists what is read and what is inferred.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from itertools import accumulate
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ...cache import TTL, TTL_SECONDS
from . import (
    TTL_TOLERANCE,
    RecordedUsage,
    Trace,
    TraceFormatError,
    TraceRequest,
    WarmEntry,
    WarmKind,
    bounded_json,
    trace_lines,
    unix_micros,
)
from .segments import SegmentChain

# The smallest prompt prefix Anthropic caches (Sonnet and Opus; Haiku needs 2,048): a shorter
# first read is not taken as a shared system prefix.
MIN_SHARED_PREFIX = 1024


@dataclass(slots=True)
class _Call:
    """One model call read from a transcript, before its blocks are inferred."""

    session: str
    at: int  # Unix microseconds: exact, so differences come out as given (5.4 s, not 5.40000009)
    recorded: RecordedUsage
    output_tokens: int  # the real count, or the largest figure logged when output is unknown
    model: str  # caches are per model: only calls of one model share a prefix
    agent: str  # sessions of one agent share a system + tools prefix
    output_known: bool = True
    marks_system: bool = True  # the client marks the system prompt and the last two messages
    ttft: int = 0  # microseconds from `at` to the response's first logged line

    @property
    def prompt_tokens(self) -> int:
        return self.recorded.prompt_tokens


# A first cache read at most this many tokens below an earlier prompt of another session (one
# model) read that prompt: Claude Code's compaction agent forks the conversation and reads
# the last prompt less its final token (166,758 of 166,759 in a real 2.1 log).
FORK_SLACK = 16

_Prompt = tuple[int, tuple[int, ...], tuple[int, ...]]  # prompt tokens, blocks, block tokens


def _fork_source(latest: dict[str, _Prompt], session: str, read: int) -> tuple[str, _Prompt] | None:
    """The most recent other session whose latest prompt the first `read` tokens are."""
    found = None
    for other, prompt in latest.items():  # insertion order: the most recent prompt last
        if other != session and read > 0 and 0 <= prompt[0] - read <= FORK_SLACK:
            found = (other, prompt)
    return found


@dataclass(frozen=True, slots=True)
class _Left:
    """What a session's latest call left in the cache: when, how many tokens (its read plus
    its write) and with which TTL."""

    at: int
    cached: int
    ttl: TTL


@dataclass(slots=True)
class _Layout:
    """Turns calls, in time order, into prompt blocks: the session chain plus the prefixes
    shared between sessions."""

    prefixes: dict[str, int]  # agent -> tokens of its shared system + tools prefix
    chain: SegmentChain = field(default_factory=SegmentChain)
    shared: dict[tuple[str, int], int] = field(default_factory=dict)  # (agent, tokens) -> block
    keep: dict[str, int] = field(default_factory=dict)  # session -> tokens a reset keeps
    # model -> session -> its latest prompt, the most recent session last
    latest: dict[str, dict[str, _Prompt]] = field(default_factory=dict)
    left: dict[str, _Left] = field(default_factory=dict)  # session -> its latest call's entry
    # (model, a prefix's last block) -> when the log last read or wrote that prefix (Unix
    # microseconds) and its TTL. A block id always follows the same blocks (the chain hands
    # out a new id for every new segment), so its id names the whole prefix.
    used: dict[tuple[str, int], tuple[int, TTL]] = field(default_factory=dict)

    def blocks(
        self, call: _Call
    ) -> tuple[tuple[int, ...], tuple[int, ...], int, tuple[int, WarmKind, TTL] | None]:
        """The call's blocks and block tokens, how many of its first blocks are prefixes
        shared between sessions, and, when the record shows the call read a prefix the
        log's own calls cannot have kept cached (`_warm`), the last block of that prefix,
        why (`WarmEntry.kind`) and its TTL."""
        session, prompt = call.session, call.prompt_tokens
        latest = self.latest.setdefault(call.model, {})
        read = call.recorded.cache_read_tokens
        missing = None
        if session not in self.keep:  # the session's first call
            self.keep[session] = 0
            fork = _fork_source(latest, session, read)
            prefix = self.prefixes.get(call.agent, 0)
            if fork is not None and fork[1][0] <= prompt:
                source, (shared, source_blocks, source_tokens) = fork
                self.chain.set(session, source_blocks, source_tokens)
                blocks, tokens = self.chain.extend(session, shared, prompt - shared)
                self.keep[session] = self.keep.get(source, 0)
            elif prefix and prompt >= prefix:
                # The agent's prefix, then (a longer first read) the longer prefix it read:
                # a system prompt an earlier session sent the same, behind the tools.
                levels = [prefix] + ([read] if prefix < read <= prompt else [])
                head: list[int] = []
                sizes: list[int] = []
                fresh = False
                for level in levels:
                    key = (call.agent, level)
                    fresh = key not in self.shared
                    if fresh:
                        self.shared[key] = self.chain.new_id()
                    head.append(self.shared[key])
                    sizes.append(level - sum(sizes))
                self.chain.set(session, tuple(head), tuple(sizes))
                blocks, tokens = self.chain.extend(session, levels[-1], prompt - levels[-1])
                self.keep[session] = prefix
            else:
                blocks, tokens = self.chain.grow(session, prompt)
        else:
            edited = self._edited(call)
            previous = self.chain.prompt_tokens(session)
            if edited is not None:
                blocks, tokens = self.chain.extend(session, edited, prompt - edited)
            elif previous <= prompt and read > previous + FORK_SLACK:
                # A read longer than the session's previous prompt: calls the log does not
                # hold sent a prompt of at least `read` tokens. Their prefix is its own
                # block, cached when this call is sent; only the rest is this call's growth.
                self.chain.extend(session, previous, read - previous)
                blocks, tokens = self.chain.extend(session, read, prompt - read)
                missing = len(blocks) - (2 if prompt > read else 1)
            else:
                blocks, tokens = self.chain.grow(session, prompt, self.keep[session])
        latest.pop(session, None)  # re-insert: the most recent prompt last
        latest[session] = (prompt, blocks, tokens)
        ttl = call.recorded.ttl or (self.left[session].ttl if session in self.left else "5m")
        cached = read + call.recorded.cache_write_tokens
        self.left[session] = _Left(call.at, cached, ttl)
        ids = set(self.shared.values())
        heads = 0
        while heads < len(blocks) - 1 and blocks[heads] in ids:
            heads += 1
        warm = self._warm(call, blocks, tokens, heads, ttl, missing)
        return blocks, tokens, heads, warm

    def _warm(
        self,
        call: _Call,
        blocks: tuple[int, ...],
        tokens: tuple[int, ...],
        heads: int,
        ttl: TTL,
        missing: int | None,
    ) -> tuple[int, WarmKind, TTL] | None:
        """The prefix the record shows this call read that the log's own calls cannot have
        kept cached, if any, as (its last block, why, TTL); and the log's use of the
        prefixes this call read or wrote, recorded for the calls after it.

        The log's use is read off the record, not the replay: a call that read a prefix
        refreshed it (with the TTL it was written with), one that wrote past it wrote it
        (with the call's TTL). A read of a prefix whose last use by the log is more than its
        TTL before (by the requests' starts: an entry lives its TTL from the start of the
        request that last used it) was kept warm by something the log does not hold."""
        read = call.recorded.cache_read_tokens
        ends = list(accumulate(tokens))
        found: tuple[int, WarmKind, TTL] | None = None
        if missing is not None:
            found = (missing, "missing_calls", ttl)
        else:
            boundary = max(
                (k for k, end in enumerate(ends) if end <= read + FORK_SLACK), default=None
            )
            if read and boundary is not None:
                last = self.used.get((call.model, blocks[boundary]))
                life = TTL_SECONDS[last[1]] * 1_000_000 if last else 0
                if last is None or call.at - last[0] > life:
                    late = last is not None and call.at - last[0] <= life + TTL_TOLERANCE * 1e6
                    found = (
                        boundary,
                        "ttl_boundary" if late else "account",
                        last[1] if last else ttl,
                    )
        # A call that wrote wrote every prefix it marks (as the replay does); one that only
        # read refreshed those it read.
        reach = ends[-1] if call.recorded.cache_write_tokens else read + FORK_SLACK
        marks = {*_breakpoints(len(blocks), heads), *([found[0]] if found else [])}
        for k in sorted(marks):
            if ends[k] > reach:
                break
            key = (call.model, blocks[k])
            before = self.used.get(key)
            kept = before[1] if before is not None and ends[k] <= read + FORK_SLACK else ttl
            self.used[key] = (call.at, kept)
        return found

    def _edited(self, call: _Call) -> int | None:
        """The tokens a later call shares with its session's previous prompt when the
        history was edited (Claude Code clears old tool results): what the call really
        read, when that is less than the previous call left cached while its entry was
        certainly alive (within its TTL) and no less than the session's system prefix; else
        None (the prompt grows or resets as its size says). Whole segments only
        (`SegmentChain.extend`)."""
        left = self.left.get(call.session)
        read = call.recorded.cache_read_tokens
        if left is None or read == 0 or not self.keep[call.session] <= read < left.cached:
            return None  # nothing read: a dropped entry as much as a changed history
        if call.at - left.at > TTL_SECONDS[left.ttl] * 1_000_000:
            return None  # the entry may have expired: a short read says nothing of content
        # A read ends at an earlier call's breakpoint, that call's uncached tail short of its
        # prompt's end: the segments up to there are kept.
        ends = list(accumulate(self.chain.prompt(call.session)[1]))
        kept = max((end for end in ends if end <= read + FORK_SLACK), default=0)
        return kept if kept >= self.keep[call.session] and kept <= call.prompt_tokens else None


def _shared_prefixes(calls: list[_Call]) -> dict[str, int]:
    """Each agent's shared system + tools prefix: the smallest first cache read of its sessions
    (at least `MIN_SHARED_PREFIX`), leaving out a read that is an earlier prompt of another
    session of the same model (a fork: that session's whole prompt, not a system prefix).
    `calls` are in time order."""
    prefixes: dict[str, int] = {}
    latest: dict[str, dict[str, _Prompt]] = {}
    for call in calls:
        prompts = latest.setdefault(call.model, {})
        if call.session not in prompts:
            read = call.recorded.cache_read_tokens
            forked = _fork_source(prompts, call.session, read) is not None
            if read >= MIN_SHARED_PREFIX and not forked:
                prefixes[call.agent] = min(read, prefixes.get(call.agent, read))
        prompts.pop(call.session, None)
        prompts[call.session] = (call.prompt_tokens, (), ())
    return prefixes


def _breakpoints(blocks: int, heads: int) -> tuple[int, ...]:
    """The blocks a client marks that caches the system prompt and the last two messages
    (Claude Code; opencode on Anthropic routes): the end of each shared prefix (tools, then
    the system prompt when sessions share it too: the first `heads` blocks), the previous
    prompt's end (the second-to-last message: what the previous call wrote) and the last
    block; at most four, the shared prefixes' earliest dropped first."""
    tail = {blocks - 1, *([blocks - 2] if blocks >= 2 else [])}
    marks = sorted({*range(heads), *tail})
    return tuple(marks[-4:])


def _trace(name: str, calls: list[_Call]) -> Trace:
    calls.sort(key=lambda call: call.at)  # stable: a session's calls in time order
    layout = _Layout(_shared_prefixes(calls))
    start = calls[0].at if calls else 0
    requests: list[TraceRequest] = []
    warm: list[WarmEntry] = []
    for call in calls:
        blocks, tokens, heads, cached = layout.blocks(call)
        at = (call.at - start) / 1_000_000
        marks = _breakpoints(len(blocks), heads) if call.marks_system else ()
        if cached is not None:
            block, kind, ttl = cached
            warm.append(WarmEntry(len(requests), block, ttl, kind))
        requests.append(
            TraceRequest(
                call.session,
                at,
                blocks,
                tokens,
                call.output_tokens,
                breakpoints=marks,
                recorded=call.recorded,
                output_known=call.output_known,
                model=call.model or None,
                ttft=call.ttft / 1_000_000,
            )
        )
    return Trace(name, tuple(requests), tuple(warm))


def _files(path: Path, suffix: str) -> list[Path]:
    if not path.is_dir():
        return [path]
    files = sorted(p for p in path.rglob(f"*{suffix}") if p.is_file())
    if not files:
        raise FileNotFoundError(f"no *{suffix} files under {path}")
    return files


# --- Claude Code: ~/.claude/projects/<project>/<session>.jsonl --------------------------------


class _ClaudeCacheCreation(BaseModel):
    model_config = ConfigDict(extra="ignore")

    ephemeral_5m_input_tokens: int = Field(default=0, ge=0)
    ephemeral_1h_input_tokens: int = Field(default=0, ge=0)


class _ClaudeUsage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    input_tokens: int = Field(ge=0)
    output_tokens: int = Field(ge=0)
    cache_creation_input_tokens: int | None = Field(default=None, ge=0)
    cache_read_input_tokens: int | None = Field(default=None, ge=0)
    cache_creation: _ClaudeCacheCreation | None = None

    def recorded(self, output_tokens: int | None) -> RecordedUsage:
        """The billed usage: the write split by TTL as `cache_creation` gives it; a log without
        the split (before Claude Code logged it) wrote only with the API's default 5m TTL."""
        split = self.cache_creation
        written = self.cache_creation_input_tokens
        if split is not None:
            five, hour = split.ephemeral_5m_input_tokens, split.ephemeral_1h_input_tokens
            if written is not None and written > five + hour:  # a total larger than its split
                five = written - hour
        else:
            five, hour = written or 0, 0
        return RecordedUsage(
            self.input_tokens, self.cache_read_input_tokens or 0, five, hour, output_tokens
        )


class _ClaudeMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str | None = None
    model: str | None = None
    stop_reason: str | None = None
    usage: _ClaudeUsage


class _ClaudeAssistant(BaseModel):
    model_config = ConfigDict(extra="ignore")

    session_id: str | None = Field(default=None, alias="sessionId")
    timestamp: datetime
    uuid: str | None = None
    parent_uuid: str | None = Field(default=None, alias="parentUuid")
    request_id: str | None = Field(default=None, alias="requestId")
    is_sidechain: bool = Field(default=False, alias="isSidechain")
    agent_id: str | None = Field(default=None, alias="agentId")
    message: _ClaudeMessage


@dataclass(slots=True)
class _ClaudeEntry:
    line: _ClaudeAssistant  # the message's first line: session, parent, prompt usage
    output_tokens: int  # the largest of its lines
    stopped: bool  # some line carries a stop_reason: its output_tokens is the final count


@dataclass(frozen=True, slots=True)
class _ClaudeLine:
    kind: str
    at: datetime
    parent: str | None
    sidechain: bool


def load_claude_code(path: Path, name: str | None = None) -> Trace:
    """Claude Code session logs (one `.jsonl` file, or a directory searched recursively, e.g.
    `~/.claude/projects/<project>/` with its `subagents/` files) as a Trace.

    One request per assistant `message.id` (Claude Code writes a line per content block, and
    the same message can appear in a subagent file too); `<synthetic>` messages made no call.
    The session is `sessionId`; a subagent's (`isSidechain`) is `sessionId/agentId` (2.x), or,
    for a subagent written into the main file without an `agentId` (1.0.x),
    `sessionId/<uuid of the root of its parentUuid chain>`: each Task run is its own chain.
    The request time is that of the user line (prompt or tool result) the message answers, via
    `parentUuid`, else of the message's first line. The output count is known only when a
    line of the message carries a `stop_reason`: the others log a start-of-message
    placeholder.
    """
    entries: dict[str, _ClaudeEntry] = {}
    lines: dict[str, _ClaudeLine] = {}  # uuid -> every line's kind, time, parent, sidechain
    for file in _files(path, ".jsonl"):
        for number, record in _json_lines(file):
            kind, uuid, stamp = record.get("type"), record.get("uuid"), record.get("timestamp")
            if isinstance(uuid, str) and isinstance(stamp, str):
                try:
                    moment = datetime.fromisoformat(stamp)
                except ValueError:
                    raise TraceFormatError(file, f"bad timestamp {stamp!r}", number) from None
                parent = record.get("parentUuid")
                side = record.get("isSidechain") is True
                lines.setdefault(
                    uuid,
                    _ClaudeLine(
                        str(kind), moment, parent if isinstance(parent, str) else None, side
                    ),
                )
            message = record.get("message")
            if kind != "assistant" or not isinstance(message, dict) or "usage" not in message:
                continue
            try:
                line = _ClaudeAssistant.model_validate(record)
            except ValidationError as error:
                raise TraceFormatError.invalid(file, error, number) from None
            if line.message.model == "<synthetic>":
                continue
            if line.session_id is None:
                line.session_id = file.stem
            key = line.message.id or line.request_id or f"{file}:{number}"
            output = line.message.usage.output_tokens
            stopped = line.message.stop_reason is not None
            entry = entries.get(key)
            if entry is None:
                entries[key] = _ClaudeEntry(line, output, stopped)
            else:
                entry.output_tokens = max(entry.output_tokens, output)
                entry.stopped = entry.stopped or stopped
    roots = _SidechainRoots(lines)
    starts = _RequestStarts(lines, entries.values())
    calls = []
    for entry in entries.values():
        line = entry.line
        session = str(line.session_id)
        if line.is_sidechain:
            chain = roots.root(line.uuid) if line.uuid else "sidechain"
            session = f"{session}/{line.agent_id or chain}"
        recorded = line.message.usage.recorded(entry.output_tokens if entry.stopped else None)
        if recorded.prompt_tokens > 0:
            model = line.message.model or ""
            agent = f"{model}/{'subagent' if line.is_sidechain else 'main'}"
            sent, first = starts.of(line)
            call = _Call(session, sent, recorded, entry.output_tokens, model, agent)
            call.output_known = entry.stopped
            call.ttft = first - sent
            calls.append(call)
    return _trace(name or (path.name if path.is_dir() else path.stem), calls)


class _RequestStarts:
    """When each assistant message's request was sent, in Unix microseconds, and when its
    first line was written.

    Claude Code writes a line when it has it: a response's lines after its content blocks
    complete, the user line (prompt or tool result) before the request that answers it. So a
    request was sent after the line its first line chains to (`parentUuid`) and before its
    first line. When that parent is any line but an assistant one (a user line, a hook's
    `progress` line, a `system` line), its time is the start; otherwise (no parent in the
    files, or another response's line) the start is the message's first line less the
    log's usual delay from a parent line to a response's first line (the median over its
    messages that have one), and no earlier than an assistant parent."""

    def __init__(self, lines: dict[str, _ClaudeLine], entries: Iterable[_ClaudeEntry]) -> None:
        self._lines = lines
        delays = []
        for entry in entries:
            parent = self._parent(entry.line)
            if parent is not None and parent.kind != "assistant":
                delays.append(max(unix_micros(entry.line.timestamp) - unix_micros(parent.at), 0))
        self._delay = round(statistics.median(delays)) if delays else 0

    def _parent(self, line: _ClaudeAssistant) -> _ClaudeLine | None:
        return self._lines.get(line.parent_uuid or "")

    def of(self, line: _ClaudeAssistant) -> tuple[int, int]:
        """(the request's start, its first line's time)."""
        first = unix_micros(line.timestamp)
        parent = self._parent(line)
        if parent is not None and parent.kind != "assistant":
            return min(unix_micros(parent.at), first), first
        sent = first - self._delay
        if parent is not None:
            sent = max(sent, unix_micros(parent.at))
        return min(sent, first), first


class _SidechainRoots:
    """The root of a sidechain line's `parentUuid` chain: its earliest sidechain ancestor (a
    subagent's prompt, `parentUuid: null`), memoized so a long chain is walked once."""

    def __init__(self, lines: dict[str, _ClaudeLine]) -> None:
        self._lines = lines
        self._roots: dict[str, str] = {}

    def root(self, uuid: str) -> str:
        path: list[str] = []
        on_path: set[str] = set()
        current = uuid
        while current not in self._roots:
            path.append(current)
            on_path.add(current)
            line = self._lines.get(current)
            parent = line.parent if line is not None else None
            above = self._lines.get(parent) if parent is not None else None
            if parent is None or above is None or not above.sidechain or parent in on_path:
                self._roots[current] = current
                break
            current = parent
        found = self._roots[current]
        for step in path:
            self._roots[step] = found
        return found


def _json_lines(file: Path) -> Iterator[tuple[int, dict[str, object]]]:
    for number, raw in trace_lines(file):
        try:
            record = bounded_json.parse(raw)
        except bounded_json.JSONProblem as problem:
            raise TraceFormatError(file, str(problem), number) from None
        if not isinstance(record, dict):
            raise TraceFormatError(file, "not a JSON object", number)
        yield number, record


# --- opencode: `opencode export <sessionID>` -------------------------------------------------


class _OpencodeCache(BaseModel):
    model_config = ConfigDict(extra="ignore")

    read: int = Field(default=0, ge=0)
    write: int = Field(default=0, ge=0)


class _OpencodeTokens(BaseModel):
    model_config = ConfigDict(extra="ignore")

    input: int = Field(ge=0)  # cached tokens excluded or included: see `_input_includes_cache`
    output: int = Field(ge=0)
    reasoning: int = Field(default=0, ge=0)
    cache: _OpencodeCache = _OpencodeCache()

    def recorded(self, includes_cache: bool) -> RecordedUsage:
        """The billed usage; opencode keeps no TTL, so the write is taken as 5m (the API's
        default and opencode's unless a cache rule sets 1h)."""
        cached = self.cache.read + self.cache.write
        uncached = self.input - cached if includes_cache else self.input
        return RecordedUsage(
            uncached, self.cache.read, self.cache.write, 0, self.output + self.reasoning
        )


class _OpencodeSpan(BaseModel):
    model_config = ConfigDict(extra="ignore")

    created: float | None = None  # ms, messages
    start: float | None = None  # ms, parts and tool runs
    end: float | None = None


class _OpencodeToolState(BaseModel):
    model_config = ConfigDict(extra="ignore")

    time: _OpencodeSpan | None = None


class _OpencodePart(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: str
    tokens: _OpencodeTokens | None = None  # step-finish parts: one model call each
    time: _OpencodeSpan | None = None
    state: _OpencodeToolState | None = None

    @property
    def ended(self) -> float | None:
        span = self.state.time if self.state is not None else self.time
        return span.end if span is not None else None


class _OpencodeMessageInfo(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str
    role: str
    time: _OpencodeSpan
    tokens: _OpencodeTokens | None = None  # assistant messages: the last step's usage
    provider_id: str = Field(default="", alias="providerID")
    model_id: str = Field(default="", alias="modelID")


class _OpencodeMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    info: _OpencodeMessageInfo
    parts: list[_OpencodePart] = []


class _OpencodeSessionInfo(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str
    parent_id: str | None = Field(default=None, alias="parentID")  # a subagent's session
    version: str | None = None


class _OpencodeExport(BaseModel):
    model_config = ConfigDict(extra="ignore")

    info: _OpencodeSessionInfo
    messages: list[_OpencodeMessage]


# opencode's getUsage (packages/opencode/src/session/index.ts) takes `input` from the AI SDK's
# `inputTokens`, which excludes cached tokens only for the Anthropic and Bedrock SDKs. Before
# 1.0.62 it stored that as is, so on other providers `input` includes the cached reads; from
# 1.0.62 (anomalyco/opencode#2653: "1.0.62 fixed the token count") it subtracts the cache on
# them (`excludesCachedTokens`); sessions of 1.3.5 have `input` including the reads and the
# writes again (marcusquinn/aidevops#12970 compares 1.3.3 and 1.3.5 data), and no later
# boundary is pinned. docs/traces.md.
_EXCLUSIVE_PROVIDERS = ("anthropic", "amazon-bedrock", "google-vertex-anthropic")
_SUBTRACTS_CACHE = (1, 0, 62)
_INCLUDES_CACHE_AGAIN = (1, 3, 5)


def _version(text: str | None) -> tuple[int, int, int] | None:
    """`1.0.62` as (1, 0, 62); None for a missing or unreadable version."""
    parts = (text or "").split("-")[0].split(".")
    if len(parts) != 3 or not all(part.isdigit() for part in parts):
        return None
    return int(parts[0]), int(parts[1]), int(parts[2])


def _input_includes_cache(
    version: tuple[int, int, int] | None, provider: str, steps: list[_OpencodeTokens]
) -> bool:
    """Whether these steps' `input` (one session, one provider) includes the cached tokens.

    Before 1.0.62: on every provider but Anthropic and Bedrock (whose SDKs report `input`
    without the cache). From 1.0.62 to before 1.3.5: never. Otherwise (1.3.5 on, or no
    version, as in an API response): when every step that used the cache has `input >=
    cache.read + cache.write`, which an input that includes them always shows and one that
    excludes them shows only by chance over a whole session."""
    if version is not None and version < _SUBTRACTS_CACHE:
        return not (provider in _EXCLUSIVE_PROVIDERS or "bedrock" in provider)
    if version is not None and version < _INCLUDES_CACHE_AGAIN:
        return False
    cached = [step for step in steps if step.cache.read + step.cache.write > 0]
    return bool(cached) and all(step.input >= step.cache.read + step.cache.write for step in cached)


def _marks_messages(provider: str, model: str) -> bool:
    """opencode's ProviderTransform.applyCaching marks the first two system messages and the
    last two others, on Anthropic-family routes only (the Anthropic and Bedrock providers, a
    Claude model through any other); other providers cache without breakpoints."""
    model = model.lower()
    return (
        provider in _EXCLUSIVE_PROVIDERS
        or "bedrock" in provider
        or "claude" in model
        or "anthropic" in model
    )


def load_opencode(path: Path, name: str | None = None) -> Trace:
    """opencode session exports (`opencode export <sessionID> > file.json`; one file, or a
    directory of them searched recursively) as a Trace.

    One request per model call: each `step-finish` part of an assistant message carries that
    call's `tokens` (the message's own `tokens` holds only its last step, so it is used only
    when a message has no step parts). The first call's time is the message's `time.created`,
    a later call's the latest end among the previous step's parts (its tool runs finish just
    before the next call), else the previous call's time. Whether `input` includes the cached
    tokens is decided per session and provider, by opencode's version in the export's `info`
    (`_input_includes_cache`).
    """
    calls: list[_Call] = []
    seen: set[tuple[str, int]] = set()
    for file in _files(path, ".json"):
        try:
            export = _OpencodeExport.model_validate_json(bounded_json.read_file(file))
        except bounded_json.JSONProblem as problem:
            raise TraceFormatError(file, str(problem)) from None
        except ValidationError as error:
            raise TraceFormatError.invalid(file, error) from None
        session = export.info.id
        kind = "subagent" if export.info.parent_id else "main"
        steps: list[tuple[_OpencodeMessageInfo, float, _OpencodeTokens]] = []
        for message in export.messages:
            info = message.info
            if info.role != "assistant" or info.time.created is None:
                continue
            for step, (at, tokens) in enumerate(_opencode_steps(message, info.time.created)):
                if (
                    info.id,
                    step,
                ) in seen or tokens.input + tokens.cache.read + tokens.cache.write == 0:
                    continue
                seen.add((info.id, step))
                steps.append((info, at, tokens))
        version = _version(export.info.version)
        by_provider: dict[str, list[_OpencodeTokens]] = {}
        for info, _, tokens in steps:
            by_provider.setdefault(info.provider_id, []).append(tokens)
        includes = {
            provider: _input_includes_cache(version, provider, tokens)
            for provider, tokens in by_provider.items()
        }
        for info, at, tokens in steps:
            recorded = tokens.recorded(includes[info.provider_id])
            if recorded.prompt_tokens == 0:
                continue
            model = f"{info.provider_id}/{info.model_id}"
            call = _Call(
                session,
                round(at * 1000),
                recorded,
                tokens.output + tokens.reasoning,
                model,
                f"{model}/{kind}",
            )
            call.marks_system = _marks_messages(info.provider_id, info.model_id)
            calls.append(call)
    return _trace(name or (path.name if path.is_dir() else path.stem), calls)


def _opencode_steps(
    message: _OpencodeMessage, created: float
) -> Iterator[tuple[float, _OpencodeTokens]]:
    at, latest_end = created, None
    found = False
    for part in message.parts:
        if part.type == "step-finish" and part.tokens is not None:
            found = True
            yield at, part.tokens
            at = latest_end if latest_end is not None else at
            latest_end = None
        elif part.ended is not None:
            latest_end = part.ended if latest_end is None else max(latest_end, part.ended)
    if not found and message.info.tokens is not None:
        yield created, message.info.tokens
