"""`load_trace`: the one entry point from a trace file on disk and its format name to a Trace."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .._choices import TRACE_FORMATS
from .._choices import TraceFormat as TraceFormat
from .events import load_events
from .mooncake import load_mooncake
from .traces import Trace
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
    if path.is_dir() and format not in _DIRECTORY_FORMATS:
        raise IsADirectoryError(
            f"{path} is a directory; {article(format)} {format} trace is one file"
        )
    return _LOADERS[format](path, name)
