"""The transcript importers on real public logs (tests/warming/fixtures/real/, reduced: ids,
times and usage kept, text replaced; README.md there names each file's source and commit)."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest
from sessiongen.warming.traces import Trace, TraceRequest
from sessiongen.warming.traces.formats import load_trace

REAL = Path(__file__).parent / "fixtures" / "real"
V1 = REAL / "claude-code" / "v1.0-in-file-subagents"
V2_0 = REAL / "claude-code" / "v2.0-in-file-sidechain"
V2_1 = REAL / "claude-code" / "v2.1-subagents-dir"
TOJI = REAL / "opencode" / "toji-electron"
V1_SESSION = "fe5e1c67-53e7-4862-81ae-d0e013e3270b"
V2_0_SESSION = "88a8d761-7b9a-4bf1-a8ca-c1febe6bf358"
V2_1_SESSION = "4d5611e5-241a-462a-8d15-5122611a9569"


def _usage_lines(directory: Path) -> dict[str, dict[str, object]]:
    """Each assistant message's lines in the log: message id -> first usage, stop reasons,
    largest output."""
    found: dict[str, dict[str, object]] = {}
    for file in sorted(directory.rglob("*.jsonl")):
        for raw in file.read_text().splitlines():
            line = json.loads(raw)
            message = line.get("message")
            if line.get("type") != "assistant" or "usage" not in message:
                continue
            entry = found.setdefault(
                message["id"], {"usage": message["usage"], "stops": [], "outputs": []}
            )
            entry["stops"].append(message["stop_reason"])  # type: ignore[attr-defined]
            entry["outputs"].append(message["usage"]["output_tokens"])  # type: ignore[attr-defined]
    return found


def test_claude_1_0_in_file_subagents_are_split_by_their_chain_root() -> None:
    """d-kimuson/claude-code-viewer mock-global-claude-dir/.../fe5e1c67-....jsonl (Claude Code
    1.0.98): the orchestrator runs Task subagents written into the main file, `isSidechain`
    and no `agentId`; each is its own `parentUuid` chain from a prompt with no parent."""
    trace = load_trace(V1, "claude-code")
    counts = Counter(r.session for r in trace.requests)
    assert counts == {
        V1_SESSION: 9,
        f"{V1_SESSION}/6690d10e-f521-4ac0-800d-e5eb7a2d8072": 9,
        f"{V1_SESSION}/f4546a51-ea10-47e0-b4e0-76802974f8a9": 4,
        f"{V1_SESSION}/0d692b0f-17cb-4fd0-94fb-215dabcef803": 2,
        f"{V1_SESSION}/f4ab2bf6-d642-431a-85cb-66691f24c404": 4,
    }


def test_claude_2_0_sidechain_lines_without_an_agent_id_are_their_own_session() -> None:
    """daaain/claude-code-log test/test_data/sidechain_integrated.jsonl (Claude Code 2.0.46):
    the subagent's assistant lines carry `isSidechain` but no `agentId`."""
    counts = Counter(r.session for r in load_trace(V2_0, "claude-code").requests)
    assert counts == {V2_0_SESSION: 2, f"{V2_0_SESSION}/b674eedd-0d9d-49e7-8116-1f092cd750ed": 1}


def test_claude_2_1_subagent_files_are_sessions_by_agent_id() -> None:
    """marot/spotter test/fixtures/transcripts/4d5611e5-... (Claude Code 2.1.39): the main log
    and `<session>/subagents/agent-*.jsonl`, whose lines carry `agentId`."""
    counts = Counter(r.session for r in load_trace(V2_1, "claude-code").requests)
    assert counts == {
        V2_1_SESSION: 4,
        f"{V2_1_SESSION}/a2898e3": 3,
        f"{V2_1_SESSION}/acompact-e1f845": 1,
    }


def test_claude_recorded_usage_is_the_log_with_the_ttl_split() -> None:
    """All three Claude Code fixtures (sources above): `recorded` is each message's usage as
    logged (its first line), the write split into 5m and 1h as `cache_creation` gives it
    (all 5m in these logs), a 2.0 line without the split counting as 5m; the request's prompt
    is their sum."""
    for directory in (V1, V2_0, V2_1):
        logged: Counter[tuple[int, int, int, int]] = Counter()
        for entry in _usage_lines(directory).values():
            usage = entry["usage"]
            assert isinstance(usage, dict)
            split = usage.get("cache_creation") or {
                "ephemeral_5m_input_tokens": usage["cache_creation_input_tokens"],
                "ephemeral_1h_input_tokens": 0,
            }
            five, hour = split["ephemeral_5m_input_tokens"], split["ephemeral_1h_input_tokens"]
            assert five + hour == usage["cache_creation_input_tokens"]
            logged[(usage["input_tokens"], usage["cache_read_input_tokens"], five, hour)] += 1
        requests = load_trace(directory, "claude-code").requests
        recorded = [r.recorded for r in requests if r.recorded is not None]
        assert len(recorded) == len(requests)
        assert logged == Counter(
            (u.input_tokens, u.cache_read_tokens, u.cache_write_5m_tokens, u.cache_write_1h_tokens)
            for u in recorded
        )
        assert all(r.recorded and r.input_tokens == r.recorded.prompt_tokens for r in requests)


def test_claude_output_is_known_only_from_a_line_with_a_stop_reason() -> None:
    """d-kimuson fe5e1c67 (1.0.98): of its messages only msg_0175yHhPUPFGbabUiDkdjvaD has a
    line with `stop_reason` (tool_use, 172 tokens); the rest log start-of-message
    placeholders (msg_01USxtUXmWaa9bAeQETXfNr5 wrote a five-item TodoWrite and logs 1).
    marot/spotter 4d5611e5 (2.1.39) never logs one: the compaction agent's long summary
    logs 8. daaain sidechain_integrated (2.0.46) logs a stop_reason on every message."""
    v1 = load_trace(V1, "claude-code").requests
    known = [r for r in v1 if r.output_known]
    assert [(r.output_tokens, r.recorded and r.recorded.output_tokens) for r in known] == [
        (172, 172)
    ]
    unknown = [r for r in v1 if not r.output_known]
    assert len(unknown) == 27
    assert all(r.recorded is not None and r.recorded.output_tokens is None for r in unknown)
    assert not any(r.output_known for r in load_trace(V2_1, "claude-code").requests)
    v2_0 = load_trace(V2_0, "claude-code").requests
    assert [r.recorded.output_tokens for r in v2_0 if r.recorded] == [365, 183, 190]


def _first(requests: tuple[TraceRequest, ...], session: str) -> TraceRequest:
    return next(r for r in requests if r.session == session)


def test_claude_subagents_share_the_system_prefix_a_first_read_shows() -> None:
    """d-kimuson fe5e1c67 (1.0.98): the subagents started at 00:56:38 read 11,381 tokens at
    their first call, a prefix written by the subagents before them (which read nothing):
    block 0 of every subagent's prompt is that one shared block, and the main session's
    first read (14,874) is its own agent's prefix."""
    requests = load_trace(V1, "claude-code").requests
    writer = _first(requests, f"{V1_SESSION}/6690d10e-f521-4ac0-800d-e5eb7a2d8072")
    reader = _first(requests, f"{V1_SESSION}/0d692b0f-17cb-4fd0-94fb-215dabcef803")
    assert writer.recorded is not None and writer.recorded.cache_read_tokens == 0
    assert reader.recorded is not None and reader.recorded.cache_read_tokens == 11381
    assert writer.at < reader.at
    assert writer.blocks[0] == reader.blocks[0]
    assert writer.block_tokens[0] == reader.block_tokens[0] == 11381
    main = _first(requests, V1_SESSION)
    assert main.block_tokens[0] == 14874 and main.blocks[0] != writer.blocks[0]


def test_claude_breakpoints_are_the_system_prefix_and_the_last_two_messages() -> None:
    """d-kimuson fe5e1c67 (1.0.98) and marot/spotter 4d5611e5 (2.1.39): Claude Code marks
    its system prompt (tools + system, block 0 when the shared prefix is known) and the last
    two messages: the previous prompt's end (what the previous call wrote) and the last
    block."""
    for directory in (V1, V2_1):
        for request in load_trace(directory, "claude-code").requests:
            if request.session.endswith("a2898e3"):
                continue  # no known prefix: below
            last = len(request.blocks) - 1
            expected = {0, last - 1, last} if last >= 1 else {0}
            assert request.breakpoints == tuple(sorted(expected)), request
    # the 2.1 subagent read nothing at its first call (no known prefix): one block, then
    # each call marks the previous prompt's end and its own
    agent = [r for r in load_trace(V2_1, "claude-code").requests if r.session.endswith("a2898e3")]
    assert [r.breakpoints for r in agent] == [(0,), (0, 1), (1, 2)]
    assert [r.block_tokens for r in agent] == [(13525,), (13525, 11567), (13525, 11567, 854)]


def test_opencode_input_includes_the_cached_reads_on_a_non_anthropic_route() -> None:
    """Krenuds/toji_electron CONVO.md (opencode API responses of 2025-09-16, provider
    `opencode`, model `grok-code`): `input` 9,640 with `cache.read` 9,600 is a 9,640-token
    prompt of which 40 were uncached, not 19,240."""
    trace = load_trace(TOJI, "opencode")
    first = _first(trace.requests, "ses_6aade4081ffe216ygZUgcUQdR1")
    assert first.input_tokens == 9640
    assert first.recorded is not None
    assert (first.recorded.input_tokens, first.recorded.cache_read_tokens) == (40, 9600)
    assert len(trace.sessions()) == 7
    assert sum(r.input_tokens for r in trace.requests) == sum(
        (9640, 10061, 9648, 12297, 12921, 10119, 9907)
    )
    # no breakpoints on a non-Anthropic route; the shared prefix is the smallest first read
    assert all(r.breakpoints == () for r in trace.requests)
    assert {r.block_tokens[0] for r in trace.requests} == {9600}


def test_claude_a_directory_of_real_logs_keeps_every_session_apart(tmp_path: Path) -> None:
    """The three reduced Claude Code fixtures above as one directory: 39 calls in 10
    sessions (the importer before the split by chain root made 7: the 1.0.98 log's four
    subagents were one session), each request carrying its recorded usage and at most 3
    breakpoints. (The whole logs beside them repeat the 1.0.98 log's message ids, which a
    directory counts once: they are loaded one by one, test_replay_real_logs.py.)"""
    for log in (V1, V2_0, V2_1):
        shutil.copytree(log, tmp_path / log.name)
    trace = load_trace(tmp_path, "claude-code")
    assert (len(trace.requests), len(trace.sessions())) == (39, 10)
    assert all(r.recorded is not None and len(r.breakpoints) <= 3 for r in trace.requests)


@pytest.mark.clause("SG-REPLAY-1")
def test_a_prefix_read_before_the_log_begins_is_warm_in_the_replay() -> None:
    """d-kimuson/claude-code-viewer @ f299e8f8, fe5e1c67: the main session's first call reads
    14,874 tokens no call of the log wrote (a session before the log did). The importer
    records that prefix as warm, and the replay as recorded reads it, unbilled, as the
    provider did; without it the replay writes it instead."""
    from sessiongen.warming.policies.trace_replay import prepare
    from sessiongen.warming.study.calibration import calibrate

    trace = load_trace(REAL / "claude-code" / "v1.0-in-file-subagents", "claude-code")
    first = trace.requests[0]
    assert first.recorded is not None and first.recorded.cache_read_tokens == 14874
    [entry] = [w for w in trace.warm if w.request == 0]
    assert sum(first.block_tokens[: entry.block + 1]) == 14874
    row = calibrate(trace).rows[0]
    assert (row.real_cache_read_tokens, row.predicted_cache_read_tokens) == (14874, 14874)
    cold = prepare(Trace(trace.name, trace.requests))  # without the warm prefix
    assert not cold.warm and calibrate(cold).rows[0].predicted_cache_read_tokens == 0
