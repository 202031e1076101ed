"""Cache breakpoint policies: the opencode default and swapping a policy in."""

from __future__ import annotations

from pathlib import Path

from sessiongen import CachePolicy, LLMRequest, no_cache, opencode_default, previous_tail
from sessiongen.lab import emulator_lab
from sessiongen.llm.types import (
    CacheMark,
    CacheTTL,
    LLMMessage,
    SystemPart,
    TextContent,
    ToolDefinition,
)


def _request(system: int = 2, messages: int = 3) -> LLMRequest:
    return LLMRequest(
        model="claude-sonnet-4-6",
        system=tuple(SystemPart(text=f"s{i}") for i in range(system)),
        tools=(
            ToolDefinition(name="a", description="", input_schema={}),
            ToolDefinition(name="b", description="", input_schema={}),
        ),
        messages=tuple(
            LLMMessage(
                role="user" if i % 2 == 0 else "assistant", content=(TextContent(text=f"m{i}"),)
            )
            for i in range(messages)
        ),
    )


def _marks(request: LLMRequest) -> list[str]:
    marks = [f"tool:{t.name}" for t in request.tools if t.cache]
    marks += [f"system:{i}" for i, p in enumerate(request.system) if p.cache]
    marks += [f"message:{i}" for i, m in enumerate(request.messages) for b in m.content if b.cache]
    return marks


def test_opencode_default_marks_last_tool_first_and_last_system_and_tail() -> None:
    marked = opencode_default(_request(), anchor=None, ttl="1h")
    assert _marks(marked) == ["tool:b", "system:0", "system:1", "message:2"]
    assert marked.tools[-1].cache == CacheMark(ttl="1h")


def test_opencode_default_with_one_system_part_and_an_anchor() -> None:
    marked = opencode_default(_request(system=1), anchor=1, ttl="5m")
    assert _marks(marked) == ["tool:b", "system:0", "message:1"]


def test_no_cache_places_nothing() -> None:
    assert _marks(no_cache(_request(), anchor=None, ttl="5m")) == []


def tail_only(request: LLMRequest, *, anchor: int | None, ttl: CacheTTL) -> LLMRequest:
    """A custom policy: only the tail breakpoint, through the default's own placement."""
    return opencode_default(
        request.model_copy(update={"tools": (), "system": ()}), anchor=anchor, ttl=ttl
    ).model_copy(update={"tools": request.tools, "system": request.system})


async def test_a_swapped_policy_reaches_the_wire(tmp_path: Path) -> None:
    async with emulator_lab(tmp_path) as lab:
        for policy in (no_cache, tail_only):
            engine = lab.rebuild(cache_policy=policy)
            session = engine.create_session("forge", workspace=lab.workspace)
            await engine.run(session.id, "Hello.")
            logged = lab.requests()[-1]
            body = logged["body"]
            marked = [b for m in body["messages"] for b in m["content"] if "cache_control" in b]
            system_marked = [p for p in body["system"] if "cache_control" in p]
            if policy is no_cache:
                assert (
                    marked == []
                    and system_marked == []
                    and logged["usage"]["cache_creation_input_tokens"] == 0
                )
            else:
                assert (
                    len(marked) == 1
                    and system_marked == []
                    and logged["usage"]["cache_creation_input_tokens"] > 0
                )


def test_previous_tail_marks_the_block_before_the_last_assistant_message() -> None:
    marked = previous_tail(_request(messages=5), anchor=None, ttl="5m")
    # messages alternate user/assistant: the last assistant is message 3, so message 2 ended
    # the previous request; message 4 is the tail.
    assert _marks(marked) == ["tool:b", "system:0", "message:2", "message:4"]


def test_previous_tail_marks_both_system_parts_on_a_sessions_first_request() -> None:
    """No assistant message yet, so no previous tail: the budget goes to the first system part
    (shared by sessions whose instructions differ) and the last."""
    marked = previous_tail(_request(messages=1), anchor=None, ttl="5m")
    assert _marks(marked) == ["tool:b", "system:0", "system:1", "message:0"]


async def _tool_heavy_step_reads(
    tmp_path: Path, policy: CachePolicy, calls: int
) -> tuple[int, int]:
    """(tokens the loop's first request cached, tokens its second request read back)."""
    async with emulator_lab(tmp_path) as lab:
        engine = lab.rebuild(cache_policy=policy)
        session = engine.create_session("forge", workspace=lab.workspace)
        lab.script(
            {"text": "", "tool_calls": [{"name": "list_files", "input": {}}] * calls},
            {"text": "done"},
        )
        await engine.run(session.id, "Explore the repository.")
        first, second = [r["usage"] for r in lab.requests()[-2:]]
        return first["cache_read_input_tokens"] + first["cache_creation_input_tokens"], second[
            "cache_read_input_tokens"
        ]


async def test_a_step_that_adds_20_blocks_misses_with_the_tail_alone(tmp_path: Path) -> None:
    """Ten tool calls add 21 blocks (10 tool_use, 10 tool_result, the prompt is the previous
    tail): the 20-block lookback from the new tail cannot reach the previous entry, so the
    opencode default falls back to the system breakpoint; previous_tail reads it all."""
    cached, read = await _tool_heavy_step_reads(tmp_path / "opencode", opencode_default, 10)
    assert read < cached
    cached, read = await _tool_heavy_step_reads(tmp_path / "previous", previous_tail, 10)
    assert read == cached
    cached, read = await _tool_heavy_step_reads(tmp_path / "short", opencode_default, 5)
    assert read == cached  # a short step is within the window either way


def _blocks_request(*roles_and_sizes: tuple[str, int], system: int = 2) -> LLMRequest:
    """A request whose messages have the given roles and numbers of text blocks."""
    request = _request(system=system, messages=0)
    messages = tuple(
        LLMMessage(
            role="user" if role == "user" else "assistant",
            content=tuple(TextContent(text=f"m{i}.{j}") for j in range(size)),
        )
        for i, (role, size) in enumerate(roles_and_sizes)
    )
    return request.model_copy(update={"messages": messages})


def _block_marks(request: LLMRequest) -> list[int]:
    blocks = [b for m in request.messages for b in m.content]
    return [i for i, b in enumerate(blocks) if b.cache]


def test_previous_tail_finds_the_previous_tail_at_an_even_block() -> None:
    """The first user message holds two blocks (an instruction update and the prompt), so the
    last assistant message starts at block 2 and block 1 ended the previous request."""
    marked = previous_tail(
        _blocks_request(("user", 2), ("assistant", 1), ("user", 1)), anchor=None, ttl="5m"
    )
    assert _block_marks(marked) == [1, 3]


def test_previous_tail_never_marks_past_an_earlier_anchor() -> None:
    """A warming request whose hook appended an assistant prefill: the previous tail (block
    2) lies after the anchor (block 1, the history's last), so only the anchor is marked."""
    request = _blocks_request(("user", 1), ("assistant", 1), ("user", 1), ("assistant", 1))
    assert _block_marks(previous_tail(request, anchor=1, ttl="5m")) == [1]


def test_previous_tail_marks_the_last_of_three_system_parts() -> None:
    marked = previous_tail(_request(system=3, messages=1), anchor=None, ttl="5m")
    assert _marks(marked) == ["tool:b", "system:0", "system:2", "message:0"]
