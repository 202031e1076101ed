"""Fuzz the emulator's `POST /v1/messages` with malformed bodies (hypothesis): every answer is
a 4xx in Anthropic's error shape, never a 5xx nor a 200, and no malformed request changes the
prompt cache (its entries, with their hit counts and lifetimes, are equal before and after).

Each example starts from a valid body whose system prompt carries a cache breakpoint (the
cache is warmed with it first, so a malformed request that read or wrote the prefix would
show) and breaks it in one to three ways, or sends bytes that are no JSON object at all.

Examples: `FUZZ_EXAMPLES` by default, `FUZZ_EXAMPLES_LONG` with SESSIONGEN_LONG=1.
Deterministic (`derandomize`), and nothing is written to a hypothesis database.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sessiongen.emulator import EmulatorState, create_app
from sessiongen.tokens import text_of_tokens
from starlette.testclient import TestClient

from ._figures import record

LONG = os.environ.get("SESSIONGEN_LONG") == "1"
FUZZ_EXAMPLES = 600
FUZZ_EXAMPLES_LONG = 5000
MODEL = "claude-sonnet-4-6"
PREFIX_TEXT = text_of_tokens(1100, "cached")  # 1,100 tokens: over the 1,024 minimum

FUZZ = settings(
    max_examples=FUZZ_EXAMPLES_LONG if LONG else FUZZ_EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def valid_body() -> dict[str, Any]:
    return {
        "model": MODEL,
        "max_tokens": 32,
        "system": [{"type": "text", "text": PREFIX_TEXT, "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hello"}]}],
    }


# --- strategies --------------------------------------------------------------------------

json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


def _not(*types: type) -> st.SearchStrategy[Any]:
    """A JSON value of none of `types` (bool counts apart from int, as JSON has it)."""

    def ok(value: Any) -> bool:
        if isinstance(value, bool):
            return bool not in types
        return not isinstance(value, types)

    return json_values.filter(ok)


Mutation = Callable[[dict[str, Any]], None]


def _set(path: tuple[Any, ...], value: Any) -> Mutation:
    def apply(body: dict[str, Any]) -> None:
        target: Any = body
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return apply


def _delete(path: tuple[Any, ...]) -> Mutation:
    def apply(body: dict[str, Any]) -> None:
        target: Any = body
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]

    return apply


def _append_message(message: Any) -> Mutation:
    def apply(body: dict[str, Any]) -> None:
        body["messages"].append(message)

    return apply


USER_BLOCK = ("messages", 0, "content", 0)
SYSTEM_BLOCK = ("system", 0)
unknown_model = st.text(min_size=1, max_size=20).filter(lambda m: not m.startswith("claude"))
bad_role = st.text(max_size=12).filter(lambda r: r not in ("user", "assistant", "system"))
bad_type = st.text(max_size=12).filter(
    lambda t: t not in ("text", "image", "document", "tool_use", "tool_result", "thinking")
)

mutations: st.SearchStrategy[Mutation] = st.one_of(
    # required fields missing
    st.sampled_from([_delete(("model",)), _delete(("max_tokens",)), _delete(("messages",))]),
    # top-level fields of the wrong type or out of range
    _not(str).map(lambda v: _set(("model",), v)),
    unknown_model.map(lambda v: _set(("model",), v)),
    _not(int).map(lambda v: _set(("max_tokens",), v)),
    st.integers(max_value=-1).map(lambda v: _set(("max_tokens",), v)),
    _not(list).map(lambda v: _set(("messages",), v)),
    st.just(_set(("messages",), [])),
    _not(bool).filter(lambda v: v is not None).map(lambda v: _set(("stream",), v)),
    _not(str, list).filter(lambda v: v is not None).map(lambda v: _set(("system",), v)),
    _not(list).filter(lambda v: v is not None).map(lambda v: _set(("tools",), v)),
    json_values.filter(lambda v: not isinstance(v, dict) and v is not None).map(
        lambda v: _set(("tool_choice",), v)
    ),
    st.builds(dict, type=bad_type).map(lambda v: _set(("tool_choice",), v)),
    st.builds(dict, type=bad_type).map(lambda v: _set(("thinking",), v)),
    st.integers(max_value=1023).map(
        lambda b: _set(("thinking",), {"type": "enabled", "budget_tokens": b})
    ),
    # messages
    _not(dict).map(lambda v: _set(("messages", 0), v)),
    bad_role.map(lambda r: _set(("messages", 0, "role"), r)),
    st.just(_delete(("messages", 0, "content"))),
    _not(str, list).map(lambda v: _set(("messages", 0, "content"), v)),
    st.just(_append_message({"role": "assistant", "content": "prefill"})),  # sonnet: no prefill
    st.just(
        _append_message(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_x"}]}
        )
    ),
    # content blocks
    _not(dict).map(lambda v: _set(("messages", 0, "content", 0), v)),
    st.just(_delete((*USER_BLOCK, "type"))),
    _not(dict)
    .filter(lambda v: v is not None)
    .map(lambda v: _set((*USER_BLOCK, "cache_control"), v)),
    st.builds(dict, type=st.text(max_size=10).filter(lambda t: t != "ephemeral")).map(
        lambda v: _set((*SYSTEM_BLOCK, "cache_control"), v)
    ),
    st.text(max_size=4)
    .filter(lambda t: t not in ("5m", "1h"))
    .map(lambda ttl: _set((*SYSTEM_BLOCK, "cache_control"), {"type": "ephemeral", "ttl": ttl})),
    bad_type.map(lambda t: _set((*SYSTEM_BLOCK, "type"), t)),
    st.text(max_size=8)
    .map(lambda t: "zz_" + t)  # no block type starts so; *_tool_result is a server tool's
    .filter(lambda t: not t.endswith("_tool_result"))
    .map(lambda t: _set((*USER_BLOCK, "type"), t)),
    _not(str).map(lambda v: _set((*USER_BLOCK, "text"), v)),
    st.just(_delete((*USER_BLOCK, "text"))),
    _not(str).map(lambda v: _set((*SYSTEM_BLOCK, "text"), v)),
)


def _mutated(applied: list[Mutation]) -> bytes:
    body = valid_body()
    for mutation in applied:
        try:
            mutation(body)
        except (AttributeError, KeyError, IndexError, TypeError):
            pass  # an earlier mutation removed or replaced what this one targets
    return json.dumps(body).encode()


def _not_an_object(raw: bytes) -> bool:
    try:
        return not isinstance(json.loads(raw), dict)
    except (ValueError, UnicodeDecodeError):
        return True


raw_bodies = st.one_of(
    st.binary(max_size=64).filter(_not_an_object),
    json_values.filter(lambda v: not isinstance(v, dict)).map(lambda v: json.dumps(v).encode()),
    st.integers(min_value=1, max_value=200).map(lambda n: json.dumps(valid_body()).encode()[:n]),
)
bodies = st.one_of(st.lists(mutations, min_size=1, max_size=3).map(_mutated), raw_bodies)


def _shown(raw: bytes) -> str:
    """The body for a failure message, with the long cached prefix elided."""
    return raw.decode("utf-8", errors="replace").replace(PREFIX_TEXT, "<prefix>")


def _post(client: TestClient, raw: bytes) -> Any:
    return client.post(
        "/v1/messages",
        content=raw,
        headers={"content-type": "application/json", "x-api-key": "fuzz"},
    )


def _assert_error_shape(response: Any, raw: bytes) -> None:
    assert 400 <= response.status_code < 500, (response.status_code, _shown(raw), response.text)
    body = response.json()
    assert body["type"] == "error", body
    error = body["error"]
    assert isinstance(error["type"], str) and error["type"], body
    assert isinstance(error["message"], str) and error["message"], body
    assert response.headers.get("request-id") == body.get("request_id")


# --- the property ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def emulator() -> Iterator[tuple[TestClient, EmulatorState]]:
    state = EmulatorState()
    with TestClient(create_app(state), raise_server_exceptions=False) as client:
        warm = client.post("/v1/messages", content=json.dumps(valid_body()).encode())
        assert warm.status_code == 200, warm.text
        assert warm.json()["usage"]["cache_creation_input_tokens"] > 0
        yield client, state


@pytest.fixture(scope="module")
def tally() -> Iterator[Counter[str]]:
    """What the examples the test body ran answered, recorded once the module is done."""
    counts: Counter[str] = Counter()
    yield counts
    record("fuzz_emulator", {"examples": 0, "5xx": 0, "cache_changes": 0, **counts})


def _cache(state: EmulatorState) -> list[Any]:
    return sorted(state.cache.entries(), key=lambda e: (e.model, e.prefix_hash))


@FUZZ
@given(raw=bodies)
def test_malformed_bodies_answer_the_error_shape_and_leave_the_cache(
    emulator: tuple[TestClient, EmulatorState], tally: Counter[str], raw: bytes
) -> None:
    client, state = emulator
    before = _cache(state)
    assert before, "the cache was warmed"
    response = _post(client, raw)
    tally["examples"] += 1
    tally[f"{response.status_code // 100}xx"] += 1
    _assert_error_shape(response, raw)
    tally["cache_changes"] += _cache(state) != before
    assert _cache(state) == before
