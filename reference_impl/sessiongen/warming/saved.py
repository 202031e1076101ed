"""Fitted warming policies saved as JSON and loaded again: what `sessiongen experiment warming
--save-policy FILE` writes and `sessiongen serve --warming-policy FILE` (or
`WarmingKeeper(policy=FromPolicy(load_policy(FILE)))`) runs.

A saved policy is what its `fit` learnt (`state()`), with the policy's kind, its model and a
format version; loading builds the policy anew and restores that state, so what runs live
is what the experiment measured on the held-back part.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .policies import Learned, Tracking

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
    """Write `policy`'s fitted state to `path` (JSON); returns the path."""
    target = Path(path).expanduser()
    target.write_text(json.dumps(policy_document(policy), indent=1) + "\n", encoding="utf-8")
    return target


def load_policy(path: str | Path) -> SavedPolicy:
    """The policy saved at `path`, fitted as it was saved. Raises PolicyFileError for a file
    that is not a saved policy of this version (with what is wrong), OSError when it cannot
    be read."""
    source = Path(path).expanduser()
    text = source.read_text(encoding="utf-8")
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PolicyFileError(source, f"not JSON ({exc.msg}, line {exc.lineno})") from None
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
    except (KeyError, TypeError, ValueError) as exc:
        detail = f"missing {exc}" if isinstance(exc, KeyError) else str(exc)
        raise PolicyFileError(source, f"state: {detail}") from None
    raise PolicyFileError(source, f"policy: {kind!r} is not a saved kind (tracking, learned)")
