"""The pydantic models at the emulator's boundary (`emulator/boundary.py`): each provider's
malformed body is a 400 in that provider's own error shape, naming the field, before
anything else reads it; and the 500s the route fuzzing found (issue 20) stay fixed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from sessiongen.emulator import EmulatorState, create_app
from starlette.testclient import TestClient

ANTHROPIC = "claude-sonnet-4-6"
BEDROCK = "us.anthropic.claude-opus-4-5-20251101-v1:0"
CONVERSE = f"/model/{BEDROCK}/converse"
GENERATE = "/v1beta/models/gemini-2.5-flash:generateContent"


@pytest.fixture
def client() -> Iterator[TestClient]:
    with TestClient(create_app(EmulatorState()), raise_server_exceptions=False) as client:
        yield client


def post(client: TestClient, path: str, body: Any) -> Any:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return client.post(path, content=raw, headers={"content-type": "application/json"})


def anthropic(**fields: Any) -> dict[str, Any]:
    return {
        "model": ANTHROPIC,
        "max_tokens": 5,
        "messages": [{"role": "user", "content": "q"}],
    } | fields


@pytest.mark.parametrize(
    ("body", "message"),
    [
        pytest.param(
            anthropic(thinking={"type": "sometimes"}),
            "thinking: Input tag 'sometimes' found using 'type' does not match any of the "
            "expected tags: 'enabled', 'disabled', 'adaptive'",
            id="thinking-type",
        ),
        pytest.param(
            anthropic(thinking={"type": "enabled", "budget_tokens": 1000}),
            "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024",
            id="thinking-budget",
        ),
        pytest.param(
            anthropic(tool_choice={"type": "tool"}),
            "tool_choice.tool.name: Field required",
            id="tool-choice-name",
        ),
        pytest.param(
            anthropic(stream="yes"), "stream: Input should be a valid boolean", id="stream"
        ),
        pytest.param(
            anthropic(messages=[{"role": "user", "content": 5}]),
            "messages.0.content: Input should be a valid list",
            id="content",
        ),
        pytest.param(None, "Input should be a valid dictionary", id="null"),
    ],
)
def test_anthropic_answers_pydantic_wording(client: TestClient, body: Any, message: str) -> None:
    """The Messages API is pydantic: its 400s are `<loc>: <msg>`, here from the model. An
    unknown thinking type is the union's tag error (the hand-written check said
    "thinking.type: Input should be ...", the one place it differed from pydantic)."""
    reply = post(client, "/v1/messages", body)
    assert reply.status_code == 400
    assert reply.json()["error"] == {"type": "invalid_request_error", "message": message}


@pytest.mark.parametrize("body", [None, [], 5, "x"], ids=["null", "list", "int", "str"])
def test_openai_responses_body_that_is_no_object_is_a_400(client: TestClient, body: Any) -> None:
    """`/v1/responses` with a body of null or [] was a 500 (issue 20)."""
    reply = post(client, "/v1/responses", body)
    assert reply.status_code == 400
    assert reply.json() == {
        "error": {
            "message": "The request body must be a JSON object.",
            "type": "invalid_request_error",
            "param": None,
            "code": None,
        }
    }


@pytest.mark.parametrize(
    ("path", "body", "message", "param", "code"),
    [
        pytest.param(
            "/v1/chat/completions",
            {"messages": [{"role": "user", "content": "q"}]},
            "Missing required parameter: 'model'.",
            "model",
            "missing_required_parameter",
            id="model",
        ),
        pytest.param(
            "/v1/chat/completions",
            {"model": "gpt-4.1", "messages": []},
            "Invalid 'messages': empty array. Expected an array with minimum length 1, but got "
            "an empty array instead.",
            "messages",
            "empty_array",
            id="empty",
        ),
        pytest.param(
            "/v1/chat/completions",
            {"model": "gpt-4.1", "messages": [{"role": "user", "content": 5}]},
            "Invalid type for 'messages[0].content': Input should be a valid list.",
            "messages[0].content",
            "invalid_type",
            id="content",
        ),
        pytest.param(
            "/v1/responses",
            {"model": "gpt-4.1", "input": "q", "prompt_cache_retention": "1w"},
            "Invalid value for 'prompt_cache_retention': Input should be 'in_memory' or '24h'.",
            "prompt_cache_retention",
            "invalid_value",
            id="retention",
        ),
        pytest.param(
            "/v1/responses",
            {
                "model": "gpt-4.1",
                "input": "q",
                "tools": [{"type": "function", "name": "f", "parameters": {"properties": []}}],
            },
            "Invalid type for 'tools[0].parameters.properties': Input should be a valid "
            "dictionary.",
            "tools[0].parameters.properties",
            "invalid_type",
            id="schema",
        ),
    ],
)
def test_openai_names_the_parameter(
    client: TestClient, path: str, body: Any, message: str, param: str, code: str
) -> None:
    reply = post(client, path, body)
    assert reply.status_code == 400
    error = reply.json()["error"]
    assert (error["message"], error["param"], error["code"]) == (message, param, code)
    assert error["type"] == "invalid_request_error"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        pytest.param(
            {"inferenceConfig": [1]}, "inferenceConfig: Input should be a valid dictionary", id="ic"
        ),
        pytest.param(
            {
                "messages": [{"role": "user", "content": [{"text": "q"}]}],
                "toolConfig": {"tools": [{"toolSpec": None}]},
            },
            "toolConfig.tools.0.toolSpec: Input should be a valid dictionary",
            id="tool-spec",
        ),
        pytest.param(
            {"messages": [{"role": "robot", "content": []}]},
            "messages.0.role: Member must satisfy enum value set: [user, assistant]",
            id="role",
        ),
        pytest.param(
            {"messages": [{"role": "user", "content": [{"text": "q", "image": {}}]}]},
            "messages.0.content.0: exactly one member of the union must be set",
            id="union",
        ),
        pytest.param(
            {"messages": [{"role": "user", "content": [{"video": {}}]}]},
            "messages.0.content.0.video: Extra inputs are not permitted",
            id="unknown-member",
        ),
    ],
)
def test_bedrock_answers_a_validation_exception(
    client: TestClient, body: Any, message: str
) -> None:
    """Converse: `{"inferenceConfig": [1]}` was an AttributeError 500 in `to_messages_body`
    and a null toolSpec one too (issue 20); each is a ValidationException naming the field."""
    reply = post(client, CONVERSE, body)
    assert reply.status_code == 400
    assert reply.json() == {"message": message}
    assert reply.headers["x-amzn-ErrorType"] == "ValidationException:"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        pytest.param(
            {"systemInstruction": True, "contents": [{"parts": [{"text": "q"}]}]},
            "Invalid value at 'systemInstruction': Input should be a valid dictionary",
            id="system",
        ),
        pytest.param(
            {"contents": [{"parts": [{"text": "q", "functionCall": {"name": "f"}}]}]},
            "Invalid value at 'contents[0].parts[0]': a part must have exactly one data field, "
            "found ['text', 'functionCall']",
            id="part",
        ),
        pytest.param(
            {"contents": [{"role": "robot", "parts": [{"text": "q"}]}]},
            "Invalid value at 'contents[0].role': Input should be 'user', 'model' or 'function'",
            id="role",
        ),
        pytest.param(
            {"contents": [{"parts": [{"text": "q"}]}], "generationConfig": {"maxOutputTokens": 0}},
            "Invalid value at 'generationConfig.maxOutputTokens': Input should be greater than "
            "or equal to 1",
            id="max",
        ),
    ],
)
def test_gemini_answers_invalid_argument(client: TestClient, body: Any, message: str) -> None:
    """A `systemInstruction` of `true` was a 500 (route fuzzing)."""
    reply = post(client, GENERATE, body)
    assert reply.status_code == 400
    assert reply.json() == {
        "error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}
    }


def test_gemini_cache_ttl_past_year_9999_is_a_400(client: TestClient) -> None:
    body = {
        "model": "models/gemini-2.5-flash",
        "contents": [{"parts": [{"text": "x" * 20_000}]}],
        "ttl": "1e20s",
    }
    reply = post(client, "/v1beta/cachedContents", body)
    assert reply.status_code == 400
    assert reply.json()["error"]["status"] == "INVALID_ARGUMENT"


@pytest.mark.parametrize(
    "raw",
    [
        b'{"model": "claude-sonnet-4-6", "max_tokens": NaN, "messages": []}',
        b'{"model": "claude-sonnet-4-6", "max_tokens": 1e400, "messages": []}',
        b'{"model": "claude-sonnet-4-6", "max_tokens": ' + b"9" * 5000 + b', "messages": []}',
        b"[" * 5000,
        b'{"model": "claude-sonnet-4-6", "max_tokens": 5, "messages": '
        b'[{"role": "user", "content": "\\ud800"}]}',
    ],
    ids=["nan", "overflow", "long-int", "deep", "lone-surrogate"],
)
@pytest.mark.parametrize("path", ["/v1/messages", "/v1/responses", CONVERSE, GENERATE])
def test_json_the_apis_refuse_is_a_400_not_a_500(client: TestClient, path: str, raw: bytes) -> None:
    """Python's json takes NaN, Infinity, 1e400 (as inf) and lone surrogates; the APIs'
    parsers do not, and each of them was a 500 further in (a response that cannot be
    serialised, a token count that cannot encode the text, a recursion error)."""
    reply = post(client, path, raw)
    assert reply.status_code == 400, reply.text


def test_a_rejected_admin_body_takes_no_request_id(client: TestClient) -> None:
    """A body that is no JSON was answered through the HTTP error handler, which took a
    request id (moving the deterministic ids); now each admin body is parsed by its model
    and refused with the admin 400 (request id null)."""
    for path in ("/_emulator/clock", "/_emulator/faults", "/_emulator/hold"):
        for raw in (b"{", b"", b'{"advance": Infinity}', b"[]"):
            reply = client.post(path, content=raw, headers={"content-type": "text/plain"})
            assert reply.status_code == 400, (path, raw, reply.text)
            assert reply.json()["request_id"] is None
    first = post(client, "/v1/messages", anthropic())
    assert first.headers["request-id"] == "req_000001"
