"""Mooncake traces: block tokens, session inference from the prefix chain, the real files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sessiongen.warming.traces import TraceFormatError
from sessiongen.warming.traces.formats import load_trace
from sessiongen.warming.traces.mooncake import (
    align_to_prompts,
    block_tokens,
    infer_sessions,
    load_mooncake,
    shared_mooncake_dir,
)

FIXTURES = Path(__file__).parent / "fixtures"
REAL = shared_mooncake_dir()
REAL_FILES = {"conversation_trace_first_half.jsonl": 5719, "synthetic_trace.jsonl": 3993}


def test_the_fixture_loads_exactly() -> None:
    trace = load_mooncake(FIXTURES / "mooncake_small.jsonl", aligned=False)
    rows = [(r.session, r.at, r.blocks, r.block_tokens, r.output_tokens) for r in trace.requests]
    assert rows == [
        ("s0", 0.0, (0, 1, 2), (512, 512, 176), 50),
        ("s1", 1.0, (0, 3, 4, 5), (512, 512, 512, 264), 80),
        ("s2", 2.0, (0, 6), (512, 188), 20),
        ("s0", 3.0, (0, 1, 7, 8), (512, 512, 512, 364), 60),  # continues s0 past [0, 1]
        ("s3", 4.0, (0, 9, 10), (512, 512, 76), 30),  # shares only the system block 0
        ("s1", 5.0, (0, 3, 4, 11, 12), (512, 512, 512, 512, 252), 90),
        ("s0", 6.0, (0, 1, 7, 13), (512, 512, 512, 164), 40),  # a retry of s0's last message
        ("s4", 7.0, (20, 21), (512, 1), 10),  # input_length 300 < 512: last block clamped to 1
        ("s5", 7.5, (30,), (600,), 5),  # more tokens than one block: the last takes them
    ]


def test_load_trace_aligns_chunks_to_prompts() -> None:
    trace = load_trace(FIXTURES / "mooncake_small.jsonl", "mooncake")
    s0 = [(r.blocks, r.block_tokens) for r in trace.requests if r.session == "s0"]
    # s0's second prompt resends its first one's 176-token tail of chunk 2 inside chunk 7:
    # aligned, it holds block 2 whole and a new block for the other 336 tokens of chunk 7.
    assert s0[0] == ((0, 1, 2), (512, 512, 176))
    assert s0[1][0][:3] == (0, 1, 2) and s0[1][1] == (512, 512, 176, 336, 364)
    assert (
        trace.requests
        == align_to_prompts(
            load_mooncake(FIXTURES / "mooncake_small.jsonl", aligned=False)
        ).requests
    )


def test_block_tokens() -> None:
    assert block_tokens(3, 1100) == (512, 512, 76)
    assert block_tokens(3, 1024) == (512, 512, 1)  # inconsistent: clamped
    assert block_tokens(1, 512) == (512,)


def test_a_shared_first_block_alone_does_not_chain() -> None:
    # [0, 6] ends its full blocks at [0], the prefix every conversation starts with: [0, 9, 10]
    # matches it but is a new conversation.
    chains = [[0, 1, 2], [0, 3, 4], [0, 6], [0, 9, 10]]
    assert infer_sessions(chains) == [0, 1, 2, 3]


def test_a_conversation_continues_through_its_full_blocks() -> None:
    chains = [[7, 8, 9], [7, 8, 10, 11], [7, 8, 10, 12, 13]]
    assert infer_sessions(chains) == [0, 0, 0]


def test_a_partial_last_block_is_not_required() -> None:
    # The continuation differs at the earlier request's last position: still the same session.
    assert infer_sessions([[1, 2, 3], [1, 2, 4, 5]]) == [0, 0]


def test_the_longest_match_wins() -> None:
    # [1, 2, y] ends at [1, 2] (session 1); [1, 2, 3, 4, 5, z] matches it and, deeper,
    # [1, 2, 3, 4, x] of session 0: it continues session 0.
    chains = [[1, 2, 3, 4, 98], [1, 2, 99], [1, 2, 3, 4, 5, 97]]
    assert infer_sessions(chains) == [0, 1, 0]


def test_a_prefix_continued_two_ways_becomes_shared() -> None:
    # Two branches from [5, 6] still chain (a regenerated answer); the third finds the prefix
    # already continued two ways (shared context) and starts a new session.
    chains = [[5, 6, 90], [5, 6, 10, 11, 91], [5, 6, 20, 21, 92], [5, 6, 30, 31, 93]]
    assert infer_sessions(chains) == [0, 0, 0, 1]


def test_one_block_requests_have_nothing_to_continue() -> None:
    assert infer_sessions([[4], [4, 5]]) == [0, 1]


def test_a_bad_line_names_its_number(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    good = '{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1]}'
    path.write_text(good + "\n\n" + '{"timestamp": 5, "input_length": 10, "hash_ids": []}\n')
    with pytest.raises(TraceFormatError) as caught:
        load_trace(path, "mooncake")
    assert caught.value.line == 3
    assert "output_length: Field required" in str(caught.value)
    assert "hash_ids: List should have at least 1 item" in str(caught.value)


def test_not_json_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text("{oops\n")
    with pytest.raises(TraceFormatError, match=r"bad.jsonl:1: .*Invalid JSON"):
        load_trace(path, "mooncake")


@pytest.fixture(params=sorted(REAL_FILES))
def real_file(request: pytest.FixtureRequest) -> Path:
    path: Path = REAL / request.param
    if not path.is_file():
        pytest.skip(
            f"the Mooncake traces are not at {REAL} (../shared/data/mooncake beside the "
            "repository; CI has them): real-data tests skipped"
        )
    return path


def test_real_mooncake_files_load_completely(real_file: Path) -> None:
    lines = [json.loads(raw) for raw in real_file.read_text().splitlines() if raw.strip()]
    trace = load_trace(real_file, "mooncake")
    assert len(trace.requests) == len(lines) == REAL_FILES[real_file.name]
    assert sum(r.input_tokens for r in trace.requests) == sum(x["input_length"] for x in lines)
    assert sum(r.output_tokens for r in trace.requests) == sum(x["output_length"] for x in lines)
    sessions = trace.sessions()
    assert 1 < len(sessions) < len(trace.requests)
    # Every request but a session's first extends the full blocks of an earlier one of its
    # session: the inference only chains along prefixes.
    for requests in sessions.values():
        for index, request in enumerate(requests[1:], start=1):
            assert any(
                request.blocks[: len(e.blocks) - 1] == e.blocks[:-1] and len(e.blocks) > 1
                for e in requests[:index]
            )


def test_real_session_counts_are_pinned(real_file: Path) -> None:
    # Measured once with the rule in infer_sessions; a change to the rule must change these
    # on purpose (docs/traces.md quotes them).
    expected = {"conversation_trace_first_half.jsonl": 4007, "synthetic_trace.jsonl": 2643}
    trace = load_trace(real_file, "mooncake")
    assert len(trace.sessions()) == expected[real_file.name]


def test_the_shared_traces_are_looked_for_beside_the_repository() -> None:
    """`../shared/data/mooncake` from the repository's root, wherever the module sits (a
    move of the module once pointed it inside the repository, and notebook 03 was skipped
    as if the data were absent)."""
    from pathlib import Path

    from sessiongen.warming.traces.mooncake import shared_mooncake_dir

    root = Path(__file__).resolve().parents[2]
    assert shared_mooncake_dir() == root.parent / "shared" / "data" / "mooncake"
