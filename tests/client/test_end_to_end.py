"""The client against real processes, as a user runs them: `sessiongen emulator` and
`sessiongen serve --provider anthropic` pointed at it, each its own process, the emulator
scripted over its admin HTTP API, and every claim checked on the wire, in the emulator's
request log, not in what the server answers about itself.

Then the same flow on `sessiongen serve`'s default provider, the embedded emulator.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
from sessiongen.client import AsyncSessiongenClient, SessiongenClient
from sessiongen.lab import write_workspace
from sessiongen.parity import WireRequest, diff
from sessiongen.tokens import content_blocks, without_cache_control

from .conftest import local_url, process

TOKEN = "e2e-client-token-7c1d"
PROMPT = "What does src/app.py do?"
TOOL_TURN: list[dict[str, Any]] = [
    {
        "text": "Let me look at the code.",
        "tool_calls": [
            {"name": "read_file", "input": {"path": "src/app.py"}},
            {"name": "grep", "input": {"pattern": "TODO"}},
        ],
    },
    {"text": "app.py defines add() and mean(); util.py still has a TODO."},
]
GENERATES = ("Give this session a title.", "Recap it in one line.", "List its open TODOs.")
PER_REQUEST = {"messages", "max_tokens", "stream"}  # what a generate may send differently
TRANSPORT_HEADERS = {"content-length"}


def _shared_prefix(logged: dict[str, Any]) -> int:
    """The prefix a request left cached: what it read plus what it wrote."""
    usage = logged["usage"]
    return int(usage["cache_read_input_tokens"] + usage["cache_creation_input_tokens"])


def _wire(logged: dict[str, Any]) -> WireRequest:
    """A logged request as the parity diff takes it: body and headers as received, minus the
    headers that only describe the transport."""
    headers = {k: v for k, v in logged["headers"].items() if k not in TRANSPORT_HEADERS}
    return WireRequest(logged["body"], headers)


def _unmarked(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages without their breakpoint markers (where a request puts its cache marks is
    the one thing a generate may move)."""
    return [
        {**m, "content": [without_cache_control(b) for b in content_blocks(m["content"])]}
        for m in messages
    ]


def _text_blocks(message: dict[str, Any]) -> list[str]:
    return [b["text"] for b in message["content"] if b["type"] == "text"]


@pytest.mark.clause("SG-INV-1")
@pytest.mark.clause("SG-INV-3")
@pytest.mark.clause("SG-INV-4")
@pytest.mark.clause("SG-CACHE-1")
@pytest.mark.clause("SG-PARITY-2")
@pytest.mark.clause("SG-HTTP-4")
def test_generates_over_http_against_a_separate_emulator_process(tmp_path: Path) -> None:
    workspace = write_workspace(tmp_path / "workspace")
    emulator_port, emulator_url = local_url()
    server_port, server_url = local_url()
    env = {
        "ANTHROPIC_BASE_URL": emulator_url,
        "ANTHROPIC_API_KEY": "test",
        "SESSIONGEN_TOKEN": TOKEN,
    }
    serve = ("serve", "--provider", "anthropic", "--port", str(server_port))
    with (
        process(
            tmp_path,
            "emulator",
            "emulator",
            "--port",
            str(emulator_port),
            ready=f"{emulator_url}/_emulator/clock",
        ),
        process(
            tmp_path,
            "server",
            *serve,
            "--db",
            str(tmp_path / "sessions.db"),
            "--workspace",
            str(workspace),
            env=env,
            ready=f"{server_url}/api/health",
        ),
        httpx.Client(base_url=emulator_url, timeout=30) as admin,
        SessiongenClient(server_url, token=TOKEN, timeout=30) as client,
    ):

        def wire() -> list[dict[str, Any]]:
            requests: list[dict[str, Any]] = admin.get("/_emulator/requests").json()["requests"]
            return requests

        admin.post("/_emulator/reset").raise_for_status()
        queued = admin.post("/_emulator/script", json={"responses": TOOL_TURN})
        assert queued.json() == {"queued": 2}

        # A durable turn that calls two tools, then answers.
        sid = client.create_session().id
        turn = client.prompt(sid, PROMPT)
        assert turn.steps == 2 and turn.text == TOOL_TURN[1]["text"]
        steps = wire()
        assert len(steps) == 2 and all(r["status"] == 200 for r in steps)
        last_step = steps[-1]
        results = last_step["body"]["messages"][-1]["content"]
        assert [b["type"] for b in results] == ["tool_result", "tool_result"]
        assert "def mean(xs)" in str(results[0]["content"])  # the tool really read the file
        shared = _shared_prefix(last_step)
        assert shared > 1024  # the sample agent's prefix is cacheable
        session, history = client.get_session(sid), client.messages(sid)

        # Three generates: one provider request each, each reading the whole shared prefix.
        generated = []
        for i, prompt in enumerate(GENERATES):
            result = client.generate(sid, prompt)
            logged = wire()
            assert len(logged) == len(steps) + i + 1, "not exactly one provider request"
            request = logged[-1]
            assert request["status"] == 200 and request["path"] == "/v1/messages"
            assert request["headers"]["x-stainless-retry-count"] == "0"
            assert request["usage"]["cache_read_input_tokens"] == shared
            assert result.usage.cache_read_tokens == shared  # what the client got is the wire's
            assert result.revision == turn.revision
            generated.append((prompt, request))

        # SG-INV-1 / SG-INV-4: the session is as the turn left it.
        assert client.messages(sid) == history
        assert client.get_session(sid) == session

        # On the wire, each generate is the last Step's request plus the settled answer and
        # the transient prompt: the same model, system, tools, tool choice and headers.
        step_body = last_step["body"]
        for prompt, request in generated:
            body = request["body"]
            for key in ({*step_body, *body} - PER_REQUEST) | {"tool_choice"}:
                assert body.get(key) == step_body.get(key), key
            assert _wire(request).headers == _wire(last_step).headers
            step_messages = step_body["messages"]
            head, tail = (
                body["messages"][: len(step_messages)],
                body["messages"][len(step_messages) :],
            )
            assert _unmarked(head) == _unmarked(step_messages)
            assert [m["role"] for m in tail] == ["assistant", "user"]
            assert _text_blocks(tail[0]) == [turn.text] and _text_blocks(tail[1]) == [prompt]

        # SG-PARITY-2 proper: the next durable Step is over the same snapshot as the
        # generates; the parity diff against each allows only the transient message.
        client.prompt(sid, "And src/util.py?")
        next_step = wire()[len(steps) + len(GENERATES)]
        assert next_step["body"]["messages"][:-1] == generated[0][1]["body"]["messages"][:-1]
        for _, request in generated:
            report = diff(_wire(next_step), _wire(request))
            assert report.violations == (), report.rows()
            last = f"messages[{len(request['body']['messages']) - 1}].content[0]"
            assert {d.path for d in report.allowed} == {last}  # each side's own prompt


def test_the_default_server_with_its_embedded_emulator(tmp_path: Path) -> None:
    """`sessiongen serve` with no provider flag, through both clients over a real socket."""
    port, url = local_url()
    db = tmp_path / "sessions.db"
    with (
        process(
            tmp_path,
            "server",
            "serve",
            "--port",
            str(port),
            "--db",
            str(db),
            env={"SESSIONGEN_TOKEN": ""},
            ready=f"{url}/api/health",
        ) as log,
        SessiongenClient(url, timeout=30) as client,
    ):
        sid = client.create_session().id
        turn = client.prompt(sid, "Hello")
        assert turn.steps == 1 and turn.text == "Emulated reply to: Hello"
        before = client.get_session(sid), client.messages(sid)
        cached = turn.usage.cache_read_tokens + turn.usage.cache_write_5m_tokens
        for prompt in GENERATES:
            result = client.generate(sid, prompt)
            assert result.text == f"Emulated reply to: {prompt}"
            assert result.revision == turn.revision
            assert result.usage.cache_read_tokens == cached
        assert (client.get_session(sid), client.messages(sid)) == before

        async def recap() -> str:
            async with AsyncSessiongenClient(url, timeout=30) as async_client:
                return (await async_client.generate(sid, "Recap?")).text

        assert asyncio.run(recap()) == "Emulated reply to: Recap?"
        assert client.messages(sid) == before[1]
        client.delete_session(sid)
    assert "provider: the embedded emulator" in log.read_text()
