"""JSON from files a user hands us (traces, saved policies), read within bounds: the one place
every loader reads it, so a bad file is one typed, one-line `JSONProblem` (which the loader
turns into its own error naming the file and line), never a `UnicodeDecodeError`,
`RecursionError` or an integer conversion error from deep inside the parser.

Bounds: a line of JSON Lines is at most `MAX_LINE_BYTES` (a real Claude Code line holding a
large tool result is a few MB), a whole JSON file at most `MAX_FILE_BYTES`; text is UTF-8;
nesting no deeper than the parser's recursion allows; integers of at most 4,300 digits
(Python's own limit); `NaN` and `Infinity`, which Python's parser takes and JSON does not
have, are refused.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

MAX_LINE_BYTES = 64 * 1024 * 1024
MAX_FILE_BYTES = 256 * 1024 * 1024


class JSONProblem(ValueError):
    """What is wrong with one JSON text, in one line (no file or line: the caller adds them)."""


def _no_constant(name: str) -> NoReturn:
    raise JSONProblem(f"{name} is not a JSON number")


def parse(raw: bytes | str) -> object:
    """The JSON value of `raw` (UTF-8 bytes or text), or `JSONProblem`."""
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise JSONProblem(f"not UTF-8 (byte {error.start + 1})") from None
    try:
        return json.loads(raw, parse_constant=_no_constant)
    except json.JSONDecodeError as error:
        raise JSONProblem(f"not JSON ({error.msg}, column {error.colno})") from None
    except RecursionError:
        raise JSONProblem("nested too deeply") from None
    except JSONProblem:
        raise
    except ValueError as error:  # an integer over Python's 4,300 digits
        raise JSONProblem(f"a number out of range ({_first_clause(error)})") from None


def _first_clause(error: Exception) -> str:
    return str(error).split(":", 1)[0].strip()


def read_file(path: Path, limit: int | None = None) -> bytes:
    """The file's bytes, or `JSONProblem` when it has more than `limit` (default
    `MAX_FILE_BYTES`); never reads more than `limit + 1` bytes. OSError (a missing file, no
    permission) passes through."""
    limit = MAX_FILE_BYTES if limit is None else limit
    if path.exists() and not path.is_file():  # a pipe would block, a device never end
        raise JSONProblem("not a regular file")
    with path.open("rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise JSONProblem(f"larger than {limit:,} bytes")
    return data


def lines(path: Path, limit: int | None = None) -> Iterator[tuple[int, bytes]]:
    """(line number from 1, raw line) for each line that is not blank; a line longer than
    `limit` (default `MAX_LINE_BYTES`) raises `LineProblem` (its number kept) after reading
    no more than `limit + 1` bytes of it."""
    limit = MAX_LINE_BYTES if limit is None else limit
    with path.open("rb") as handle:
        number = 0
        while True:
            raw = handle.readline(limit + 1)
            if not raw:
                return
            number += 1
            if len(raw) > limit and not raw.endswith(b"\n"):
                raise LineProblem(f"a line longer than {limit:,} bytes", number)
            if raw.strip():
                yield number, raw


class LineProblem(JSONProblem):
    """A `JSONProblem` of one line of a JSON Lines file: `line` is its number."""

    def __init__(self, problem: str, line: int) -> None:
        super().__init__(problem)
        self.line = line
