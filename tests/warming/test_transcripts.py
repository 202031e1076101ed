"""Claude Code session logs and opencode exports: one request per model call, blocks inferred
from how the prompt grows."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from sessiongen.warming.traces import TraceFormatError
from sessiongen.warming.traces.formats import load_trace
from sessiongen.warming.traces.segments import SegmentChain

FIXTURES = Path(__file__).parent / "fixtures"
CLAUDE = FIXTURES / "claude-code"
SESSION_A = "5b2f0c1e-7d4a-4c1b-9a53-0e6f2d8c4a10"
SESSION_B = "9e8d7c6b-1a2b-4c3d-8e9f-a0b1c2d3e4f5"
OPENCODE_A = "ses_4a9f2c7e1ffeQk3sV8mZ2bYt0L"
OPENCODE_B = "ses_4a9f0b3d2ffeHn7pR1cW5xJu9K"


def test_growth_shares_the_previous_prompt_and_a_shrink_resets() -> None:
    chain = SegmentChain()
    assert chain.grow("s", 100) == ((0,), (100,))
    assert chain.grow("s", 150) == ((0, 1), (100, 50))
    assert chain.grow("s", 150) == ((0, 1), (100, 50))  # the same prompt again: no new block
    assert chain.grow("s", 120) == ((2,), (120,))  # compacted: nothing shared
    assert chain.grow("t", 10) == ((3,), (10,))  # other sessions never share inferred blocks


def test_claude_code_directory_loads_exactly() -> None:
    trace = load_trace(CLAUDE, "claude-code")
    rows = [(r.session, r.at, r.blocks, r.block_tokens, r.output_tokens) for r in trace.requests]
    assert rows == [
        # msg 1 is two lines (thinking, tool_use): one request, the larger output; sent when
        # the user prompt was logged (09:00:00), not when the answer was. Session B's first
        # call reads 14,800 tokens an earlier session wrote: the main agent's shared system +
        # tools prefix, block 0 of every main session's prompt (A's too, which wrote it).
        (SESSION_A, 0.0, (0, 1), (14800, 414), 188),
        (SESSION_A, 5.4, (0, 1, 2), (14800, 414, 1833), 412),
        (SESSION_B, 120.0, (0, 3), (14800, 2412), 150),
        # the subagent's own session; its first call read nothing, so no prefix is known
        (f"{SESSION_B}/a7f3e21", 123.5, (4,), (6005,), 220),
        (f"{SESSION_B}/a7f3e21", 126.8, (4, 5), (6005, 904), 310),
        (SESSION_B, 132.0, (0, 3, 6), (14800, 2412, 703), 260),
        (SESSION_A, 270.0, (0, 1, 2, 7), (14800, 414, 1833, 526), 95),
        # after the compaction the prompt is smaller: a reset that keeps the shared system
        # prefix and adds one new block; the <synthetic> message after it made no call.
        (SESSION_A, 1201.0, (0, 8), (14800, 509), 300),
    ]


def test_claude_code_single_file() -> None:
    trace = load_trace(CLAUDE / "-home-dev-shop" / f"{SESSION_B}.jsonl", "claude-code")
    assert [(r.session, r.at, r.block_tokens) for r in trace.requests] == [
        (SESSION_B, 0.0, (14800, 2412)),  # its first read: the shared system + tools prefix
        (SESSION_B, 12.0, (14800, 2412, 703)),
    ]


def test_claude_code_a_message_in_two_files_counts_once(tmp_path: Path) -> None:
    shutil.copytree(CLAUDE, tmp_path / "logs")
    source = tmp_path / "logs" / "-home-dev-shop" / f"{SESSION_A}.jsonl"
    shutil.copy(source, tmp_path / "logs" / "copy.jsonl")
    assert (
        load_trace(tmp_path / "logs", "claude-code").requests
        == load_trace(CLAUDE, "claude-code").requests
    )


def test_claude_code_calls_without_a_prompt_are_skipped(tmp_path: Path) -> None:
    def line(message_id: str, model: str, prompt: int) -> str:
        usage = {"input_tokens": prompt, "output_tokens": 3}
        message = {"id": message_id, "model": model, "usage": usage}
        return json.dumps(
            {"type": "assistant", "timestamp": "2025-06-02T09:00:00Z", "message": message}
        )

    path = tmp_path / "s.jsonl"
    kept = line("m1", "claude-sonnet-4-5", 40)
    path.write_text("\n".join([kept, line("m2", "<synthetic>", 40), line("m3", "x", 0)]) + "\n")
    assert [r.input_tokens for r in load_trace(path, "claude-code").requests] == [40]


def test_claude_code_without_a_user_parent_uses_the_first_line(tmp_path: Path) -> None:
    line = {
        "type": "assistant",
        "sessionId": "s",
        "parentUuid": "missing",
        "uuid": "u1",
        "timestamp": "2025-06-02T09:00:03Z",
        "message": {"id": "m1", "usage": {"input_tokens": 5, "output_tokens": 1}},
    }
    # The second answers the first assistant line, not a user line: its own time counts.
    second = {**line, "uuid": "u2", "parentUuid": "u1", "timestamp": "2025-06-02T09:00:08Z"}
    second["message"] = {"id": "m2", "usage": {"input_tokens": 9, "output_tokens": 2}}
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps(line) + "\n" + json.dumps(second) + "\n")
    trace = load_trace(path, "claude-code")
    assert [(r.at, r.block_tokens) for r in trace.requests] == [(0.0, (5,)), (5.0, (5, 4))]


def test_claude_code_ttl_breakdown_alone_counts_as_cache_write(tmp_path: Path) -> None:
    usage = {
        "input_tokens": 2,
        "output_tokens": 1,
        "cache_read_input_tokens": 10,
        "cache_creation": {"ephemeral_5m_input_tokens": 3, "ephemeral_1h_input_tokens": 4},
    }
    line = {"type": "assistant", "timestamp": "2025-06-02T09:00:00Z", "message": {"usage": usage}}
    path = tmp_path / "fallback-name.jsonl"
    path.write_text(json.dumps(line) + "\n")
    (request,) = load_trace(path, "claude-code").requests
    assert (request.session, request.input_tokens) == ("fallback-name", 19)


def test_claude_code_bad_lines_are_named(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    bad_usage: dict[str, object] = {"type": "assistant", "timestamp": "2025-06-02T09:00:00Z"}
    bad_usage["message"] = {"usage": {"input_tokens": -1, "output_tokens": 0}}
    path.write_text('{"type": "user"}\n' + json.dumps(bad_usage) + "\n")
    with pytest.raises(TraceFormatError, match=r"s.jsonl:2: message.usage.input_tokens: "):
        load_trace(path, "claude-code")
    path.write_text('{"type": "user"}\n{"type": "assist\n')
    with pytest.raises(TraceFormatError, match=r"s.jsonl:2: not JSON"):
        load_trace(path, "claude-code")


def test_opencode_directory_loads_exactly() -> None:
    trace = load_trace(FIXTURES / "opencode", "opencode")
    rows = [(r.session, r.at, r.blocks, r.block_tokens, r.output_tokens) for r in trace.requests]
    assert rows == [
        # one step per assistant message: input + cache read + cache write, output +
        # reasoning. Session B's first call reads 14,000 tokens session A wrote: the shared
        # system + tools prefix, block 0 of both sessions.
        (OPENCODE_A, 0.0, (0, 1), (14000, 1020), 95),
        (OPENCODE_A, 3.05, (0, 1, 2), (14000, 1020, 1348), 304),
        (OPENCODE_A, 299.85, (0, 1, 2, 3), (14000, 1020, 1348, 409), 120),
        # the aborted message with no usage made no call; session B's one message has two
        # steps: the second is sent when the first step's tool run ended (09:10:09)
        (OPENCODE_B, 600.15, (0, 4), (14000, 1120), 230),
        (OPENCODE_B, 608.65, (0, 4, 5), (14000, 1120, 1904), 310),
    ]


def test_opencode_the_same_export_twice_counts_once(tmp_path: Path) -> None:
    for copy in ("one", "two"):
        (tmp_path / copy).mkdir()
        shutil.copy(FIXTURES / "opencode" / f"{OPENCODE_A}.json", tmp_path / copy / "a.json")
    assert len(load_trace(tmp_path, "opencode").requests) == 3


def test_opencode_message_tokens_without_steps(tmp_path: Path) -> None:
    message = {
        "info": {
            "id": "msg_1",
            "role": "assistant",
            "time": {"created": 2000},
            "tokens": {"input": 3, "output": 4, "cache": {"read": 5, "write": 6}},
        },
        "parts": [],
    }
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"info": {"id": "ses_x"}, "messages": [message]}))
    (request,) = load_trace(path, "opencode").requests
    assert (request.session, request.block_tokens, request.output_tokens) == ("ses_x", (14,), 4)


def test_opencode_a_bad_export_names_the_field(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    message = {"info": {"id": "m", "role": "assistant", "time": {"created": 1}}, "parts": [{}]}
    path.write_text(json.dumps({"info": {"id": "ses_x"}, "messages": [message]}))
    with pytest.raises(TraceFormatError, match=r"s.json: messages.0.parts.0.type: Field required"):
        load_trace(path, "opencode")


def test_claude_code_keeps_the_5m_and_1h_write_split(tmp_path: Path) -> None:
    """Claude Code 2.x logs write with 1h TTLs on some plans: the split is kept per request."""
    usage = {
        "input_tokens": 3,
        "output_tokens": 10,
        "cache_creation_input_tokens": 8037,
        "cache_read_input_tokens": 17842,
        "cache_creation": {"ephemeral_5m_input_tokens": 37, "ephemeral_1h_input_tokens": 8000},
    }
    line = {
        "type": "assistant",
        "timestamp": "2026-02-11T20:36:47Z",
        "message": {"id": "m1", "stop_reason": "tool_use", "usage": usage},
    }
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps(line) + "\n")
    (request,) = load_trace(path, "claude-code").requests
    assert request.recorded is not None
    assert (request.recorded.cache_write_5m_tokens, request.recorded.cache_write_1h_tokens) == (
        37,
        8000,
    )
    assert request.recorded.ttl == "1h"
    assert (request.output_known, request.recorded.output_tokens) == (True, 10)


def _assistant(
    session: str, uuid: str, at: str, prompt: tuple[int, int, int], **extra: object
) -> str:
    inp, read, write = prompt
    usage = {
        "input_tokens": inp,
        "output_tokens": 5,
        "cache_read_input_tokens": read,
        "cache_creation_input_tokens": write,
    }
    message = {"id": f"msg_{uuid}", "model": "claude-opus-4-6", "usage": usage}
    line = {"type": "assistant", "sessionId": session, "uuid": uuid, "timestamp": at}
    return json.dumps({**line, "message": message, **extra})


def test_claude_code_a_first_read_just_below_another_prompt_forks_it(tmp_path: Path) -> None:
    """A compaction agent reads the main conversation's last prompt less its final token: its
    prompt shares all the main session's blocks, not a system prefix."""
    lines = [
        _assistant("s", "a1", "2026-02-11T21:00:00Z", (3, 0, 20000)),
        _assistant("s", "a2", "2026-02-11T21:00:05Z", (3, 20000, 1000)),  # prompt 21,003
        _assistant(
            "s",
            "c1",
            "2026-02-11T21:00:09Z",
            (3, 21002, 2000),  # reads 21,002 of the main session's 21,003
            isSidechain=True,
            agentId="acompact-1",
        ),
    ]
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(lines) + "\n")
    _, main, compact = load_trace(path, "claude-code").requests
    assert compact.session == "s/acompact-1"
    assert main.block_tokens == (20003, 1000)
    assert compact.blocks[:2] == main.blocks  # the whole main prompt, then its own block
    assert compact.block_tokens == (20003, 1000, 2002)


def _opencode_export(
    provider: str, model: str, steps: list[tuple[int, int, int]], version: str | None = None
) -> str:
    parts = [
        {
            "type": "step-finish",
            "tokens": {"input": inp, "output": 1, "cache": {"read": read, "write": write}},
        }
        for inp, read, write in steps
    ]
    info = {
        "id": "msg_1",
        "role": "assistant",
        "time": {"created": 1000},
        "providerID": provider,
        "modelID": model,
    }
    session = {"id": "ses_x", **({"version": version} if version else {})}
    return json.dumps({"info": session, "messages": [{"info": info, "parts": parts}]})


def _prompts(tmp_path: Path, export: str) -> list[int]:
    path = tmp_path / "s.json"
    path.write_text(export)
    return [r.input_tokens for r in load_trace(path, "opencode").requests]


def test_opencode_input_is_read_by_version_and_provider(tmp_path: Path) -> None:
    """opencode's `input` (anomalyco/opencode getUsage): before 1.0.62 the AI SDK's
    inputTokens as is, which includes the cached reads except on the Anthropic and Bedrock
    SDKs; from 1.0.62 the cache is subtracted on every provider; 1.3.5 logs include reads and
    writes again. One step: input 5,000, read 4,000, write 0."""
    step = [(5000, 4000, 0)]
    assert _prompts(tmp_path, _opencode_export("anthropic", "claude-sonnet-4", step, "0.9.6")) == [
        9000
    ]
    assert _prompts(tmp_path, _opencode_export("openai", "gpt-5", step, "0.9.6")) == [5000]
    assert _prompts(tmp_path, _opencode_export("openai", "gpt-5", step, "1.0.62")) == [9000]
    assert _prompts(tmp_path, _opencode_export("anthropic", "claude-sonnet-4", step, "1.3.4")) == [
        9000
    ]
    # 1.3.5 and later: the data decides, reads and writes included when every cached step
    # is at least their sum
    cached = [(5000, 4000, 500), (7000, 4500, 2000)]
    assert _prompts(
        tmp_path, _opencode_export("anthropic", "claude-sonnet-4", cached, "1.3.5")
    ) == [
        5000,
        7000,
    ]
    excluded = [(5000, 4000, 500), (3, 4500, 2000)]  # 3 < 6,500: excluded
    assert _prompts(tmp_path, _opencode_export("anthropic", "claude-4", excluded, "1.3.5")) == [
        9500,
        6503,
    ]


def test_opencode_marks_breakpoints_only_on_anthropic_family_routes(tmp_path: Path) -> None:
    """opencode's applyCaching marks the first two system messages and the last two others for
    Anthropic and Bedrock and for a Claude model through any provider; not elsewhere."""
    path = tmp_path / "s.json"
    path.write_text(
        _opencode_export("openrouter", "anthropic/claude-sonnet-4", [(10, 0, 0), (20, 0, 0)])
    )
    assert [r.breakpoints for r in load_trace(path, "opencode").requests] == [(0,), (0, 1)]
    path.write_text(_opencode_export("openai", "gpt-5", [(10, 0, 0), (20, 0, 0)]))
    assert [r.breakpoints for r in load_trace(path, "opencode").requests] == [(), ()]
