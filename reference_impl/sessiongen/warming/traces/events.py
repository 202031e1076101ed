"""The generic session-event format ("events"), one provider request a record, that users
write from their own logs: JSON Lines (a record a line) or Parquet (a record a row, for
traces of millions of requests; needs the `parquet` extra, pyarrow). Each record is validated
with one pydantic model, whichever the file.

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

Lines of one session must be in time order; sessions may interleave. See docs/traces.md,
which also gives the Parquet schema. `write_events_jsonl` and `write_events_parquet` write a
Trace in this format, so one converts to the other.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from . import (
    RecordedUsage,
    Trace,
    TraceFormatError,
    TraceRequest,
    trace_lines,
    unix_micros,
)
from .segments import SegmentChain

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "PARQUET_INSTALL_HINT",
    "EventBlock",
    "EventLine",
    "EventUsage",
    "ParquetUnavailable",
    "is_parquet",
    "load_events",
    "parquet_schema",
    "write_events_jsonl",
    "write_events_parquet",
]


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


PARQUET_INSTALL_HINT = (
    "install the parquet extra: pip install 'sessiongen[parquet]' (or uv add pyarrow)"
)
"""What to install for Parquet: pyarrow, an optional dependency (the `parquet` extra)."""


class ParquetUnavailable(ImportError):
    """pyarrow is not installed; the message names the file and what to install."""


_PARQUET_MAGIC = b"PAR1"  # the first and last four bytes of every Parquet file
_BATCH_ROWS = 2_048
"""Rows read and validated at once. A row holds its whole prompt (tens of blocks, each a dict
and then a model), so this bounds the Python objects alive while reading to tens of MB."""
_COLUMNS = ("session", "timestamp", "output_tokens", "blocks", "prefix_tokens", "new_tokens")
_OPTIONAL_COLUMNS = ("usage",)
_LINES = TypeAdapter(list[EventLine])  # a whole batch in one call to pydantic-core

Unit = Literal["line", "row"]


def is_parquet(path: Path) -> bool:
    """Whether `path` is read as Parquet: named `.parquet`, or beginning with the Parquet
    magic bytes (whatever its name). Anything else is read as JSON Lines."""
    if path.suffix.lower() == ".parquet":
        return True
    with path.open("rb") as handle:
        return handle.read(len(_PARQUET_MAGIC)) == _PARQUET_MAGIC


def load_events(path: Path, name: str | None = None) -> Trace:
    """An events file, JSON Lines or Parquet (`is_parquet`), as a Trace, `at` measured from
    the earliest timestamp. Raises TraceFormatError naming the line (JSONL) or the row
    (Parquet, counted from 1) of a malformed or inconsistent record, or naming the file when
    it is no Parquet at all; ParquetUnavailable for Parquet without pyarrow."""
    if is_parquet(path):
        return _trace(path, name, _parquet_lines(path), "row")
    return _trace(path, name, _jsonl_lines(path), "line")


def _jsonl_lines(path: Path) -> Iterator[tuple[int, EventLine]]:
    for number, raw in trace_lines(path):
        try:
            line = EventLine.model_validate_json(raw)
        except ValidationError as error:
            raise TraceFormatError.invalid(path, error, number) from None
        yield number, line


def _trace(
    path: Path, name: str | None, lines: Iterable[tuple[int, EventLine]], unit: Unit
) -> Trace:
    """The checks every record must pass beyond its model, one implementation for both
    file kinds: time order, block ids, the prompt, usage, breakpoints."""
    with _gc_paused():
        reader = _Reader(path, unit)
        micros: list[int] = []  # each request's Unix microseconds
        requests: list[TraceRequest] = []  # `at` from the first record's time
        for number, line in lines:
            moment = reader.micros(line, number)
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
            at = (moment - micros[0]) / 1_000_000 if micros else 0.0
            try:
                request = TraceRequest(
                    line.session, at, blocks, tokens, line.output_tokens, marks, recorded
                )
            except ValueError as error:  # more breakpoints than a request may carry
                raise TraceFormatError(path, f"blocks: {error}", number) from None
            micros.append(moment)
            requests.append(request)
        # `at` counts from the earliest time; only a file whose first record is not the
        # earliest needs its requests rebuilt (most are written in time order).
        start = min(micros, default=0)
        if micros and start != micros[0]:
            requests = [
                replace(request, at=(moment - start) / 1_000_000)
                for moment, request in zip(micros, requests, strict=True)
            ]
        return Trace.ordered(name or path.stem, requests)


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a trace loads: the loader makes millions of
    acyclic objects (rows, models, tuples), and the collector's passes over them doubled the
    load time of a large trace; it resumes, if it was on, whatever happens."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _require_pyarrow(path: Path, doing: str) -> None:
    """Raise ParquetUnavailable, naming the file and the extra, unless pyarrow imports."""
    try:
        # optional extra: pyarrow is imported only when it is used
        import pyarrow.parquet  # noqa: F401
    except ImportError as error:
        raise ParquetUnavailable(
            f"{path}: {doing} Parquet needs pyarrow; {PARQUET_INSTALL_HINT}"
        ) from error


def _one_line(error: Exception) -> str:
    """An Arrow error's message on one line: some span several, or quote a corrupt byte."""
    text = "".join(c if c.isprintable() else " " for c in str(error))
    return " ".join(text.split()) or type(error).__name__


def _parquet_lines(path: Path) -> Iterator[tuple[int, EventLine]]:
    """Each row of an events Parquet file and its number (from 1), validated with the same
    model as a JSONL line, read a batch of rows at a time."""
    _require_pyarrow(path, "reading")
    # optional extra: pyarrow is imported only when it is used
    import pyarrow as pa
    import pyarrow.parquet as pq

    with path.open("rb") as handle:  # the system's errors (permissions) stay OSErrors
        head = handle.read(len(_PARQUET_MAGIC))
    if not head:
        raise TraceFormatError(path, "the file is empty, not Parquet")
    if head != _PARQUET_MAGIC:
        raise TraceFormatError(
            path,
            "not a Parquet file (it does not begin with PAR1); "
            "an events trace in JSON Lines must not be named .parquet",
        )
    try:
        parquet = pq.ParquetFile(path)
        columns = _columns(path, parquet.schema_arrow)
        if parquet.metadata.num_row_groups == 0:  # no rows (pyarrow < 19 fails to iterate)
            return
        batches = parquet.iter_batches(batch_size=_BATCH_ROWS, columns=columns)
    # pyarrow raises OSError, not ArrowException, for some unreadable data; the system's own
    # errors came up above, where the file was opened
    except (pa.ArrowException, OSError) as error:  # a truncated file has no footer
        raise TraceFormatError(path, f"not a readable Parquet file: {_one_line(error)}") from None
    number = 0
    while True:
        try:
            batch = next(batches, None)
            if batch is None:
                return
            rows = _rows(batch)
        except (pa.ArrowException, OSError) as error:  # a corrupt page in the middle
            raise TraceFormatError(
                path, f"cannot read the Parquet rows from {number + 1} on: {_one_line(error)}"
            ) from None
        try:
            lines = _LINES.validate_python(rows)
        except ValidationError:
            # row by row instead, so a bad row is named in its turn, after the checks on
            # the rows before it
            for row in rows:
                number += 1
                try:
                    line = EventLine.model_validate(row)
                except ValidationError as error:
                    raise TraceFormatError.invalid(path, error, number) from None
                yield number, line
            continue
        del rows, batch  # only the models are needed now
        for line in lines:
            number += 1
            yield number, line
        del lines


def _columns(path: Path, schema: pa.Schema) -> list[str]:
    """The columns to read (others are ignored, as a JSONL line's other fields are), after
    checking the schema has the required ones: a file without them fails whatever its rows."""
    names = set(schema.names)
    missing = [
        column for column in ("session", "timestamp", "output_tokens") if column not in names
    ]
    if not missing and "blocks" not in names:
        missing = [column for column in ("prefix_tokens", "new_tokens") if column not in names]
        if missing:
            missing = ["blocks", *missing]
    if missing:
        raise TraceFormatError(
            path,
            f"no column {' or '.join(repr(c) for c in missing)}: an events Parquet file has "
            "session, timestamp, output_tokens, and blocks or prefix_tokens + new_tokens",
        )
    return [column for column in (*_COLUMNS, *_OPTIONAL_COLUMNS) if column in names]


def _rows(batch: pa.RecordBatch) -> list[dict[str, Any]]:
    """A batch as one dict a row, as a JSONL line decodes. In Parquet every row has every
    field, so a null inside a block or usage struct is taken as the field left out."""
    # optional extra: pyarrow is imported only when it is used
    import pyarrow as pa

    names = batch.schema.names
    if "timestamp" in names:
        column = batch.column(names.index("timestamp"))
        if pa.types.is_timestamp(column.type) and column.type.unit == "ns":
            # as datetimes, not pandas Timestamps; the format's resolution is a microsecond
            column = column.cast(pa.timestamp("us", column.type.tz), safe=False)
            batch = batch.set_column(names.index("timestamp"), "timestamp", column)
    rows: list[dict[str, Any]] = batch.to_pylist()
    blocks_nulls = "blocks" in names and _has_null_fields(
        _list_values(batch.column(names.index("blocks")))
    )
    usage_nulls = "usage" in names and _has_null_fields(batch.column(names.index("usage")))
    if blocks_nulls or usage_nulls:
        for row in rows:
            if blocks_nulls and isinstance(row["blocks"], list):
                row["blocks"] = [_given(block) for block in row["blocks"]]
            if usage_nulls:
                row["usage"] = _given(row["usage"])
    return rows


def _list_values(column: pa.Array[Any]) -> pa.Array[Any] | None:
    # optional extra: pyarrow is imported only when it is used
    import pyarrow as pa

    if isinstance(column, pa.ListArray | pa.LargeListArray):
        return column.flatten()
    return None


def _has_null_fields(column: pa.Array[Any] | None) -> bool:
    # optional extra: pyarrow is imported only when it is used
    import pyarrow as pa

    if not isinstance(column, pa.StructArray):
        return False
    return any(column.field(k).null_count for k in range(column.type.num_fields))


def _given(value: object) -> object:
    """A struct's dict without its null fields (anything else as it is)."""
    if isinstance(value, dict):
        return {key: item for key, item in value.items() if item is not None}
    return value


class _Reader:
    """What one events file's records must agree on: timestamp kind, each session's time
    order, each block id's token count, and each session's previous prompt. `unit` names a
    record: a JSONL line or a Parquet row."""

    def __init__(self, path: Path, unit: Unit = "line") -> None:
        self.path = path
        self.unit = unit
        self.chain = SegmentChain()
        self.ids: dict[int | str, tuple[int, int, int]] = {}  # id -> (block, tokens, record)
        self.last_time: dict[str, tuple[int, int]] = {}  # session -> (latest time, its record)
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
                f"session {line.session!r} goes back in time ({self.unit} {previous[1]} is "
                f"later); write each session's {self.unit}s in time order",
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
        blocks: list[int] = []
        tokens: list[int] = []
        ids = self.ids
        for block in line.blocks:
            key = block.id  # 1 and "1" stay different blocks: they never compare equal
            known = ids.get(key)
            if known is None:
                known = ids[key] = (self.chain.new_id(), block.tokens, number)
            elif known[1] != block.tokens:
                raise TraceFormatError(
                    self.path,
                    f"block {block.id!r} has {block.tokens} tokens here but {known[1]} on "
                    f"{self.unit} {known[2]}: one id is one block",
                    number,
                )
            blocks.append(known[0])
            tokens.append(known[1])  # the first use's int: a large trace holds one per block
        prompt = tuple(blocks), tuple(tokens)
        self.chain.set(line.session, *prompt)
        return prompt


# Writing: a Trace as events records (block form, numeric timestamps), so any trace the
# format can hold converts between JSONL and Parquet.


def _check_writable(trace: Trace) -> None:
    """Raise ValueError for what the events format cannot hold, rather than drop it."""
    if trace.warm:
        raise ValueError(
            f"trace {trace.name!r} has {len(trace.warm)} prefixes cached before it began "
            "(Trace.warm), which the events format cannot hold"
        )
    for index, request in enumerate(trace.requests):
        recorded = request.recorded
        if not request.output_known or (
            recorded is not None and recorded.output_tokens != request.output_tokens
        ):
            raise ValueError(
                f"request {index} of trace {trace.name!r} (session {request.session!r}) has no "
                "known output count, which the events format cannot mark"
            )


def _record(request: TraceRequest) -> dict[str, Any]:
    marked = set(request.breakpoints)
    record: dict[str, Any] = {
        "session": request.session,
        "timestamp": request.at,
        "output_tokens": request.output_tokens,
        "blocks": [
            {"id": block, "tokens": tokens, "breakpoint": True}
            if index in marked
            else {"id": block, "tokens": tokens}
            for index, (block, tokens) in enumerate(
                zip(request.blocks, request.block_tokens, strict=True)
            )
        ],
    }
    if request.recorded is not None:
        record["usage"] = _usage(request.recorded)
    return record


def _usage(recorded: RecordedUsage) -> dict[str, int]:
    return {
        "input_tokens": recorded.input_tokens,
        "cache_read_tokens": recorded.cache_read_tokens,
        "cache_write_5m_tokens": recorded.cache_write_5m_tokens,
        "cache_write_1h_tokens": recorded.cache_write_1h_tokens,
    }


def write_events_jsonl(trace: Trace, path: str | Path) -> Path:
    """Write `trace` as an events JSONL file, a request a line in the trace's order: block
    form with the trace's block ids, `timestamp` its `at` in seconds, `breakpoint` on the
    client's marked blocks, `usage` where recorded. Loading it gives the trace back, with
    `at` to the microsecond and block ids renumbered in order of first use. Raises
    ValueError for a trace the format cannot hold (warm prefixes, unknown output counts)."""
    _check_writable(trace)
    path = Path(path)
    with path.open("w", encoding="utf-8") as handle:
        for request in trace.requests:
            handle.write(json.dumps(_record(request), separators=(",", ":")) + "\n")
    return path


def parquet_schema() -> pa.Schema:
    """The Arrow schema `write_events_parquet` writes (docs/traces.md). Reading accepts more:
    any column types the record model accepts, the token form, ISO 8601 or timestamp-typed
    times, string block ids."""
    _require_pyarrow(Path("events.parquet"), "writing")
    # optional extra: pyarrow is imported only when it is used
    import pyarrow as pa

    fields: list[pa.Field[Any]] = [
        pa.field("session", pa.string(), nullable=False),
        pa.field("timestamp", pa.float64(), nullable=False),
        pa.field("output_tokens", pa.int64(), nullable=False),
        pa.field("blocks", pa.list_(_block_struct()), nullable=False),
        pa.field(
            "usage",
            pa.struct([pa.field(name, pa.int64(), nullable=False) for name in _USAGE]),
        ),
    ]
    return pa.schema(fields)


_USAGE = ("input_tokens", "cache_read_tokens", "cache_write_5m_tokens", "cache_write_1h_tokens")


def _block_struct() -> pa.StructType:  # a function: pyarrow imports only when used
    # optional extra: pyarrow is imported only when it is used
    import pyarrow as pa

    return pa.struct(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("tokens", pa.int64(), nullable=False),
            pa.field("breakpoint", pa.bool_(), nullable=False),
        ]
    )


def write_events_parquet(trace: Trace, path: str | Path, row_group_rows: int = 65_536) -> Path:
    """Write `trace` as an events Parquet file (`parquet_schema`, zstd), a request a row in
    the trace's order and `row_group_rows` rows a row group: the same records as
    `write_events_jsonl`, so loading it gives the trace back the same way. Raises ValueError
    for a trace the format cannot hold, ParquetUnavailable without pyarrow."""
    path = Path(path)
    _require_pyarrow(path, "writing")
    # optional extra: pyarrow is imported only when it is used
    import pyarrow.parquet as pq

    _check_writable(trace)
    schema = parquet_schema()
    with pq.ParquetWriter(path, schema, compression="zstd") as writer:
        for start in range(0, len(trace.requests), row_group_rows):
            writer.write_batch(_batch(trace.requests[start : start + row_group_rows], schema))
    return path


def _batch(requests: Sequence[TraceRequest], schema: pa.Schema) -> pa.RecordBatch:
    """Requests as one record batch, built column by column: a list of dicts a row would
    cost pyarrow a Python object per block."""
    # optional extra: pyarrow is imported only when it is used
    import pyarrow as pa

    offsets = [0]
    ids: list[int] = []
    tokens: list[int] = []
    marks: list[bool] = []
    for request in requests:
        ids.extend(request.blocks)
        tokens.extend(request.block_tokens)
        marked = [False] * len(request.blocks)
        for index in request.breakpoints:
            marked[index] = True
        marks.extend(marked)
        offsets.append(len(ids))
    block_list = schema.field("blocks").type
    blocks = pa.ListArray.from_arrays(
        pa.array(offsets, pa.int32()),
        pa.StructArray.from_arrays(
            [pa.array(ids, pa.int64()), pa.array(tokens, pa.int64()), pa.array(marks)],
            fields=list(block_list.value_type),
        ),
        type=block_list,
    )
    usage = pa.array(
        [None if r.recorded is None else _usage(r.recorded) for r in requests],
        schema.field("usage").type,
    )
    return pa.RecordBatch.from_arrays(
        [
            pa.array([r.session for r in requests], pa.string()),
            pa.array([r.at for r in requests], pa.float64()),
            pa.array([r.output_tokens for r in requests], pa.int64()),
            blocks,
            usage,
        ],
        schema=schema,
    )
