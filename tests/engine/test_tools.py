"""The built-in tools stay inside the workspace and fail with typed tool errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sessiongen import (
    InvalidToolArguments,
    NotARegularFile,
    PathOutsideWorkspace,
    ToolExecutionFailed,
    UnknownTool,
)
from sessiongen.model import Agent, AssistantMessage, ToolCallPart
from sessiongen.testing import ScriptedReply
from sessiongen.tools import BUILTIN_TOOLS, ToolRegistry


@pytest.fixture
def tools() -> ToolRegistry:
    return ToolRegistry()


def test_list_and_read_and_grep(tools: ToolRegistry, workspace: Path) -> None:
    assert tools.get("list_files").execute(workspace, {}) == "AGENTS.md\nsrc/app.py\nsrc/util.py"
    assert (
        tools.get("read_file").execute(workspace, {"path": "src/util.py"}) == "TODO = 'remove me'\n"
    )
    assert (
        tools.get("grep").execute(workspace, {"pattern": "return"})
        == "src/app.py:2:     return a + b"
    )
    assert tools.get("grep").execute(workspace, {"pattern": "nothing-here"}) == "no matches"


@pytest.mark.parametrize("path", ["../x", "/etc/passwd", "src/../../x"])
def test_escaping_paths_are_refused(tools: ToolRegistry, workspace: Path, path: str) -> None:
    with pytest.raises(PathOutsideWorkspace):
        tools.get("read_file").execute(workspace, {"path": path})


def test_symlink_out_of_the_workspace_is_refused(
    tools: ToolRegistry, workspace: Path, tmp_path: Path
) -> None:
    (tmp_path / "secret.txt").write_text("secret")
    (workspace / "link.txt").symlink_to(tmp_path / "secret.txt")
    with pytest.raises(PathOutsideWorkspace):
        tools.get("read_file").execute(workspace, {"path": "link.txt"})


def test_errors_are_typed(tools: ToolRegistry, workspace: Path) -> None:
    with pytest.raises(InvalidToolArguments):
        tools.get("read_file").execute(workspace, {})
    with pytest.raises(InvalidToolArguments):
        tools.get("list_files").execute(workspace, {"path": ".", "extra": 1})
    with pytest.raises(NotARegularFile):
        tools.get("read_file").execute(workspace, {"path": "src"})
    with pytest.raises(ToolExecutionFailed):
        tools.get("read_file").execute(workspace, {"path": "missing.txt"})
    with pytest.raises(UnknownTool):
        tools.get("rm")


def test_definitions_are_json_schema(tools: ToolRegistry) -> None:
    definition = tools.get("grep").definition()
    assert definition.input_schema["required"] == ["pattern"]
    assert set(definition.input_schema["properties"]) == {"pattern", "path"}


def _hostile(workspace: Path, outside: Path) -> None:
    """Links out of the workspace (a file, a directory), a link that loops back to the root,
    `..` inside paths, deep nesting, and one link that stays inside."""
    outside.mkdir()
    (outside / "secret.txt").write_text("SECRET-OUTSIDE-TOKEN\n")
    (outside / "dir").mkdir()
    (outside / "dir" / "secret2.txt").write_text("SECRET-OUTSIDE-TOKEN-2\n")
    (workspace / "link.txt").symlink_to(outside / "secret.txt")
    (workspace / "outdir").symlink_to(outside / "dir", target_is_directory=True)
    deep = workspace / "deep" / "a" / "b" / "c" / "d" / "e" / "f" / "g"
    deep.mkdir(parents=True)
    (deep / "inner.txt").write_text("deep inside\n")
    (deep / "loop").symlink_to(workspace, target_is_directory=True)
    (deep / "escape.txt").symlink_to(Path("../" * 9) / outside.name / "secret.txt")
    (workspace / "inlink.py").symlink_to(workspace / "src" / "app.py")


HOSTILE_CALLS: list[tuple[str, str, dict[str, object]]] = [
    ("t1", "list_files", {}),
    ("t2", "grep", {"pattern": "SECRET"}),
    ("t3", "grep", {"pattern": "SECRET", "path": "outdir"}),
    ("t4", "grep", {"pattern": "SECRET", "path": "deep"}),
    ("t5", "read_file", {"path": "outdir/secret2.txt"}),
    ("t6", "read_file", {"path": "deep/a/../../link.txt"}),
    ("t7", "read_file", {"path": "deep/a/b/c/d/e/f/g/escape.txt"}),
    ("t8", "write_file", {"path": "outdir/new.txt", "content": "x"}),
    ("t9", "write_file", {"path": "link.txt", "content": "overwritten"}),
    ("t10", "list_files", {"path": "deep/a/b/c/d/e/f/g/loop/src"}),
    ("t11", "read_file", {"path": "inlink.py"}),
]


async def test_every_tool_stays_inside_a_hostile_workspace_through_a_real_step(
    make_engine: Any, agent: Agent, workspace: Path, tmp_path: Path
) -> None:
    """Confinement on every path a tool touches, not only its argument: walks neither list
    nor read through links that leave the workspace, nor loop through one back into it;
    paths through such links are refused; nothing outside is read or written."""
    outside = tmp_path / "outside"
    _hostile(workspace, outside)
    before = {p: p.read_bytes() for p in outside.rglob("*") if p.is_file()}
    every_tool = agent.model_copy(update={"tools": tuple(BUILTIN_TOOLS)})
    engine, scripted, _ = make_engine(agents=[every_tool])
    scripted.queue([ScriptedReply.calling(*HOSTILE_CALLS), ScriptedReply(text="done")])
    session = engine.create_session("build", workspace=workspace)
    await engine.run(session.id, "look around")
    (step, *_) = [
        m for m in engine.store.read(session.id).messages if isinstance(m, AssistantMessage)
    ]
    results = {p.id: (p.state, p.result or "") for p in step.parts if isinstance(p, ToolCallPart)}
    assert len(results) == len(HOSTILE_CALLS)
    assert all("SECRET-OUTSIDE" not in result for _, result in results.values()), results
    listed = results["t1"][1].splitlines()
    assert listed == [
        "AGENTS.md",
        "deep/a/b/c/d/e/f/g/inner.txt",
        "inlink.py",
        "src/app.py",
        "src/util.py",
    ]
    assert results["t2"] == ("completed", "no matches")
    assert results["t4"] == ("completed", "no matches")
    for refused in ("t3", "t5", "t6", "t7", "t8", "t9"):
        state, result = results[refused]
        assert state == "error" and result.startswith("PathOutsideWorkspace"), (refused, result)
    assert results["t10"][0] == "completed"  # the loop resolves inside: the root's src
    assert results["t11"] == ("completed", "def add(a, b):\n    return a + b\n")
    assert {p: p.read_bytes() for p in outside.rglob("*") if p.is_file()} == before
