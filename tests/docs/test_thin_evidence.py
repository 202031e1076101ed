"""Thin evidence is flagged where it is shown: a row or column of a committed evidence table
that rests on fewer requests or sessions than `sessiongen_tooling.evidence` allows carries
its mark, any other does not, and a table with a mark says what the mark means. Fast: the
committed tables only (tests/generate/test_evidence.py measures them again)."""

from __future__ import annotations

import re
from pathlib import Path

from sessiongen_tooling.evidence import THIN_LEGEND, THIN_MARK, THIN_REQUESTS, THIN_SESSIONS, thin

EVIDENCE = Path(__file__).resolve().parents[2] / "contract" / "evidence"


def _rows(name: str) -> list[dict[str, str]]:
    lines = [line for line in (EVIDENCE / name).read_text("utf-8").splitlines() if line[:1] == "|"]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    return [
        dict(zip(header, [c.strip() for c in line.strip("|").split("|")], strict=True))
        for line in lines[2:]
    ]


def test_the_threshold_is_one_rule() -> None:
    assert thin(THIN_REQUESTS, THIN_SESSIONS) == ""
    assert thin(THIN_REQUESTS - 1, THIN_SESSIONS) == thin(THIN_REQUESTS, THIN_SESSIONS - 1) != ""
    assert str(THIN_REQUESTS) in THIN_LEGEND and str(THIN_SESSIONS) in THIN_LEGEND


def test_each_real_log_row_is_marked_exactly_when_thin() -> None:
    text = (EVIDENCE / "calibration-real-logs.md").read_text("utf-8")
    rows = [r for r in _rows("calibration-real-logs.md") if r["log"] != "**all**"]
    assert rows
    for row in rows:
        requests, sessions = (int(row[k].replace(",", "")) for k in ("requests", "sessions"))
        expected = requests < THIN_REQUESTS or sessions < THIN_SESSIONS
        assert (THIN_MARK in row["log"]) == expected, row
    assert (THIN_MARK in text.replace(THIN_LEGEND, "")) == (THIN_LEGEND in text)


def test_each_held_back_trace_is_marked_exactly_when_thin() -> None:
    for name in sorted(p.name for p in EVIDENCE.glob("warming-held-back-*.md")):
        text = (EVIDENCE / name).read_text("utf-8")
        head = text.splitlines()[0]
        columns = re.findall(r"\(([\d,]+) requests; fitted on ([\d,]+) sessions?\)( ⚠ thin)?", head)
        assert columns, name
        for requests, sessions, mark in columns:
            n, s = int(requests.replace(",", "")), int(sessions.replace(",", ""))
            assert bool(mark) == (n < THIN_REQUESTS or s < THIN_SESSIONS), (
                name,
                requests,
                sessions,
            )
        assert (THIN_MARK in head) == (THIN_LEGEND in text), name
