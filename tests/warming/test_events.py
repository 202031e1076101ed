"""The generic session-event JSONL ("events") format."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from sessiongen.warming.traces import Trace, TraceFormatError
from sessiongen.warming.traces.formats import load_trace

FIXTURES = Path(__file__).parent / "fixtures"


def _load(tmp_path: Path, *lines: dict[str, object] | str) -> Trace:
    path = tmp_path / "events.jsonl"
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return load_trace(path, "events")


def _error(tmp_path: Path, *lines: dict[str, object] | str) -> TraceFormatError:
    with pytest.raises(TraceFormatError) as caught:
        _load(tmp_path, *lines)
    return caught.value


def test_the_fixture_loads_exactly() -> None:
    trace = load_trace(FIXTURES / "events.jsonl", "events")
    rows = [(r.session, r.at, r.blocks, r.block_tokens, r.output_tokens) for r in trace.requests]
    assert rows == [
        ("alice", 0.0, (0, 1), (14000, 600), 220),
        ("bob", 4.0, (0, 2), (14000, 90), 40),  # "system" is one block, shared by both
        ("alice", 9.5, (0, 1, 3), (14000, 600, 1450), 180),
        ("alice", 190.0, (0, 1, 3, 4), (14000, 600, 1450, 120), 510),
        ("bob", 724.0, (0, 5), (14000, 400), 75),  # kept only the system block
    ]


def test_numeric_timestamps_are_seconds_from_the_earliest(tmp_path: Path) -> None:
    trace = _load(
        tmp_path,
        {
            "session": "a",
            "timestamp": 100.25,
            "prefix_tokens": 0,
            "new_tokens": 5,
            "output_tokens": 1,
        },
        {"session": "b", "timestamp": 100, "prefix_tokens": 0, "new_tokens": 7, "output_tokens": 1},
    )
    assert [(r.session, r.at) for r in trace.requests] == [("b", 0.0), ("a", 0.25)]


_ONE_BLOCK = {"blocks": [{"id": 1, "tokens": 3}], "output_tokens": 0}


def test_a_naive_iso_timestamp_is_utc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "EST+05")  # a machine zone other than UTC (POSIX form, no tzdata)
    time.tzset()
    try:
        trace = _load(
            tmp_path,
            {"session": "a", "timestamp": "2025-06-02T09:00:00", **_ONE_BLOCK},
            {"session": "b", "timestamp": "2025-06-02T11:00:01+02:00", **_ONE_BLOCK},
        )
    finally:
        monkeypatch.undo()
        time.tzset()
    assert [r.at for r in trace.requests] == [0.0, 1.0]


def test_a_prefix_ending_inside_a_segment_keeps_only_whole_segments(tmp_path: Path) -> None:
    trace = _load(
        tmp_path,
        {
            "session": "a",
            "timestamp": 0,
            "prefix_tokens": 0,
            "new_tokens": 1000,
            "output_tokens": 0,
        },
        {
            "session": "a",
            "timestamp": 1,
            "prefix_tokens": 1000,
            "new_tokens": 500,
            "output_tokens": 0,
        },
        {
            "session": "a",
            "timestamp": 2,
            "prefix_tokens": 1200,
            "new_tokens": 30,
            "output_tokens": 0,
        },
    )
    assert [(r.blocks, r.block_tokens) for r in trace.requests] == [
        ((0,), (1000,)),
        ((0, 1), (1000, 500)),
        ((0, 2), (1000, 230)),  # 200 of the cut segment join the 30 new tokens
    ]


def test_ids_are_opaque_and_typed(tmp_path: Path) -> None:
    trace = _load(
        tmp_path,
        {"session": "a", "timestamp": 0, "blocks": [{"id": 1, "tokens": 4}], "output_tokens": 0},
        {"session": "b", "timestamp": 0, "blocks": [{"id": "1", "tokens": 4}], "output_tokens": 0},
    )
    assert trace.requests[0].blocks != trace.requests[1].blocks


_BLOCK = [{"id": 1, "tokens": 3}]
_TOKENS = {"prefix_tokens": 0, "new_tokens": 3}
_BAD_LINES: list[tuple[dict[str, object] | str, str]] = [
    ({}, "give blocks, or both"),
    ({"prefix_tokens": 0}, "give blocks, or both"),
    ({**_TOKENS, "blocks": _BLOCK}, "not both"),
    ({**_TOKENS, "output_tokens": None}, "output_tokens"),
    ({**_TOKENS, "session": ""}, "session"),
    ({"timestamp": "yesterday", "blocks": _BLOCK}, "neither a number of seconds nor ISO 8601"),
    ({"timestamp": True, "blocks": _BLOCK}, "timestamp"),
    ({"blocks": [{"id": 1, "tokens": 0}]}, "blocks.0.tokens"),
    ({"blocks": [{"id": 1.5, "tokens": 3}]}, "blocks.0.id"),
    ({"blocks": []}, "blocks"),
    ({"prefix_tokens": 0, "new_tokens": 0}, "at least one token"),
    ({"prefix_tokens": 0, "new_tokens": -1}, "new_tokens"),
    ("not json", "Invalid JSON"),
]


@pytest.mark.parametrize(("fields", "message"), _BAD_LINES)
def test_a_bad_line_is_named_with_its_number(
    tmp_path: Path, fields: dict[str, object] | str, message: str
) -> None:
    good = {"session": "z", "timestamp": 0, "prefix_tokens": 0, "new_tokens": 1, "output_tokens": 0}
    line = fields
    if isinstance(fields, dict):  # a valid line's fields with these changed (None: left out)
        line = {"session": "a", "timestamp": 0, "output_tokens": 1, **fields}
        line = {key: value for key, value in line.items() if value is not None}
    error = _error(tmp_path, good, "", line)
    assert error.line == 3
    assert message in error.problem
    assert str(error).startswith(f"{tmp_path / 'events.jsonl'}:3: ")


def test_a_prefix_longer_than_the_previous_prompt(tmp_path: Path) -> None:
    error = _error(
        tmp_path,
        {"session": "a", "timestamp": 0, "prefix_tokens": 0, "new_tokens": 10, "output_tokens": 0},
        {"session": "a", "timestamp": 1, "prefix_tokens": 11, "new_tokens": 1, "output_tokens": 0},
    )
    assert error.line == 2
    assert "longer than the session's previous prompt (10 tokens)" in error.problem


def test_one_id_has_one_token_count(tmp_path: Path) -> None:
    error = _error(
        tmp_path,
        {
            "session": "a",
            "timestamp": 0,
            "blocks": [{"id": "sys", "tokens": 9}],
            "output_tokens": 0,
        },
        {
            "session": "b",
            "timestamp": 0,
            "blocks": [{"id": "sys", "tokens": 8}],
            "output_tokens": 0,
        },
    )
    assert (error.line, error.problem) == (
        2,
        "block 'sys' has 8 tokens here but 9 on line 1: one id is one block",
    )


def test_a_session_must_not_go_back_in_time(tmp_path: Path) -> None:
    error = _error(
        tmp_path,
        {"session": "a", "timestamp": 5, "prefix_tokens": 0, "new_tokens": 1, "output_tokens": 0},
        {"session": "b", "timestamp": 1, "prefix_tokens": 0, "new_tokens": 1, "output_tokens": 0},
        {"session": "a", "timestamp": 4, "prefix_tokens": 1, "new_tokens": 1, "output_tokens": 0},
    )
    assert error.line == 3
    assert "goes back in time (line 1 is later)" in error.problem


def test_timestamp_kinds_do_not_mix(tmp_path: Path) -> None:
    error = _error(
        tmp_path,
        {"session": "a", "timestamp": 5, "prefix_tokens": 0, "new_tokens": 1, "output_tokens": 0},
        {
            "session": "b",
            "timestamp": "2025-06-02T09:00:00Z",
            "prefix_tokens": 0,
            "new_tokens": 1,
            "output_tokens": 0,
        },
    )
    assert (error.line, error.problem) == (
        2,
        "mixes numeric and ISO 8601 timestamps; use one kind per file",
    )


@pytest.mark.parametrize(
    ("breakpoints", "problem"),
    [
        ((0, 1, 2, 3), "at most 4 breakpoints"),  # four given plus the last block: five
        ((5,), "must index"),  # one past the last block
        ((-1, 2), "must index"),
        ((1, 1), "ascending and unique"),
    ],
)
def test_a_request_s_breakpoints_are_checked(breakpoints: tuple[int, ...], problem: str) -> None:
    """`TraceRequest` breakpoints index its blocks, ascending and unique, and with the last
    block (always marked) make at most the provider's four."""
    from sessiongen.warming.traces import TraceRequest

    with pytest.raises(ValueError, match=problem):
        TraceRequest("s", 0.0, (0, 1, 2, 3, 4), (10,) * 5, 1, breakpoints)
