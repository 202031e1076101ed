"""The prototyper's surface (issue 32): a user's tool is registered or refused by name, a
turn's answer is on its result, a prompt too short to cache says so, the keeper says why it
does not ping, and a served emulator's clock is read and moved over HTTP."""

from __future__ import annotations

import logging
from importlib.metadata import version
from pathlib import Path

import httpx
import pytest
import sessiongen
from pydantic import Field
from sessiongen import (
    Agent,
    ModelRef,
    TextPart,
    Tool,
    ToolArgs,
    ToolCallPart,
    ToolCallScope,
    ToolNotRegistered,
    ToolRegistry,
)
from sessiongen.catalog import get_model
from sessiongen.emulator import BackgroundServer
from sessiongen.errors import SessiongenError
from sessiongen.lab import emulator_lab
from sessiongen.sample import SAMPLE_AGENT
from sessiongen.testing import ScriptedReply
from sessiongen.tools import BUILTIN_TOOLS
from sessiongen.warming import EmulatorClock, TtlSkiRental, WarmingKeeper

from ..conftest import EngineFactory


class EchoArgs(ToolArgs):
    text: str = Field(description="What to say back.")


def echo(scope: ToolCallScope, args: EchoArgs) -> str:
    return args.text.upper()


ECHO = Tool("echo", "Say the text back, louder.", EchoArgs, echo)


def test_a_version_from_the_package_metadata() -> None:
    assert sessiongen.__version__ == version("sessiongen")
    assert "__version__" in dir(sessiongen)


def test_an_agent_naming_an_unregistered_tool_is_refused_when_the_engine_is_built(
    make_engine: EngineFactory, agent: Agent
) -> None:
    misspelt = agent.model_copy(update={"tools": ("read_file", "reed_file", "echo")})
    with pytest.raises(ToolNotRegistered) as refused:
        make_engine(agents=[misspelt])
    assert str(refused.value) == (
        "agent 'build' permits tools 'reed_file', 'echo', which are not registered; "
        "registered tools: grep, list_files, read_file, write_file"
    )
    assert refused.value.tools == ["reed_file", "echo"] and refused.value.agent == "build"
    assert isinstance(refused.value, ValueError)  # an InvalidArgument, as a bad argument is
    with pytest.raises(ToolNotRegistered):
        ToolRegistry().permitted(["echo"])


async def test_a_registered_tool_of_ones_own_goes_on_the_wire_and_runs(
    make_engine: EngineFactory, agent: Agent, workspace: Path
) -> None:
    mine = agent.model_copy(update={"tools": ("read_file", "echo")})
    tools = ToolRegistry([*BUILTIN_TOOLS.values(), ECHO])
    engine, scripted, recording = make_engine(agents=[mine], tools=tools)
    scripted.queue(
        [
            ScriptedReply.calling(("t1", "echo", {"text": "hi"}), text="Let me say it."),
            ScriptedReply(text="Said it."),
        ]
    )
    session = engine.create_session("build", workspace=workspace)
    turn = await engine.run(session.id, "Say hi.")
    assert [t.name for t in recording.requests[0].tools] == ["read_file", "echo"]
    assert recording.requests[0].tools[1].input_schema["properties"]["text"] == {
        "description": "What to say back.",
        "type": "string",
    }
    assert turn.text == "Said it."  # the last Step's text, not the first's
    texts = [p.text for m in turn.messages for p in m.parts if isinstance(p, TextPart)]
    assert texts == ["Let me say it.", "Said it."]
    results = [p.result for m in turn.messages for p in m.parts if isinstance(p, ToolCallPart)]
    assert results == ["HI"]


def test_the_problem_of_an_unregistered_tool_round_trips() -> None:
    error = ToolNotRegistered(["reed_file"], registered=["read_file"], agent="build")
    body = error.problem_details()
    assert body["type"] == "https://sessiongen.dev/problems/tool-not-registered"
    assert body["status"] == 422 and body["tools"] == ["reed_file"] and body["agent"] == "build"
    back = SessiongenError.from_problem(body)
    assert isinstance(back, ToolNotRegistered)
    assert (back.tools, back.agent, str(back)) == (["reed_file"], "build", str(error))


SHORT = Agent(name="short", model=ModelRef(id="claude-sonnet-4-6"), system="Be brief.")


async def test_a_prompt_under_the_cacheable_minimum_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A short prompt reads 0 and writes nothing: the turn, the generate and the log say
    why; the sample agent's long system prompt is over the minimum and is cached."""
    minimum = get_model("claude-sonnet-4-6").min_cacheable_tokens
    async with emulator_lab(agents=(SAMPLE_AGENT, SHORT)) as lab:
        short = lab.engine.create_session("short")
        with caplog.at_level(logging.WARNING, logger="sessiongen.engine"):
            turn = await lab.engine.run(short.id, "Hi.")
            result = await lab.engine.generate(short.id, "Hi again.")
        assert turn.below_cache_minimum and result.below_cache_minimum
        assert lab.last_usage().cache_read_tokens == 0 and lab.last_usage().cache_write_tokens == 0
        assert 0 < turn.usage.total_input_tokens < minimum
        warned = [r.getMessage() for r in caplog.records if r.name == "sessiongen.engine"]
        assert len(warned) == 2
        assert f"under claude-sonnet-4-6's minimum cacheable length ({minimum} tokens)" in warned[0]

        keeper = WarmingKeeper(lab.engine, clock=lab.emulator.clock, policy=TtlSkiRental())
        keeper.watch(short.id)
        assert keeper.schedule(short.id) is None
        why = keeper.why_not_pinging(short.id) or ""
        assert f"minimum cacheable length ({minimum:,} tokens)" in why

        long = lab.engine.create_session("forge", workspace=lab.workspace)
        caplog.clear()
        turn = await lab.engine.run(long.id, "What does src/app.py do?")
        assert not turn.below_cache_minimum and turn.usage.cache_write_tokens > 0
        assert not [r for r in caplog.records if r.name == "sessiongen.engine"]
        keeper.watch(long.id)
        assert keeper.schedule(long.id) is not None and keeper.why_not_pinging(long.id) is None
        assert keeper.why_not_pinging("ses_nobody") == "the session is not watched"


def test_a_served_emulators_clock_over_http() -> None:
    """`EmulatorClock` reads and moves the clock of an emulator on a socket through
    `/_emulator/clock`, with the admin token when the emulator has one."""
    token = "clock-token-5d1f0a"
    with BackgroundServer(token=token) as server:
        with EmulatorClock(server.url, token=token) as clock:
            assert clock.now() == 0.0
            assert clock.advance(30) == 30.0
            assert clock.set(100) == 100.0
            assert server.state.clock.now() == 100.0  # the emulator's own clock moved
        with EmulatorClock(server.url) as tokenless, pytest.raises(httpx.HTTPStatusError):
            tokenless.now()
