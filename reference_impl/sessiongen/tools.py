"""The built-in workspace tools (read_file, list_files, grep, write_file), confined to the
workspace root, and `run_tool_call`, the one way a model's tool call is run.

A tool validates its arguments with a pydantic model and resolves every path inside the
workspace; a path that escapes it is a `PathOutsideWorkspace` tool error, never a crash.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import (
    InvalidToolArguments,
    PathOutsideWorkspace,
    ToolError,
    ToolExecutionFailed,
    UnknownTool,
)
from .llm.types import ToolCall, ToolDefinition

MAX_OUTPUT_CHARS = 20_000


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ReadFileArgs(_Args):
    path: str = Field(description="File path relative to the workspace root.")


class ListFilesArgs(_Args):
    path: str = Field(default=".", description="Directory relative to the workspace root.")


class GrepArgs(_Args):
    pattern: str = Field(description="A Python regular expression.")
    path: str = Field(default=".", description="Directory or file to search.")


class WriteFileArgs(_Args):
    path: str = Field(description="File path relative to the workspace root.")
    content: str = Field(description="The complete new UTF-8 content of the file.")


@dataclass(frozen=True)
class Tool:
    """A named capability the model may call: its schema and how to run it."""

    name: str
    description: str
    args: type[_Args]
    run: Callable[[Path, Any], str]

    def definition(self) -> ToolDefinition:
        return _definition(self.name, self.description, self.args)

    def execute(self, workspace: Path, arguments: dict[str, Any]) -> str:
        """Run the tool; every failure is a ToolError subclass."""
        try:
            parsed = self.args.model_validate(arguments)
        except ValidationError as exc:
            raise InvalidToolArguments(f"{self.name}: {exc.errors(include_url=False)}") from exc
        try:
            return self.run(workspace, parsed)[:MAX_OUTPUT_CHARS]
        except ToolError:
            raise
        except Exception as exc:
            raise ToolExecutionFailed(f"{self.name}: {type(exc).__name__}: {exc}") from exc


@cache
def _definition(name: str, description: str, args: type[_Args]) -> ToolDefinition:
    """The wire definition, built once per tool: schema generation is not free and every
    request preparation needs it."""
    schema = args.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    return ToolDefinition(name=name, description=description, input_schema=schema)


def resolve_inside(workspace: Path, relative: str) -> Path:
    """The path inside the workspace, or PathOutsideWorkspace."""
    root = workspace.resolve()
    target = (root / relative).resolve()
    if target != root and root not in target.parents:
        raise PathOutsideWorkspace(f"{relative!r} is outside the workspace")
    return target


def _read_file(workspace: Path, args: ReadFileArgs) -> str:
    return resolve_inside(workspace, args.path).read_text(encoding="utf-8")


def _walk(base: Path, root: Path) -> Iterable[Path]:
    """The files under `base` (a resolved directory inside the resolved workspace `root`),
    in order. Confinement holds for every path a walk touches, not only its argument: a link
    is listed only if it resolves to a file inside the workspace, and linked directories are
    not entered (one inside would list its files twice, one outside would leave the
    workspace)."""
    found: list[Path] = []
    for directory, _, files in os.walk(base, followlinks=False):
        for name in files:
            path = Path(directory) / name
            target = path.resolve()
            if target.is_file() and (target == root or root in target.parents):
                found.append(path)
    return sorted(found)


def _list_files(workspace: Path, args: ListFilesArgs) -> str:
    base = resolve_inside(workspace, args.path)
    root = workspace.resolve()
    return "\n".join(str(p.relative_to(root)) for p in _walk(base, root))


def _grep(workspace: Path, args: GrepArgs) -> str:
    try:
        pattern = re.compile(args.pattern)
    except re.error as exc:
        raise InvalidToolArguments(f"grep: bad pattern: {exc}") from exc
    base = resolve_inside(workspace, args.path)
    root = workspace.resolve()
    hits: list[str] = []
    for path in [base] if base.is_file() else _walk(base, root):
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(lines, start=1):
            if pattern.search(line):
                hits.append(f"{path.relative_to(root)}:{number}: {line}")
    return "\n".join(hits) if hits else "no matches"


def _write_file(workspace: Path, args: WriteFileArgs) -> str:
    target = resolve_inside(workspace, args.path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(args.content, encoding="utf-8")
    return f"wrote {len(args.content.encode('utf-8'))} bytes to {args.path}"


BUILTIN_TOOLS: dict[str, Tool] = {
    tool.name: tool
    for tool in (
        Tool("read_file", "Read a UTF-8 text file from the workspace.", ReadFileArgs, _read_file),
        Tool(
            "list_files",
            "List files under a workspace directory, recursively, sorted.",
            ListFilesArgs,
            _list_files,
        ),
        Tool(
            "grep",
            "Search workspace files for lines matching a regular expression.",
            GrepArgs,
            _grep,
        ),
        Tool(
            "write_file",
            "Create or replace a UTF-8 text file in the workspace.",
            WriteFileArgs,
            _write_file,
        ),
    )
}


class ToolRegistry:
    """The tools an engine knows; an agent's permission list selects from them."""

    def __init__(self, tools: Iterable[Tool] = BUILTIN_TOOLS.values()) -> None:
        self._tools = {tool.name: tool for tool in tools}

    def permitted(self, names: Iterable[str]) -> tuple[Tool, ...]:
        """The permitted tools in the agent's order; unknown names are skipped."""
        return tuple(self._tools[name] for name in names if name in self._tools)

    def get(self, name: str) -> Tool:
        if name not in self._tools:
            raise UnknownTool(f"no tool named {name!r}")
        return self._tools[name]


@dataclass(frozen=True)
class ToolOutcome:
    """What one tool call produced: its text, or a tool error's text."""

    text: str
    is_error: bool = False


def run_tool_call(
    registry: ToolRegistry,
    call: ToolCall,
    permitted: tuple[str, ...],
    workspace: Path | None,
) -> ToolOutcome:
    """Run one model tool call with its permission check; every failure is a tool error
    result, never a crash. Settlement and generate's policy D both run calls through here."""
    try:
        if call.name not in permitted:
            raise ToolError(f"tool {call.name!r} is not permitted for this agent")
        if workspace is None:
            raise ToolError("this session has no workspace")
        return ToolOutcome(registry.get(call.name).execute(workspace, call.input))
    except ToolError as error:
        return ToolOutcome(f"{type(error).__name__}: {error}", is_error=True)
