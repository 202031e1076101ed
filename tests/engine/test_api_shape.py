"""The public shapes hooks, cache policies and callers rely on: read-only value objects,
keyword-only parameters and documented defaults (each pinned by the mutation run, issue 20)."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sessiongen import no_cache, opencode_default, previous_tail
from sessiongen.cache_policy import lookback_ladder
from sessiongen.session.generate import ToolResult
from sessiongen.session.request import RequestInfo, SessionModelRequest

from ..conftest import EngineFactory

KEYWORD_ONLY = inspect.Parameter.KEYWORD_ONLY
POSITIONAL = inspect.Parameter.POSITIONAL_OR_KEYWORD


def _kinds(function: Callable[..., Any]) -> dict[str, inspect._ParameterKind]:
    return {name: p.kind for name, p in inspect.signature(function).parameters.items()}


def test_a_snapshot_is_read_only(make_engine: EngineFactory, workspace: Path) -> None:
    engine, _, _ = make_engine()
    snapshot = engine.select(engine.create_session("build", workspace=workspace).id)
    with pytest.raises(dataclasses.FrozenInstanceError):
        snapshot.history = ()  # type: ignore[misc]


def test_request_info_is_read_only_and_not_warming_unless_told() -> None:
    info = RequestInfo(operation="step", session_id="s", revision=0)
    assert (info.step, info.tag, info.warming) == (None, None, False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        info.tag = "changed"  # type: ignore[misc]


def test_a_preparation_is_read_only() -> None:
    preparation = SessionModelRequest()
    with pytest.raises(dataclasses.FrozenInstanceError):
        preparation.cache_policy = no_cache  # type: ignore[misc]


def test_build_and_prepare_take_the_snapshot_by_position_and_the_rest_by_keyword() -> None:
    for method in (SessionModelRequest.build, SessionModelRequest.prepare):
        kinds = _kinds(method)
        assert kinds.pop("self") == kinds.pop("snapshot") == POSITIONAL, method
        assert set(kinds.values()) == {KEYWORD_ONLY}, method


@pytest.mark.parametrize("policy", [opencode_default, previous_tail, no_cache, lookback_ladder])
def test_a_cache_policy_takes_anchor_and_ttl_by_keyword(policy: Callable[..., Any]) -> None:
    assert _kinds(policy) == {"request": POSITIONAL, "anchor": KEYWORD_ONLY, "ttl": KEYWORD_ONLY}


def test_a_tool_result_is_not_an_error_unless_told() -> None:
    assert ToolResult(call_id="c", text="t").is_error is False


def test_every_generate_surface_has_the_engines_signature() -> None:
    """`generate` is spelt out on each edge (engine, plugin context, both HTTP clients, and
    `prepare_generate`) so that `help()`, IDEs and type checkers show its real keywords;
    this keeps the copies one: same parameters, kinds, defaults and annotations. Below the
    edges it travels whole, as one `GenerateOptions` (issue 30), whose fields, like the HTTP
    body's, are the prompt and the keyword arguments with the same defaults."""
    import dataclasses

    from sessiongen import SessionEngine
    from sessiongen.client import AsyncSessiongenClient, SessiongenClient
    from sessiongen.plugins.context import SessionAccess
    from sessiongen.server.models import GenerateRequest
    from sessiongen.session.generate import GenerateOptions, SessionGenerate

    def shape(function: Callable[..., Any]) -> list[tuple[str, Any, Any, Any]]:
        parameters = list(inspect.signature(function).parameters.values())[1:]  # not self
        return [(p.name, p.kind, p.default, p.annotation) for p in parameters]

    engine = shape(SessionEngine.generate)
    assert [name for name, *_ in engine] == [
        "session_id",
        "prompt",
        "tools_policy",
        "warming",
        "tag",
    ]
    for surface in (SessionAccess, SessiongenClient, AsyncSessiongenClient):
        assert shape(surface.generate) == engine, surface.__name__
    assert shape(SessionEngine.prepare_generate) == engine  # the request generate would send
    for below in (SessionGenerate.generate, SessionGenerate.prepare):
        assert [name for name, *_ in shape(below)] == ["session_id", "options"]
    keywords = {name: default for name, kind, default, _ in engine if kind is KEYWORD_ONLY}
    options = {f.name: f.default for f in dataclasses.fields(GenerateOptions)}
    assert options == {"prompt": dataclasses.MISSING, **keywords}
    fields = GenerateRequest.model_fields
    assert set(fields) == {"prompt", *keywords}
    assert fields["prompt"].is_required()
    assert {name: fields[name].default for name in keywords} == keywords


def test_generate_options_are_checked_once_where_they_come_in() -> None:
    """`GenerateOptions` takes the policy's word and keeps the enum, and refuses what the
    engine refuses, with the same typed errors."""
    from sessiongen import EmptyPrompt, GenerateOptions, InvalidArgument, ToolsPolicy

    assert GenerateOptions("Recap.", "no_tools").tools_policy is ToolsPolicy.NO_TOOLS  # type: ignore[arg-type]
    with pytest.raises(EmptyPrompt):
        GenerateOptions("  ")
    for bad in ({"tools_policy": "all"}, {"warming": 1}, {"tag": 3}):
        with pytest.raises(InvalidArgument):
            GenerateOptions("Recap.", **bad)
