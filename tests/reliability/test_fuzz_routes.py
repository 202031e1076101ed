"""Fuzz every provider route of the emulator and its admin API with malformed bodies
(hypothesis), in the spirit of `test_fuzz_emulator.py` (which goes deeper on `/v1/messages`).

Each provider route starts from a valid body of its own API whose prompt is long enough to
cache (the cache is warmed with it first) and breaks it: one to three fields anywhere in the
body (found by walking it) replaced by a JSON value of any type (null, lists, objects, huge
numbers, long strings, nested garbage) or deleted, an unknown field added, or the whole body
replaced by something that is no JSON object (null, `[]`, a scalar, bytes that are no JSON,
a cut-off body), sent with a JSON, a wrong or no content type. For every example:

- the answer is never a 5xx and never a dropped connection (an exception out of the app);
- a 4xx is the provider's own error shape (Anthropic's `{"type": "error", "error": ...}`,
  OpenAI's `{"error": {"message", "type", "param", "code"}}`, Bedrock's `{"message"}` with
  `x-amzn-ErrorType`, Gemini's `{"error": {"code", "message", "status"}}`);
- a rejected request changes nothing: the admin API's view (cache entries with their hits and
  lifetimes, clock, config, holds) and the script queue and pending faults are the same after
  it as before, and the request log only gained that request's entry (its status, no usage).

A mutation may leave a valid body (a string replaced by another string): a 2xx is allowed
and not checked further. The admin routes take the same mutations of their own valid bodies;
their 4xx is Anthropic's shape with a null request id, and a rejected one changes nothing.

`EXAMPLES` per route (`LONG_EXAMPLES` with SESSIONGEN_LONG=1). Deterministic
(`derandomize`), and nothing is written to a hypothesis database.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sessiongen.emulator import EmulatorState, create_app
from sessiongen.tokens import text_of_tokens
from starlette.testclient import TestClient

LONG = os.environ.get("SESSIONGEN_LONG") == "1"
EXAMPLES = 40
LONG_EXAMPLES = 1000
ADMIN_EXAMPLES = 25

FUZZ = settings(
    max_examples=LONG_EXAMPLES if LONG else EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
ADMIN_FUZZ = settings(FUZZ, max_examples=LONG_EXAMPLES if LONG else ADMIN_EXAMPLES)

PREFIX = text_of_tokens(4200, "cached")  # 4,200 tokens: over every model's minimum
TOOL_SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}}
ANTHROPIC = "claude-sonnet-4-6"
OPENAI = "gpt-4.1"
BEDROCK = "us.anthropic.claude-opus-4-5-20251101-v1:0"
GEMINI = "gemini-2.5-flash"


# --- the routes and their valid bodies -----------------------------------------------------


def _anthropic_body(count: bool) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": ANTHROPIC,
        "max_tokens": 32,
        "system": [{"type": "text", "text": PREFIX, "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hello"}]}],
        "tools": [{"name": "look", "description": "d", "input_schema": TOOL_SCHEMA}],
        "tool_choice": {"type": "auto"},
        "thinking": {"type": "enabled", "budget_tokens": 1024},
    }
    if count:
        del body["max_tokens"]
    else:
        body["max_tokens"] = 2048
    return body


def _chat_body() -> dict[str, Any]:
    return {
        "model": OPENAI,
        "messages": [
            {"role": "system", "content": PREFIX},
            {"role": "user", "content": [{"type": "text", "text": "hello"}]},
        ],
        "max_completion_tokens": 32,
        "tools": [{"type": "function", "function": {"name": "look", "parameters": TOOL_SCHEMA}}],
        "tool_choice": "auto",
        "stream": False,
        "prompt_cache_key": "k",
    }


def _responses_body() -> dict[str, Any]:
    return {
        "model": OPENAI,
        "instructions": PREFIX,
        "input": [{"role": "user", "content": "hello"}],
        "max_output_tokens": 32,
        "tools": [{"type": "function", "name": "look", "parameters": TOOL_SCHEMA}],
        "tool_choice": "auto",
        "text": {"format": {"type": "text"}},
        "reasoning": {"effort": "low"},
    }


def _converse_body() -> dict[str, Any]:
    return {
        "system": [{"text": PREFIX}, {"cachePoint": {"type": "default"}}],
        "messages": [{"role": "user", "content": [{"text": "hello"}]}],
        "inferenceConfig": {"maxTokens": 32, "stopSequences": ["STOP"]},
        "toolConfig": {
            "tools": [{"toolSpec": {"name": "look", "inputSchema": {"json": TOOL_SCHEMA}}}],
            "toolChoice": {"auto": {}},
        },
    }


def _gemini_body() -> dict[str, Any]:
    return {
        "systemInstruction": {"parts": [{"text": PREFIX}]},
        "contents": [{"role": "user", "parts": [{"text": "hello"}]}],
        "tools": [{"functionDeclarations": [{"name": "look", "parameters": TOOL_SCHEMA}]}],
        "toolConfig": {"functionCallingConfig": {"mode": "AUTO"}},
        "generationConfig": {"maxOutputTokens": 32, "stopSequences": ["STOP"]},
    }


def _cached_content_body() -> dict[str, Any]:
    body = _gemini_body()
    del body["generationConfig"]
    return {"model": f"models/{GEMINI}", "ttl": "300s", "displayName": "fuzz", **body}


def _anthropic_shape(response: Any) -> None:
    body = response.json()
    assert body["type"] == "error", body
    assert isinstance(body["error"]["type"], str) and body["error"]["type"], body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"], body
    assert response.headers["request-id"] == body["request_id"]


def _openai_shape(response: Any) -> None:
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}, error
    assert isinstance(error["message"], str) and error["message"], error
    assert isinstance(error["type"], str) and error["type"], error
    assert error["param"] is None or isinstance(error["param"], str), error
    assert response.headers["x-request-id"].startswith("req_")


def _bedrock_shape(response: Any) -> None:
    body = response.json()
    assert set(body) == {"message"} and isinstance(body["message"], str), body
    assert response.headers["x-amzn-ErrorType"].endswith("Exception:"), response.headers
    assert response.headers["x-amzn-RequestId"].startswith("req_")


def _gemini_shape(response: Any) -> None:
    error = response.json()["error"]
    assert set(error) == {"code", "message", "status"}, error
    assert error["code"] == response.status_code, error
    assert isinstance(error["message"], str) and error["message"], error
    assert isinstance(error["status"], str) and error["status"], error


def _admin_shape(response: Any) -> None:
    body = response.json()
    assert body["type"] == "error" and body["request_id"] is None, body
    assert body["error"]["type"] == "invalid_request_error", body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"], body


@dataclass(frozen=True)
class Route:
    path: str
    valid: Callable[[], dict[str, Any]]
    shape: Callable[[Any], None]
    caches: bool = True  # its valid body writes the cache (count_tokens, the admin API: no)


ROUTES = {
    "messages": Route("/v1/messages", lambda: _anthropic_body(False), _anthropic_shape),
    "count_tokens": Route(
        "/v1/messages/count_tokens", lambda: _anthropic_body(True), _anthropic_shape, False
    ),
    "chat": Route("/v1/chat/completions", _chat_body, _openai_shape),
    "responses": Route("/v1/responses", _responses_body, _openai_shape),
    "converse": Route(f"/model/{BEDROCK}/converse", _converse_body, _bedrock_shape),
    "converse_stream": Route(f"/model/{BEDROCK}/converse-stream", _converse_body, _bedrock_shape),
    "generate": Route(f"/v1beta/models/{GEMINI}:generateContent", _gemini_body, _gemini_shape),
    "stream_generate": Route(
        f"/v1beta/models/{GEMINI}:streamGenerateContent?alt=sse", _gemini_body, _gemini_shape
    ),
    "cached_contents": Route("/v1beta/cachedContents", _cached_content_body, _gemini_shape),
}
ADMIN = {
    "clock": Route("/_emulator/clock", lambda: {"advance": 1.5}, _admin_shape, False),
    "script": Route(
        "/_emulator/script",
        lambda: {
            "responses": [
                {"text": "t", "tool_calls": [{"name": "look", "input": {"q": "x"}}]},
                {"thinking": "th", "stop_reason": "end_turn", "output_tokens": 3},
            ]
        },
        _admin_shape,
        False,
    ),
    "faults": Route(
        "/_emulator/faults",
        lambda: {"status": 529, "count": 1, "headers": {"a": "b"}, "delay": 0.0},
        _admin_shape,
        False,
    ),
    "config": Route(
        "/_emulator/config",
        lambda: {"ttft": 0.5, "tool_prompt": True, "gemini_implicit_ttl": 60.0},
        _admin_shape,
        False,
    ),
    "hold": Route("/_emulator/hold", lambda: {"count": 1}, _admin_shape, False),
}


# --- strategies ----------------------------------------------------------------------------

huge = st.sampled_from([10**30, -(10**30), 2**63, -(2**63) - 1, 1e308, -1e308, 1e-320, -1])
scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | huge
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.sampled_from(["", "user", "text", "auto", "default", "5m", "1h", "ANY", "24h"])
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every path into `value` (dict keys and list indexes), the long prefix's text aside."""
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return
    for key, child in items:
        yield (*prefix, key)
        yield from paths(child, (*prefix, key))


Mutation = Callable[[Any], None]


def _replace(path: tuple[Any, ...], new: Any) -> Mutation:
    def apply(body: Any) -> None:
        target = body
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = new

    return apply


def _delete(path: tuple[Any, ...]) -> Mutation:
    def apply(body: Any) -> None:
        target = body
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]

    return apply


def _mutations(valid: dict[str, Any]) -> st.SearchStrategy[Mutation]:
    # Half the time a top-level field, half any field: the few top-level ones get their due.
    where = st.sampled_from([(key,) for key in valid]) | st.sampled_from(list(paths(valid)))
    return st.one_of(
        st.tuples(where, json_values).map(lambda pv: _replace(*pv)),
        where.map(_delete),
        st.tuples(st.text(min_size=1, max_size=8), json_values).map(
            lambda kv: _replace((kv[0],), kv[1])
        ),
    )


def _mutated(valid: Callable[[], dict[str, Any]], applied: list[Mutation]) -> bytes:
    body = valid()
    for mutation in applied:
        try:
            mutation(body)
        except (KeyError, IndexError, TypeError):
            pass  # an earlier mutation removed or replaced what this one targets
    return json.dumps(body).encode()


def _not_an_object(raw: bytes) -> bool:
    try:
        return not isinstance(json.loads(raw), dict)
    except (ValueError, UnicodeDecodeError):
        return True


def bodies(route: Route) -> st.SearchStrategy[bytes]:
    whole = json.dumps(route.valid()).encode()
    raw = st.one_of(
        st.sampled_from(
            [b"null", b"[]", b"[1]", b"0", b'"x"', b"true", b"", b"{", b"\xff\xfe", b"[" * 5_000]
        ),
        # no JSON the APIs take: NaN, Infinity, a double's overflow, an over-long integer
        st.sampled_from([b"NaN", b"-Infinity", b"1e400", b"9" * 5000]).map(
            lambda bad: re.sub(rb"(?<=: )-?[0-9.]+", bad, whole, count=1)
        ),
        st.binary(max_size=32).filter(_not_an_object),
        json_values.filter(lambda v: not isinstance(v, dict)).map(lambda v: json.dumps(v).encode()),
        st.integers(min_value=1, max_value=len(whole) - 1).map(lambda n: whole[:n]),
    )
    changed = st.lists(_mutations(route.valid()), min_size=1, max_size=3).map(
        lambda applied: _mutated(route.valid, applied)
    )
    return st.one_of(changed, changed, raw)


content_types = st.sampled_from(
    [
        "application/json",
        "application/json",
        "text/plain",
        "application/x-www-form-urlencoded",
        None,
    ]
)


# --- the state a rejected request must leave alone -----------------------------------------


def _view(client: TestClient, state: EmulatorState) -> dict[str, Any]:
    """What a request could change, seen through the admin API (and the script queue and
    pending faults, which it does not serve)."""
    requests = client.get("/_emulator/requests").json()["requests"]
    return {
        "cache": client.get("/_emulator/cache").json(),
        "clock": client.get("/_emulator/clock").json(),
        "config": state.config(),
        "hold": client.get("/_emulator/hold").json(),
        "script": len(state._script),
        "faults": state.pending_faults(),
        "cached_contents": sorted(state.cached_contents),
        "log": requests,
    }


def _post(client: TestClient, path: str, raw: bytes, content_type: str | None) -> Any:
    headers = {"x-api-key": "fuzz", "authorization": "Bearer fuzz"}
    if content_type is not None:
        headers["content-type"] = content_type
    try:
        return client.post(path, content=raw, headers=headers)
    except Exception as exc:  # an exception out of the app: the connection dropped
        pytest.fail(f"{path}: the connection dropped ({exc!r}) for {_shown(raw)}")


def _shown(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace").replace(PREFIX, "<prefix>")


def _fresh(client: TestClient, state: EmulatorState, route: Route) -> None:
    """Reset the state, warm the cache with the route's valid body (or a Messages one) and
    queue a scripted reply."""
    state.reset()
    route = route if route.caches else ROUTES["messages"]
    warm = client.post(route.path, content=json.dumps(route.valid()).encode())
    assert warm.status_code == 200, warm.text
    assert client.get("/_emulator/cache").json()["entries"], "the valid body was cached"
    # A scripted reply waits: a rejected request must not take it.
    queued = client.post("/_emulator/script", json={"responses": [{"text": "scripted"}]})
    assert queued.json() == {"queued": 1}


@pytest.fixture(scope="module")
def emulator() -> Iterator[tuple[TestClient, EmulatorState]]:
    state = EmulatorState()
    with TestClient(create_app(state), raise_server_exceptions=False) as client:
        yield client, state


def _check(
    client: TestClient,
    state: EmulatorState,
    route: Route,
    raw: bytes,
    content_type: str | None,
    *,
    logged: bool,
) -> None:
    before = _view(client, state)
    response = _post(client, route.path, raw, content_type)
    shown = (route.path, response.status_code, _shown(raw)[:3000], response.text[:400])
    assert response.status_code < 500, shown
    if response.status_code < 400:
        # A valid body may change anything: start again from the warmed state.
        _fresh(client, state, route)
        return
    route.shape(response)
    after = _view(client, state)
    if logged:
        entry = after["log"][-1]
        assert (entry["status"], entry["usage"]) == (response.status_code, None), shown
        after["log"] = after["log"][:-1]
    assert after == before, shown


@pytest.mark.parametrize("name", list(ROUTES))
def test_a_malformed_provider_request_is_a_4xx_in_its_shape_that_changes_nothing(
    emulator: tuple[TestClient, EmulatorState], name: str
) -> None:
    client, state = emulator
    route = ROUTES[name]
    _fresh(client, state, route)

    @FUZZ
    @given(raw=bodies(route), content_type=content_types)
    def run(raw: bytes, content_type: str | None) -> None:
        _check(client, state, route, raw, content_type, logged=True)

    run()


@pytest.mark.parametrize("name", list(ADMIN))
def test_a_malformed_admin_request_is_a_400_that_changes_nothing(
    emulator: tuple[TestClient, EmulatorState], name: str
) -> None:
    client, state = emulator
    route = ADMIN[name]
    _fresh(client, state, route)

    @ADMIN_FUZZ
    @given(raw=bodies(route), content_type=content_types)
    def run(raw: bytes, content_type: str | None) -> None:
        _check(client, state, route, raw, content_type, logged=False)

    run()
