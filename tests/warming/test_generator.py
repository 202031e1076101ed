"""The seeded coding-agent session generator."""

from __future__ import annotations

from dataclasses import replace

import pytest
from sessiongen.warming.traces import Trace
from sessiongen.warming.traces.generator import SessionMix, generate_sessions


def test_the_same_seed_gives_the_same_trace() -> None:
    assert generate_sessions(30, seed=7) == generate_sessions(30, seed=7)


def test_another_seed_gives_another_trace() -> None:
    assert generate_sessions(30, seed=7).requests != generate_sessions(30, seed=8).requests


def test_sessions_of_an_agent_share_its_long_prefix() -> None:
    trace = generate_sessions(40, seed=1)
    firsts = [requests[0] for requests in trace.sessions().values()]
    assert len(firsts) == 40
    prefixes = {(r.blocks[0], r.block_tokens[0]) for r in firsts}
    assert len(prefixes) == 2  # two agents by default
    assert all(12_000 <= tokens <= 20_000 for _, tokens in prefixes)
    for request in trace.requests:  # every prompt starts with its agent's prefix
        assert (request.blocks[0], request.block_tokens[0]) in prefixes


def test_a_session_prompt_grows_by_one_segment_a_call() -> None:
    mix = SessionMix()
    trace = generate_sessions(40, seed=2, mix=mix)
    content = (mix.tool_tokens, mix.human_tokens)
    low = mix.output_tokens.low + min(c.low for c in content)
    high = mix.output_tokens.high + max(c.high for c in content)
    for requests in trace.sessions().values():
        first = requests[0]
        assert len(first.blocks) == 2
        assert mix.human_tokens.low <= first.block_tokens[1] <= mix.human_tokens.high
        for before, after in zip(requests, requests[1:], strict=False):
            assert after.blocks[:-1] == before.blocks  # no session here reaches the limit
            assert low <= after.block_tokens[-1] <= high


def test_a_full_context_is_compacted_to_prefix_and_summary() -> None:
    mix = SessionMix(context_limit=30_000)
    trace = generate_sessions(40, seed=3, mix=mix)
    assert max(r.input_tokens for r in trace.requests) <= 30_000 + mix.summary_tokens + 12_000
    compacted = 0
    for requests in trace.sessions().values():
        for before, after in zip(requests, requests[1:], strict=False):
            if after.blocks[:-1] != before.blocks:
                compacted += 1
                assert after.blocks[0] == before.blocks[0] and len(after.blocks) == 2
                assert after.block_tokens[1] > mix.summary_tokens
    assert compacted > 0


def _gaps(trace: Trace) -> list[float]:
    return [gap for gap in trace.reuse_gaps() if gap is not None]


def test_human_gaps_follow_the_documented_mixture() -> None:
    # One call per turn: every gap within a session is a human gap.
    mix = SessionMix(tool_step_p=0.0)
    trace = generate_sessions(600, seed=4, mix=mix)
    gaps = _gaps(trace)
    long = [g for g in gaps if g >= 300]
    eps = 1e-6  # gaps are differences of summed float times
    assert all(20 - eps <= g <= 180 + eps or 300 - eps <= g <= 3600 + eps for g in gaps)
    assert 0.12 <= len(long) / len(gaps) <= 0.18  # long_gap_p = 0.15
    short = sorted(g for g in gaps if g < 300)
    assert 50 <= short[len(short) // 2] <= 70  # median 60 s
    turns = len(trace.requests) / 600
    assert 4.5 <= turns <= 5.5  # end_p = 0.2: 5 turns a session


def test_tool_steps_are_seconds_apart() -> None:
    mix = SessionMix(end_p=1.0)  # one turn a session: every gap is a tool-loop step
    trace = generate_sessions(300, seed=5, mix=mix)
    gaps = _gaps(trace)
    assert all(1 - 1e-6 <= g <= 60 + 1e-6 for g in gaps)
    assert 5 <= sorted(gaps)[len(gaps) // 2] <= 7  # median 6 s
    calls = len(trace.requests) / 300
    assert 3.6 <= calls <= 4.4  # tool_step_p = 0.75: 4 calls a turn


def test_sessions_start_as_a_poisson_process() -> None:
    trace = generate_sessions(500, seed=6)
    starts = [requests[0].at for requests in trace.sessions().values()]
    assert starts[0] == 0.0
    mean_gap = (starts[-1] - starts[0]) / (len(starts) - 1)
    assert 80 <= mean_gap <= 100  # session_gap_s = 90


def test_no_sessions_and_bad_parameters() -> None:
    assert generate_sessions(0, seed=1).requests == ()
    with pytest.raises(ValueError, match="n_sessions"):
        generate_sessions(-1, seed=1)
    with pytest.raises(ValueError, match="at least one agent"):
        SessionMix(agents=0)
    with pytest.raises(ValueError, match="end_p must be a probability"):
        replace(SessionMix(), end_p=1.5)
