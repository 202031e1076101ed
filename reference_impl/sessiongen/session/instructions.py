"""Instructions: resolve and assemble read-only; commit as a separate durable step.

Sources are the agent's configured instruction texts and instruction files in the workspace.
`assemble` compares them with the committed state and yields the baseline (rendered into the
system prompt, fixed at the first commit so the cached prefix stays stable) and, when a
source changed, the update text the model must see once. Only a durable Step commits.
"""

from __future__ import annotations

import errno
import os
import threading
import time
from dataclasses import dataclass

from ..errors import InstructionsInitializationBlocked
from ..model import Agent, InstructionsCommitted
from .store import InstructionState


@dataclass(frozen=True)
class ResolvedSources:
    """Current source values; `unavailable` lists sources that exist but cannot be read."""

    values: dict[str, str]
    unavailable: tuple[str, ...] = ()


@dataclass(frozen=True)
class AssembledInstructions:
    """What a request shows the model, and what a commit would store."""

    baseline: str
    update: str | None
    values: dict[str, str]
    needs_commit: bool


_ABSENT = frozenset({errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP})
INSTRUCTION_FILES = 1024
"""How many instruction files' texts one context keeps (the first kept dropped first)."""
RACY_NS = 2_000_000_000
"""A file modified this recently before it was read may be modified again within the
timestamp granularity of its file system (a few milliseconds; two seconds on FAT) without
its modification time changing: it is read again until its modification time is older than
this (git's "racily clean" entries, the same answer)."""


class InstructionFiles:
    """Instruction files as last read, each read again only when its stat changed.

    A file's text is kept with its stat signature (modification time in nanoseconds, size,
    inode, change time: an edit, a replacement or a permission change each moves one) and
    served while the file's signature is the same, unless it was modified within `RACY_NS`
    of being read. Owned by one `SessionContext`; shared by
    the threads that select through it (a dict replaced per file, under a lock)."""

    def __init__(self) -> None:
        self._texts: dict[str, tuple[tuple[int, int, int, int], str]] = {}
        self._lock = threading.Lock()

    def read(self, path: str) -> str | None:
        """The file's text; None if there is no file. Raises OSError or UnicodeDecodeError
        when it cannot be read."""
        now = time.time_ns()
        try:
            stat = os.stat(path)
        except OSError as error:
            if error.errno in _ABSENT:  # as `Path.exists` tells a missing file
                return None
            raise
        signature = (stat.st_mtime_ns, stat.st_size, stat.st_ino, stat.st_ctime_ns)
        known = self._texts.get(path)
        if known is not None and known[0] == signature:
            return known[1]
        with open(path, encoding="utf-8") as file:
            text = file.read()
        with self._lock:
            if stat.st_mtime_ns < now - RACY_NS:
                self._texts[path] = (signature, text)
                while len(self._texts) > INSTRUCTION_FILES:
                    del self._texts[next(iter(self._texts))]
            else:  # racily new: it could change again unseen
                self._texts.pop(path, None)
        return text


def _read_now(path: str) -> str | None:
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as file:
        return file.read()


def resolve(
    agent: Agent, workspace: str | None, files: InstructionFiles | None = None
) -> ResolvedSources:
    """Read every source; a missing file is absent, an unreadable one is unavailable.
    `files`, if given, serves a file that has not changed since it last read it."""
    values = {f"agent:{i}": text for i, text in enumerate(agent.instructions)}
    unavailable: list[str] = []
    if workspace is not None:
        read = _read_now if files is None else files.read
        for name in agent.instruction_files:
            try:
                text = read(os.path.join(workspace, name))
            except (OSError, UnicodeDecodeError):
                unavailable.append(name)
                continue
            if text is not None:
                values[name] = text
    return ResolvedSources(values=values, unavailable=tuple(unavailable))


def render_baseline(values: dict[str, str]) -> str:
    return "\n\n".join(f"Instructions from {name}:\n{text}" for name, text in values.items())


def render_update(before: dict[str, str], after: dict[str, str]) -> str | None:
    changed = [name for name, text in after.items() if before.get(name) != text]
    removed = [name for name in before if name not in after]
    if not changed and not removed:
        return None
    lines = ["<system-reminder>", "Your instructions changed."]
    lines += [f"Instructions from {name} are now:\n{after[name]}" for name in changed]
    lines += [f"Instructions from {name} were removed." for name in removed]
    lines.append("</system-reminder>")
    return "\n".join(lines)


def assemble(sources: ResolvedSources, state: InstructionState | None) -> AssembledInstructions:
    """Read-only: never writes. Raises InstructionsInitializationBlocked when there is no
    committed baseline and a source cannot be read."""
    if state is None:
        if sources.unavailable:
            raise InstructionsInitializationBlocked(
                f"cannot initialise instructions: unreadable {', '.join(sources.unavailable)}"
            )
        return AssembledInstructions(
            baseline=render_baseline(sources.values),
            update=None,
            values=sources.values,
            needs_commit=True,
        )
    # An unreadable source keeps its committed value rather than reading as removed.
    kept = {name: state.current[name] for name in sources.unavailable if name in state.current}
    values = {**kept, **sources.values}
    update = render_update(state.current, values)
    return AssembledInstructions(
        baseline=render_baseline(state.initial),
        update=update,
        values=values,
        needs_commit=update is not None,
    )


def commit_event(assembled: AssembledInstructions, message_id: str) -> InstructionsCommitted:
    """The durable instruction event for a Step that shows `assembled` to the model."""
    if assembled.update is None:
        return InstructionsCommitted(values=assembled.values)
    return InstructionsCommitted(
        values=assembled.values, update=assembled.update, message_id=message_id
    )
