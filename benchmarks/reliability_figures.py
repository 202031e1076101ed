"""The reliability page's figures (docs/reliability.md), from a run of the reliability tests.

Runs the six test files of tests/reliability/ (concurrency, crash, HTTP fuzzing, the fault
matrix, the soak and the emulator fuzzing) with SESSIONGEN_RELIABILITY_FIGURES pointing at a
JSON file, into which each test writes what it measured (tests/reliability/_figures.py);
then prints that JSON, the page's figures table and the fault matrix (faults x paths). The
figures are the tests' own counts, recorded after their assertions, so they exist only if
the tests passed.

Run: uv run python benchmarks/reliability_figures.py [--long] [--hostile] [--out FILE]
`--hostile` runs only the hostile-input tests (issue 28) and prints their table.
`--long` sets SESSIONGEN_LONG=1 (200 crash runs, 10,000 HTTP fuzz cases, 1,000 soak turns,
5,000 emulator fuzz examples; many minutes, not a few).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FILES = (
    "reliability/test_concurrency.py",
    "reliability/test_crash.py",
    "reliability/test_fuzz_http.py",
    "reliability/test_fault_matrix.py",
    "reliability/test_soak.py",
    "reliability/test_fuzz_emulator.py",
)
HOSTILE = (
    "reliability/test_hostile_tools.py",
    "test_probe_hostile.py",
    "emulator/test_hostile_bodies.py",
    "reliability/test_disk_full.py",
    "server/test_secrets.py",
    "warming/test_hostile_files.py",
)
"""The hostile-input tests (issue 28): a prompt-injected model, a malicious endpoint, huge
bodies, a full disk, bad files. Each records its figures under "hostile"."""
PATHS = ("generate", "drain", "drain-retrying")
"""The fault matrix's columns: generate on a retrying client, a durable turn with SDK retries
off, the same with SDK retries on."""


def run(
    out: Path, *, long: bool = False, files: tuple[str, ...] = FILES + HOSTILE
) -> dict[str, Any]:
    """Run the tests with figures written to `out`; returns the figures."""
    out.unlink(missing_ok=True)
    env = {**os.environ, "SESSIONGEN_RELIABILITY_FIGURES": str(out)}
    if long:
        env["SESSIONGEN_LONG"] = "1"
    paths = [str(ROOT / "tests" / name) for name in files]
    # one process: the tests write their figures into one file
    command = [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:randomly", *paths]
    subprocess.run(command, env=env, cwd=ROOT, check=True)
    figures: dict[str, Any] = json.loads(out.read_text())
    return figures


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _rejections(fuzz: dict[str, Any]) -> str:
    """The 4xx statuses of the HTTP fuzz run, most frequent first: '384 × 404, ...'."""
    statuses = {
        key.removeprefix("status_"): count
        for key, count in fuzz.items()
        if key.startswith("status_4") and not key.endswith("xx")
    }
    ranked = sorted(statuses.items(), key=lambda item: (-item[1], item[0]))
    return ", ".join(f"{count:,} × {status}" for status, count in ranked)


def lost_or_changed(figures: dict[str, Any]) -> int:
    """Crash runs' lost or changed records plus every fault matrix case's."""
    matrix = figures.get("fault_matrix", {})
    cells = [cell for path in PATHS for cell in matrix.get(path, {}).values()]
    total = int(figures["crash"]["lost_or_changed_records"])
    return total + sum(int(cell["lost_or_changed_records"]) for cell in cells)


def table(figures: dict[str, Any]) -> str:
    """The page's figures table."""
    one = figures["concurrency_1_process"]
    two = figures["concurrency_2_process"]
    crash = figures["crash"]
    fuzz = figures["fuzz"]
    matrix = figures["fault_matrix"]
    soak = figures["soak"]
    emulator = figures["fuzz_emulator"]
    first, last = crash["seeds"]
    cases = sum(len(matrix.get(path, {})) for path in PATHS)
    faults = len({fault for path in PATHS for fault in matrix.get(path, {})})
    recovered = sum(
        cell["outcome"] == "recovered" for path in PATHS for cell in matrix[path].values()
    )
    memory_from, memory_to = soak["memory_turns_measured"]
    rows: list[tuple[str, Any]] = [
        ("Concurrent generates held, 1 server process", one["max_in_flight"]),
        ("Concurrent generates held, 2 server processes", two["max_in_flight"]),
        (f"Crash runs survived (SIGKILL, seeds {first} to {last})", crash["runs"]),
        (
            "Crash runs killed with a Step open (recovered as interrupted at restart)",
            crash["runs_killed_mid_step"],
        ),
        ("Acknowledged prompts checked after the crashes", crash["acknowledged_prompts"]),
        ("Event rows checked unchanged across restarts", crash["event_rows_checked"]),
        ("HTTP fuzz cases tried", fuzz["cases"]),
        (
            f"HTTP fuzz cases rejected ({_rejections(fuzz)}), store unchanged",
            fuzz.get("rejected_unchanged", 0),
        ),
        ("HTTP fuzz answers 5xx", fuzz.get("status_5xx", 0)),
        (f"Fault matrix cases passed ({faults} faults × {len(PATHS)} paths)", cases),
        ("Fault matrix cases the SDK's retry recovered (drain with retries)", recovered),
        ("Soak turns (warming keeper on, virtual clock)", soak["turns"]),
        ("Soak provider requests", soak["requests"]),
        ("Soak warming pings (ledger equals the pings billed)", soak["pings"]),
        (
            f"Soak memory growth per turn, KiB (turns {memory_from} to {memory_to})",
            soak["memory_growth_kib_per_turn"],
        ),
        (
            f"Soak emulator log entries kept / dropped (capacity {soak['log_capacity']})",
            f"{soak['log_kept']:,} / {soak['log_dropped']:,}",
        ),
        ("Soak warming ledger equals the billed pings", soak["ledger_equals_billed_pings"]),
        ("Emulator fuzz examples run", emulator["examples"]),
        ("Emulator fuzz answers 5xx", emulator["5xx"]),
        ("Emulator fuzz prompt cache changes", emulator["cache_changes"]),
        ("Lost or changed records (crash runs and fault matrix)", lost_or_changed(figures)),
    ]
    lines = ["| Figure | Value |", "|---|---:|"]
    lines += [f"| {name} | {_value(value)} |" for name, value in rows]
    return "\n".join(lines)


def _cell(cell: dict[str, Any] | None) -> str:
    if cell is None:
        return "not run"
    outcome = str(cell["outcome"])
    requests = f"{cell['requests']} request" + ("s" if cell["requests"] != 1 else "")
    if outcome == "recovered":
        return f"recovered ({requests})"
    if outcome == "interrupted":
        return f"`{cell['error']}`, Step interrupted ({requests})"
    return f"`{outcome}` ({requests})"


def matrix_table(figures: dict[str, Any]) -> str:
    """The fault matrix: one row per fault (in the test's order), one column per path, each
    cell its outcome: the typed error raised, with the Step marked interrupted on a drain, or
    the turn recovered by the SDK's retry."""
    matrix = figures["fault_matrix"]
    faults: list[str] = list(matrix.get("faults", []))  # the test's order
    for path in PATHS:
        faults += [fault for fault in matrix.get(path, {}) if fault not in faults]
    lines = ["| Fault | " + " | ".join(f"`{path}`" for path in PATHS) + " |"]
    lines.append("|---" * (len(PATHS) + 1) + "|")
    for fault in faults:
        cells = [_cell(matrix.get(path, {}).get(fault)) for path in PATHS]
        lines.append(f"| `{fault}` | " + " | ".join(cells) + " |")
    lost = [
        sum(cell["lost_or_changed_records"] for cell in matrix.get(path, {}).values())
        for path in PATHS
    ]
    tried = [len(matrix.get(path, {})) for path in PATHS]
    lines.append("| Faults tried | " + " | ".join(f"{n:,}" for n in tried) + " |")
    lines.append("| Lost or changed records | " + " | ".join(f"{n:,}" for n in lost) + " |")
    return "\n".join(lines)


def hostile_table(figures: dict[str, Any]) -> str:
    """The hostile inputs: one row per figure a hostile-input test recorded, by case."""
    lines = ["| Case | Figure | Value |", "|---|---|---:|"]
    for case, measured in sorted(figures.get("hostile", {}).items()):
        for name, value in measured.items():
            lines.append(f"| {case} | {name} | {_value(value)} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--long", action="store_true", help="SESSIONGEN_LONG=1")
    parser.add_argument("--out", type=Path, help="keep the figures' JSON here")
    parser.add_argument(
        "--hostile", action="store_true", help="only the hostile-input tests and their table"
    )
    args = parser.parse_args()
    files = HOSTILE if args.hostile else FILES + HOSTILE
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as scratch:
        out = args.out or Path(scratch) / "figures.json"
        figures = run(out, long=args.long, files=files)
    elapsed = time.monotonic() - started
    print(json.dumps(figures, indent=2, sort_keys=True))
    if not args.hostile:
        print()
        print(table(figures))
        print()
        print(matrix_table(figures))
    print()
    print(hostile_table(figures))
    print()
    print(f"{len(files)} test files in {elapsed:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
