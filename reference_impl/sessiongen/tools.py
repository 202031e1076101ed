"""The built-in workspace tools (read_file, list_files, grep, write_file), confined to the
workspace root, and `run_tool_call`, the one way a model's tool call is run.

A model's tool call is untrusted input. `Workspace` is the one implementation of "a path
inside the workspace" for every tool and every tools policy: a path resolves inside the
root or is `PathOutsideWorkspace`; only regular files are read (`NotARegularFile` for a
pipe, device, socket or directory, refused before a read can block); a call reads at most
`ToolLimits.read_bytes` and runs at most `ToolLimits.seconds`, off the event loop
(`ToolTimedOut` past it). An isolated workspace (`Workspace.isolated`, policy D) reads the
same files and keeps its writes in memory: nothing is copied and the disk is never written.
grep's patterns run on RE2, whose matching time is linear in the text: no pattern can
backtrack catastrophically. Every failure is a tool error result, never a crash.
"""

from __future__ import annotations

import asyncio
import codecs
import os
import stat
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import cache, partial
from pathlib import Path
from typing import Any, Generic, TypeVar

import re2  # type: ignore[import-untyped]  # google-re2 ships no type information
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import (
    InvalidToolArguments,
    NotARegularFile,
    PathOutsideWorkspace,
    ToolError,
    ToolExecutionFailed,
    ToolNotRegistered,
    ToolTimedOut,
    UnknownTool,
)
from .llm.types import ToolCall, ToolDefinition

MAX_OUTPUT_CHARS = 20_000
_READ_FILE_BYTES = 4 * MAX_OUTPUT_CHARS + 4
"""What read_file reads at most: enough for MAX_OUTPUT_CHARS characters of UTF-8."""
_CHUNK = 64 * 1024
"""Bytes read at a time, and the longest piece of a line grep searches at once."""


@dataclass(frozen=True)
class ToolLimits:
    """What one tool call may spend. Past `seconds` the call's result is `ToolTimedOut`;
    past `read_bytes` (bytes read from files, not only returned) a read stops there."""

    seconds: float = 30.0
    read_bytes: int = 64 * 1024 * 1024
    listed_files: int = 100_000

    def __post_init__(self) -> None:
        if not self.seconds > 0 or self.read_bytes < 1 or self.listed_files < 1:
            raise ValueError(f"tool limits must be positive: {self}")


class ToolArgs(BaseModel):
    """The base of a tool's arguments: a pydantic model whose fields (their types and
    `Field(description=...)`) are the JSON schema the model is shown. A call with a missing,
    mistyped or extra argument is `InvalidToolArguments`, returned to the model."""

    model_config = ConfigDict(extra="forbid")


ArgsT = TypeVar("ArgsT", bound=ToolArgs)
"""A tool's own arguments model, which its `run` receives validated."""


class ReadFileArgs(ToolArgs):
    path: str = Field(description="File path relative to the workspace root.")


class ListFilesArgs(ToolArgs):
    path: str = Field(default=".", description="Directory relative to the workspace root.")


class GrepArgs(ToolArgs):
    pattern: str = Field(
        description="A regular expression (RE2 syntax: no backreferences or lookaround)."
    )
    path: str = Field(default=".", description="Directory or file to search.")


class WriteFileArgs(ToolArgs):
    path: str = Field(description="File path relative to the workspace root.")
    content: str = Field(description="The complete new UTF-8 content of the file.")


class Workspace:
    """A session's workspace as its tools see it: the root every path must resolve inside,
    and, when isolated, the writes of one transient call kept in memory."""

    def __init__(self, root: Path | str, *, isolated: bool = False) -> None:
        self.root = Path(root).resolve()
        self._written: dict[Path, str] | None = {} if isolated else None

    @classmethod
    def isolated(cls, root: Path | str) -> Workspace:
        """The workspace for policy D: reads the same files under the same confinement,
        writes only to memory (later calls of the same generate see them)."""
        return cls(root, isolated=True)

    def resolve(self, relative: str) -> Path:
        """The path inside the workspace, or PathOutsideWorkspace."""
        target = (self.root / relative).resolve()
        if not self.contains(target):
            raise PathOutsideWorkspace(f"{relative!r} is outside the workspace")
        return target

    def contains(self, resolved: Path) -> bool:
        return resolved == self.root or self.root in resolved.parents

    def relative(self, path: Path) -> str:
        return str(path.relative_to(self.root))

    def call(self, limits: ToolLimits) -> ToolCallScope:
        """This workspace under one call's limits (what a tool's `run` receives)."""
        return ToolCallScope(self, limits)


class ToolCallScope:
    """One tool call's access to its workspace: every read, walk and write a tool makes,
    bounded by the call's deadline and read budget."""

    def __init__(self, workspace: Workspace, limits: ToolLimits) -> None:
        self.workspace = workspace
        self.limits = limits
        self._deadline = time.monotonic() + limits.seconds
        self._unread = limits.read_bytes

    @property
    def root(self) -> Path:
        return self.workspace.root

    def resolve(self, relative: str) -> Path:
        return self.workspace.resolve(relative)

    def relative(self, path: Path) -> str:
        return self.workspace.relative(path)

    def check_time(self) -> None:
        if time.monotonic() > self._deadline:
            raise ToolTimedOut(f"the call ran past its limit of {self.limits.seconds:g} s")

    @property
    def budget_spent(self) -> bool:
        return self._unread <= 0

    def is_file(self, path: Path) -> bool:
        written = self.workspace._written
        if written is not None and path in written:
            return True
        try:
            return stat.S_ISREG(os.stat(path).st_mode)
        except OSError:
            return False

    def read_text(self, path: Path, max_bytes: int) -> str:
        """The file's text, from at most `max_bytes` bytes (cut at a character boundary)."""
        written = self.workspace._written
        if written is not None and path in written:
            return written[path]
        with self._open(path) as file:
            data = self._read(file, max_bytes)
            complete = not file.read(1)
        decoder = codecs.getincrementaldecoder("utf-8")()
        return decoder.decode(data, final=complete)

    def lines(self, path: Path) -> Iterator[tuple[int, str]]:
        """(line number, text) for each line (split at newline), a line longer than the
        chunk size in pieces with the same number; stops when the read budget is spent.
        Raises UnicodeDecodeError for a file that is not UTF-8."""
        written = self.workspace._written
        if written is not None and path in written:
            lines = written[path].split("\n")
            yield from enumerate(lines[:-1] if lines[-1] == "" else lines, start=1)
            return
        decoder = codecs.getincrementaldecoder("utf-8")()
        number = 1
        with self._open(path) as file:
            while self._unread > 0:
                self.check_time()
                raw = file.readline(min(_CHUNK, self._unread))
                if not raw:
                    decoder.decode(b"", final=True)  # a file cut inside a character
                    return
                self._unread -= len(raw)
                ends = raw.endswith(b"\n")
                yield number, decoder.decode(raw, final=False).rstrip("\r\n")
                number += ends

    def files(self, base: Path) -> list[Path]:
        """The regular files under `base` (resolved, inside), sorted. A link is listed only
        if it resolves to a file inside the workspace; linked directories are not entered
        (one inside would list its files twice, one outside would leave the workspace)."""
        found: set[Path] = set()
        for directory, _, names in os.walk(base, followlinks=False):
            self.check_time()
            for name in names:
                path = Path(directory) / name
                target = path.resolve()
                if self.workspace.contains(target) and self.is_file(target):
                    found.add(path)
                    if len(found) >= self.limits.listed_files:
                        raise ToolExecutionFailed(
                            f"more than {self.limits.listed_files:,} files under "
                            f"{self.relative(base) or '.'!r}; name a smaller directory"
                        )
        written = self.workspace._written or {}
        found.update(path for path in written if path == base or base in path.parents)
        return sorted(found)

    def write_text(self, path: Path, content: str) -> None:
        """Replace the file whole: the new text is written beside it and renamed over it,
        so a full disk or a stuck call leaves the old file as it was, never cut short."""
        existing = os.stat(path) if os.path.lexists(path) else None
        if existing is not None and not stat.S_ISREG(existing.st_mode):
            raise NotARegularFile(f"{self.relative(path)!r} is not a regular file")
        written = self.workspace._written
        if written is not None:
            written[path] = content
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        scratch = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
        mode = 0o644 if existing is None else stat.S_IMODE(existing.st_mode)
        try:
            fd = os.open(scratch, flags, mode)
            try:
                left = memoryview(content.encode("utf-8"))
                while left:
                    self.check_time()
                    left = left[os.write(fd, left[:_CHUNK]) :]
            finally:
                os.close(fd)
            os.replace(scratch, path)
        finally:
            scratch.unlink(missing_ok=True)

    def _open(self, path: Path) -> Any:
        """`path` (a listed link included) opened for reading if it resolves to a regular
        file inside the workspace."""
        name = self.relative(path)
        path = path.resolve()
        if not self.workspace.contains(path):
            raise PathOutsideWorkspace(f"{name!r} is outside the workspace")
        try:
            mode = os.stat(path).st_mode
        except FileNotFoundError:
            raise ToolExecutionFailed(f"{name!r} does not exist") from None
        if not stat.S_ISREG(mode):
            raise NotARegularFile(f"{name!r} is not a regular file")
        # O_NONBLOCK: a file swapped for a pipe after the check opens at once instead of
        # waiting for a writer; fstat then refuses it.
        fd = os.open(path, os.O_RDONLY | _NONBLOCK | _NOFOLLOW | _CLOEXEC)
        return self._checked(fd, path, "r")

    def _checked(self, fd: int, path: Path, mode: str) -> Any:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise NotARegularFile(f"{self.relative(path)!r} is not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, mode + "b")

    def _read(self, file: Any, max_bytes: int) -> bytes:
        chunks: list[bytes] = []
        wanted = min(max_bytes, self._unread)
        while wanted > 0:
            self.check_time()
            chunk = file.read(min(_CHUNK, wanted))
            if not chunk:
                break
            chunks.append(chunk)
            wanted -= len(chunk)
            self._unread -= len(chunk)
        return b"".join(chunks)


_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


@dataclass(frozen=True)
class Tool(Generic[ArgsT]):
    """A named capability the model may call: its name and description, its arguments model
    (`args`, a `ToolArgs` subclass: the schema on the wire) and `run`, which gets the call's
    workspace scope and the validated arguments and returns the text the model reads.

    Register it in the engine's `ToolRegistry` and name it in an `Agent`'s `tools`::

        class WordCountArgs(ToolArgs):
            path: str = Field(description="File path relative to the workspace root.")

        def word_count(scope: ToolCallScope, args: WordCountArgs) -> str:
            return str(len(scope.read_text(scope.resolve(args.path), 1 << 20).split()))

        WORD_COUNT = Tool("word_count", "Count a file's words.", WordCountArgs, word_count)
    """

    name: str
    description: str
    args: type[ArgsT]
    run: Callable[[ToolCallScope, ArgsT], str]

    def definition(self) -> ToolDefinition:
        return _definition(self.name, self.description, self.args)

    def execute(
        self,
        workspace: Workspace | Path,
        arguments: dict[str, Any],
        limits: ToolLimits | None = None,
    ) -> str:
        """Run the tool in this thread; every failure is a ToolError subclass."""
        try:
            parsed = self.args.model_validate(arguments)
        except ValidationError as exc:
            raise InvalidToolArguments(f"{self.name}: {exc.errors(include_url=False)}") from exc
        if not isinstance(workspace, Workspace):
            workspace = Workspace(workspace)
        try:
            return self.run(workspace.call(limits or ToolLimits()), parsed)[:MAX_OUTPUT_CHARS]
        except ToolError:
            raise
        except Exception as exc:
            raise ToolExecutionFailed(f"{self.name}: {type(exc).__name__}: {exc}") from exc


@cache
def _definition(name: str, description: str, args: type[ToolArgs]) -> ToolDefinition:
    """The wire definition, built once per tool: schema generation is not free and every
    request preparation needs it."""
    schema = args.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    return ToolDefinition(name=name, description=description, input_schema=schema)


def _read_file(scope: ToolCallScope, args: ReadFileArgs) -> str:
    return scope.read_text(scope.resolve(args.path), _READ_FILE_BYTES)


def _list_files(scope: ToolCallScope, args: ListFilesArgs) -> str:
    return "\n".join(scope.relative(p) for p in scope.files(scope.resolve(args.path)))


def _pattern(text: str) -> Any:
    options = re2.Options()
    options.log_errors = False  # a bad pattern is the model's error, not the server's log
    try:
        return re2.compile(text, options=options)
    except re2.error as exc:
        detail = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else exc
        raise InvalidToolArguments(f"grep: bad pattern: {detail}") from exc


def _grep(scope: ToolCallScope, args: GrepArgs) -> str:
    pattern = _pattern(args.pattern)
    base = scope.resolve(args.path)
    hits: list[str] = []
    size = 0
    for path in [base] if scope.is_file(base) else scope.files(base):
        found: list[str] = []
        try:
            for number, line in scope.lines(path):
                if pattern.search(line):
                    found.append(f"{scope.relative(path)}:{number}: {line}")
        except UnicodeDecodeError:
            continue  # not text: skipped whole, as before it was read
        hits += found
        size += sum(len(hit) + 1 for hit in found)
        if size > MAX_OUTPUT_CHARS:
            break  # the answer is cut there anyway
        if scope.budget_spent:
            hits.append(f"[grep stopped after reading {scope.limits.read_bytes:,} bytes]")
            break
    return "\n".join(hits) if hits else "no matches"


def _write_file(scope: ToolCallScope, args: WriteFileArgs) -> str:
    scope.write_text(scope.resolve(args.path), args.content)
    return f"wrote {len(args.content.encode('utf-8'))} bytes to {args.path}"


BUILTIN_TOOLS: dict[str, Tool[Any]] = {
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
    """The tools an engine knows (by default the built-in `BUILTIN_TOOLS`; yours beside them:
    `ToolRegistry([*BUILTIN_TOOLS.values(), my_tool])`), and what one call of any of them
    may spend; an agent's permission list selects from them."""

    def __init__(
        self,
        tools: Iterable[Tool[Any]] = BUILTIN_TOOLS.values(),
        *,
        limits: ToolLimits | None = None,
    ) -> None:
        self._tools = {tool.name: tool for tool in tools}
        self.limits = limits or ToolLimits()

    @property
    def names(self) -> tuple[str, ...]:
        """The registered tools' names, sorted."""
        return tuple(sorted(self._tools))

    def permitted(self, names: Iterable[str], *, agent: str | None = None) -> tuple[Tool[Any], ...]:
        """The named tools in the agent's order. A name the registry does not have (misspelt,
        or a tool never registered) is `ToolNotRegistered` (naming `agent`, when given),
        never dropped from the wire."""
        names = tuple(names)
        missing = [name for name in names if name not in self._tools]
        if missing:
            raise ToolNotRegistered(missing, registered=self._tools, agent=agent)
        return tuple(self._tools[name] for name in names)

    def get(self, name: str) -> Tool[Any]:
        if name not in self._tools:
            raise UnknownTool(f"no tool named {name!r}")
        return self._tools[name]


@dataclass(frozen=True)
class ToolOutcome:
    """What one tool call produced: its text, or a tool error's text."""

    text: str
    is_error: bool = False


async def run_tool_call(
    registry: ToolRegistry,
    call: ToolCall,
    permitted: tuple[str, ...],
    workspace: Workspace | None,
) -> ToolOutcome:
    """Run one model tool call with its permission check, in a thread of its own under the
    registry's limits, so the event loop keeps answering; every failure is a tool error
    result, never a crash. Settlement and generate's policy D both run calls through here."""
    try:
        if call.name not in permitted:
            raise ToolError(f"tool {call.name!r} is not permitted for this agent")
        if workspace is None:
            raise ToolError("this session has no workspace")
        tool = registry.get(call.name)
        limits = registry.limits
        run = partial(tool.execute, workspace, call.input, limits)
        return ToolOutcome(await _in_thread(run, limits.seconds, call.name))
    except ToolError as error:
        return ToolOutcome(f"{type(error).__name__}: {error}", is_error=True)


_GRACE = 1.0
"""Seconds past a call's limit before its thread is abandoned: a call checks its deadline
between reads, so only one stuck in a single system call needs it."""

T = TypeVar("T")


async def _in_thread(run: Callable[[], T], seconds: float, name: str) -> T:
    """`run()` in a daemon thread (one stuck in a system call cannot keep the process from
    exiting, as the default executor's threads would), awaited at most `seconds` and the
    grace; then abandoned, its call answered `ToolTimedOut`."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()

    def settle(outcome: Callable[[], None]) -> None:
        if not done.done():
            outcome()

    def work() -> None:
        try:
            value = run()
        except BaseException as error:  # handed to the awaiting task, raised there
            failed = error
            _post(loop, settle, lambda: done.set_exception(failed))
        else:
            _post(loop, settle, lambda: done.set_result(value))

    threading.Thread(target=work, name=f"tool-{name}", daemon=True).start()
    try:
        return await asyncio.wait_for(asyncio.shield(done), seconds + _GRACE)
    except TimeoutError:
        raise ToolTimedOut(f"{name}: the call ran past its limit of {seconds:g} s") from None


def _post(
    loop: asyncio.AbstractEventLoop, settle: Callable[[Callable[[], None]], None], outcome: Any
) -> None:
    try:
        loop.call_soon_threadsafe(settle, outcome)
    except RuntimeError:
        pass  # the loop closed while the call ran: nobody is waiting for it
