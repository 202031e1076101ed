"""The mutation script's own bookkeeping: what it skips, what it samples, how it scores.

cosmic-ray itself is not run here (that takes an hour); these use a session database with
cosmic-ray 8's schema, read from a real session of `benchmarks/mutation_score.py`.
"""

from __future__ import annotations

import importlib.util
import json
import sqlite3
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent

SCHEMA = """
CREATE TABLE work_items (job_id VARCHAR NOT NULL, PRIMARY KEY (job_id));
CREATE TABLE mutation_specs (
    module_path VARCHAR, operator_name VARCHAR, operator_args JSON, occurrence INTEGER,
    start_pos_row INTEGER, start_pos_col INTEGER, end_pos_row INTEGER, end_pos_col INTEGER,
    definition_name VARCHAR, job_id VARCHAR NOT NULL, PRIMARY KEY (job_id));
CREATE TABLE work_results (
    worker_outcome VARCHAR(9), output TEXT, test_outcome VARCHAR(11), diff TEXT,
    job_id VARCHAR NOT NULL, PRIMARY KEY (job_id));
"""


@pytest.fixture(scope="module")
def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "mutation_score", ROOT / "benchmarks" / "mutation_score.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["mutation_score"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _session(tmp_path: Path, rows: list[tuple[str, int, int]]) -> Path:
    db = tmp_path / "session.sqlite"
    with sqlite3.connect(db) as con:
        con.executescript(SCHEMA)
        for i, (path, row, col) in enumerate(rows):
            job = f"job{i:04d}"
            con.execute("insert into work_items values (?)", (job,))
            con.execute(
                "insert into mutation_specs values (?, 'NumberReplacer', '{}', 0, ?, ?, ?, ?,"
                " 'f', ?)",
                (path, row, col, row, col + 1, job),
            )
    return db


def test_a_sample_is_the_asked_fraction_and_the_same_for_the_same_seed(
    script: ModuleType, tmp_path: Path
) -> None:
    rows = [(f"reference_impl/sessiongen/warming/m{i % 3}.py", i, 4) for i in range(200)]
    drawn = []
    for attempt in range(3):
        (tmp_path / str(attempt)).mkdir()
        db = _session(tmp_path / str(attempt), rows)
        left_out = script.draw_sample(db, 0.1, seed=0 if attempt < 2 else 1)
        assert left_out == 180
        with sqlite3.connect(db) as con:
            runnable = {
                job
                for (job,) in con.execute(
                    "select job_id from work_items"
                    " where job_id not in (select job_id from work_results)"
                )
            }
        drawn.append(runnable)
        mutants = script.read_results(db, "warming")
        assert sum(m.outcome == "unsampled" for m in mutants) == 180
        assert {m.path for m in mutants} == {"warming/m0.py", "warming/m1.py", "warming/m2.py"}
    assert len(drawn[0]) == 20
    assert drawn[0] == drawn[1]
    assert drawn[0] != drawn[2]


def test_annotations_are_skipped_per_file_of_a_package(script: ModuleType, tmp_path: Path) -> None:
    package = tmp_path / "reference_impl" / "sessiongen" / "cache"
    package.mkdir(parents=True)
    (package / "a.py").write_text(
        "from __future__ import annotations\n\ndef f(x: int = 1) -> int:\n    return x + 2\n"
    )
    (package / "b.py").write_text("def g() -> None:\n    y: int = 3\n    return None\n")
    rows = [
        ("reference_impl/sessiongen/cache/a.py", 3, 9),  # `int` in f's parameter: skipped
        ("reference_impl/sessiongen/cache/a.py", 3, 15),  # the default 1: runs
        ("reference_impl/sessiongen/cache/a.py", 4, 15),  # the 2: runs
        ("reference_impl/sessiongen/cache/b.py", 2, 7),  # y's local annotation: skipped
        ("reference_impl/sessiongen/cache/b.py", 2, 13),  # the 3: runs
    ]
    db = _session(tmp_path, rows)
    assert script.skip_annotations(db, tmp_path) == 2
    outcomes = [m.outcome for m in script.read_results(db, "cache")]
    assert outcomes.count("skipped") == 2


def test_a_sampled_score_reports_its_interval_and_a_full_one_does_not(
    script: ModuleType,
) -> None:
    full = script.ModuleScore("cache", killed=90, survived=10)
    assert full.percent == 90.0 and full.interval is None
    sampled = script.ModuleScore("warming", unsampled=900, killed=90, survived=10)
    low, high = sampled.interval
    assert low < 90.0 < high
    assert (low, high) == (82.6, 94.5)  # Wilson, z = 1.96, 90 of 100


def test_the_docs_tables_are_the_committed_records(script: ModuleType) -> None:
    """docs/benchmarks.md's mutation tables are generated from benchmarks/mutation/*.json:
    regenerate with `uv run python benchmarks/mutation_score.py --docs docs/benchmarks.md
    --from benchmarks/mutation/*.json`."""
    records = sorted((ROOT / "benchmarks" / "mutation").glob("*.json"))
    assert records, "no committed mutation run record"
    page = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    start, end = page.index(script.DOCS_BEGIN), page.index(script.DOCS_END)
    section = page[start : end + len(script.DOCS_END)]
    reports = [json.loads(path.read_text(encoding="utf-8")) for path in records]
    assert section == script.render_docs(reports)
    judged = (ROOT / "benchmarks" / "mutation-report.md").read_text(encoding="utf-8")
    assert "NOT JUDGED" not in judged
    for report in reports:  # each committed run has its section of judgements
        assert report["commit"][:12] in judged, f"run at {report['commit'][:12]} not reported"
