"""The Trace helpers and `load_trace`, the one entry point for every format."""

from __future__ import annotations

from pathlib import Path

import pytest
from sessiongen.warming.traces import Trace, TraceFormatError, TraceRequest, WarmEntry, unix_micros
from sessiongen.warming.traces.formats import FORMATS, TraceFormat, load_trace

FIXTURES = Path(__file__).parent / "fixtures"


def _request(session: str, at: float) -> TraceRequest:
    return TraceRequest(session, at, (1,), (10,), 0)


def test_sessions_group_in_order_of_first_request() -> None:
    trace = Trace("t", (_request("b", 0), _request("a", 1), _request("b", 2)))
    grouped = trace.sessions()
    assert list(grouped) == ["b", "a"]
    assert [r.at for r in grouped["b"]] == [0, 2]


def test_reuse_gaps_are_the_time_to_the_same_sessions_next_request() -> None:
    trace = Trace("t", (_request("a", 0), _request("b", 1), _request("a", 4.5), _request("b", 61)))
    assert trace.reuse_gaps() == (4.5, 60, None, None)


def test_ordered_sorts_by_time_and_keeps_ties_in_given_order() -> None:
    trace = Trace.ordered("t", [_request("x", 3), _request("y", 1), _request("z", 1)])
    assert [r.session for r in trace.requests] == ["y", "z", "x"]


def test_a_request_needs_one_token_count_per_block() -> None:
    with pytest.raises(ValueError, match="2 blocks but 1"):
        TraceRequest("s", 0, (1, 2), (10,), 0)


def test_unix_micros_is_exact() -> None:
    assert unix_micros(1.5) == 1_500_000
    assert unix_micros(1.001) == 1_001_000  # 1.001 * 1e6 is 1000999.9999999999 in floats
    assert (unix_micros(1_748_854_805.4) - unix_micros(1_748_854_800.0)) / 1e6 == 5.4


@pytest.mark.parametrize(
    ("path", "format"),
    [
        ("mooncake_small.jsonl", "mooncake"),
        ("events.jsonl", "events"),
        ("claude-code", "claude-code"),
        ("opencode", "opencode"),
    ],
)
def test_load_trace_reads_every_format(path: str, format: TraceFormat) -> None:
    trace = load_trace(FIXTURES / path, format)
    assert trace.requests
    assert trace.name == Path(path).stem
    assert [r.at for r in trace.requests] == sorted(r.at for r in trace.requests)
    assert load_trace(FIXTURES / path, format, name="mine").name == "mine"


def test_formats_lists_the_four() -> None:
    assert FORMATS == ("mooncake", "events", "claude-code", "opencode")


def test_unknown_format_names_the_choices() -> None:
    with pytest.raises(ValueError, match="'csv'.*mooncake, events, claude-code, opencode"):
        load_trace(FIXTURES / "events.jsonl", "csv")  # type: ignore[arg-type]


def test_missing_file_is_a_clear_file_not_found(tmp_path: Path) -> None:
    missing = tmp_path / "nope.jsonl"
    with pytest.raises(FileNotFoundError, match="no events trace at .*nope.jsonl"):
        load_trace(missing, "events")


def test_a_directory_is_only_for_transcript_formats() -> None:
    with pytest.raises(IsADirectoryError, match="a mooncake trace is one file"):
        load_trace(FIXTURES, "mooncake")


def test_an_empty_transcript_directory_says_so(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"no \*\.jsonl files under"):
        load_trace(tmp_path, "claude-code")


def test_format_errors_are_value_errors_naming_file_and_line() -> None:
    error = TraceFormatError("trace.jsonl", "bad", 7)
    assert isinstance(error, ValueError)
    assert str(error) == "trace.jsonl:7: bad"
    assert (error.line, error.problem) == (7, "bad")


def test_a_directory_for_the_events_format_reads_an_events_trace(tmp_path: Path) -> None:
    """The message says "an events trace", not "a events trace"."""
    with pytest.raises(IsADirectoryError, match="an events trace is one file"):
        load_trace(tmp_path, "events")


def _split_trace() -> Trace:
    """Four sessions starting in order a, b, c, d, of 3, 1, 2 and 2 requests, interleaved;
    a warm entry on b's and d's requests."""
    rows = [("a", 0), ("b", 1), ("a", 2), ("c", 3), ("a", 4), ("d", 5), ("c", 6), ("d", 7)]
    requests = tuple(TraceRequest(s, float(t), (t,), (100,), 0) for s, t in rows)
    warm = (WarmEntry(1, 0, "5m"), WarmEntry(7, 0, "1h"))
    return Trace("t", requests, warm)


@pytest.mark.parametrize(
    ("fraction", "fitted"),
    [(0.0, ""), (0.3, ""), (0.375, "a"), (0.5, "ab"), (0.75, "abc"), (0.99, "abc")],
)
def test_split_takes_whole_sessions_in_start_order(fraction: float, fitted: str) -> None:
    """The fit part is the sessions that start first while their requests stay within the
    fraction; no session is cut, and the last session is always held back."""
    trace = _split_trace()
    fit, held = trace.split(fraction)
    assert "".join(sorted({r.session for r in fit.requests})) == fitted
    assert len(fit.requests) <= fraction * len(trace.requests)
    assert not {r.session for r in fit.requests} & {r.session for r in held.requests}
    assert sorted(fit.requests + held.requests, key=lambda r: r.at) == list(trace.requests)
    assert (fit.name, held.name) == ("t-fit", "t-held-back")


def test_split_moves_warm_entries_with_their_requests() -> None:
    fit, held = _split_trace().split(0.5)  # a and b fitted
    assert [(fit.requests[w.request].at, w.ttl) for w in fit.warm] == [(1.0, "5m")]
    assert [(held.requests[w.request].at, w.ttl) for w in held.warm] == [(7.0, "1h")]


@pytest.mark.parametrize("fraction", [-0.1, 1.0, 2.0])
def test_split_refuses_a_fraction_outside_zero_to_one(fraction: float) -> None:
    with pytest.raises(ValueError, match="fit fraction"):
        _split_trace().split(fraction)
