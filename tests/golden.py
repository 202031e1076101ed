"""Compare a JSON-able value with a recorded golden file.

Set SESSIONGEN_UPDATE_GOLDEN=1 to (re)record; a missing golden file fails, it never records
itself silently.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def assert_golden(path: Path, value: Any) -> None:
    text = json.dumps(value, indent=2, sort_keys=False) + "\n"
    if os.environ.get("SESSIONGEN_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"no golden file {path}; record it with SESSIONGEN_UPDATE_GOLDEN=1"
    assert json.loads(text) == json.loads(path.read_text()), f"request differs from {path.name}"
