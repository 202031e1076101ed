"""`sessiongen bench`: a quick run writes a valid bench.json, the docs' generated section is
what the committed benchmarks/bench.json renders, and bad arguments or a broken benchmark
are one-line errors. No test here asserts a timing."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sessiongen.cli import main
from sessiongen_tooling import bench
from sessiongen_tooling.bench import (
    BenchError,
    Benchmark,
    FigureSpec,
    figures_of,
    generated_section,
    read_record,
    render_docs,
    write_docs,
)

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ROOT / "benchmarks" / "bench.json"
PAGE = ROOT / "docs" / "benchmarks.md"
FAST = "replay_speed"  # about a second with --quick


def check_record(report: dict[str, Any]) -> None:
    """The shape of a bench.json record."""
    assert {"commit", "machine", "created", "figures"} <= set(report)
    assert report["commit"] == "unknown" or re.fullmatch(r"[0-9a-f]{40}", report["commit"])
    machine = report["machine"]
    assert machine["cpu_count"] >= 1 and machine["platform"] and machine["python"]
    assert report["created"].endswith("+00:00")
    assert report["figures"]
    for figure in report["figures"]:
        assert set(figure) == {"name", "value", "target", "unit", "met", "command"}
        assert math.isfinite(figure["value"])
        assert figure["command"].startswith("uv run sessiongen bench --only ")
        if figure["target"] is None:
            assert figure["met"] is None
        else:
            assert figure["met"] == (figure["value"] <= figure["target"])


def test_quick_run_of_one_benchmark_writes_bench_json(tmp_path: Path) -> None:
    """The real command line, in a fresh process, with the default --out."""
    done = subprocess.run(
        [sys.executable, "-m", "sessiongen.cli", "bench", "--quick", "--only", FAST],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "bench.json").read_text(encoding="utf-8"))
    check_record(report)
    assert report["quick"] is True
    names = [f["name"] for f in report["figures"]]
    (benchmark,) = (b for b in bench.REGISTRY if b.name == FAST)
    assert names == [s.name for s in benchmark.figures]
    for name in names:
        assert name in done.stdout  # the table
    assert "wrote bench.json" in done.stdout


def test_the_docs_section_is_what_the_committed_record_renders() -> None:
    """Regenerate with `uv run sessiongen bench --docs docs/benchmarks.md --from
    benchmarks/bench.json` (or rerun: `--out benchmarks/bench.json --docs ...`)."""
    section = generated_section(PAGE.read_text(encoding="utf-8"))
    assert section is not None, f"{PAGE} has lost its generated section's markers"
    assert section == render_docs(read_record(COMMITTED)), f"{PAGE}'s figures are stale"


def test_the_committed_record_is_a_full_run_of_every_benchmark() -> None:
    report = read_record(COMMITTED)
    check_record(report)
    assert report["quick"] is False
    names = {f["name"] for f in report["figures"]}
    for benchmark in bench.REGISTRY:
        assert {s.name for s in benchmark.figures if s.target is not None} <= names
        assert any(f["command"] == benchmark.command() for f in report["figures"])


@pytest.mark.parametrize("benchmark", bench.REGISTRY, ids=bench.NAMES)
def test_every_registered_script_loads_and_takes_its_quick_arguments(
    benchmark: Benchmark,
) -> None:
    assert callable(benchmark.load())


def one_line_usage_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as exit_:
        main(["bench", *argv])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("sessiongen: error: "), err
    return err


def test_an_unknown_benchmark_is_a_one_line_error_naming_them_all(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = one_line_usage_error(capsys, "--only", "nope")
    for name in bench.NAMES:  # the parser's choices, spelled out in cli.py, are the registry's
        assert name in err
    assert err.count("_") == sum(name.count("_") for name in bench.NAMES)


@pytest.mark.parametrize(
    "argv",
    [
        ["--from", "benchmarks/bench.json"],
        ["--docs", "page.md", "--from", "bench.json", "--quick"],
        ["--docs", "page.md", "--from", "bench.json", "--only", FAST],
        ["--docs", "page.md", "--from", "bench.json", "--out", "x.json"],
        ["--quick=yes"],
    ],
)
def test_bad_arguments_are_one_line_errors(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    one_line_usage_error(capsys, *argv)


def test_a_broken_record_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record = tmp_path / "bench.json"
    record.write_text("{", encoding="utf-8")
    assert main(["bench", "--docs", str(PAGE), "--from", str(record)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not JSON" in err


def test_outside_a_checkout_it_says_so(tmp_path: Path) -> None:
    with pytest.raises(BenchError, match="not in one: run `uv run sessiongen bench`"):
        bench.REGISTRY[0].load(tmp_path)


def checkout(tmp_path: Path, **scripts: str) -> Path:
    (tmp_path / "pyproject.toml").write_text("", encoding="utf-8")
    (tmp_path / "benchmarks").mkdir()
    for name, text in scripts.items():
        (tmp_path / "benchmarks" / f"{name}.py").write_text(text, encoding="utf-8")
    return tmp_path


def test_a_missing_script_fails_before_anything_runs(tmp_path: Path) -> None:
    ran = (
        "from pathlib import Path\ndef run():\n    Path(__file__ + '.ran').touch()\n    return {}\n"
    )
    root = checkout(tmp_path, ran=ran)
    chosen = [Benchmark("ran", "", ()), Benchmark("absent", "", ())]
    with pytest.raises(BenchError, match=r"absent\.py is missing"):
        bench.run_benchmarks(chosen, root=root)
    assert not (root / "benchmarks" / "ran.py.ran").exists()


def test_a_failing_benchmark_is_one_line_naming_it_and_where(tmp_path: Path) -> None:
    root = checkout(tmp_path, boom="def run(quick=False):\n    raise ValueError('no data')\n")
    boom = Benchmark("boom", "", (), {"quick": True})
    with pytest.raises(BenchError) as error:
        bench.run_benchmarks([boom], quick=True, root=root)
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith("the boom benchmark failed: ValueError: no data (at ")
    assert message.endswith("boom.py:2)")


def test_a_script_that_cannot_be_imported_is_one_line(tmp_path: Path) -> None:
    root = checkout(tmp_path, broken="import no_such_module_here\n")
    with pytest.raises(BenchError) as error:
        Benchmark("broken", "", ()).load(root)
    message = str(error.value)
    assert "\n" not in message and "broken.py cannot be imported: ModuleNotFoundError" in message


def test_quick_arguments_the_script_does_not_take_are_an_error(tmp_path: Path) -> None:
    root = checkout(tmp_path, slow="def run(entries=10):\n    return {}\n")
    with pytest.raises(BenchError, match="run\\(\\) takes no argument 'quick'"):
        Benchmark("slow", "", (), {"quick": True}).load(root)


def test_figures_follow_the_registry_and_keep_extra_ones() -> None:
    spec = Benchmark(
        "demo",
        "",
        (
            FigureSpec("ratio", "a ratio", "ratio", 1.5),
            FigureSpec("ms", "a time", "ms"),
            FigureSpec("absent", "an optional one", "ms"),
        ),
    )
    figures = figures_of(spec, {"extra": 3.0, "ms": 2.0, "ratio": 1.6})
    assert [(f.name, f.target, f.met) for f in figures] == [
        ("a ratio", 1.5, False),
        ("a time", None, None),
        ("demo: extra", None, None),
    ]
    with pytest.raises(BenchError, match="returned no figure 'ratio'"):
        figures_of(spec, {"ms": 2.0})


def test_write_docs_replaces_only_the_generated_section(tmp_path: Path) -> None:
    report = read_record(COMMITTED)
    page = tmp_path / "page.md"
    page.write_text(f"# Title\n\n{bench.DOCS_BEGIN}\nold\n{bench.DOCS_END}\n\nprose\n")
    write_docs(report, page)
    assert page.read_text() == f"# Title\n\n{render_docs(report)}\n\nprose\n"
    page.write_text("# no markers\n")
    with pytest.raises(BenchError, match="has no generated section"):
        write_docs(report, page)


def test_a_missed_ratio_is_explained_by_its_parts_under_its_table() -> None:
    """Issue 30: generate's preparation misses 1.05 over the Step's; the page says, from the
    run's own figures, what the extra time is spent on. Without those figures (an older
    record) no sentence is made up."""
    engine = next(b for b in bench.REGISTRY if b.name == "engine_scale")
    parts = {"extra": 17.0, "options": 1.5, "append": 4.0, "overflow": 3.5}
    figures = [
        {"name": spec.name, "value": parts[spec.key.split("_")[1]]}
        for spec in engine.figures
        if spec.key.startswith("generate_") and spec.key.endswith("_10000_us")
    ]
    assert engine.explain is not None
    sentence = engine.explain(engine.values(figures))
    assert sentence is not None
    assert "17.0 µs in all" in sentence and "8.0 µs the generator's own calls" in sentence
    assert engine.explain(engine.values(figures[1:])) is None
