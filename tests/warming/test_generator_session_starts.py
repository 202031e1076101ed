"""When a generated trace's sessions start, against the defaults docs/traces.md documents.

Session starts are a Poisson process: exponential gaps of mean `session_gap_s`, the first at
0 (`SessionMix`). Each gap is one draw of the trace's one random stream, so for a seed the
gaps of any mean are the unit-mean gaps scaled by that mean, and nothing else in the trace
changes. The default trace's start gaps are therefore exactly the unit-mean gaps times the
mean the documentation states.
"""

from __future__ import annotations

import pytest
from sessiongen.warming.traces import Trace
from sessiongen.warming.traces.generator import SessionMix, generate_sessions

from tests.docs.test_claims import DOCS, number, tables

SESSIONS = 60
SEED = 11


def _documented_session_gap_s() -> float:
    """The default of `session_gap_s` in the generated-sessions table of docs/traces.md."""
    table = next(t for t in tables(DOCS / "traces.md") if t and "Parameter" in t[0])
    row = next(r for r in table if r["Parameter"] == "`session_gap_s`")
    assert row["Default"].endswith(" s") and "mean" in row["Meaning"]
    return number(row["Default"])


def _starts(trace: Trace) -> list[float]:
    return [requests[0].at for requests in trace.sessions().values()]


def _start_gaps(trace: Trace) -> list[float]:
    starts = _starts(trace)
    return [after - before for before, after in zip(starts, starts[1:], strict=False)]


def test_default_sessions_start_at_the_documented_mean_gap_apart() -> None:
    mean = _documented_session_gap_s()
    default = generate_sessions(SESSIONS, seed=SEED)
    unit = generate_sessions(SESSIONS, seed=SEED, mix=SessionMix(session_gap_s=1.0))
    assert _starts(default)[0] == 0.0 and len(_starts(default)) == SESSIONS
    unit_gaps = _start_gaps(unit)
    assert all(gap > 0 for gap in unit_gaps)
    assert _start_gaps(default) == pytest.approx([mean * gap for gap in unit_gaps], rel=1e-9)


def test_the_session_gap_moves_only_the_session_starts() -> None:
    """The sessions themselves (blocks, tokens, and times from their own start) are the
    same whatever the mean gap between their starts."""
    default = generate_sessions(SESSIONS, seed=SEED)
    unit = generate_sessions(SESSIONS, seed=SEED, mix=SessionMix(session_gap_s=1.0))
    ours, theirs = default.sessions(), unit.sessions()
    assert list(ours) == list(theirs)
    for session, requests in ours.items():
        other = theirs[session]
        assert [(r.blocks, r.block_tokens, r.output_tokens) for r in requests] == [
            (r.blocks, r.block_tokens, r.output_tokens) for r in other
        ]
        offsets = [r.at - requests[0].at for r in requests]
        assert offsets == pytest.approx([r.at - other[0].at for r in other], abs=1e-6)
