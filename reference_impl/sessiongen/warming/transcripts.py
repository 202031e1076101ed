"""Traces from agent transcripts already on disk: Claude Code session logs and opencode session
exports, one provider request per model call, prompt blocks inferred from token usage.

Neither format records which prompt blocks a call sent, only how many tokens: the prompt is
input + cache write + cache read tokens, and it is taken to share the session's whole
previous prompt when at least as long (one new block for the growth), else to have been
reset (compaction, a cleared context: one new block). docs/traces.md lists what is read and
what is inferred.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .segments import SegmentChain
from .traces import Trace, TraceFormatError, TraceRequest, unix_micros


@dataclass(slots=True)
class _Call:
    """One model call read from a transcript, before its blocks are inferred."""

    session: str
    at: int  # Unix microseconds: exact, so differences come out as given (5.4 s, not 5.40000009)
    prompt_tokens: int
    output_tokens: int


def _trace(name: str, calls: list[_Call]) -> Trace:
    calls.sort(key=lambda call: call.at)  # stable: a session's calls in time order
    chain = SegmentChain()
    start = calls[0].at if calls else 0
    requests = []
    for call in calls:
        blocks, tokens = chain.grow(call.session, call.prompt_tokens)
        at = (call.at - start) / 1_000_000
        requests.append(TraceRequest(call.session, at, blocks, tokens, call.output_tokens))
    return Trace(name, tuple(requests))


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

    @property
    def prompt_tokens(self) -> int:
        written = self.cache_creation_input_tokens
        if written is None and self.cache_creation is not None:  # only the TTL breakdown given
            written = (
                self.cache_creation.ephemeral_5m_input_tokens
                + self.cache_creation.ephemeral_1h_input_tokens
            )
        return self.input_tokens + (written or 0) + (self.cache_read_input_tokens or 0)


class _ClaudeMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str | None = None
    model: str | None = None
    usage: _ClaudeUsage


class _ClaudeAssistant(BaseModel):
    model_config = ConfigDict(extra="ignore")

    session_id: str | None = Field(default=None, alias="sessionId")
    timestamp: datetime
    parent_uuid: str | None = Field(default=None, alias="parentUuid")
    request_id: str | None = Field(default=None, alias="requestId")
    is_sidechain: bool = Field(default=False, alias="isSidechain")
    agent_id: str | None = Field(default=None, alias="agentId")
    message: _ClaudeMessage


@dataclass(slots=True)
class _ClaudeEntry:
    line: _ClaudeAssistant  # the message's first line: session, parent, prompt usage
    output_tokens: int  # the largest of its lines: early ones can carry a placeholder


def load_claude_code(path: Path, name: str | None = None) -> Trace:
    """Claude Code session logs (one `.jsonl` file, or a directory searched recursively, e.g.
    `~/.claude/projects/<project>/` with its `subagents/` files) as a Trace.

    One request per assistant `message.id` (Claude Code writes a line per content block, and
    the same message can appear in a subagent file too); `<synthetic>` messages made no call.
    The session is `sessionId`, a subagent's (`isSidechain`) `sessionId/agentId`. The request
    time is that of the user line (prompt or tool result) the message answers, via
    `parentUuid`, else of the message's first line.
    """
    entries: dict[str, _ClaudeEntry] = {}
    times: dict[str, tuple[str, datetime]] = {}  # uuid -> (type, timestamp) of every line
    for file in _files(path, ".jsonl"):
        for number, record in _json_lines(file):
            kind, uuid, stamp = record.get("type"), record.get("uuid"), record.get("timestamp")
            if isinstance(uuid, str) and isinstance(stamp, str):
                try:
                    times[uuid] = (str(kind), datetime.fromisoformat(stamp))
                except ValueError:
                    raise TraceFormatError(file, f"bad timestamp {stamp!r}", number) from None
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
            entry = entries.get(key)
            if entry is None:
                entries[key] = _ClaudeEntry(line, output)
            else:
                entry.output_tokens = max(entry.output_tokens, output)
    calls = []
    for entry in entries.values():
        line = entry.line
        session = str(line.session_id)
        if line.is_sidechain:
            session = f"{session}/{line.agent_id or 'sidechain'}"
        parent = times.get(line.parent_uuid or "")
        sent = parent[1] if parent is not None and parent[0] == "user" else line.timestamp
        prompt = line.message.usage.prompt_tokens
        if prompt > 0:
            calls.append(_Call(session, unix_micros(sent), prompt, entry.output_tokens))
    return _trace(name or path.stem, calls)


def _json_lines(file: Path) -> Iterator[tuple[int, dict[str, object]]]:
    with file.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                record = json.loads(raw)
            except json.JSONDecodeError as error:
                raise TraceFormatError(file, f"not JSON: {error.msg}", number) from None
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

    input: int = Field(ge=0)  # without cached tokens: opencode subtracts cache read and write
    output: int = Field(ge=0)
    reasoning: int = Field(default=0, ge=0)
    cache: _OpencodeCache = _OpencodeCache()

    @property
    def prompt_tokens(self) -> int:
        return self.input + self.cache.read + self.cache.write


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


class _OpencodeMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    info: _OpencodeMessageInfo
    parts: list[_OpencodePart] = []


class _OpencodeSessionInfo(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str


class _OpencodeExport(BaseModel):
    model_config = ConfigDict(extra="ignore")

    info: _OpencodeSessionInfo
    messages: list[_OpencodeMessage]


def load_opencode(path: Path, name: str | None = None) -> Trace:
    """opencode session exports (`opencode export <sessionID> > file.json`; one file, or a
    directory of them searched recursively) as a Trace.

    One request per model call: each `step-finish` part of an assistant message carries that
    call's `tokens` (the message's own `tokens` holds only its last step, so it is used only
    when a message has no step parts). The first call's time is the message's `time.created`,
    a later call's the latest end among the previous step's parts (its tool runs finish just
    before the next call), else the previous call's time.
    """
    calls: list[_Call] = []
    seen: set[tuple[str, int]] = set()
    for file in _files(path, ".json"):
        try:
            export = _OpencodeExport.model_validate_json(file.read_bytes())
        except ValidationError as error:
            raise TraceFormatError.invalid(file, error) from None
        session = export.info.id
        for message in export.messages:
            info = message.info
            if info.role != "assistant" or info.time.created is None:
                continue
            for step, (at, tokens) in enumerate(_opencode_steps(message, info.time.created)):
                if (info.id, step) in seen or tokens.prompt_tokens == 0:
                    continue
                seen.add((info.id, step))
                output = tokens.output + tokens.reasoning
                calls.append(_Call(session, round(at * 1000), tokens.prompt_tokens, output))
    return _trace(name or path.stem, calls)


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
