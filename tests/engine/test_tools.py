"""The built-in tools stay inside the workspace and fail with typed tool errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from sessiongen import InvalidToolArguments, PathOutsideWorkspace, ToolExecutionFailed, UnknownTool
from sessiongen.tools import ToolRegistry


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
    with pytest.raises(ToolExecutionFailed):
        tools.get("read_file").execute(workspace, {"path": "src"})
    with pytest.raises(UnknownTool):
        tools.get("rm")


def test_definitions_are_json_schema(tools: ToolRegistry) -> None:
    definition = tools.get("grep").definition()
    assert definition.input_schema["required"] == ["pattern"]
    assert set(definition.input_schema["properties"]) == {"pattern", "path"}
