"""Instructions: resolve and assemble read-only; commit as a separate durable step.

Sources are the agent's configured instruction texts and instruction files in the workspace.
`assemble` compares them with the committed state and yields the baseline (rendered into the
system prompt, fixed at the first commit so the cached prefix stays stable) and, when a
source changed, the update text the model must see once. Only a durable Step commits.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ._store import InstructionState
from .errors import InstructionsInitializationBlocked
from .model import Agent, InstructionsCommitted


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


def resolve(agent: Agent, workspace: str | None) -> ResolvedSources:
    """Read every source; a missing file is absent, an unreadable one is unavailable."""
    values = {f"agent:{i}": text for i, text in enumerate(agent.instructions)}
    unavailable: list[str] = []
    if workspace is not None:
        for name in agent.instruction_files:
            path = Path(workspace) / name
            if not path.exists():
                continue
            try:
                values[name] = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                unavailable.append(name)
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
