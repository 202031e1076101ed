"""`sessiongen experiment warming`: the command users script against. It writes the policy
and interval tables and three PNGs, prints the policy table, and fails on bad input with one
line on stderr (exit 2 for bad arguments, 1 for bad files), never a traceback.

Inputs stay small (a 6-session generator trace, the format fixtures): the offline optimum's
time grows with the sessions. The real Mooncake run is skipped when the file is absent."""

from __future__ import annotations

import csv
import io
import shutil
import struct
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import pytest
from sessiongen._choices import TRACE_FORMATS as CLI_FORMATS
from sessiongen.cache import TTL
from sessiongen.cli import main
from sessiongen.warming.policies import DEFAULT_POLICY, Tracking
from sessiongen.warming.policies.saved import load_policy, policy_document
from sessiongen.warming.study.calibration import has_recorded_usage
from sessiongen.warming.study.experiment import experiment_steps, run_warming_experiment
from sessiongen.warming.study.report import REFERENCE_ROWS, default_intervals
from sessiongen.warming.traces.formats import FORMATS, TraceFormat, article, load_trace
from sessiongen.warming.traces.generator import generate_sessions

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parent / "fixtures"
MOONCAKE_FIRST_HALF = ROOT.parent / "shared/data/mooncake/conversation_trace_first_half.jsonl"
PNGS = ("cost_by_policy.png", "reuse_gap_cdf.png", "cost_vs_interval.png")
POLICY_COLUMNS = [
    "policy",
    "online",
    "cost",
    "ratio_to_optimum",
    "pings",
    "cache_read_tokens",
    "cache_write_tokens",
    "input_tokens",
    "real_cost",
    "real_cache_read_tokens",
    "real_cache_write_tokens",
    "part",
    "default",
]
FIXTURE_TRACES = {
    "mooncake": FIXTURES / "mooncake_small.jsonl",
    "events": FIXTURES / "events.jsonl",
    "claude-code": FIXTURES / "claude-code",  # a project directory of session logs
    "opencode": FIXTURES / "opencode",  # a directory of exports
}


@dataclass(frozen=True)
class Run:
    code: int
    out: str
    err: str
    dir: Path

    def rows(self, name: str = "policies.csv") -> list[dict[str, str]]:
        with (self.dir / name).open(newline="", encoding="utf-8") as handle:
            return list(csv.DictReader(handle))

    def costs(self) -> dict[str, float]:
        return {row["policy"]: float(row["cost"]) for row in self.rows()}


def _run(*args: str, out: Path) -> Run:
    """`sessiongen experiment warming ...` in this process, capturing both streams."""
    stdout, stderr = io.StringIO(), io.StringIO()
    with redirect_stdout(stdout), redirect_stderr(stderr):
        code = main(["experiment", "warming", *args, "--out", str(out)])
    return Run(code, stdout.getvalue(), stderr.getvalue(), out)


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Run:
    out = tmp_path_factory.mktemp("generated") / "not-yet-there" / "out"
    return _run("--generate", "6", "--seed", "1", out=out)


def test_a_generated_run_succeeds_quietly_and_prints_the_table(generated: Run) -> None:
    assert generated.code == 0, generated.err
    assert generated.err == ""  # the progress bar stays off when stderr is not a terminal
    printed = [line for line in generated.out.splitlines() if "│" in line]
    by_cost = [row["policy"] for row in generated.rows()]
    assert [line.split("│")[1].strip() for line in printed] == by_cost  # cheapest first
    for header in ("policy", "online", "cost (USD)", "ratio_to_optimum", "pings"):
        assert header in generated.out


def test_the_summary_names_the_best_online_policy_and_the_trace(generated: Run) -> None:
    (summary,) = [line for line in generated.out.splitlines() if line.startswith("best online")]
    online = [row for row in generated.rows() if row["online"] == "true"]
    best = min(online, key=lambda row: float(row["cost"]))
    ratio = float(best["ratio_to_optimum"])
    assert summary.startswith(f"best online policy: {best['policy']}, ratio {ratio:.3f} ")
    # By default the table is the part held back from fitting: it says so, and how much.
    held = [row for row in generated.rows() if row["policy"] == "optimum"]
    assert held
    sessions = int(generated.out.split(" sessions (learning")[0].rsplit(" ", 1)[1])
    assert "held-back part generated-6-seed1-held-back: " in summary
    assert summary.endswith(f"(learning policies fitted on the {6 - sessions} sessions before it)")
    (default,) = [line for line in generated.out.splitlines() if line.startswith("default policy")]
    row = next(r for r in generated.rows() if r["default"] == "true")
    ratio = float(row["ratio_to_optimum"])
    assert default.startswith(f"default policy ({row['policy']}): ratio {ratio:.3f}, ")


def test_the_table_is_on_the_held_back_part_and_marks_the_default(generated: Run) -> None:
    rows = generated.rows()
    assert {row["part"] for row in rows} == {"held_back"}
    assert [row["policy"] for row in rows if row["default"] == "true"] == [DEFAULT_POLICY]
    assert {row["default"] for row in rows} == {"true", "false"}


def test_fit_fraction_zero_prices_the_whole_trace(tmp_path: Path) -> None:
    run = _run("--generate", "6", "--seed", "1", "--fit-fraction", "0", out=tmp_path)
    assert run.code == 0, run.err
    assert {row["part"] for row in run.rows()} == {"whole"}
    (summary,) = [line for line in run.out.splitlines() if line.startswith("best online")]
    assert "trace generated-6-seed1: " in summary and summary.endswith(" 6 sessions")


def test_save_policy_writes_the_default_fitted_on_the_whole_trace(tmp_path: Path) -> None:
    saved = tmp_path / "policy.json"
    run = _run("--generate", "6", "--seed", "1", "--save-policy", str(saved), out=tmp_path)
    assert run.code == 0, run.err
    loaded = load_policy(saved)
    assert loaded.name == DEFAULT_POLICY
    expected = Tracking().fit(generate_sessions(6, seed=1))
    assert policy_document(loaded) == policy_document(expected)


def test_policies_csv_has_the_columns_and_the_reference_rows(generated: Run) -> None:
    with (generated.dir / "policies.csv").open(encoding="utf-8") as handle:
        assert handle.readline().strip().split(",") == POLICY_COLUMNS
    names = [row["policy"] for row in generated.rows()]
    assert len(names) == len(set(names)) and set(REFERENCE_ROWS) <= set(names)
    assert {row["online"] for row in generated.rows()} == {"true", "false"}


def test_every_online_policy_costs_at_least_the_optimum_and_it_the_bound(generated: Run) -> None:
    costs = generated.costs()
    optimum, bound = costs["optimum"], costs["lower_bound"]
    assert optimum >= bound > 0
    online = {r["policy"]: float(r["cost"]) for r in generated.rows() if r["online"] == "true"}
    assert len(online) >= 10
    assert {name: cost for name, cost in online.items() if cost < optimum - 1e-9} == {}


def test_the_ratio_column_is_cost_over_the_optimum_cost(generated: Run) -> None:
    optimum = generated.costs()["optimum"]
    for row in generated.rows():
        assert float(row["ratio_to_optimum"]) == pytest.approx(float(row["cost"]) / optimum)


def test_intervals_csv_sweeps_both_ttls_with_their_horizons(generated: Run) -> None:
    rows = generated.rows("intervals.csv")
    assert list(rows[0]) == ["ttl", "interval", "horizon", "cost", "ratio_to_optimum", "pings"]
    horizons: tuple[tuple[TTL, float], ...] = (("5m", 1800.0), ("1h", 7200.0))
    for ttl, horizon in horizons:
        sweep = [row for row in rows if row["ttl"] == ttl]
        assert [float(r["interval"]) for r in sweep] == list(default_intervals(ttl))
        assert {float(r["horizon"]) for r in sweep} == {horizon}
    optimum = generated.costs()["optimum"]
    for row in rows:  # the same optimum as the policy table's denominator
        assert float(row["ratio_to_optimum"]) == pytest.approx(float(row["cost"]) / optimum)


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path
    assert data[12:16] == b"IHDR" and len(data) > 10_000, path
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_the_three_plots_are_real_pngs(generated: Run) -> None:
    for name in PNGS:
        width, height = _png_size(generated.dir / name)
        assert width >= 600 and height >= 300, name
    assert str(generated.dir / "policies.csv") in generated.out  # says where it wrote


@pytest.mark.parametrize("format", FORMATS)
def test_every_trace_format_runs(format: TraceFormat, tmp_path: Path) -> None:
    run = _run("--trace", str(FIXTURE_TRACES[format]), "--format", format, out=tmp_path)
    assert run.code == 0, run.err
    names = [row["policy"] for row in run.rows()]
    assert set(REFERENCE_ROWS) <= set(names)
    calibration = ["calibration.csv", "calibration.png"]
    recorded = has_recorded_usage(load_trace(FIXTURE_TRACES[format], format))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["policies.csv", "intervals.csv", *PNGS, *(calibration if recorded else [])]
    )


def test_the_console_script_runs_through_uv(tmp_path: Path) -> None:
    """The installed entry point, as a user runs it (the venv's script when uv is absent)."""
    uv = shutil.which("uv")
    script = Path(sys.executable).with_name("sessiongen")
    command = [uv, "run", "sessiongen"] if uv else [str(script)]
    result = subprocess.run(
        [*command, "experiment", "warming", "--generate", "5", "--out", str(tmp_path / "tmp")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr and "best online policy: " in result.stdout
    for name in ("policies.csv", "intervals.csv", *PNGS):
        assert (tmp_path / "tmp" / name).stat().st_size > 0, name


def _warming(*args: str) -> int:
    """`main` for the error tests, whose output capsys reads."""
    return main(["experiment", "warming", *args])


def _one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "Traceback" not in captured.err
    assert captured.err.endswith("\n") and captured.err.count("\n") == 1, captured.err
    return captured.err.rstrip("\n")


def test_a_missing_file_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope.jsonl"
    code = _warming("--trace", str(missing), "--format", "mooncake", "--out", str(tmp_path / "out"))
    line = _one_line_error(capsys)
    assert code == 1 and line.startswith("sessiongen: error: ") and str(missing) in line
    assert not (tmp_path / "out").exists()  # nothing made for a trace that failed to load


def test_a_malformed_line_is_a_one_line_error_naming_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "trace.jsonl"
    good = (FIXTURES / "mooncake_small.jsonl").read_text().splitlines()[0]
    trace.write_text(good + '\n{"timestamp": 5, "input_length": \n')
    code = _warming("--trace", str(trace), "--format", "mooncake", "--out", str(tmp_path / "out"))
    line = _one_line_error(capsys)
    assert code == 1 and line.startswith(f"sessiongen: error: {trace}:2: "), line


def test_an_empty_trace_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "empty.jsonl"
    trace.write_text("")
    code = _warming("--trace", str(trace), "--format", "events", "--out", str(tmp_path / "out"))
    line = _one_line_error(capsys)
    assert code == 1 and str(trace) in line and "no requests" in line


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--trace", "t.jsonl", "--format", "csv"], "argument --format: invalid choice:"),
        (["--trace", "t.jsonl", "--generate", "5"], "not allowed with argument"),
        (["--generate", "0"], "argument --generate: must be a whole number of sessions"),
        (["--generate", "100001"], "from 1 to 100,000"),
        (["--generate", "five"], "argument --generate:"),
        (["--generate", "5", "--seed", "1.5"], "argument --seed: must be an integer"),
        (["--trace", "t.jsonl"], "argument --format: required with --trace"),
        (["--generate", "5", "--format", "events"], "argument --format: only with --trace"),
        ([], "one of the arguments --trace --generate is required"),
        *(
            (["--generate", "5", "--fit-fraction", value], "argument --fit-fraction: must be a")
            for value in ("1", "1.5", "-0.1", "half", "nan")
        ),
    ],
)
def test_bad_arguments_are_one_line_usage_errors(
    args: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit:
        main(["experiment", "warming", *args, "--out", str(tmp_path / "out")])
    line = _one_line_error(capsys)
    assert exit.value.code == 2
    assert line.startswith("sessiongen: error: ") and says in line, line


def test_an_out_path_that_is_a_file_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The file itself, or one on the way to it: the line names the file in the way (mkdir
    alone said "File exists")."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    for out in (blocker, blocker / "out"):
        code = main(["experiment", "warming", "--generate", "1", "--out", str(out)])
        line = _one_line_error(capsys)
        assert code == 1, line
        assert line == (
            f"sessiongen: error: {out} cannot be the output directory: {blocker} is a file "
            "(the tables and plots are written into a directory)"
        )


def test_without_matplotlib_the_command_says_what_to_install(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # makes `import matplotlib` fail
    code = main(["experiment", "warming", "--generate", "1", "--out", str(tmp_path / "out")])
    line = _one_line_error(capsys)
    assert code == 1
    assert (
        line == "sessiongen: error: install sessiongen[experiments] (matplotlib) to draw the plots"
    )


def test_experiment_help_lists_warming(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit:
        main(["experiment", "--help"])
    assert exit.value.code == 0 and "warming" in capsys.readouterr().out


def test_the_cli_format_list_is_the_loaders() -> None:
    """The command line takes its formats from `_choices` so `--help` need not import the
    loaders; they are the loaders' own."""
    assert CLI_FORMATS == FORMATS


def test_progress_is_called_once_per_step_of_the_bar(tmp_path: Path) -> None:
    """The CLI's bar total is `experiment_steps()`: each named step, in order, then the
    writing."""
    steps: list[str] = []
    trace = load_trace(FIXTURE_TRACES["events"], "events")
    result = run_warming_experiment(trace, tmp_path, progress=steps.append)
    assert len(steps) == experiment_steps()
    names = {row.policy for row in result.table.rows} - {"optimum", "lower_bound"}
    assert steps[:3] == ["fitting the learning policies", "optimum", "lower_bound"]
    assert set(steps[3 : 3 + len(names)]) == names
    assert steps[3 + len(names)] == "5m_every_15s" and steps[-1] == "writing tables and plots"
    assert all(path.stat().st_size > 0 for path in result.paths)


@pytest.mark.skipif(
    not MOONCAKE_FIRST_HALF.exists(),
    reason=f"the Mooncake trace is not at {MOONCAKE_FIRST_HALF} (kept outside the repository)",
)
def test_on_the_mooncake_first_half_the_default_beats_5m_on_the_held_back_part(
    tmp_path: Path,
) -> None:
    run = _run("--trace", str(MOONCAKE_FIRST_HALF), "--format", "mooncake", out=tmp_path)
    assert run.code == 0, run.err
    costs = run.costs()
    assert costs[DEFAULT_POLICY] < costs["5m"] and costs["learned"] < costs["5m"]
    fit, held = load_trace(MOONCAKE_FIRST_HALF, "mooncake").split(0.5)
    assert f"{len(held.requests):,} requests" in run.out
    assert f"fitted on the {len({r.session for r in fit.requests}):,} sessions" in run.out


def test_the_default_line_gives_its_cost_against_the_best_online_policys(generated: Run) -> None:
    (line,) = [line for line in generated.out.splitlines() if line.startswith("default policy")]
    rows = generated.rows()
    default = next(row for row in rows if row["default"] == "true")
    best = min((row for row in rows if row["online"] == "true"), key=lambda r: float(r["cost"]))
    share = float(default["cost"]) / float(best["cost"])
    assert line.endswith(f", {share:.3f} of the best online policy's cost"), line


def test_a_split_run_calibrates_on_the_whole_trace(tmp_path: Path) -> None:
    """The policy table is the held-back part, but calibration fits nothing, so it covers
    every recorded request of the trace."""
    trace = load_trace(FIXTURE_TRACES["claude-code"], "claude-code")
    fit, held = trace.split(0.5)
    assert fit.requests and held.requests
    result = run_warming_experiment(trace, tmp_path, fit_fraction=0.5)
    assert result.table.part == "held_back" and result.table.requests == len(held.requests)
    assert result.table.calibration is not None
    assert len(result.table.calibration.rows) == len(trace.requests)
    with (tmp_path / "calibration.csv").open(newline="", encoding="utf-8") as handle:
        assert len(list(csv.DictReader(handle))) == len(trace.requests)


def test_without_fitting_there_is_no_fitting_step(tmp_path: Path) -> None:
    steps: list[str] = []
    trace = load_trace(FIXTURE_TRACES["events"], "events")
    run_warming_experiment(trace, tmp_path, fit_fraction=0.0, progress=steps.append)
    assert "fitting the learning policies" not in steps
    assert len(steps) == experiment_steps(trace, fit_fraction=0.0) == experiment_steps() - 1


@pytest.mark.parametrize("fraction", [1.0, -0.5])
def test_a_bad_fit_fraction_fails_before_anything_is_written(
    fraction: float, tmp_path: Path
) -> None:
    trace = load_trace(FIXTURE_TRACES["events"], "events")
    out, saved = tmp_path / "out", tmp_path / "policy.json"
    with pytest.raises(ValueError, match="fit fraction must be at least 0 and below 1"):
        run_warming_experiment(trace, out, fit_fraction=fraction, save_policy=saved)
    assert not out.exists() and not saved.exists()


@pytest.mark.parametrize("actual", sorted(FIXTURE_TRACES))
def test_a_trace_read_as_the_wrong_format_names_the_format_it_looks_like(actual: str) -> None:
    """Every other format on each fixture fails with the format the file looks like, the
    way `sessiongen experiment warming --format` prints it."""
    from sessiongen.warming.traces.formats import guess_format

    path = FIXTURE_TRACES[actual]
    assert guess_format(path) == actual
    for wrong in FORMATS:
        if wrong == actual:
            continue
        try:
            load_trace(path, wrong)
        except (ValueError, OSError) as error:
            message = str(error)
        else:
            message = ""
        assert message.endswith(
            f"looks like {article(actual)} {actual} trace: --format {actual}"
        ), (wrong, message)


def test_the_knobs_are_options(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["experiment", "warming", "--help"])
    shown = capsys.readouterr().out
    for option in (
        "--ttl",
        "--ping-interval",
        "--horizon",
        "--model",
        "--input-price",
        "--cache-write-5m-price",
        "--cache-write-1h-price",
        "--cache-read-price",
        "--output-price",
    ):
        assert option in shown, option


def test_the_sweep_is_the_one_asked_for(tmp_path: Path) -> None:
    run = _run(
        "--generate", "3", "--fit-fraction", "0", "--ttl", "5m", "--ping-interval", "100",
        "--ping-interval", "5m=250", "--horizon", "900", out=tmp_path,
    )  # fmt: skip
    assert run.code == 0, run.err
    rows = [
        (r["ttl"], float(r["interval"]), float(r["horizon"])) for r in run.rows("intervals.csv")
    ]
    assert rows == [("5m", 100.0, 900.0), ("5m", 250.0, 900.0)]


def test_a_price_option_overrides_the_catalog_for_the_run_only(tmp_path: Path) -> None:
    """`--input-price` changes what `no_cache` (every token input) costs, at `--model`'s
    other prices, and leaves the catalog as it was."""
    from sessiongen.cache import price

    model = "claude-opus-4-6"
    before = price(model)
    plain = _run("--generate", "3", "--fit-fraction", "0", "--model", model, out=tmp_path / "a")
    dearer = _run(
        "--generate", "3", "--fit-fraction", "0", "--model", model, "--input-price",
        str(before.input * 3), out=tmp_path / "b",
    )  # fmt: skip
    assert plain.code == dearer.code == 0, dearer.err
    assert dearer.costs()["no_cache"] == pytest.approx(3 * plain.costs()["no_cache"])
    # the table says its prices are not the catalog's
    assert f"(overridden: input {before.input * 3:g} USD/MTok)" in " ".join(dearer.out.split())
    assert "overridden" not in plain.out
    [row] = [r for r in plain.rows() if r["policy"] == "no_cache"]
    assert plain.costs()["no_cache"] == pytest.approx(int(row["input_tokens"]) * before.input / 1e6)
    assert price(model) == before


def test_the_model_option_prices_every_request_at_it(tmp_path: Path) -> None:
    sonnet = _run("--generate", "3", "--fit-fraction", "0", out=tmp_path / "a")
    opus = _run("--generate", "3", "--fit-fraction", "0", "--model", "claude-opus-4-1",
                out=tmp_path / "b")  # fmt: skip
    assert opus.code == 0, opus.err
    assert "claude-opus-4-1 prices" in opus.out
    assert opus.costs()["no_cache"] == pytest.approx(5 * sonnet.costs()["no_cache"])


def test_the_table_says_what_each_yardstick_is(generated: Run) -> None:
    lines = generated.out.splitlines()
    assert any(line.startswith("optimum (ratio 1): the cheapest schedule") for line in lines)
    assert any(line.startswith("lower_bound (ratio 0.") for line in lines)


def test_the_calibration_figure_counts_the_whole_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a split, the policy figures are of the held-back part but the calibration is of
    the whole trace, and its title says so (it said the held-back part's 19 of 28)."""
    from sessiongen.warming.study import plots

    titles: list[str] = []
    draw = plots.calibration

    def recording(rows: object, *, title: str | None = None) -> object:
        titles.append(title or "")
        return draw(rows, title=title)  # type: ignore[arg-type]

    monkeypatch.setattr(plots, "calibration", recording)
    trace = load_trace(FIXTURES / "real" / "claude-code" / "v1.0-in-file-subagents", "claude-code")
    run_warming_experiment(trace, tmp_path, fit_fraction=0.5)
    [title] = titles
    assert f"{len(trace.requests)} requests with recorded usage of {len(trace.requests)}" in title
