"""Every route's happy path, and session.generate's promises kept over HTTP: three generates
after a durable turn with tool calls leave messages and revision as they were, make one
provider request each, and read the turn's cached prefix."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from fastapi import FastAPI
from sessiongen.lab import EmulatorLab

from .conftest import TOOL_TURN, create


async def test_health_answers_ok(client: httpx.AsyncClient) -> None:
    response = await client.get("/api/health")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


async def test_create_defaults_to_the_sample_agent(client: httpx.AsyncClient) -> None:
    response = await client.post("/api/session")
    assert response.status_code == 201
    session_id = response.json()["id"]
    assert response.json() == {"id": session_id}
    assert response.headers["location"] == f"/api/session/{session_id}"
    named = await client.post("/api/session", json={"agent": "forge"})
    assert named.status_code == 201 and named.json()["id"] != session_id


async def test_get_session_has_its_revision(client: httpx.AsyncClient, lab: EmulatorLab) -> None:
    session_id = await create(client)
    response = await client.get(f"/api/session/{session_id}")
    assert response.status_code == 200
    body = response.json()
    assert body["id"] == session_id and body["agent"] == "forge"
    assert body["revision"] == lab.engine.store.read(session_id).session.revision == 1
    assert body["workspace"] == str(lab.workspace)
    assert body["root_id"] == session_id and body["parent_id"] is None
    assert body["pending"] == [] and body["calls"] == 0


@pytest.mark.clause("SG-HTTP-1")
async def test_prompt_runs_a_durable_turn_with_tool_calls(
    client: httpx.AsyncClient, lab: EmulatorLab
) -> None:
    session_id = await create(client)
    lab.script(*TOOL_TURN)
    response = await client.post(
        f"/api/session/{session_id}/prompt", json={"prompt": "What does src/app.py do?"}
    )
    assert response.status_code == 200, response.text
    turn = response.json()
    record = lab.engine.store.read(session_id)
    assert turn["revision"] == record.session.revision
    assert turn["steps"] == 2 and turn["finish_reason"] == "end_turn"
    assert turn["text"] == TOOL_TURN[1]["text"]
    assert [c["name"] for c in turn["tool_calls"]] == ["read_file", "grep"]
    assert turn["usage"]["cache_write_5m_tokens"] > 1024  # the sample prefix is cacheable
    assert len(lab.requests()) == 2

    messages = (await client.get(f"/api/session/{session_id}/messages")).json()
    assert messages["revision"] == record.session.revision
    kinds = [m["kind"] for m in messages["messages"]]
    assert kinds.count("user") == 1 and kinds.count("assistant") == 2
    calls = [
        p for m in messages["messages"] for p in m.get("parts", ()) if p["type"] == "tool_call"
    ]
    assert [c["state"] for c in calls] == ["completed", "completed"]
    assert "def add" in calls[0]["result"]  # the tool ran in the server's workspace

    session = (await client.get(f"/api/session/{session_id}")).json()
    assert session["calls"] == 2
    assert session["usage"]["output_tokens"] == turn["usage"]["output_tokens"]


@pytest.mark.clause("SG-INV-1")
@pytest.mark.clause("SG-INV-3")
@pytest.mark.clause("SG-CACHE-1")
async def test_three_generates_leave_the_session_and_read_the_shared_prefix(
    client: httpx.AsyncClient, lab: EmulatorLab
) -> None:
    session_id = await create(client)
    lab.script(*TOOL_TURN)
    turn = await client.post(f"/api/session/{session_id}/prompt", json={"prompt": "Look around."})
    assert turn.status_code == 200, turn.text
    last = lab.last_usage()
    shared_prefix = (
        last.cache_read_tokens + last.cache_write_5m_tokens
    )  # what the turn's last request left cached
    lab.script({"text": "Checking.", "tool_calls": [{"name": "grep", "input": {"pattern": "x"}}]})

    before = lab.engine.store.dump()
    messages = (await client.get(f"/api/session/{session_id}/messages")).json()
    for number, prompt in enumerate(("Title?", "Recap in one line.", "Any risks?"), start=1):
        logged = len(lab.requests())
        response = await client.post(
            f"/api/session/{session_id}/generate",
            json={"prompt": prompt, "tools_policy": "definitions", "warming": False, "tag": "t"},
        )
        assert response.status_code == 200, response.text
        result = response.json()
        assert set(result) == {
            "text",
            "tool_calls",
            "finish_reason",
            "usage",
            "model",
            "revision",
            "tool_results",
            "below_cache_minimum",
        }
        assert len(lab.requests()) == logged + 1  # exactly one provider request
        assert result["revision"] == turn.json()["revision"]
        assert result["model"] == "claude-sonnet-4-6"
        assert result["usage"]["cache_read_tokens"] == shared_prefix, number
        assert result["usage"] == lab.last_usage().model_dump()
        if number == 1:  # the scripted tool call is returned, never executed
            assert result["finish_reason"] == "tool_use" and result["tool_results"] == []
            assert [c["name"] for c in result["tool_calls"]] == ["grep"]
        else:
            assert result["text"] and result["tool_calls"] == []
        assert lab.engine.store.dump() == before
        after = (await client.get(f"/api/session/{session_id}/messages")).json()
        assert after == messages


async def test_generate_defaults_and_warming(client: httpx.AsyncClient, lab: EmulatorLab) -> None:
    session_id = await create(client)
    await client.post(f"/api/session/{session_id}/prompt", json={"prompt": "Hello"})
    plain = await client.post(f"/api/session/{session_id}/generate", json={"prompt": "Hi"})
    assert plain.status_code == 200 and plain.json()["finish_reason"] == "end_turn"
    ping = await client.post(
        f"/api/session/{session_id}/generate", json={"prompt": "Keep-alive", "warming": True}
    )
    assert ping.status_code == 200, ping.text
    assert ping.json()["text"] == "" and ping.json()["finish_reason"] == "max_tokens"
    assert lab.requests()[-1]["body"]["max_tokens"] == 0


@pytest.mark.clause("SG-HTTP-1")
async def test_delete_removes_the_session_for_good(
    client: httpx.AsyncClient, lab: EmulatorLab
) -> None:
    first = await create(client)
    second = await create(client)
    await client.post(f"/api/session/{second}/prompt", json={"prompt": "Hello"})
    response = await client.delete(f"/api/session/{second}")
    assert response.status_code == 204 and response.content == b""
    assert (await client.get(f"/api/session/{second}")).status_code == 404
    assert (await client.delete(f"/api/session/{second}")).status_code == 404
    dump = lab.engine.store.dump()
    for table, rows in dump.items():
        if table != "deleted_sessions":
            assert not any(second in row for row in rows), table
    assert (await client.get(f"/api/session/{first}")).status_code == 200
    third = await create(client)
    assert third not in (first, second)  # a deleted id is never handed out again


async def test_concurrent_prompts_to_one_session_run_one_after_the_other(
    client: httpx.AsyncClient, lab: EmulatorLab
) -> None:
    """A second prompt admitted during the first turn's tool round would be promoted by that
    turn's Drain, leaving its own Drain nothing to send but an assistant-last request (a
    provider 400). The server runs a session's turns one at a time instead."""
    session_id = await create(client)
    lab.script(*TOOL_TURN)
    first, second = await asyncio.gather(
        client.post(f"/api/session/{session_id}/prompt", json={"prompt": "Look around."}),
        client.post(f"/api/session/{session_id}/prompt", json={"prompt": "Then summarise."}),
    )
    assert (first.status_code, second.status_code) == (200, 200), (first.text, second.text)
    assert (first.json()["steps"], second.json()["steps"]) == (2, 1)
    assert second.json()["revision"] > first.json()["revision"]
    assert [entry["status"] for entry in lab.requests()] == [200, 200, 200]


async def test_unknown_ids_leave_no_per_session_state(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    for n in range(5):
        await client.post(f"/api/session/ses_9{n}/prompt", json={"prompt": "hi"})
        await client.delete(f"/api/session/ses_9{n}")
    assert app.state.service.engine._turns == {}  # no lock per unknown id
