"""Notebook 03's knobs: every one is in its `parameters` cell, and the papermill command its
Parameters section documents runs (on a committed real log, the generator kept small and
the Mooncake traces left out, so it takes about a minute)."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "03-cache-ttl-warming.ipynb"
REAL_LOG = ROOT / "tests" / "warming" / "fixtures" / "real" / "claude-code" / "v2.1-subagents-dir"
KNOBS = ("TRACE", "TRACE_FORMAT", "GENERATED_SESSIONS", "SEED", "MOONCAKE", "MODEL", "PRICES",
         "SWEEPS", "LINGER", "GAP")  # fmt: skip


def _cells() -> list[dict[str, object]]:
    cells: list[dict[str, object]] = json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
    return cells


def _source(cell: dict[str, object]) -> str:
    source = cell["source"]
    return "".join(source) if isinstance(source, list) else str(source)


def test_every_knob_is_a_tagged_parameter_and_set_nowhere_else() -> None:
    cells = _cells()
    [parameters] = [c for c in cells if "parameters" in c["metadata"].get("tags", [])]  # type: ignore[attr-defined]
    assigned = set(re.findall(r"^([A-Z_]+) = ", _source(parameters), flags=re.MULTILINE))
    assert set(KNOBS) <= assigned
    for cell in cells:
        if cell is not parameters and cell["cell_type"] == "code":
            for knob in KNOBS:
                assert not re.search(rf"^{knob} = ", _source(cell), flags=re.MULTILINE), knob


def documented_command() -> list[str]:
    """The papermill command of the Parameters section, as a shell would split it."""
    [section] = [_source(c) for c in _cells() if _source(c).startswith("## 1. Parameters")]
    block = section.split("```")[1]
    return shlex.split(block.replace("\\\n", " "))


def test_the_documented_papermill_command_runs(tmp_path: Path) -> None:
    command = documented_command()
    assert command[:2] == ["papermill", "notebooks/03-cache-ttl-warming.ipynb"]
    out = tmp_path / "out.ipynb"
    command[2] = str(out)
    command[command.index("-p") + 2] = str(REAL_LOG)  # -p TRACE <your project>
    command += ["-p", "GENERATED_SESSIONS", "5", "-p", "MOONCAKE", "False"]
    done = subprocess.run(
        [sys.executable, "-m", *command],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    cells = json.loads(out.read_text(encoding="utf-8"))["cells"]
    printed = "".join(
        "".join(o.get("text", "")) for c in cells if c["cell_type"] == "code" for o in c["outputs"]
    )
    # MODEL reached the tables: every request at it, not each at its logged model
    assert "v2.1-subagents-dir: 8 requests, 3 sessions, priced at claude-opus-4-6 (" in printed
    assert "3300 s" in printed  # the SWEEPS grid
