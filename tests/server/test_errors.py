"""Bad requests: each answers application/problem+json with its stable `type`, makes no
provider call, and leaves the store exactly as it was."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from sessiongen.lab import EmulatorLab
from sessiongen.server import MAX_BODY_BYTES, create_app

from .conftest import asgi_client, assert_problem, create

TOO_LONG = "x" * 200_001

# (name, route, body (None: no body; bytes: sent as is), status, problem type)
BAD: list[tuple[str, str, Any, int, str]] = [
    ("empty prompt", "generate", {"prompt": ""}, 422, "empty-prompt"),
    ("whitespace prompt", "generate", {"prompt": " \n\t "}, 422, "empty-prompt"),
    ("empty turn prompt", "prompt", {"prompt": "   "}, 422, "empty-prompt"),
    ("oversized prompt", "generate", {"prompt": TOO_LONG}, 413, "prompt-too-large"),
    ("oversized turn prompt", "prompt", {"prompt": TOO_LONG}, 413, "prompt-too-large"),
    ("unknown field", "generate", {"prompt": "hi", "temperature": 1}, 422, "invalid-argument"),
    ("unknown turn field", "prompt", {"prompt": "hi", "x": 1}, 422, "invalid-argument"),
    ("prompt not a string", "generate", {"prompt": 42}, 422, "invalid-argument"),
    ("prompt a list", "prompt", {"prompt": ["hi"]}, 422, "invalid-argument"),
    ("warming not a bool", "generate", {"prompt": "hi", "warming": "yes"}, 422, "invalid-argument"),
    ("warming as 1", "generate", {"prompt": "hi", "warming": 1}, 422, "invalid-argument"),
    ("tag not a string", "generate", {"prompt": "hi", "tag": 7}, 422, "invalid-argument"),
    (
        "unknown policy",
        "generate",
        {"prompt": "hi", "tools_policy": "all"},
        422,
        "invalid-argument",
    ),
    ("missing prompt", "generate", {}, 422, "invalid-argument"),
    ("no body", "generate", None, 422, "invalid-argument"),
    ("body not an object", "prompt", ["hi"], 422, "invalid-argument"),
    ("malformed JSON", "generate", b'{"prompt": "hi"', 422, "invalid-argument"),
    ("malformed turn JSON", "prompt", b"{prompt: hi}", 422, "invalid-argument"),
    ("over the body limit", "generate", b" " * (MAX_BODY_BYTES + 1), 413, "request-too-large"),
]


async def _send(client: httpx.AsyncClient, path: str, body: Any) -> httpx.Response:
    if body is None:
        return await client.post(path)
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return await client.post(path, content=content, headers={"content-type": "application/json"})


@pytest.mark.clause("SG-FAIL-2")
@pytest.mark.parametrize(
    ("route", "body", "status", "problem"), [b[1:] for b in BAD], ids=[b[0] for b in BAD]
)
@pytest.mark.clause("SG-HTTP-2")
async def test_bad_input_is_a_typed_problem_and_changes_nothing(
    client: httpx.AsyncClient, lab: EmulatorLab, route: str, body: Any, status: int, problem: str
) -> None:
    session_id = await create(client)
    await client.post(f"/api/session/{session_id}/prompt", json={"prompt": "Hello"})
    before, logged = lab.engine.store.dump(), len(lab.requests())
    response = await _send(client, f"/api/session/{session_id}/{route}", body)
    problem_body = assert_problem(response, status, problem)
    assert problem_body["detail"]
    assert lab.engine.store.dump() == before
    assert len(lab.requests()) == logged


async def test_validation_problems_name_the_field_without_echoing_it(
    client: httpx.AsyncClient,
) -> None:
    session_id = await create(client)
    response = await client.post(
        f"/api/session/{session_id}/generate", json={"prompt": "hi", "secret_field": "s3cr3t"}
    )
    body = assert_problem(response, 422, "invalid-argument")
    assert body["errors"] == [
        {
            "loc": "body.secret_field",
            "msg": "Extra inputs are not permitted",
            "type": "extra_forbidden",
        }
    ]
    assert "s3cr3t" not in response.text
    malformed = await _send(client, f"/api/session/{session_id}/generate", b'{"prompt": ')
    body = assert_problem(malformed, 422, "invalid-argument")
    assert body["errors"][0]["type"] == "json_invalid" and "at character" in body["detail"]
    form = await client.post(f"/api/session/{session_id}/generate", data={"prompt": "hi"})
    body = assert_problem(form, 422, "invalid-argument")  # curl -d without -H sends a form
    assert "Content-Type: application/json" in body["detail"]


@pytest.mark.clause("SG-FAIL-1")
@pytest.mark.parametrize(
    ("method", "suffix", "body"),
    [
        ("GET", "", None),
        ("GET", "/messages", None),
        ("POST", "/prompt", {"prompt": "hi"}),
        ("POST", "/generate", {"prompt": "hi"}),
        ("DELETE", "", None),
        ("POST", "/warming", None),
        ("GET", "/warming", None),
        ("DELETE", "/warming", None),
    ],
)
@pytest.mark.clause("SG-HTTP-2")
async def test_unknown_session_is_404_everywhere(
    client: httpx.AsyncClient, lab: EmulatorLab, method: str, suffix: str, body: Any
) -> None:
    await create(client)
    before = lab.engine.store.dump()
    response = await client.request(method, f"/api/session/ses_999999{suffix}", json=body)
    assert_problem(response, 404, "session-not-found")
    assert lab.engine.store.dump() == before and lab.requests() == []


async def test_unknown_agent_is_the_errors_modules_problem(
    client: httpx.AsyncClient, lab: EmulatorLab
) -> None:
    before = lab.engine.store.dump()
    response = await client.post("/api/session", json={"agent": "nobody"})
    body = assert_problem(response, 404, "agent-not-found")
    assert "forge" in body["detail"]  # it names the known agents
    for bad in ({"agent": 3}, {"agent": "forge", "workspace": "/"}):
        assert_problem(await client.post("/api/session", json=bad), 422, "invalid-argument")
    assert lab.engine.store.dump() == before


@pytest.mark.clause("SG-HTTP-2")
async def test_a_small_body_limit_refuses_before_parsing(lab: EmulatorLab) -> None:
    app = create_app(lab.engine, max_body_bytes=64)
    async with asgi_client(app) as client:
        session_id = await create(client)
        before = lab.engine.store.dump()
        response = await client.post(
            f"/api/session/{session_id}/prompt", json={"prompt": "y" * 100}
        )
        body = assert_problem(response, 413, "request-too-large")
        assert body["title"] == "RequestTooLarge" and "64 bytes" in body["detail"]

        async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted while read
            for _ in range(10):
                yield b"z" * 10

        streamed = await client.post(
            f"/api/session/{session_id}/generate",
            content=chunks(),
            headers={"content-type": "application/json"},
        )
        assert_problem(streamed, 413, "request-too-large")
        assert lab.engine.store.dump() == before and lab.requests() == []


async def test_unknown_routes_and_methods_are_problems(client: httpx.AsyncClient) -> None:
    assert_problem(await client.get("/api/nothing"), 404, "not-found")
    wrong = await client.put("/api/health")
    assert_problem(wrong, 405, "method-not-allowed")
    assert wrong.headers["allow"] == "GET"
    assert wrong.json()["detail"] == "PUT is not allowed on /api/health; allowed: GET"


@pytest.mark.clause("SG-FAIL-6")
@pytest.mark.clause("SG-HTTP-2")
async def test_provider_errors_carry_the_providers_status_and_request_id(
    client: httpx.AsyncClient, lab: EmulatorLab
) -> None:
    session_id = await create(client)
    await client.post(f"/api/session/{session_id}/prompt", json={"prompt": "Hello"})
    before = lab.engine.store.dump()
    lab.faults(status=529)
    response = await client.post(f"/api/session/{session_id}/generate", json={"prompt": "Hi"})
    body = assert_problem(response, 503, "provider-overloaded")
    assert body["provider_status"] == 529
    assert body["provider_request_id"] == lab.requests()[-1]["id"]
    assert body["provider_error_type"] == "overloaded_error"
    assert body["retry_after"] is None and "retry-after" not in response.headers
    assert lab.engine.store.dump() == before
    lab.faults(status=429, headers={"retry-after": "2.5"})
    limited = await client.post(f"/api/session/{session_id}/generate", json={"prompt": "Hi"})
    body = assert_problem(limited, 503, "provider-rate-limited")
    assert body["retry_after"] == 2.5 and limited.headers["retry-after"] == "3"
    lab.faults(status=500)
    turn = await client.post(f"/api/session/{session_id}/prompt", json={"prompt": "Again"})
    body = assert_problem(turn, 502, "provider-server-error")
    assert body["provider_status"] == 500 and body["provider_request_id"]


async def test_an_unexpected_error_is_a_500_problem_without_its_message(
    lab: EmulatorLab, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(request: Any, info: Any) -> Any:
        raise RuntimeError("hook exploded: internal detail")

    app = create_app(lab.rebuild(hooks=[broken]))
    async with asgi_client(app) as client:
        session_id = await create(client)
        response = await client.post(f"/api/session/{session_id}/generate", json={"prompt": "Hi"})
    body = assert_problem(response, 500, "internal-error")
    assert "internal detail" not in response.text
    assert "hook exploded" in caplog.text  # the log has it, for the operator
    assert body["title"] == "SessiongenError"


@pytest.mark.clause("SG-HTTP-2")
@pytest.mark.clause("SG-FAIL-1")
async def test_a_session_deleted_while_its_generate_runs_answers_404(
    client: httpx.AsyncClient, lab: EmulatorLab
) -> None:
    """The generate's provider call is held at the emulator while the session is deleted:
    the answer is `session-not-found` (it would speak for a session that is gone), the call
    was made once, and the generate wrote nothing after the delete."""
    import asyncio

    sid = await create(client)
    lab.script({"text": "Hello."})
    assert (await client.post(f"/api/session/{sid}/prompt", json={"prompt": "hi"})).is_success
    (await lab.admin.post("/_emulator/hold", json={"count": 1})).raise_for_status()
    running = asyncio.create_task(
        client.post(f"/api/session/{sid}/generate", json={"prompt": "Recap."})
    )
    while (await lab.admin.get("/_emulator/hold")).json()["waiting"] < 1:
        await asyncio.sleep(0.01)
    assert (await client.delete(f"/api/session/{sid}")).status_code == 204
    after_delete = lab.engine.store.dump()
    (await lab.admin.post("/_emulator/release")).raise_for_status()
    assert_problem(await running, 404, "session-not-found")
    assert lab.engine.store.dump() == after_delete
    assert len(lab.requests()) == 2  # the turn and the one generate
