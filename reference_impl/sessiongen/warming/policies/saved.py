"""Fitted warming policies saved as JSON and loaded again: what `sessiongen experiment warming
--save-policy FILE` writes and `sessiongen serve --warming-policy FILE` (or
`WarmingKeeper(policy=FromPolicy(load_policy(FILE)))`) runs.

A saved policy is what its `fit` learnt (`state()`), with the policy's kind, its model and a
format version; loading builds the policy anew and restores that state, so what runs live
is what the experiment measured on the held-back part.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..traces import bounded_json
from . import Learned, Tracking

FORMAT = "sessiongen-warming-policy"
VERSION = 1
SavedPolicy = Learned | Tracking
"""The policies that can be saved: the ones that learn."""


class PolicyFileError(ValueError):
    """A saved policy file that cannot be read: names the file and what is wrong."""

    def __init__(self, path: Path | str, problem: str) -> None:
        self.path = Path(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")

    def __reduce__(self) -> tuple[type[PolicyFileError], tuple[Path, str]]:
        return (type(self), (self.path, self.problem))


def policy_document(policy: SavedPolicy) -> dict[str, Any]:
    """The JSON document of a fitted policy."""
    kind = "tracking" if isinstance(policy, Tracking) else "learned"
    document: dict[str, Any] = {"format": FORMAT, "version": VERSION, "policy": kind}
    document["model"] = policy.model
    if isinstance(policy, Learned):
        document["split"] = policy.split
    document["state"] = policy.state()
    return document


def save_policy(policy: SavedPolicy, path: str | Path) -> Path:
    """Write `policy`'s fitted state to `path` (JSON); returns the path. The file is written
    whole beside it and then renamed over it, so `path` is either the old file or the new one,
    never a half-written policy that `serve --warming-policy` would refuse."""
    target = Path(path).expanduser()
    text = json.dumps(policy_document(policy), indent=1) + "\n"
    scratch = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        scratch.write_text(text, encoding="utf-8")
        scratch.replace(target)
    finally:
        scratch.unlink(missing_ok=True)
    return target


MAX_POLICY_BYTES = 16 * 1024 * 1024
"""A saved policy is a few KB; a larger file is not one."""


def load_policy(path: str | Path) -> SavedPolicy:
    """The policy saved at `path`, fitted as it was saved. Raises PolicyFileError, one line
    naming the file, for anything that is not a saved policy of this version (bad bytes,
    nesting, numbers out of range, a wrong shape: what is wrong), OSError when it cannot be
    read. Nothing is loaded unless all of it is valid."""
    source = Path(path).expanduser()
    try:
        document = bounded_json.parse(bounded_json.read_file(source, MAX_POLICY_BYTES))
    except bounded_json.JSONProblem as problem:
        raise PolicyFileError(source, str(problem)) from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise PolicyFileError(source, f'not a saved warming policy (no "format": "{FORMAT}")')
    if document.get("version") != VERSION:
        raise PolicyFileError(
            source, f"saved by format version {document.get('version')!r}; this reads {VERSION}"
        )
    kind, model = document.get("policy"), document.get("model")
    if not isinstance(model, str):
        raise PolicyFileError(source, "model: a model name is required")
    try:
        if kind == "tracking":
            return Tracking(model).load_state(document["state"])
        if kind == "learned":
            return Learned(model, split=document.get("split", "depth")).load_state(
                document["state"]
            )
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        detail = f"missing {exc}" if isinstance(exc, KeyError) else str(exc)
        raise PolicyFileError(source, f"state: {detail}") from None
    raise PolicyFileError(source, f"policy: {kind!r} is not a saved kind (tracking, learned)")
