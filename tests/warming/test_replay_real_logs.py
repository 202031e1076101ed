"""The replay on real logs and the causes of its misses (issue 31): whole real Claude Code
logs of 100+ calls within the target of the bill, and one test per cause of a past
disagreement (request starts, warm prefixes the log cannot explain, calls missing from the
log, the `as_recorded` row's coverage, each call at its own model, miss causes)."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sessiongen.cache import (
    MISS_CAUSES,
    CallShape,
    count_causes,
    get_model,
    is_miss,
    miss_cause,
    price,
)
from sessiongen.warming.study.calibration import Calibration, calibrate
from sessiongen.warming.traces import TTL_TOLERANCE
from sessiongen.warming.traces.formats import load_trace

REAL = Path(__file__).parent / "fixtures" / "real" / "claude-code"
WHOLE_LOGS = ("v1.0-whole-fe5e1c67", "v2.1-1h-258c7280", "v2.1-1h-8463c716", "v2.1-5m-fa812bfe")


def _calibration(log: str) -> Calibration:
    return calibrate(load_trace(REAL / log, "claude-code"))


@pytest.mark.clause("SG-REPLAY-1")
@pytest.mark.parametrize("log", WHOLE_LOGS)
def test_a_whole_real_log_replays_within_the_target_of_its_bill(log: str) -> None:
    """Each whole real log (100+ calls; tests/warming/fixtures/real/README.md): the replay
    as recorded reads within 3% and writes within 10% of what the provider billed, and
    prices within 3%."""
    total = _calibration(log).total
    assert total.requests >= 100
    assert abs(total.read_ratio - 1) <= 0.03, total
    assert abs(total.write_ratio - 1) <= 0.10, total
    assert abs(total.cost_ratio - 1) <= 0.03, total


def test_the_1h_logs_write_with_1h_and_read_across_a_gap_past_5_minutes() -> None:
    """8463c716 writes every prefix with the 1h TTL and comes back after 304.7 s: its entry
    is alive (1h), read in full, and the replay writes 1h as the bill does."""
    calibration = _calibration("v2.1-1h-8463c716")
    rows = calibration.rows
    assert all(r.real_cache_write_1h_tokens == r.real_cache_write_tokens for r in rows)
    total_1h = sum(r.predicted_cache_write_1h_tokens for r in rows)
    assert total_1h == sum(r.predicted_cache_write_tokens for r in rows) > 0
    previous: dict[str, float] = {}
    late = []
    for row in rows:
        if row.session in previous and 300 < row.at - previous[row.session] < 400:
            late.append(row)
        previous[row.session] = row.at
    assert late and all(
        r.predicted_cache_read_tokens >= r.real_cache_read_tokens - 16 and not r.miss_cause
        for r in late
    )


def test_subagents_started_together_each_write() -> None:
    """The 1.0.98 log's three subagents start at the same instant: none can read what the
    others are writing (an entry is readable once its request's response began), so each
    writes the 11,381-token subagent prefix, as billed. Readable at once, two of the three
    read it and the replay's writes fell to 0.835 of the bill."""
    rows = _calibration("v1.0-whole-fe5e1c67").rows
    fan = [r for r in rows if "/" in r.session and r.real_cache_read_tokens == 0]
    starts = {r.at for r in fan}
    together = [r for r in fan if sum(1 for o in fan if o.at == r.at) == 3]
    assert len(together) == 3 and len(starts) < len(fan)
    assert all(r.predicted_cache_read_tokens == 0 for r in together)
    assert all(r.miss_cause == "cold_start" for r in together)


# --- a Claude Code log written line by line ----------------------------------------------

START = datetime(2026, 2, 1, 12, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Call:
    """One model call of a hand-written Claude Code log: sent `at` seconds in (the user line),
    its first answer line `ttft` seconds later; `parent` "user" (the usual), "assistant" (the
    call chains to another response's line) or "none" (its parent is not in the file)."""

    at: float
    read: int
    write: int
    uncached: int = 0
    ttl: str = "5m"
    model: str = "claude-sonnet-4-6"
    session: str = "s1"
    ttft: float = 3.0
    parent: str = "user"


def _write_log(folder: Path, calls: Sequence[Call]) -> Path:
    """The calls as a Claude Code log (one file per session), in the shape 2.x writes."""
    files: dict[str, list[str]] = {}
    last: dict[str, str] = {}
    for n, call in enumerate(calls):
        lines = files.setdefault(call.session, [])

        def stamp(seconds: float) -> str:
            return (START + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")

        user = f"u{n}"
        before = last.get(call.session)
        if call.parent == "user":
            said: dict[str, object] = {"type": "user", "uuid": user, "parentUuid": before}
            said |= {"sessionId": call.session, "timestamp": stamp(call.at)}
            said |= {"message": {"role": "user", "content": "x"}}
            lines.append(json.dumps(said))
            parent: str | None = user
        elif call.parent == "assistant":
            parent = before
        else:
            parent = "not-in-the-file"
        split = {
            "ephemeral_5m_input_tokens": call.write if call.ttl == "5m" else 0,
            "ephemeral_1h_input_tokens": call.write if call.ttl == "1h" else 0,
        }
        usage = {
            "input_tokens": call.uncached,
            "cache_read_input_tokens": call.read,
            "cache_creation_input_tokens": call.write,
            "cache_creation": split,
            "output_tokens": 5,
        }
        answer = f"a{n}"
        message = {"id": f"msg_{n}", "model": call.model, "role": "assistant", "usage": usage}
        record: dict[str, object] = {"type": "assistant", "uuid": answer, "parentUuid": parent}
        record |= {"sessionId": call.session, "timestamp": stamp(call.at + call.ttft)}
        lines.append(json.dumps(record | {"message": message}))
        last[call.session] = answer
    folder.mkdir(parents=True, exist_ok=True)
    for session, lines in files.items():
        (folder / f"{session}.jsonl").write_text("\n".join(lines) + "\n")
    return folder


def _rows(tmp_path: Path, calls: Sequence[Call]) -> Calibration:
    return calibrate(load_trace(_write_log(tmp_path / "log", calls), "claude-code"))


# (1) gaps judged from the request's start


def test_a_request_starts_at_the_line_it_answers_not_at_its_answer(tmp_path: Path) -> None:
    """A response whose first line came 20 s after the line it answers was sent at that
    line: 290 s after the previous request's start, inside 5 minutes, so its session's
    prefix is read. Timed by its own line (310 s) it would be a miss."""
    calls = [Call(0, 0, 5000), Call(290, 5000, 300, ttft=20.0)]
    trace = load_trace(_write_log(tmp_path / "log", calls), "claude-code")
    assert [r.at for r in trace.requests] == [0.0, 290.0]
    assert trace.requests[1].ttft == pytest.approx(20.0)
    row = calibrate(trace).rows[1]
    assert row.predicted_cache_read_tokens == 5000 and row.warm_kind == ""


def test_a_response_without_a_line_to_answer_starts_its_usual_delay_earlier(
    tmp_path: Path,
) -> None:
    """A response chained to another response's line, or to a line not in the file, was sent
    before its first line by the log's usual delay from a line to a first answer line (the
    median, here 4 s), and never before an assistant parent."""
    calls = [
        Call(0, 0, 5000, ttft=4.0),
        Call(100, 5000, 300, ttft=4.0),
        Call(200, 5300, 300, ttft=10.0, parent="assistant"),
        Call(300, 5600, 300, ttft=10.0, parent="none"),
    ]
    trace = load_trace(_write_log(tmp_path / "log", calls), "claude-code")
    assert [r.at for r in trace.requests] == [0.0, 100.0, 206.0, 306.0]


def test_a_read_at_a_gap_just_past_the_ttl_is_taken_as_alive(tmp_path: Path) -> None:
    """By the log's times the second request comes 303.4 s after the first, and the bill
    shows it read the whole 124k prefix: the log's times are when lines were written, so a
    gap within `TTL_TOLERANCE` past the TTL is taken as within it (`ttl_boundary`), and the
    replay reads it as billed instead of writing it again."""
    calls = [Call(0, 0, 124_000), Call(303.4, 124_000, 500)]
    calibration = _rows(tmp_path, calls)
    row = calibration.rows[1]
    assert (row.warm_kind, row.warm_tokens) == ("ttl_boundary", 124_000)
    assert row.predicted_cache_read_tokens == 124_000 and row.predicted_cache_write_tokens == 500
    assert calibration.total.write_ratio == pytest.approx(1.0)
    assert "read within 10 s past the TTL 1 calls (124,000 tokens)" in calibration.line()
    assert TTL_TOLERANCE == 10.0


def test_a_miss_just_inside_the_ttl_by_the_logs_clock_is_an_expiry(tmp_path: Path) -> None:
    """A miss 295 s after the previous request, by the log's clock: within the tolerance of
    the TTL, so the entry expired (`ttl_expired_5m`), not a loss on the provider's side."""
    rows = _rows(tmp_path, [Call(0, 0, 5000), Call(295, 0, 5300)]).rows
    assert rows[1].miss_cause == "ttl_expired_5m"
    assert rows[1].predicted_miss_cause == ""  # the replay's own clock: alive, read


# (2) account-level warm prefixes


def test_a_shared_prefix_read_hours_after_the_log_last_used_it_is_warm(tmp_path: Path) -> None:
    """Two sessions three hours apart both read the 12,000-token system + tools prefix; the
    log's own last use of it expired hours before the second. Other sessions of the account
    kept it warm: the replay takes it as cached there (`account`) and reads it as billed."""
    calls = [
        Call(0, 12_000, 2_000, session="a"),
        Call(10_800, 12_000, 1_500, session="b"),
    ]
    calibration = _rows(tmp_path, calls)
    assert [(r.warm_kind, r.warm_tokens) for r in calibration.rows] == [
        ("account", 12_000),
        ("account", 12_000),
    ]
    assert [r.predicted_cache_read_tokens for r in calibration.rows] == [12_000, 12_000]
    assert calibration.total.write_ratio == pytest.approx(1.0)
    assert "account-level prefixes 2 calls (24,000 tokens)" in calibration.line()


# (3) calls missing from the log


def test_a_read_longer_than_any_logged_prompt_means_calls_are_missing(tmp_path: Path) -> None:
    """The third call reads 9,000 tokens where its session's previous prompt had 6,000:
    calls the log does not hold wrote the rest. They are counted, and the replay reads what
    they cached instead of writing it (the bill wrote 400; without it the replay wrote
    3,400), so they do not bias the write estimate."""
    calls = [Call(0, 0, 5000), Call(30, 5000, 1000), Call(120, 9000, 400)]
    calibration = _rows(tmp_path, calls)
    row = calibration.rows[2]
    assert row.warm_kind == "missing_calls" and row.warm_tokens == 9000
    assert (row.predicted_cache_read_tokens, row.predicted_cache_write_tokens) == (9000, 400)
    assert "calls missing from the log: before 1 calls" in calibration.line()


# (4) the as_recorded row compares what it prices


def test_the_as_recorded_row_says_which_sessions_it_covers(tmp_path: Path) -> None:
    """With several sessions the default fit fraction prices `as_recorded` on the later
    ones only: a printed line names them and gives the real usage of exactly those, beside
    the calibration line of the whole trace."""
    from sessiongen.cli import main

    calls = [
        Call(0, 0, 20_000, session="early"),
        Call(60, 20_000, 500, session="early"),
        Call(7200, 0, 30_000, session="late"),
        Call(7260, 30_000, 700, session="late"),
    ]
    folder = _write_log(tmp_path / "log", calls)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["experiment", "warming", "--trace", str(folder), "--format", "claude-code",
                     "--out", str(tmp_path / "out")]) == 0  # fmt: skip
    lines = out.getvalue().splitlines()
    [covered] = [line for line in lines if line.startswith("as_recorded row:")]
    assert "1 sessions of 1 logs (late)" in covered
    assert "cache reads 30,000, cache writes 30,700" in covered


# (5) each call at its own model


def test_each_call_is_priced_at_its_own_model(tmp_path: Path) -> None:
    """An Opus call and a Haiku call: each priced at its own model's prices (the real cost
    is the sum of the two), never at one model for the whole trace."""
    calls = [
        Call(0, 0, 10_000, model="claude-opus-4-6", session="main"),
        Call(5, 0, 8_000, model="claude-haiku-4-5-20251001", session="side"),
    ]
    calibration = _rows(tmp_path, calls)
    assert [r.model for r in calibration.rows] == ["claude-opus-4-6", "claude-haiku-4-5"]
    opus, haiku = price("claude-opus-4-6"), price("claude-haiku-4-5")
    expected = (10_000 * opus.cache_write_5m) / 1e6 + (8_000 * haiku.cache_write_5m) / 1e6
    assert calibration.total.real_cost == pytest.approx(expected)
    assert calibration.total.predicted_cost == pytest.approx(expected)


def test_a_model_the_catalog_does_not_know_is_priced_at_the_stand_in_and_said(
    tmp_path: Path,
) -> None:
    calibration = _rows(tmp_path, [Call(0, 0, 5000, model="claude-unknown-9")])
    assert calibration.rows[0].model == "claude-sonnet-4-6"
    assert calibration.stand_ins == ("claude-unknown-9",)
    assert "not catalogued, priced at claude-sonnet-4-6: claude-unknown-9" in calibration.line()


# (6) miss causes


def test_the_replay_names_each_miss_cause(tmp_path: Path) -> None:
    """One session per cause; the real and the replay's misses get the same cause, counted
    in the calibration line."""
    calls = [
        Call(0, 0, 5000, session="expired"),
        Call(400, 0, 5300, session="expired"),
        Call(0, 0, 5000, ttl="1h", session="hour"),
        Call(3700, 0, 5300, ttl="1h", session="hour"),
        Call(0, 0, 5000, session="switch"),
        Call(30, 0, 5300, model="claude-opus-4-6", session="switch"),
        Call(0, 0, 5000, session="edited"),
        Call(30, 5000, 1000, session="edited"),
        Call(60, 2000, 4100, session="edited"),
        Call(0, 0, 5000, session="reset"),
        Call(30, 0, 5300, session="reset"),
        Call(0, 0, 0, uncached=500, session="small"),
    ]
    rows = _rows(tmp_path, sorted(calls, key=lambda c: c.at)).rows
    causes = {(r.session, r.miss_cause) for r in rows if r.miss_cause}
    assert causes == {
        ("expired", "cold_start"),
        ("expired", "ttl_expired_5m"),
        ("hour", "cold_start"),
        ("hour", "ttl_expired_1h"),
        ("switch", "cold_start"),
        ("switch", "model_changed"),
        ("edited", "cold_start"),
        ("edited", "messages_rewritten"),
        ("reset", "cold_start"),
        ("reset", "likely_server_side"),
        ("small", "below_minimum"),
    }
    predicted = {(r.session, r.predicted_miss_cause) for r in rows if r.predicted_miss_cause}
    # the replay cannot see the provider's reset: it reads there
    assert predicted == causes - {("reset", "likely_server_side")}


def test_the_miss_cause_rule() -> None:
    """`cache.miss_cause` in the order its docstring gives, on call shapes."""
    before = CallShape(0, "m", 5000, tools="t", system="s", messages=("a", "b"), ttl="5m")
    now = CallShape(30, "m", 6000, tools="t", system="s", messages=("a", "b", "c"))
    least = get_model("claude-sonnet-4-6").min_cacheable_tokens
    assert miss_cause(now, None, min_tokens=least) == "cold_start"
    assert miss_cause(CallShape(0, "m", 10), None, min_tokens=least) == "below_minimum"
    assert miss_cause(now, before, min_tokens=least) == "likely_server_side"
    assert miss_cause(CallShape(30, "n", 6000), before, min_tokens=least) == "model_changed"
    changed = CallShape(30, "m", 6000, tools="u", system="s", messages=("a", "b", "c"))
    assert miss_cause(changed, before, min_tokens=least) == "tools_changed"
    changed = CallShape(30, "m", 6000, tools="t", system="x", messages=("a", "b", "c"))
    assert miss_cause(changed, before, min_tokens=least) == "system_prompt_changed"
    changed = CallShape(30, "m", 6000, tools="t", system="s", messages=("a", "x", "c"))
    assert miss_cause(changed, before, min_tokens=least) == "messages_rewritten"
    late = CallShape(301, "m", 6000, tools="t", system="s", messages=("a", "b", "c"))
    assert miss_cause(late, before, min_tokens=least) == "ttl_expired_5m"
    near = CallShape(295, "m", 6000, tools="t", system="s", messages=("a", "b", "c"))
    assert miss_cause(near, before, min_tokens=least) == "likely_server_side"
    assert miss_cause(near, before, min_tokens=least, tolerance=10) == "ttl_expired_5m"
    unknown = CallShape(30, "m", 6000)
    assert miss_cause(unknown, CallShape(0, "m", 5000), min_tokens=least) == "unknown"
    assert is_miss(0, 0, True) and not is_miss(100, 0, True)
    assert is_miss(4000, 5000, False) and not is_miss(4990, 5000, False)
    assert count_causes(["cold_start", "", "ttl_expired_5m", "cold_start"]) == (
        "ttl_expired_5m 1, cold_start 2"
    )
    assert len(MISS_CAUSES) == 10


def test_the_agents_runs_name_their_misses() -> None:
    """The committed runs of the real clients (`report.csv`'s `miss_cause`): Claude Code's
    compaction agent has its own system prompt, opencode's fork offers one more tool, and a
    turn after an idle gap past 5 minutes finds the entry expired."""
    from sessiongen.agents.findings import load_runs

    runs = {(r.client, r.scenario): r for r in load_runs(REAL.parents[4] / "notebooks/data/agents")}

    def causes(client: str, scenario: str) -> set[str]:
        return {row.miss_cause for row in runs[(client, scenario)].rows if row.miss_cause}

    assert "system_prompt_changed" in causes("claude-code", "compaction")
    assert "tools_changed" in causes("opencode", "session-fork")
    for client in ("codex", "gemini-cli", "opencode"):
        assert "ttl_expired_5m" in causes(client, "idle-gaps"), client
    assert all(row.miss_cause in ("", *MISS_CAUSES) for run in runs.values() for row in run.rows)
