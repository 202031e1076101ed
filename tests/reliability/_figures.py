"""The reliability figures' recorder, shared by the tests of tests/reliability/.

When `SESSIONGEN_RELIABILITY_FIGURES` names a JSON file, `record(name, figures)` merges
`figures` into that file under `name` (dicts merge key by key, at any depth; anything else
is replaced), so a parametrized test can add its case to a table the others fill.
`benchmarks/reliability_figures.py` reads the file and prints the reliability page's tables.
A test calls `record` only after its assertions passed: a figure is what a passing test
counted.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

ENV = "SESSIONGEN_RELIABILITY_FIGURES"


def record(name: str, figures: dict[str, Any]) -> None:
    """Merge `figures` into the JSON file named by SESSIONGEN_RELIABILITY_FIGURES, under
    `name`; nothing when the variable is unset."""
    path = os.environ.get(ENV)
    if not path:
        return
    target = Path(path)
    current: dict[str, Any] = json.loads(target.read_text()) if target.exists() else {}
    current[name] = _merged(current.get(name), figures)
    scratch = target.with_name(target.name + ".tmp")
    scratch.write_text(json.dumps(current, indent=2, sort_keys=True) + "\n")
    scratch.replace(target)


def _merged(old: Any, new: Any) -> Any:
    if isinstance(old, dict) and isinstance(new, dict):
        merged = dict(old)
        for key, value in new.items():
            merged[key] = _merged(old.get(key), value)
        return merged
    return new
