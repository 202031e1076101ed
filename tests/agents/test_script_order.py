"""The script `sessiongen agents run` queues for a turn that delegates: a subagent's request
gets the subagent's reply and the loop's requests the loop's steps, in whichever order
they arrive (Codex runs a spawned agent beside its parent: the child may ask first). Read
off the emulator's queue directly, no client process."""

from __future__ import annotations

from pathlib import Path

import pytest
from sessiongen.agents import CLIENTS, load_scenario
from sessiongen.agents.clients import ClientName
from sessiongen.agents.run import _script
from sessiongen.emulator import EmulatorState


@pytest.mark.parametrize("name", sorted(CLIENTS))
def test_a_subagent_that_asks_first_still_gets_its_own_reply(name: ClientName) -> None:
    client = CLIENTS[name]()
    turn = load_scenario("subagent").turns[0]
    intent = next(c for step in turn.steps for c in step.calls if c.tool == "subagent")
    state = EmulatorState()
    state.queue_responses(_script(client, turn, Path("/project"), None))
    loop_tool = client.loop_tool(None)
    parent: tuple[list[str], list[str]] = ([loop_tool, client.spawn_tool], [])
    # A subagent marked by a header may be offered every tool of its parent; one told apart
    # by a tool only the parent has lacks that tool.
    child: tuple[list[str], list[str]] = ([loop_tool], [])
    if client.subagent_header:
        child = ([loop_tool, client.spawn_tool], [client.subagent_header])
    first = state.pop_response("m", *parent)
    spawn = state.pop_response("m", *parent)
    assert first is not None and spawn is not None
    assert [c.name for c in spawn.tool_calls] == [client.spawn_tool]
    # The child asks before the parent's next request.
    reply = state.pop_response("m", *child)
    assert reply is not None
    assert reply == client.subagent_reply(intent).model_copy(update={"match": reply.match})
    rest = []
    while (entry := state.pop_response("m", *parent)) is not None:
        rest.append(entry)
    assert rest[-1].text == turn.steps[-1].say
    assert state.clear_script() == 0
