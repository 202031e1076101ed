"""Calibration: a trace that carries the provider's recorded usage is replayed as its client
ran it (`as_recorded`), and the experiment sets the prediction beside the real usage: a row
with `real_` columns, `calibration.csv`, `calibration.png` and one printed line."""

from __future__ import annotations

import csv
import io
import json
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from sessiongen.cli import main
from sessiongen.warming.policies import AsRecorded, History
from sessiongen.warming.study.calibration import calibrate
from sessiongen.warming.study.report import compare_policies
from sessiongen.warming.traces import RecordedUsage, TraceFormatError, TraceRequest
from sessiongen.warming.traces.events import load_events

SYSTEM = {"id": "sys", "tokens": 12000, "breakpoint": True}


def _line(session: str, at: float, blocks: list[dict[str, object]], **usage: int) -> str:
    return json.dumps(
        {"session": session, "timestamp": at, "output_tokens": 50, "blocks": blocks, "usage": usage}
    )


def _trace_file(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "recorded.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def two_sessions(tmp_path: Path, *, b_first_read: int) -> Path:
    """Session a writes the shared system block and its own message; session b starts a
    minute later and, as the provider billed it, reads `b_first_read` tokens."""
    a1 = {"id": "a1", "tokens": 500}
    b1 = {"id": "b1", "tokens": 300}
    return _trace_file(
        tmp_path,
        [
            _line("a", 0, [SYSTEM, a1], input_tokens=0, cache_write_5m_tokens=12500),
            _line(
                "b",
                60,
                [SYSTEM, b1],
                input_tokens=0,
                cache_read_tokens=b_first_read,
                cache_write_5m_tokens=12300 - b_first_read,
            ),
            # An hour later: everything expired, written again (1h this time).
            _line(
                "a",
                3660,
                [SYSTEM, a1, {"id": "a2", "tokens": 700}],
                input_tokens=0,
                cache_write_1h_tokens=13200,
            ),
        ],
    )


def _run(trace: Path, out: Path) -> tuple[int, str, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    with redirect_stdout(stdout), redirect_stderr(stderr):
        code = main(
            [
                "experiment",
                "warming",
                "--trace",
                str(trace),
                "--format",
                "events",
                "--out",
                str(out),
            ]
        )
    return code, stdout.getvalue(), stderr.getvalue()


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


@pytest.mark.clause("SG-REPLAY-1")
def test_the_experiment_calibrates_a_recorded_trace(tmp_path: Path) -> None:
    code, out, err = _run(two_sessions(tmp_path, b_first_read=12000), tmp_path / "out")
    assert code == 0, err
    rows = {row["policy"]: row for row in _rows(tmp_path / "out" / "policies.csv")}
    recorded = rows["as_recorded"]
    assert recorded["online"] == "true"
    # The prediction equals the real usage here: b reads the system block a wrote.
    assert recorded["real_cache_read_tokens"] == recorded["cache_read_tokens"] == "12000"
    assert recorded["real_cache_write_tokens"] == recorded["cache_write_tokens"] == "26000"
    assert float(recorded["real_cost"]) == pytest.approx(float(recorded["cost"]))
    assert all(row["real_cost"] == "" for name, row in rows.items() if name != "as_recorded")
    per_request = _rows(tmp_path / "out" / "calibration.csv")
    assert [r["session"] for r in per_request] == ["a", "b", "a"]
    assert [r["ttl"] for r in per_request] == ["5m", "5m", "1h"]
    assert per_request[2]["predicted_cache_write_1h_tokens"] == "13200"
    assert (tmp_path / "out" / "calibration.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    line = next(text for text in out.splitlines() if text.startswith("calibration"))
    assert "cache reads 1.000, cache writes 1.000" in line
    assert str(tmp_path / "out" / "calibration.csv") in out


@pytest.mark.clause("SG-REPLAY-1")
def test_a_real_usage_the_replay_cannot_reproduce_shows_as_error(tmp_path: Path) -> None:
    """The provider billed b's first request no read (say its system prompt differed): the
    replay still predicts the 12,000-token read, and the calibration says so."""
    trace = load_events(two_sessions(tmp_path, b_first_read=0))
    calibration = calibrate(trace)
    total = calibration.total
    assert total.real_cache_read_tokens == 0 and total.predicted_cache_read_tokens == 12000
    assert total.read_ratio == float("inf")
    assert (total.predicted_cache_write_tokens, total.real_cache_write_tokens) == (26000, 38000)
    assert total.write_ratio == pytest.approx(26000 / 38000)
    assert total.cost_ratio < 1
    assert total.read_error == 0.0  # one request of three is off: the median is not
    b = next(row for row in calibration.rows if row.session == "b")
    assert (b.real_cache_read_tokens, b.predicted_cache_read_tokens) == (0, 12000)
    table = compare_policies(trace)
    row = table.row("as_recorded")
    assert row.real_cache_read_tokens == 0 and row.cache_read_tokens == 12000


def test_calibration_groups_subagents_with_their_log(tmp_path: Path) -> None:
    lines = [
        _line("s1", 0, [SYSTEM], input_tokens=0, cache_write_5m_tokens=12000),
        _line(
            "s1/agent-1",
            10,
            [SYSTEM, {"id": "x", "tokens": 9}],
            input_tokens=0,
            cache_read_tokens=12000,
            cache_write_5m_tokens=9,
        ),
        _line("s2", 20, [{"id": "other", "tokens": 2000}], input_tokens=2000),
    ]
    calibration = calibrate(load_events(_trace_file(tmp_path, lines)))
    assert [(log.name, log.requests) for log in calibration.logs] == [("s1", 2), ("s2", 1)]


def test_as_recorded_reads_the_ttl_off_the_usage() -> None:
    policy = AsRecorded()

    def decide(session: str, **usage: int) -> str | None:
        recorded = RecordedUsage(
            usage.get("input", 0), usage.get("read", 0), usage.get("w5", 0), usage.get("w1", 0), 1
        )
        request = TraceRequest(session, 0.0, (1,), (recorded.prompt_tokens or 1,), 1, (), recorded)
        return policy.decide(request, History(0, 0, None, 0, 0)).ttl

    assert decide("s", w1=100, w5=50) == "1h"
    assert decide("s", read=100) == "1h"  # a full read keeps the session's TTL
    assert decide("t", read=100) == "5m"  # none seen yet
    assert decide("t", w5=10) == "5m"
    assert decide("u", input=2000) is None  # no read and no write: no breakpoint was sent


def test_the_events_format_reads_breakpoints_and_usage(tmp_path: Path) -> None:
    trace = load_events(two_sessions(tmp_path, b_first_read=12000))
    first = trace.requests[0]
    assert first.breakpoints == (0,) and first.marks == (0, 1)
    assert first.recorded == RecordedUsage(0, 0, 12500, 0, 50)


def test_a_usage_that_does_not_add_up_is_named_by_line(tmp_path: Path) -> None:
    path = _trace_file(tmp_path, [_line("a", 0, [SYSTEM], input_tokens=10)])
    with pytest.raises(TraceFormatError, match=r"recorded.jsonl:1: usage: adds up to 10"):
        load_events(path)


def test_too_many_breakpoints_are_named_by_line(tmp_path: Path) -> None:
    blocks: list[dict[str, object]] = [
        {"id": k, "tokens": 10, "breakpoint": True} for k in range(5)
    ]
    path = _trace_file(tmp_path, [_line("a", 0, blocks, input_tokens=50)])
    with pytest.raises(TraceFormatError, match=r":1: blocks: .*at most 4 breakpoints"):
        load_events(path)


def test_a_trace_without_recorded_usage_has_no_calibration(tmp_path: Path) -> None:
    path = tmp_path / "plain.jsonl"
    path.write_text(
        json.dumps({"session": "a", "timestamp": 0, "output_tokens": 1, "blocks": [SYSTEM]}) + "\n",
        encoding="utf-8",
    )
    code, out, err = _run(path, tmp_path / "out")
    assert code == 0, err
    assert "calibration" not in out
    assert not (tmp_path / "out" / "calibration.csv").exists()
    assert "as_recorded" not in {row["policy"] for row in _rows(tmp_path / "out" / "policies.csv")}


@pytest.mark.clause("SG-REPLAY-2")
def test_gap_outcomes_read_the_ttl_boundary_off_the_record(tmp_path: Path) -> None:
    """Gaps of 280 s and 320 s after a 5m write: the record shows a hit, then a miss, and
    the boundary says an entry lived at least 280 s and lingered at most 20 s."""
    a1, a2, a3 = ({"id": f"a{k}", "tokens": 100} for k in range(3))
    lines = [
        _line("a", 0, [SYSTEM, a1], input_tokens=0, cache_write_5m_tokens=12100),
        _line(
            "a",
            280,
            [SYSTEM, a1, a2],
            input_tokens=0,
            cache_read_tokens=12100,
            cache_write_5m_tokens=100,
        ),
        _line("a", 600, [SYSTEM, a1, a2, a3], input_tokens=0, cache_write_5m_tokens=12300),
    ]
    from sessiongen.warming.study.calibration import gap_outcomes, ttl_boundary

    outcomes = gap_outcomes(load_events(_trace_file(tmp_path, lines)))
    assert [(o.gap, o.outcome) for o in outcomes] == [(280.0, "hit"), (320.0, "miss")]
    boundary = ttl_boundary(outcomes, "5m")
    assert (boundary.longest_hit, boundary.shortest_miss) == (280.0, 320.0)
    assert (boundary.hits_within_ttl, boundary.misses_past_ttl) == (1, 1)
    assert boundary.linger_at_most == 20.0
    assert ttl_boundary(outcomes, "1h").gaps == 0


def test_gaps_at_exactly_the_ttl_are_within_it_and_the_linger_is_the_shortest_late_miss(
    tmp_path: Path,
) -> None:
    """An entry lives its TTL inclusive: a hit and a miss at exactly 300 s count within the
    5m TTL, and `linger_at_most` is the shortest late miss less the TTL (330 s, not 400 s)."""
    from sessiongen.warming.study.calibration import gap_outcomes, ttl_boundary

    lines = []
    for session, gap, hit in (("h", 300, True), ("m", 300, False), ("p", 330, False)):
        lines += _gap_pair(session, gap, hit)
    lines += _gap_pair("q", 400, False)
    outcomes = gap_outcomes(load_events(_trace_file(tmp_path, sorted(lines, key=_at))))
    boundary = ttl_boundary(outcomes, "5m")
    assert (boundary.hits_within_ttl, boundary.misses_within_ttl) == (1, 1)
    assert (boundary.hits_past_ttl, boundary.misses_past_ttl) == (0, 2)
    assert boundary.linger_at_most == 30.0


def _at(line: str) -> float:
    return float(json.loads(line)["timestamp"])


def _gap_pair(session: str, gap: float, hit: bool) -> list[str]:
    """A session's own 2,000-token prompt written at 0, then extended after `gap` seconds
    and, as billed, read in full (`hit`) or not at all."""
    own = {"id": f"{session}0", "tokens": 2000}
    more = {"id": f"{session}1", "tokens": 100}
    second = (
        {"cache_read_tokens": 2000, "cache_write_5m_tokens": 100}
        if hit
        else {"cache_write_5m_tokens": 2100}
    )
    return [
        _line(session, 0, [own], input_tokens=0, cache_write_5m_tokens=2000),
        _line(session, gap, [own, more], input_tokens=0, **second),
    ]


def test_gap_outcomes_take_a_read_only_sessions_ttl_as_5m_and_need_an_extended_prompt(
    tmp_path: Path,
) -> None:
    """A session whose first call only read (b, the system block a wrote) has a 5m entry by
    then, so its next gap is an outcome; a call that does not extend the previous prompt
    (a's third, a different history) is no outcome of a's entry."""
    from sessiongen.warming.study.calibration import gap_outcomes

    b1 = {"id": "b1", "tokens": 300}
    lines = [
        _line("a", 0, [SYSTEM, {"id": "a1", "tokens": 500}], input_tokens=0, **_w(12500)),
        _line("b", 10, [SYSTEM], input_tokens=0, cache_read_tokens=12000),
        _line("b", 70, [SYSTEM, b1], input_tokens=0, cache_read_tokens=12000, **_w(300)),
        _line("a", 100, [SYSTEM, {"id": "other", "tokens": 500}], input_tokens=0, **_w(12500)),
    ]
    outcomes = gap_outcomes(load_events(_trace_file(tmp_path, lines)))
    assert [(o.session, o.gap, o.ttl, o.outcome) for o in outcomes] == [("b", 60.0, "5m", "hit")]


def _w(tokens: int) -> dict[str, int]:
    return {"cache_write_5m_tokens": tokens}


def test_the_calibration_line_gives_predicted_and_real_uncached_input(tmp_path: Path) -> None:
    """The one-line summary names the predicted and then the real uncached input: here the
    provider billed 40 uncached tokens where the replay predicts none."""
    lines = [
        _line("a", 0, [SYSTEM], input_tokens=40, cache_write_5m_tokens=11960),
    ]
    line = calibrate(load_events(_trace_file(tmp_path, lines))).line()
    assert "uncached input 0 predicted, 40 real tokens" in line


def test_the_as_recorded_row_carries_the_real_writes_and_counts_unknown_outputs(
    tmp_path: Path,
) -> None:
    """The `as_recorded` row's `real_` columns are the provider's figures, not the
    prediction (38,000 real writes against 26,000 predicted), and the table counts the
    requests whose output count is a placeholder."""
    import dataclasses

    trace = load_events(two_sessions(tmp_path, b_first_read=0))
    requests = (dataclasses.replace(trace.requests[0], output_known=False), *trace.requests[1:])
    table = compare_policies(dataclasses.replace(trace, requests=requests))
    row = table.row("as_recorded")
    assert (row.real_cache_write_tokens, row.cache_write_tokens) == (38000, 26000)
    assert row.real_cache_read_tokens == 0
    assert table.output_unknown == 1


def test_the_experiment_counts_the_as_recorded_step_only_with_recorded_usage(
    tmp_path: Path,
) -> None:
    """`experiment_steps(trace)` counts one more step (the `as_recorded` row) for a trace
    carrying recorded usage than for one without."""
    from sessiongen.warming.study.experiment import experiment_steps
    from sessiongen.warming.traces import Trace

    trace = load_events(two_sessions(tmp_path, b_first_read=12000))
    bare = Trace("bare", tuple(_without_usage(r) for r in trace.requests))
    assert experiment_steps(trace) == experiment_steps(bare) + 1 == experiment_steps() + 1


def _without_usage(request: TraceRequest) -> TraceRequest:
    import dataclasses

    return dataclasses.replace(request, recorded=None)


def test_as_recorded_forgets_the_session_ttls_on_reset() -> None:
    """`reset` clears the TTL each session wrote with: after it, a read-only request of a
    session that wrote 1h before the reset gets 5m, as in a fresh replay."""
    policy = AsRecorded()
    history = History(0, 0, None, 0, 0)

    def request(usage: RecordedUsage) -> TraceRequest:
        return TraceRequest("s", 0.0, (1,), (usage.prompt_tokens,), 1, (), usage)

    assert policy.decide(request(RecordedUsage(0, 0, 0, 100, 1)), history).ttl == "1h"
    policy.reset()
    assert policy.decide(request(RecordedUsage(0, 100, 0, 0, 1)), history).ttl == "5m"
