"""`load_trace`: the one entry point from a trace file on disk and its format name to a Trace."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..._choices import TRACE_FORMATS
from ..._choices import TraceFormat as TraceFormat
from . import Trace, TraceFormatError, bounded_json
from .events import load_events
from .mooncake import load_mooncake
from .transcripts import load_claude_code, load_opencode

_LOADERS: dict[TraceFormat, Callable[[Path, str | None], Trace]] = {
    "mooncake": load_mooncake,
    "events": load_events,
    "claude-code": load_claude_code,
    "opencode": load_opencode,
}
# Transcripts come one file per session, so those formats also take a directory of them.
_DIRECTORY_FORMATS = ("claude-code", "opencode")

FORMATS: tuple[TraceFormat, ...] = TRACE_FORMATS


def article(word: str) -> str:
    """ "a" or "an" before `word` (a format name: "an events trace", "a mooncake trace")."""
    return "an" if word[:1] in "aeiou" else "a"


def load_trace(path: str | Path, format: TraceFormat, name: str | None = None) -> Trace:
    """The trace in `path`, read as `format` (docs/traces.md describes each); named `name`,
    else after the file.

    Raises ValueError for an unknown format (naming the choices), FileNotFoundError when
    `path` does not exist, and TraceFormatError (a ValueError) naming the file and line of a
    record that does not follow the format.
    """
    if format not in _LOADERS:
        raise ValueError(f"unknown trace format {format!r}; choose one of: {', '.join(FORMATS)}")
    path = Path(path).expanduser()
    if not path.exists():
        raise FileNotFoundError(f"no {format} trace at {path}: the path does not exist")
    if not path.is_dir() and not path.is_file():  # a pipe or a device would block or never end
        raise TraceFormatError(path, "not a regular file or a directory")
    if path.is_dir() and format not in _DIRECTORY_FORMATS:
        raise IsADirectoryError(
            f"{path} is a directory; {article(format)} {format} trace is one file"
            + format_hint(path, format)
        )
    try:
        trace = _LOADERS[format](path, name)
    except (TraceFormatError, FileNotFoundError) as error:
        hint = format_hint(path, format)
        if not hint:
            raise
        if isinstance(error, TraceFormatError):
            raise TraceFormatError(error.path, error.problem + hint, error.line) from error
        raise FileNotFoundError(f"{error}{hint}") from error
    if not trace.requests and (hint := format_hint(path, format)):
        raise TraceFormatError(path, f"no requests read as {article(format)} {format} trace{hint}")
    return trace


def guess_format(path: Path) -> TraceFormat | None:
    """The format `path` looks like, from its first record (a directory: from the files in
    it), or None when it looks like none of them. Only for hints: `load_trace` reads the
    format it is given."""
    if path.is_dir():
        if next(path.rglob("*.jsonl"), None) is not None:
            return "claude-code"
        return "opencode" if next(path.rglob("*.json"), None) is not None else None
    try:
        with path.open("rb") as file:
            head = file.read(1 << 16)
    except OSError:
        return None
    first = head.split(b"\n", 1)[0].strip()
    try:
        record = bounded_json.parse(first)
    except bounded_json.JSONProblem:
        return "opencode" if head.lstrip().startswith(b"{") else None
    if not isinstance(record, dict):
        return None
    if "hash_ids" in record or "input_length" in record:
        return "mooncake"
    if "blocks" in record and "session" in record:
        return "events"
    if "sessionId" in record or record.get("type") in ("summary", "user", "assistant"):
        return "claude-code"
    if "info" in record and "messages" in record:
        return "opencode"
    return None


def format_hint(path: Path, format: TraceFormat) -> str:
    """ "; it looks like a mooncake trace: --format mooncake" when `path` looks like another
    format than `format`, else ""."""
    guess = guess_format(path)
    if guess is None or guess == format:
        return ""
    return f"; it looks like {article(guess)} {guess} trace: --format {guess}"
