"""The generic session-event JSONL format ("events"), one provider request a line, that users
write from their own logs; each line is validated with a pydantic model.

A line has `session`, `timestamp` (seconds as a number, or an ISO 8601 string; a string
without a zone is UTC), `output_tokens`, and the prompt in one of two forms:

- `blocks`: a list of `{"id", "tokens"}` in prompt order; ids are opaque (int or string),
  equal ids mean the same block (so the same token count), and sharing a block id across
  sessions shares that prefix (a system prompt);
- `prefix_tokens` + `new_tokens`: tokens shared with the same session's previous line, then
  tokens appended. Each line's new tokens become one new block (see `SegmentChain.extend` for
  a prefix that ends inside an earlier block).

Optional: `"breakpoint": true` on a block marks it for caching as the client did (the last
block always is), and `usage` gives what the provider billed (`input_tokens`,
`cache_read_tokens`, `cache_write_5m_tokens`, `cache_write_1h_tokens`), which the experiment
calibrates against.

Lines of one session must be in time order; sessions may interleave. See docs/traces.md.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    ValidationError,
    field_validator,
    model_validator,
)

from .segments import SegmentChain
from .traces import RecordedUsage, Trace, TraceFormatError, TraceRequest, unix_micros


class EventBlock(BaseModel):
    """One prompt block of an events line; `breakpoint` marks it for caching, as the client
    did (the prompt's last block is always marked)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: StrictInt | StrictStr
    tokens: int = Field(ge=1)
    breakpoint: bool = False


class EventUsage(BaseModel):
    """What the provider billed for the line's request, from the user's own logs: uncached
    input (cached tokens excluded), cache reads, and cache writes by TTL. Their sum is the
    prompt, so it must equal the line's prompt tokens."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input_tokens: int = Field(ge=0)
    cache_read_tokens: int = Field(default=0, ge=0)
    cache_write_5m_tokens: int = Field(default=0, ge=0)
    cache_write_1h_tokens: int = Field(default=0, ge=0)

    def recorded(self, output_tokens: int) -> RecordedUsage:
        return RecordedUsage(
            self.input_tokens,
            self.cache_read_tokens,
            self.cache_write_5m_tokens,
            self.cache_write_1h_tokens,
            output_tokens,
        )


class EventLine(BaseModel):
    """One line of the events format: one provider request."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    session: str = Field(min_length=1)
    timestamp: float | datetime
    output_tokens: int = Field(ge=0)
    blocks: list[EventBlock] | None = Field(default=None, min_length=1)
    prefix_tokens: int | None = Field(default=None, ge=0)
    new_tokens: int | None = Field(default=None, ge=0)
    usage: EventUsage | None = None

    @field_validator("timestamp", mode="before")
    @classmethod
    def _seconds_or_iso(cls, value: object) -> object:
        if isinstance(value, bool):
            raise ValueError("timestamp must be a number of seconds or an ISO 8601 string")
        if not isinstance(value, str):
            return value
        try:
            return datetime.fromisoformat(value)  # without a zone: UTC, see unix_micros
        except ValueError:
            raise ValueError(
                f"timestamp {value!r} is neither a number of seconds nor ISO 8601"
            ) from None

    @model_validator(mode="after")
    def _one_prompt_form(self) -> Self:
        token_form = (self.prefix_tokens, self.new_tokens)
        if self.blocks is not None:
            if token_form != (None, None):
                raise ValueError("give either blocks or prefix_tokens + new_tokens, not both")
        elif None in token_form:
            raise ValueError("give blocks, or both prefix_tokens and new_tokens")
        elif self.prefix_tokens == 0 and self.new_tokens == 0:
            raise ValueError("a prompt needs at least one token")
        return self


def load_events(path: Path, name: str | None = None) -> Trace:
    """An events JSONL file as a Trace, `at` measured from the earliest timestamp. Raises
    TraceFormatError naming the line of a malformed or inconsistent line."""
    reader = _Reader(path)
    parsed: list[tuple[int, TraceRequest]] = []  # (Unix microseconds, request at 0)
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                line = EventLine.model_validate_json(raw)
            except ValidationError as error:
                raise TraceFormatError.invalid(path, error, number) from None
            micros = reader.micros(line, number)
            blocks, tokens = reader.prompt(line, number)
            marks = tuple(k for k, b in enumerate(line.blocks or ()) if b.breakpoint)
            recorded = None
            if line.usage is not None:
                recorded = line.usage.recorded(line.output_tokens)
                if recorded.prompt_tokens != sum(tokens):
                    raise TraceFormatError(
                        path,
                        f"usage: adds up to {recorded.prompt_tokens} prompt tokens but the "
                        f"prompt has {sum(tokens)}",
                        number,
                    )
            try:
                request = TraceRequest(
                    line.session, 0.0, blocks, tokens, line.output_tokens, marks, recorded
                )
            except ValueError as error:  # more breakpoints than a request may carry
                raise TraceFormatError(path, f"blocks: {error}", number) from None
            parsed.append((micros, request))
    start = min((micros for micros, _ in parsed), default=0)
    return Trace.ordered(
        name or path.stem,
        (replace(request, at=(micros - start) / 1_000_000) for micros, request in parsed),
    )


class _Reader:
    """What one events file's lines must agree on: timestamp kind, each session's time order,
    each block id's token count, and each session's previous prompt."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.chain = SegmentChain()
        self.ids: dict[int | str, tuple[int, int, int]] = {}  # id -> (block, tokens, line)
        self.last_time: dict[str, tuple[int, int]] = {}  # session -> (latest time, its line)
        self.numeric: bool | None = None  # timestamps are numbers (else ISO 8601)

    def micros(self, line: EventLine, number: int) -> int:
        is_number = not isinstance(line.timestamp, datetime)
        if self.numeric is None:
            self.numeric = is_number
        elif is_number != self.numeric:
            raise TraceFormatError(
                self.path, "mixes numeric and ISO 8601 timestamps; use one kind per file", number
            )
        micros = unix_micros(line.timestamp)
        previous = self.last_time.get(line.session)
        if previous is not None and micros < previous[0]:
            raise TraceFormatError(
                self.path,
                f"session {line.session!r} goes back in time (line {previous[1]} is later); "
                "write each session's lines in time order",
                number,
            )
        self.last_time[line.session] = (micros, number)
        return micros

    def prompt(self, line: EventLine, number: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
        if line.blocks is None:
            assert line.prefix_tokens is not None and line.new_tokens is not None
            try:
                return self.chain.extend(line.session, line.prefix_tokens, line.new_tokens)
            except ValueError as error:
                raise TraceFormatError(self.path, str(error), number) from None
        blocks = []
        for block in line.blocks:
            key = block.id  # 1 and "1" stay different blocks: they never compare equal
            known = self.ids.get(key)
            if known is None:
                known = self.ids[key] = (self.chain.new_id(), block.tokens, number)
            elif known[1] != block.tokens:
                raise TraceFormatError(
                    self.path,
                    f"block {block.id!r} has {block.tokens} tokens here but {known[1]} on line "
                    f"{known[2]}: one id is one block",
                    number,
                )
            blocks.append(known[0])
        tokens = tuple(block.tokens for block in line.blocks)
        self.chain.set(line.session, tuple(blocks), tokens)
        return tuple(blocks), tokens
