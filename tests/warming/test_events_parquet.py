"""The events format in Parquet: the same records as the JSONL format, a row each, validated
by the same model; and the writers that convert a Trace to either."""

from __future__ import annotations

import io
import json
import sys
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sessiongen.cli import main
from sessiongen.warming.traces import Trace, TraceFormatError
from sessiongen.warming.traces.events import (
    PARQUET_INSTALL_HINT,
    ParquetUnavailable,
    is_parquet,
    parquet_schema,
    write_events_jsonl,
    write_events_parquet,
)
from sessiongen.warming.traces.formats import TraceFormat, load_trace
from sessiongen.warming.traces.generator import generate_sessions

FIXTURES = Path(__file__).parent / "fixtures"
# The traces of other formats that the events format can hold: no prefix cached before the
# trace, every output count known (recorded usage and client breakpoints included).
WRITABLE_FIXTURES: list[tuple[Path, TraceFormat]] = [
    (FIXTURES / "opencode", "opencode"),
    (FIXTURES / "real/claude-code/v2.0-in-file-sidechain", "claude-code"),
]


def _as_events_give_it_back(trace: Trace) -> Trace:
    """`trace` as loading its events file gives it back: `at` to the microsecond from the
    earliest request, block ids renumbered in order of first use, and no request's model or
    time to first token (the format has no field for them yet)."""
    ids: dict[int, int] = {}
    start = min((round(r.at * 1_000_000) for r in trace.requests), default=0)
    return Trace.ordered(
        trace.name,
        [
            replace(
                request,
                at=(round(request.at * 1_000_000) - start) / 1_000_000,
                blocks=tuple(ids.setdefault(block, len(ids)) for block in request.blocks),
                model=None,
                ttft=0.0,
            )
            for request in trace.requests
        ],
    )


def _parquet_of(records: list[dict[str, Any]], path: Path, **kwargs: Any) -> Path:
    """The records as a Parquet file, types inferred by pyarrow (as a user's tool writes);
    every field any record has is a column, null where a record leaves it out."""
    keys = list(dict.fromkeys(key for record in records for key in record))
    pq.write_table(pa.table({key: [r.get(key) for r in records] for key in keys}), path, **kwargs)
    return path


def _jsonl_of(records: list[dict[str, Any]], path: Path) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return path


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _error(path: Path) -> TraceFormatError:
    with pytest.raises(TraceFormatError) as caught:
        load_trace(path, "events")
    error = caught.value
    assert "\n" not in str(error)
    assert str(error).startswith(str(path))
    return error


# Round trips


@pytest.fixture(scope="module")
def generated() -> Trace:
    return generate_sessions(50, seed=0)


def test_a_generated_trace_round_trips_through_parquet(generated: Trace, tmp_path: Path) -> None:
    path = write_events_parquet(generated, tmp_path / "g.parquet")
    loaded = load_trace(path, "events", name=generated.name)
    assert loaded == _as_events_give_it_back(generated)
    assert any(r.breakpoints for r in loaded.requests)  # the engine's marks came through
    again = write_events_parquet(loaded, tmp_path / "again.parquet")
    assert load_trace(again, "events", name=generated.name) == loaded  # exactly, from now on


def test_jsonl_and_parquet_of_a_generated_trace_load_equal(
    generated: Trace, tmp_path: Path
) -> None:
    jsonl = write_events_jsonl(generated, tmp_path / "g.jsonl")
    parquet = write_events_parquet(generated, tmp_path / "g.parquet")
    assert load_trace(jsonl, "events") == load_trace(parquet, "events", name="g")
    assert load_trace(jsonl, "events") == _as_events_give_it_back(replace(generated, name="g"))


def test_the_events_fixture_converts_to_parquet_and_back(tmp_path: Path) -> None:
    trace = load_trace(FIXTURES / "events.jsonl", "events")
    parquet = write_events_parquet(trace, tmp_path / "events.parquet")
    jsonl = write_events_jsonl(trace, tmp_path / "events.jsonl")
    assert load_trace(parquet, "events") == trace
    assert load_trace(jsonl, "events") == trace


@pytest.mark.parametrize(("path", "format"), WRITABLE_FIXTURES, ids=lambda x: str(x)[-24:])
def test_real_fixtures_with_usage_and_breakpoints_round_trip(
    path: Path, format: TraceFormat, tmp_path: Path
) -> None:
    trace = load_trace(path, format)
    assert all(r.recorded is not None and r.breakpoints for r in trace.requests)
    # Prefixes the record shows cached outside the log (the opencode fixture's second
    # session reads the shared prefix 300.3 s after its last use) the writer refuses
    # (test_events.py); everything else round-trips.
    trace = replace(trace, warm=())
    for writer, suffix in ((write_events_parquet, "parquet"), (write_events_jsonl, "jsonl")):
        written = writer(trace, tmp_path / f"trace.{suffix}")
        assert load_trace(written, "events", name=trace.name) == _as_events_give_it_back(trace)


def test_the_same_records_load_equal_from_jsonl_and_parquet(tmp_path: Path) -> None:
    """The fixture's records as a user's tool would write them to Parquet: string ids, ISO
    timestamps, both prompt forms (nulls where a row uses the other)."""
    records = _records(FIXTURES / "events.jsonl")
    parquet = _parquet_of(records, tmp_path / "events.parquet")
    assert pa.types.is_string(pq.read_schema(parquet).field("timestamp").type)
    assert load_trace(parquet, "events") == load_trace(FIXTURES / "events.jsonl", "events")


def test_a_null_struct_field_is_a_field_left_out(tmp_path: Path) -> None:
    """Parquet gives every row every struct field, so a block without `breakpoint` or a
    usage without the cache fields is null there, and reads as the JSONL line without it."""
    records = [
        {
            "session": "a",
            "timestamp": 0,
            "blocks": [{"id": 1, "tokens": 10, "breakpoint": True}, {"id": 2, "tokens": 5}],
            "output_tokens": 3,
            "usage": {"input_tokens": 15},
        },
        {
            "session": "a",
            "timestamp": 2.5,
            "blocks": [{"id": 1, "tokens": 10}, {"id": 2, "tokens": 5}, {"id": 3, "tokens": 4}],
            "output_tokens": 1,
            "usage": {"input_tokens": 4, "cache_read_tokens": 15},
        },
        {
            "session": "b",
            "timestamp": 3,
            "blocks": [{"id": 1, "tokens": 10}],
            "output_tokens": 1,
        },
    ]
    parquet = _parquet_of(records, tmp_path / "nulls.parquet")
    loaded = load_trace(parquet, "events")
    assert loaded == load_trace(_jsonl_of(records, tmp_path / "nulls.jsonl"), "events")
    assert [r.breakpoints for r in loaded.requests] == [(0,), (), ()]
    assert [r.recorded and r.recorded.cache_read_tokens for r in loaded.requests] == [0, 15, None]


def test_parquet_timestamps_are_read_as_iso_times(tmp_path: Path) -> None:
    """A Parquet timestamp column is the ISO kind: with a zone as given, without one UTC; a
    nanosecond column is read to the microsecond, the format's resolution."""
    times = [datetime(2025, 6, 2, 9, 0, tzinfo=UTC), datetime(2025, 6, 2, 9, 0, 4, 500_000)]
    units: tuple[tuple[Literal["ns", "us", "ms"], str | None], ...] = (
        ("ns", "UTC"),
        ("us", None),
        ("ms", "+02:00"),
    )
    for unit, zone in units:
        table = pa.table(
            {
                "session": ["a", "b"],
                "timestamp": pa.array(
                    [t.replace(tzinfo=None) for t in times], pa.timestamp(unit)
                ).cast(pa.timestamp(unit, zone)),
                "blocks": [[{"id": 1, "tokens": 3}], [{"id": 1, "tokens": 3}]],
                "output_tokens": [1, 1],
            }
        )
        path = tmp_path / f"{unit}.parquet"
        pq.write_table(table, path)
        assert [r.at for r in load_trace(path, "events").requests] == [0.0, 4.5], unit


def test_an_empty_trace_round_trips(tmp_path: Path) -> None:
    path = write_events_parquet(Trace("empty", ()), tmp_path / "empty.parquet")
    assert load_trace(path, "events") == Trace("empty", ())
    assert pq.read_schema(path) == parquet_schema()


def test_a_parquet_file_is_known_by_its_name_or_its_magic(tmp_path: Path) -> None:
    trace = load_trace(FIXTURES / "events.jsonl", "events")
    unnamed = write_events_parquet(trace, tmp_path / "trace.bin")
    assert is_parquet(unnamed) and not is_parquet(FIXTURES / "events.jsonl")
    assert load_trace(unnamed, "events", name=trace.name) == trace


def test_a_large_file_is_read_in_batches_and_rows_numbered_across_them(tmp_path: Path) -> None:
    rows = 5_000  # more than two batches of 2,048 rows, in two row groups
    records: list[dict[str, Any]] = [
        {"session": f"s{k}", "timestamp": k, "blocks": [{"id": k, "tokens": 1}], "output_tokens": 0}
        for k in range(rows)
    ]
    records[4_321]["output_tokens"] = -1
    path = _parquet_of(records, tmp_path / "big.parquet", row_group_size=2_500)
    error = _error(path)
    assert error.line == 4_322
    assert str(error).startswith(f"{path}:4322: output_tokens: ")


def test_a_row_breaking_a_rule_across_rows_is_named_by_row(tmp_path: Path) -> None:
    records = [
        {"session": "a", "timestamp": 5, "prefix_tokens": 0, "new_tokens": 1, "output_tokens": 0},
        {"session": "b", "timestamp": 1, "prefix_tokens": 0, "new_tokens": 1, "output_tokens": 0},
        {"session": "a", "timestamp": 4, "prefix_tokens": 1, "new_tokens": 1, "output_tokens": 0},
    ]
    error = _error(_parquet_of(records, tmp_path / "back.parquet"))
    assert error.line == 3
    assert "goes back in time (row 1 is later); write each session's rows in time order" in (
        error.problem
    )


def test_a_bad_row_after_a_bad_rule_is_not_named_first(tmp_path: Path) -> None:
    """Rows are checked in order, as lines are: a batch that fails its model does not
    name its failing row before an earlier row's own problem."""
    records: list[dict[str, Any]] = [
        {"session": "a", "timestamp": 0, "blocks": [{"id": "x", "tokens": 9}], "output_tokens": 0},
        {"session": "b", "timestamp": 0, "blocks": [{"id": "x", "tokens": 8}], "output_tokens": 0},
        {"session": "c", "timestamp": 0, "blocks": [{"id": "y", "tokens": 0}], "output_tokens": 0},
    ]
    error = _error(_parquet_of(records, tmp_path / "order.parquet"))
    assert (error.line, error.problem) == (
        2,
        "block 'x' has 8 tokens here but 9 on row 1: one id is one block",
    )


# Bad files: each one line naming the file, and the row where there is one


_GOOD = {"session": "a", "timestamp": 0, "blocks": [{"id": 1, "tokens": 3}], "output_tokens": 2}


@pytest.mark.parametrize(
    ("drop", "says"),
    [
        ("output_tokens", "no column 'output_tokens': an events Parquet file has session, "),
        ("session", "no column 'session'"),
        ("blocks", "no column 'blocks' or 'prefix_tokens' or 'new_tokens'"),
    ],
)
def test_a_missing_column(drop: str, says: str, tmp_path: Path) -> None:
    record = {key: value for key, value in _GOOD.items() if key != drop}
    error = _error(_parquet_of([record, record], tmp_path / "missing.parquet"))
    assert error.line is None and error.problem.startswith(says)


@pytest.mark.parametrize(
    ("changed", "says"),
    [
        ({"session": 7}, "session: Input should be a valid string"),
        ({"output_tokens": "many"}, "output_tokens: Input should be a valid integer"),
        ({"blocks": "system"}, "blocks: Input should be a valid list"),
        ({"blocks": [{"id": 1.5, "tokens": 3}]}, "blocks.0.id.int: Input should be a valid int"),
        ({"blocks": [{"id": 1, "tokens": 3, "cached": True}]}, "blocks.0.cached: Extra inputs"),
        ({"timestamp": True}, "timestamp: Value error, timestamp must be a number"),
    ],
)
def test_a_wrong_type_is_named_with_its_row(
    changed: dict[str, Any], says: str, tmp_path: Path
) -> None:
    records = [_GOOD, {**_GOOD, **changed}]
    path = _parquet_of(records[1:], tmp_path / "first.parquet")  # one type per column
    error = _error(path)
    assert error.line == 1 and error.problem.startswith(says), error.problem


def test_an_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.parquet"
    path.write_bytes(b"")
    assert _error(path).problem == "the file is empty, not Parquet"


def test_a_truncated_file(tmp_path: Path) -> None:
    whole = write_events_parquet(generate_sessions(5, seed=1), tmp_path / "whole.parquet")
    path = tmp_path / "truncated.parquet"
    path.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    error = _error(path)
    assert error.line is None and error.problem.startswith("not a readable Parquet file: ")


def test_a_corrupt_file(tmp_path: Path) -> None:
    """A valid header and footer around garbage: the data pages fail to decode."""
    whole = write_events_parquet(generate_sessions(5, seed=1), tmp_path / "whole.parquet")
    data = bytearray(whole.read_bytes())
    footer = int.from_bytes(data[-8:-4], "little") + 8  # the metadata and its length
    for k in range(8, len(data) - footer):  # keep PAR1 and the first page header's start
        data[k] = 0xFF
    path = tmp_path / "corrupt.parquet"
    path.write_bytes(bytes(data))
    error = _error(path)
    assert error.problem.startswith(
        ("not a readable Parquet file: ", "cannot read the Parquet rows from 1 on: ")
    ), error.problem


def test_jsonl_named_parquet(tmp_path: Path) -> None:
    path = tmp_path / "events.parquet"
    path.write_bytes((FIXTURES / "events.jsonl").read_bytes())
    assert _error(path).problem == (
        "not a Parquet file (it does not begin with PAR1); "
        "an events trace in JSON Lines must not be named .parquet"
    )


def test_without_pyarrow_the_error_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_events_parquet(generate_sessions(2, seed=1), tmp_path / "g.parquet")
    for module in ("pyarrow", "pyarrow.parquet"):
        monkeypatch.setitem(sys.modules, module, None)  # makes `import pyarrow` fail
    with pytest.raises(ParquetUnavailable) as caught:
        load_trace(path, "events")
    assert str(caught.value) == f"{path}: reading Parquet needs pyarrow; {PARQUET_INSTALL_HINT}"
    assert "pip install 'sessiongen[parquet]'" in PARQUET_INSTALL_HINT
    assert "uv add pyarrow" in PARQUET_INSTALL_HINT
    with pytest.raises(ParquetUnavailable, match="writing Parquet needs pyarrow"):
        write_events_parquet(Trace("t", ()), tmp_path / "t.parquet")
    assert load_trace(FIXTURES / "events.jsonl", "events").requests  # JSONL needs none


# Writing what the format cannot hold


def test_the_writers_refuse_what_the_format_cannot_hold(tmp_path: Path) -> None:
    placeholder_outputs = load_trace(FIXTURES / "claude-code", "claude-code")
    warm = load_trace(FIXTURES / "real/opencode/toji-electron", "opencode")
    for writer in (write_events_parquet, write_events_jsonl):
        with pytest.raises(ValueError, match="no known output count"):
            writer(placeholder_outputs, tmp_path / "out")
        with pytest.raises(ValueError, match=r"prefixes cached before it began \(Trace.warm\)"):
            writer(warm, tmp_path / "out")
    assert not (tmp_path / "out").exists()  # refused before writing


# The CLI


def _cli(*args: str) -> tuple[int, str, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    with redirect_stdout(stdout), redirect_stderr(stderr):
        code = main(["experiment", "warming", *args])
    return code, stdout.getvalue(), stderr.getvalue()


def test_the_experiment_runs_on_a_parquet_trace(tmp_path: Path) -> None:
    trace = load_trace(FIXTURES / "events.jsonl", "events")
    parquet = write_events_parquet(trace, tmp_path / "events.parquet")
    runs = {}
    for path in (FIXTURES / "events.jsonl", parquet):
        out = tmp_path / path.suffix[1:]
        code, stdout, stderr = _cli("--trace", str(path), "--format", "events", "--out", str(out))
        assert code == 0, stderr
        assert "best online policy: " in stdout
        runs[path.suffix] = (out / "policies.csv").read_text()
    assert runs[".parquet"] == runs[".jsonl"]  # the same trace, the same table


def test_the_experiment_on_a_corrupt_parquet_is_a_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "corrupt.parquet"
    path.write_bytes(b"PAR1" + b"\x00" * 64)
    code, stdout, stderr = _cli(
        "--trace", str(path), "--format", "events", "--out", str(tmp_path / "out")
    )
    assert (code, stdout) == (1, "")
    assert stderr.startswith(f"sessiongen: error: {path}: not a readable Parquet file: ")
    assert stderr.count("\n") == 1 and "Traceback" not in stderr
    assert not (tmp_path / "out").exists()


def test_the_experiment_without_pyarrow_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_events_parquet(generate_sessions(2, seed=1), tmp_path / "g.parquet")
    for module in ("pyarrow", "pyarrow.parquet"):
        monkeypatch.setitem(sys.modules, module, None)
    code, stdout, stderr = _cli(
        "--trace", str(path), "--format", "events", "--out", str(tmp_path / "out")
    )
    assert (code, stdout) == (1, "")
    assert (
        stderr
        == f"sessiongen: error: {path}: reading Parquet needs pyarrow; {PARQUET_INSTALL_HINT}\n"
    )
