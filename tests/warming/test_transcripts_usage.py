"""What the Claude Code importer reads off real usage beyond token counts: a longer shared
prefix behind the agent's tools, and a history the client edited (Claude Code clears old
tool results), each set beside the replay's prediction."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sessiongen.warming.study.calibration import calibrate
from sessiongen.warming.traces.formats import load_trace

MODEL = "claude-sonnet-4-6"


def _log(tmp_path: Path, calls: list[tuple[str, float, int, int, int]]) -> Path:
    """A Claude Code log of `(session, seconds, input, read, write)` calls, each answering
    its own user line; outputs known (a stop_reason)."""
    lines: list[dict[str, object]] = []
    for k, (session, at, uncached, read, write) in enumerate(calls):
        stamp = f"2026-11-02T10:{int(at // 60):02d}:{at % 60:06.3f}Z"
        lines.append(
            {
                "type": "user",
                "uuid": f"u{k}",
                "parentUuid": None,
                "sessionId": session,
                "timestamp": stamp,
                "message": {"role": "user", "content": "x"},
            }
        )
        usage = {
            "input_tokens": uncached,
            "output_tokens": 10,
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": write,
        }
        lines.append(
            {
                "type": "assistant",
                "uuid": f"a{k}",
                "parentUuid": f"u{k}",
                "sessionId": session,
                "timestamp": stamp,
                "message": {
                    "id": f"msg{k}",
                    "model": MODEL,
                    "stop_reason": "end_turn",
                    "usage": usage,
                },
            }
        )
    path = tmp_path / "log.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.clause("SG-REPLAY-1")
def test_a_longer_first_read_is_a_second_shared_prefix(tmp_path: Path) -> None:
    """Sessions b and c read 12,000 tokens at their first call, more than the 10,000 every
    session shares: the system prompt they send the same, behind the tools. It becomes a
    second shared block, marked, and c reads what b wrote there."""
    trace = load_trace(
        _log(
            tmp_path,
            [
                ("a", 0, 3, 10000, 900),  # the agent's prefix read (written before the log)
                ("b", 10, 3, 12000, 500),  # a longer system prompt, written before the log
                ("c", 20, 3, 12000, 700),
            ],
        ),
        "claude-code",
    )
    b, c = trace.requests[1], trace.requests[2]
    assert b.block_tokens[:2] == (10000, 2000) and b.blocks[:2] == c.blocks[:2]
    assert b.breakpoints[:2] == (0, 1)
    # Warm: a's agent prefix and b's longer one, each read first by a call of the log that
    # no earlier call wrote; c reads what b's record already put there.
    assert [(w.request, w.block) for w in trace.warm] == [(0, 0), (1, 1)]
    rows = calibrate(trace).rows
    assert [(r.real_cache_read_tokens, r.predicted_cache_read_tokens) for r in rows] == [
        (10000, 10000),
        (12000, 12000),
        (12000, 12000),
    ]


@pytest.mark.clause("SG-REPLAY-1")
def test_an_edited_history_shares_only_what_was_read(tmp_path: Path) -> None:
    """The third call comes 30 s after the second, well within the 5m entry the second left
    (10,000 + 4,000 + 1,000 tokens), but reads only 14,000: the client changed its history
    after that point. The prompt shares the 14,000 tokens, so the replay reads 14,000 and
    writes the rest, as the provider billed; taken as plain growth it would read 15,003."""
    trace = load_trace(
        _log(
            tmp_path,
            [
                ("a", 0, 3, 0, 10500),
                ("b", 5, 3, 10000, 4000),
                ("b", 20, 3, 14000, 1000),
                ("b", 50, 3, 14000, 2000),
            ],
        ),
        "claude-code",
    )
    assert trace.warm == ()  # a's first call read nothing: it wrote the shared prefix
    rows = calibrate(trace).rows
    last = rows[-1]
    # Off by the 3 uncached tokens the earlier call sent after its breakpoint, which the
    # replay caches with the rest of its prompt.
    assert (last.real_cache_read_tokens, last.predicted_cache_read_tokens) == (14000, 14003)
    assert (last.real_cache_write_tokens, last.predicted_cache_write_tokens) == (2000, 2000)


@pytest.mark.clause("SG-REPLAY-1")
def test_a_short_read_after_the_ttl_is_an_expiry_not_an_edit(tmp_path: Path) -> None:
    """The same short read 400 s later: past the 5m entry's life, so it says nothing of the
    content. The prompt grows on the whole previous one and the replay predicts the expiry:
    it reads only the shared prefix another session kept alive, as billed."""
    trace = load_trace(
        _log(
            tmp_path,
            [
                ("a", 0, 3, 0, 10500),
                ("b", 5, 3, 10000, 4000),
                ("a", 300, 3, 10000, 500),  # keeps the shared prefix alive
                ("b", 405, 3, 10000, 5000),
            ],
        ),
        "claude-code",
    )
    last = trace.requests[-1]
    assert last.blocks[: len(trace.requests[1].blocks)] == trace.requests[1].blocks
    row = calibrate(trace).rows[-1]
    assert (row.real_cache_read_tokens, row.predicted_cache_read_tokens) == (10000, 10000)


@pytest.mark.clause("SG-REPLAY-1")
def test_a_short_read_at_exactly_the_ttl_is_still_an_edit(tmp_path: Path) -> None:
    """An entry is alive through its TTL inclusive: a short read exactly 300 s after the
    session's 5m call is an edited history (the prompt shares only the 10,000 tokens read),
    and the replay reads what was billed instead of the whole previous prompt."""
    trace = load_trace(
        _log(
            tmp_path,
            [
                ("a", 0, 3, 0, 10500),
                ("b", 5, 3, 10000, 4000),
                ("b", 305, 3, 10000, 5000),
            ],
        ),
        "claude-code",
    )
    before, last = trace.requests[1], trace.requests[2]
    assert last.blocks[: len(before.blocks)] != before.blocks
    row = calibrate(trace).rows[-1]
    assert (row.real_cache_read_tokens, row.predicted_cache_read_tokens) == (10000, 10000)


@pytest.mark.clause("SG-REPLAY-1")
def test_a_read_only_call_keeps_its_session_s_ttl_for_the_edit_window(tmp_path: Path) -> None:
    """b writes with 1h, then a call only reads: its entry keeps b's 1h TTL, so a short
    read 400 s later (past 5m, within 1h) is an edited history, not an expiry."""
    path = _log(
        tmp_path,
        [
            ("a", 0, 3, 0, 10500),
            ("b", 5, 3, 10000, 4000),
            ("b", 20, 3, 14000, 0),
            ("b", 420, 3, 10000, 4000),
        ],
    )
    lines = [json.loads(text) for text in path.read_text(encoding="utf-8").splitlines()]
    for line in lines:
        if line["uuid"] == "a1":  # b's first call: its 4,000-token write is 1h
            line["message"]["usage"]["cache_creation"] = {"ephemeral_1h_input_tokens": 4000}
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    trace = load_trace(path, "claude-code")
    assert trace.requests[1].recorded is not None
    assert trace.requests[1].recorded.ttl == "1h"
    before, last = trace.requests[2], trace.requests[3]
    assert last.blocks[: len(before.blocks)] != before.blocks


@pytest.mark.clause("SG-REPLAY-1")
def test_a_read_of_all_the_previous_call_left_is_growth_not_an_edit(tmp_path: Path) -> None:
    """b's first call sends 100 uncached tokens after its breakpoint and leaves 14,000
    cached; its next call reads exactly those 14,000: nothing was edited (only a read below
    what was left is), so the prompt grows on the whole previous one."""
    trace = load_trace(
        _log(
            tmp_path,
            [
                ("a", 0, 3, 0, 10500),
                ("b", 5, 100, 10000, 4000),
                ("b", 20, 3, 14000, 500),
            ],
        ),
        "claude-code",
    )
    before, last = trace.requests[1], trace.requests[2]
    assert last.blocks[: len(before.blocks)] == before.blocks
