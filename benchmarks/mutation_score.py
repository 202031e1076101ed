"""Mutation score of the session.generate modules, measured with cosmic-ray.

Run from the repository root; nothing to install first:

    uv run python benchmarks/mutation_score.py [--modules generate,parity] [--out mutation.json]

How it works, and why it never touches your tree:
  * cosmic-ray mutates source files in place, so the script `git clone`s the repository's HEAD
    (the committed state: uncommitted edits are not measured) into a temporary directory, once
    per worker (`--jobs`, default 2). Every mutation happens in those clones, which are deleted
    at the end (`--keep` keeps them). One environment, `uv sync --frozen --no-editable` from the
    lock file, serves all clones; the test command puts the clone's own reference_impl on
    PYTHONPATH, ahead of the installed copy (there only for its metadata: the server reads
    its version), and the script checks that `sessiongen` resolves to the clone.
  * cosmic-ray is not a project dependency: it runs as `uvx --from "cosmic-ray>=8,<9"
    cosmic-ray ...`, so pyproject.toml and uv.lock stay as they are. Each clone runs one
    `cosmic-ray http-worker` on a free loopback port, and `cosmic-ray exec` (http distributor)
    hands each mutant to whichever worker is free.
  * Each module runs against the tests that execute it: a coverage run with per-test contexts
    showed that the selections in SELECTIONS execute every line of these modules that the whole
    suite executes. `-x` stops a killed mutant at its first failure. The notebooks, tests/docs,
    the CLI tests (subprocesses) and one 2 s subprocess test are left out, and nbval is not
    loaded (`-o addopts=`).
  * A mutant gets `--timeout` seconds (default: max(30, 5 x the unmutated run of its
    selection)), enforced by cosmic-ray, which kills the test run's process group. A timeout
    counts as detected (as in cosmic-ray's own report) and has its own column.
  * Mutants inside type annotations that Python never evaluates (parameter and return
    annotations under `from __future__ import annotations`, local-variable annotations) are
    marked skipped before the run, the way cosmic-ray's own filters mark work items; they are
    counted but not run and not in the percentage. `--mutate-annotations` runs them too.

It prints one row per module and the total (mutants, skipped, killed, timeouts, survived,
incompetent, % killed = (killed + timeouts) / (killed + timeouts + survived)) and writes `--out`
(JSON): those figures, the tool's name and version, the commit, the test commands, and every
survivor (module, line, operator, the mutated line before and after).
"""

from __future__ import annotations

import argparse
import ast
import datetime as dt
import json
import math
import os
import random
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

COSMIC_RAY = "cosmic-ray>=8,<9"
PACKAGE = "reference_impl/sessiongen"
PYTEST = "-m pytest -x -q -p no:cacheprovider -o addopts= -p no:nbval"
# Left out of every selection, each for the reason given.
SLOW = (
    # Runs the engine in a subprocess for ~2 s and executes no line of these modules that the
    # rest of the selection does not.
    "tests/engine/test_durability.py"
    "::test_killed_drain_leaves_a_sound_database_with_the_step_marked",
    # Re-measures every evidence table of the contract (12-24 s, half the selection's time,
    # and it runs before tests/engine, so every mutant not killed by then paid for it). Its
    # claims are checked one by one by the other tests of test_evidence.py, and the suite runs it.
    "tests/generate/test_evidence.py::test_the_contracts_tables_are_the_fresh_measurement",
)
ENGINE_TESTS = (
    "tests/generate",
    "tests/engine",
    "tests/warming/test_keeper.py",  # the rest of tests/warming is trace parsing, no engine
    "tests/test_lab.py",
    "tests/test_readme.py",
)
# module -> the tests that execute it (coverage with per-test contexts); paths that a commit
# does not have yet are left out.
SELECTIONS: dict[str, tuple[str, ...]] = {
    "generate": ENGINE_TESTS,
    "request": ENGINE_TESTS,
    "transcript": ENGINE_TESTS,
    "context": ENGINE_TESTS,
    # The parity unit tests, the laws, and the diff on every provider's wire layout. Also calling
    # diff, left out: tests/generate's lab tests (they reach no line these three do not), the
    # client end-to-end test (subprocesses) and the provider policy matrix (5 s of setup).
    "parity": (
        "tests/generate/test_parity.py",
        "tests/generate/test_laws.py",
        "tests/generate/test_parity_providers.py",
    ),
    # The placement measurements call the policies directly, on sessions of every length.
    "breakpoints": (*ENGINE_TESTS, "tests/warming/test_placement.py"),  # was cache_policy
    "counting": (
        *ENGINE_TESTS,
        "tests/engine/test_overflow.py",
        "tests/engine/test_count_per_provider.py",
    ),
    # Packages (every module in them): the tests that import them, from the test imports.
    "cache": (
        "tests/emulator",
        "tests/providers/test_bedrock_caching.py",
        "tests/providers/test_openai_caching.py",
        "tests/providers/test_gemini_caching.py",
        "tests/llm/test_usage.py",
        "tests/engine/test_compaction.py",
        "tests/engine/test_owned_state.py",
        "tests/generate/test_result.py",
        "tests/warming/test_policies.py",
        "tests/warming/test_replay.py",
        "tests/warming/test_optimum.py",
        "tests/warming/test_placement.py",
    ),
    # Without the experiment on the Mooncake traces (a CLI subprocess run, 100 s).
    "warming": tuple(
        f"tests/warming/{name}"
        for name in (
            "test_calibration.py test_events.py test_events_parquet.py test_generator.py"
            " test_keeper.py test_mooncake.py test_optimum.py test_placement.py test_plots.py"
            " test_policies.py test_replay.py test_report.py test_shards.py test_traces.py"
            " test_tracking.py test_tracking_more.py test_transcripts.py"
            " test_transcripts_real.py test_transcripts_usage.py"
        ).split()
    ),
    # The package, every provider's folder (record, wire, counter, adapter, emulator routes,
    # probe driver): the tests that import `sessiongen.providers` or run a provider through
    # its SDK, counting and wire tests first (`-x` stops at the first failure). Left out: the
    # probe runs (tests/test_probe.py, probe processes against emulators on sockets, 140 s;
    # test_probe_bedrock_key.py runs a driver in process), the policy matrix (every policy
    # on every SDK), the alias check (CLI subprocesses) and the emulator's scale tests.
    "providers": (
        "tests/emulator/test_token_counting.py",
        "tests/emulator/test_billed_tokens.py",
        "tests/engine/test_count_per_provider.py",
        "tests/providers/test_forced_tool_counts.py",
        "tests/providers/test_openai.py",
        "tests/providers/test_gemini.py",
        "tests/providers/test_bedrock.py",
        "tests/providers/test_openai_caching.py",
        "tests/providers/test_gemini_caching.py",
        "tests/providers/test_bedrock_caching.py",
        "tests/providers/test_fifth_provider.py",
        "tests/llm",
        "tests/generate/test_parity_providers.py",
        "tests/generate/test_parity.py",
        "tests/generate/test_laws.py",
        "tests/engine/test_overflow.py",
        "tests/engine/test_transcript_truth.py",
        "tests/test_demo_providers.py",
        "tests/test_probe_bedrock_key.py",
        "tests/agents/test_findings.py",
        *(
            f"tests/emulator/{name}"
            for name in (
                "test_thinking_fidelity.py test_codex_requests.py test_gemini_json_reply.py"
                " test_tool_choice_none.py test_validation.py test_block_validation.py"
                " test_model_facts.py test_catalog_clients.py test_streaming.py test_caching.py"
                " test_invalidation.py test_implicit_cache.py test_cache_model.py"
                " test_boundary.py test_admin.py test_faults.py test_hold.py test_request_log.py"
                " test_script_match.py test_hostile_bodies.py test_token.py"
                " test_background_server.py"
            ).split()
        ),
    ),
    # The byte-based counter and the token facts: the tests that import `sessiongen.tokens`
    # and the counting tests of every provider.
    "tokens": (
        "tests/emulator/test_token_counting.py",
        "tests/emulator/test_billed_tokens.py",
        "tests/engine/test_count_per_provider.py",
        "tests/engine/test_overflow.py",
        "tests/providers/test_forced_tool_counts.py",
        "tests/providers/test_fifth_provider.py",
        "tests/llm/test_llm_layer.py",
        "tests/agents/test_findings.py",
        *(
            f"tests/emulator/{name}"
            for name in (
                "test_invalidation.py test_block_validation.py test_thinking_fidelity.py"
                " test_model_facts.py test_codex_requests.py test_catalog_clients.py"
            ).split()
        ),
    ),
}
# module -> a pytest `-k` expression its selection runs under (no spaces: the command is split
# on whitespace). The emulator's conformance tests run each case over an in-process ASGI
# transport and again over a loopback socket; the provider modules are the routes behind
# both, and the ASGI runs alone execute every line of them that the two do (coverage), in
# half the time.
KEYWORDS: dict[str, str] = {"providers": "not(loopback)", "tokens": "not(loopback)"}
SKIP_REASON = "type annotation that is never evaluated at run time"
SAMPLE_REASON = "not drawn for the sample (--sample)"
COUNTED = ("mutants", "skipped", "unsampled", "killed", "timeouts", "survived", "incompetent")


@dataclass
class Mutant:
    module: str
    path: str  # the file, relative to the package (a package module has many)
    line: int
    operator: str
    definition: str | None
    outcome: str  # killed | timeouts | survived | incompetent | skipped | unsampled
    before: list[str] = field(default_factory=list)
    after: list[str] = field(default_factory=list)


@dataclass
class ModuleScore:
    module: str
    source: str = ""
    test_command: str = ""
    baseline_s: float = 0.0
    timeout_s: float = 0.0
    wall_s: float = 0.0
    mutants: int = 0
    skipped: int = 0
    unsampled: int = 0
    killed: int = 0
    timeouts: int = 0
    survived: int = 0
    incompetent: int = 0

    @property
    def percent(self) -> float:
        detected = self.killed + self.timeouts
        judged = detected + self.survived
        return round(100.0 * detected / judged, 1) if judged else 100.0

    @property
    def interval(self) -> tuple[float, float] | None:
        """95% Wilson interval of the module's score when only a sample of it ran."""
        judged = self.killed + self.timeouts + self.survived
        if not self.unsampled or not judged:
            return None
        z, p = 1.96, (self.killed + self.timeouts) / judged
        centre = (p + z * z / (2 * judged)) / (1 + z * z / judged)
        half = z * math.sqrt(p * (1 - p) / judged + z * z / (4 * judged * judged))
        half /= 1 + z * z / judged
        return round(100 * (centre - half), 1), round(100 * (centre + half), 1)


# Process groups this script started and must end: the http workers and a running `exec`.
CHILDREN: list[subprocess.Popen[bytes]] = []


def _env(**extra: str) -> dict[str, str]:
    """The environment for every child: not the developer's venv; no bytecode written."""
    drop = {"VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT", "PYTHONPATH"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env | extra


def _run(
    cmd: list[str], cwd: Path, *, check: bool = True, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cmd, cwd=cwd, env=env or _env(), text=True, capture_output=True, check=check
    )


def _start(cmd: list[str], cwd: Path, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        proc = subprocess.Popen(
            cmd, cwd=cwd, env=_env(), stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    CHILDREN.append(proc)
    return proc


def cr_command(*args: str) -> list[str]:
    """`cosmic-ray ARGS`, in uv's tool environment (not the project's)."""
    return ["uvx", "--quiet", "--from", COSMIC_RAY, "cosmic-ray", *args]


def test_command(module: str, clone: Path, python: Path) -> str:
    """The module's pytest run, the same in every clone (it runs in the clone's directory).

    The shared environment does not install the project: PYTHONPATH makes `sessiongen` the
    clone's own copy, the one cosmic-ray mutates.
    """
    paths = [p for p in SELECTIONS[module] if (clone / p).exists()]
    deselect = "".join(f" --deselect {t}" for t in SLOW if (clone / t.split("::")[0]).exists())
    keywords = f" -k {KEYWORDS[module]}" if module in KEYWORDS else ""
    return f"env PYTHONPATH=reference_impl {python} {PYTEST} {' '.join(paths)}{deselect}{keywords}"


def make_clone(repo: Path, commit: str, dest: Path) -> None:
    _run(["git", "clone", "--quiet", "--no-hardlinks", str(repo), str(dest)], cwd=dest.parent)
    _run(["git", "checkout", "--quiet", "--detach", commit], cwd=dest)


def make_environment(clone: Path, venv: Path) -> Path:
    """One environment for all clones, from the clone's lock file. The project is installed
    (not editable) for its metadata only: PYTHONPATH puts each clone's own copy first."""
    env = _env(UV_PROJECT_ENVIRONMENT=str(venv))
    _run(["uv", "sync", "--frozen", "--quiet", "--no-editable"], clone, env=env)
    return venv / "bin" / "python"


def check_import(clone: Path, python: Path) -> None:
    """`sessiongen` must resolve to the clone, or the mutants would not be what is tested."""
    code = "import sessiongen; print(sessiongen.__file__)"
    where = _run(["env", "PYTHONPATH=reference_impl", str(python), "-c", code], clone)
    if not Path(where.stdout.strip()).resolve().is_relative_to(clone.resolve()):
        raise SystemExit(f"sessiongen in {clone} resolves to {where.stdout.strip()}, not the clone")


def warm_up(clone: Path, python: Path) -> None:
    """Run the widest selection once with bytecode writing on, so that the dependencies'
    bytecode is cached in the environment (the mutant runs write none, and importing the
    provider SDK from source costs a second a run); then drop the clone's own bytecode, so
    that no cached copy of a module under test can ever stand in for its mutated source."""
    env = _env()
    del env["PYTHONDONTWRITEBYTECODE"]
    _run(test_command("generate", clone, python).split(), clone, check=False, env=env)
    for cache in [p for p in clone.rglob("__pycache__") if p.is_dir()]:
        shutil.rmtree(cache)


def module_file(clone: Path, module: str) -> str:
    """The module's path in the clone: `name.py`, `_name.py` once it became internal,
    `session/name.py` once the engine's parts moved into their package, or the package
    directory `name/` (cosmic-ray then mutates every module in it)."""
    if (clone / PACKAGE / module / "__init__.py").is_file():
        return f"{PACKAGE}/{module}"
    for name in (f"{module}.py", f"_{module}.py", f"session/{module}.py"):
        if (clone / PACKAGE / name).is_file():
            return f"{PACKAGE}/{name}"
    raise SystemExit(f"no {module}.py, _{module}.py, session/{module}.py or {module}/ in {PACKAGE}")


def baseline(command: str, clone: Path, module: str) -> float:
    """Seconds the unmutated selection takes; it must pass, or no score means anything."""
    start = time.monotonic()
    proc = _run(command.split(), clone, check=False)
    took = time.monotonic() - start
    if proc.returncode != 0:
        sys.stdout.write(proc.stdout[-4000:] + proc.stderr[-4000:])
        raise SystemExit(f"baseline for {module} fails (exit {proc.returncode}); fix that first")
    return took


def write_config(path: Path, source: str, command: str, timeout_s: float, ports: list[int]) -> None:
    urls = ", ".join(f'"http://127.0.0.1:{p}"' for p in ports)
    path.write_text(
        "[cosmic-ray]\n"
        f'module-path = "{source}"\n'
        f"timeout = {timeout_s}\n"
        "excluded-modules = []\n"
        f'test-command = "{command}"\n\n'
        "[cosmic-ray.distributor]\n"
        'name = "http"\n\n'
        "[cosmic-ray.distributor.http]\n"
        f"worker-urls = [{urls}]\n"
    )


Span = tuple[tuple[int, int], tuple[int, int]]


def annotation_spans(source: str) -> list[Span]:
    """(line, column) spans of the annotations Python never evaluates in this module.

    Local-variable annotations never are (PEP 526); parameter and return annotations are not
    under `from __future__ import annotations` (PEP 563) unless something asks for them, which
    nothing in these modules does. Class-level annotations are left alone: pydantic evaluates
    them. Columns are in characters, as cosmic-ray (parso) counts them.
    """
    tree = ast.parse(source)
    lines = source.splitlines()
    postponed = any(
        isinstance(n, ast.ImportFrom)
        and n.module == "__future__"
        and any(a.name == "annotations" for a in n.names)
        for n in tree.body
    )

    def char_col(line: int, byte_col: int) -> int:
        return len(lines[line - 1].encode()[:byte_col].decode(errors="replace"))

    def span(node: ast.expr) -> Span:
        end_line = node.end_lineno or node.lineno
        end_col = node.end_col_offset or 0
        return (
            (node.lineno, char_col(node.lineno, node.col_offset)),
            (end_line, char_col(end_line, end_col)),
        )

    def in_function(body: list[ast.stmt]) -> Iterator[ast.expr]:
        """Local-variable annotations, not descending into nested classes."""
        for stmt in body:
            if isinstance(stmt, ast.AnnAssign):
                yield stmt.annotation
            if isinstance(stmt, ast.ClassDef):
                continue
            for child in ast.iter_child_nodes(stmt):
                if isinstance(child, ast.stmt):
                    yield from in_function([child])

    spans: list[Span] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if postponed:
            a = node.args
            params = [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]
            spans += [span(p.annotation) for p in params if p is not None and p.annotation]
            if node.returns is not None:
                spans.append(span(node.returns))
        spans += [span(annotation) for annotation in in_function(node.body)]
    return spans


def _mark_skipped(con: sqlite3.Connection, jobs: list[str], reason: str) -> None:
    con.executemany(
        "insert into work_results (worker_outcome, output, test_outcome, diff, job_id)"
        " values ('SKIPPED', ?, NULL, NULL, ?)",
        [(reason, job) for job in jobs],
    )


def skip_annotations(db: Path, clone: Path) -> int:
    """Mark the mutants inside never-evaluated annotations as skipped; returns how many."""
    spans: dict[str, list[Span]] = {}
    with sqlite3.connect(db) as con:
        specs = con.execute(
            "select job_id, module_path, start_pos_row, start_pos_col from mutation_specs"
            " where job_id not in (select job_id from work_results)"
        ).fetchall()
        skipped = []
        for job, path, row, col in specs:
            if path not in spans:
                spans[path] = annotation_spans((clone / path).read_text())
            if any(start <= (row, col) < end for start, end in spans[path]):
                skipped.append(job)
        _mark_skipped(con, skipped, SKIP_REASON)
    return len(skipped)


def draw_sample(db: Path, fraction: float, seed: int) -> int:
    """Leave a seeded random `fraction` of the runnable mutants to run and mark the rest as
    not sampled; returns how many were left out. The draw is over the mutants in source order
    (cosmic-ray's job ids are random), so one commit, fraction and seed draw the same ones."""
    with sqlite3.connect(db) as con:
        runnable = [
            job
            for (job,) in con.execute(
                "select job_id from mutation_specs"
                " where job_id not in (select job_id from work_results)"
                " order by module_path, start_pos_row, start_pos_col, operator_name, occurrence"
            )
        ]
        keep = set(random.Random(seed).sample(runnable, round(fraction * len(runnable))))
        left_out = [job for job in runnable if job not in keep]
        _mark_skipped(con, left_out, SAMPLE_REASON)
    return len(left_out)


def counts(db: Path) -> tuple[int, int]:
    """(results, work items) so far, read without disturbing cosmic-ray's writes."""
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as con:
            done = con.execute("select count(*) from work_results").fetchone()[0]
            total = con.execute("select count(*) from work_items").fetchone()[0]
            return int(done), int(total)
    except sqlite3.Error:
        return 0, 0


def diff_lines(diff: str) -> tuple[list[str], list[str]]:
    before: list[str] = []
    after: list[str] = []
    for line in diff.splitlines():
        if line.startswith(("---", "+++", "@@")):
            continue
        if line.startswith("-"):
            before.append(line[1:].strip())
        elif line.startswith("+"):
            after.append(line[1:].strip())
    return before, after


def classify(worker: str | None, test: str | None, output: str | None) -> str:
    """One outcome per mutant. cosmic-ray stores enum names (NORMAL, NO_TEST, KILLED, ...)."""
    worker = (worker or "").lower()
    test = (test or "").lower()
    if worker in ("skipped", "no_test"):
        return "unsampled" if output == SAMPLE_REASON else "skipped"
    if worker != "normal" or test not in ("killed", "survived"):
        return "incompetent"
    if test == "killed":
        return "timeouts" if (output or "").strip() == "timeout" else "killed"
    return "survived"


def read_results(db: Path, module: str) -> list[Mutant]:
    query = (
        "select s.module_path, s.start_pos_row, s.operator_name, s.definition_name,"
        " r.worker_outcome, r.test_outcome, r.output, r.diff from mutation_specs s"
        " left join work_results r on r.job_id = s.job_id"
        " order by s.module_path, s.start_pos_row, s.start_pos_col, s.operator_name"
    )
    mutants: list[Mutant] = []
    with sqlite3.connect(db) as con:
        for path, row, operator, definition, worker, test, output, diff in con.execute(query):
            outcome = classify(worker, test, output)
            before, after = diff_lines(diff or "")
            where = str(Path(path).relative_to(PACKAGE)) if path.startswith(PACKAGE) else path
            mutants.append(
                Mutant(module, where, int(row), operator, definition, outcome, before, after)
            )
    return mutants


EXEC_ATTEMPTS = 3


def run_exec(module: str, config: Path, db: Path, clone: Path, log: Path, start: float) -> bool:
    """One `cosmic-ray exec` of the session, printing progress; True if it exited cleanly."""
    proc = _start(cr_command("exec", str(config), str(db)), clone, log)
    first, _ = counts(db)
    begin = shown = time.monotonic()
    last = first
    while proc.poll() is None:
        time.sleep(2)
        done, total = counts(db)
        now = time.monotonic()
        if done != last and (done % 10 == 0 or done == total or now - shown > 30):
            eta = (now - begin) / (done - first) * (total - done)
            print(
                f"[{module}] {done}/{total} done, {now - start:.0f}s elapsed, ~{eta:.0f}s left",
                flush=True,
            )
            last, shown = done, now
    CHILDREN.remove(proc)
    return proc.returncode == 0


def score_module(
    module: str,
    clones: list[Path],
    python: Path,
    ports: list[int],
    work: Path,
    *,
    timeout: float | None,
    mutate_annotations: bool,
    sample: float | None,
    seed: int,
) -> tuple[ModuleScore, list[Mutant]]:
    command = test_command(module, clones[0], python)
    took = baseline(command, clones[0], module)
    limit = round(timeout if timeout is not None else max(30.0, 5.0 * took), 1)
    source = module_file(clones[0], module)
    readable = command.replace(str(python), "python")
    score = ModuleScore(module, source, readable, round(took, 1), limit)
    config, db = work / f"{module}.toml", work / f"{module}.sqlite"
    write_config(config, source, command, limit, ports)
    _run(cr_command("init", str(config), str(db)), clones[0])
    skipped = 0 if mutate_annotations else skip_annotations(db, clones[0])
    unsampled = draw_sample(db, sample, seed) if sample is not None else 0
    print(
        f"[{module}] {source}: {counts(db)[1]} mutants, {skipped} in annotations skipped,"
        f" {unsampled} left out of the sample; baseline {took:.1f}s, timeout {limit:.0f}s",
        flush=True,
    )
    start = time.monotonic()
    for attempt in range(1, EXEC_ATTEMPTS + 1):
        log = work / f"{module}.exec.{attempt}.log"
        if run_exec(module, config, db, clones[0], log, start):
            break
        tail = log.read_text(errors="replace").strip().splitlines()[-15:]
        print(f"[{module}] cosmic-ray exec failed (attempt {attempt}):", *tail, sep="\n  ")
        # A session resumes: the next exec runs only the mutants that have no result yet.
        if attempt == EXEC_ATTEMPTS:
            raise SystemExit(f"cosmic-ray exec for {module} failed {attempt} times")
    score.wall_s = round(time.monotonic() - start, 1)
    for clone in clones:  # every mutation must have been put back
        dirty = _run(["git", "status", "--porcelain", "--untracked-files=no"], clone).stdout
        if dirty.strip():
            raise SystemExit(f"clone {clone} was left modified:\n{dirty}")
    mutants = read_results(db, module)
    score.mutants = len(mutants)
    for m in mutants:
        setattr(score, m.outcome, getattr(score, m.outcome) + 1)
    return score, mutants


def total_of(scores: list[ModuleScore]) -> ModuleScore:
    total = ModuleScore("TOTAL")
    for s in scores:
        for name in COUNTED:
            setattr(total, name, getattr(total, name) + getattr(s, name))
    return total


def table(scores: list[ModuleScore]) -> str:
    names = ("mutants", "skipped", "unsampled", "killed", "timeout", "survived", "incompetent")
    head = f"{'module':<14}" + "".join(f"{n:>12}" for n in names) + f"{'% killed':>12}"
    rows = [head, "-" * len(head)]
    for s in [*scores, total_of(scores)]:
        if s.module == "TOTAL":
            rows.append("-" * len(head))
        values = [getattr(s, name) for name in COUNTED]
        interval = f" (95%: {s.interval[0]}-{s.interval[1]})" if s.interval else ""
        rows.append(
            f"{s.module:<14}" + "".join(f"{v:>12}" for v in values) + f"{s.percent:>11}%{interval}"
        )
    return "\n".join(rows)


def tool_version(clone: Path) -> str:
    return _run(cr_command("--version"), clone).stdout.strip().rsplit(" ", 1)[-1]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, proc: subprocess.Popen[bytes], deadline_s: float = 120.0) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise SystemExit(f"cosmic-ray http-worker on port {port} exited ({proc.returncode})")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"cosmic-ray http-worker on port {port} did not start")


def stop_children(work: Path) -> None:
    """End the process groups started here, then any test run they left in the clones.

    cosmic-ray starts each test run in a session of its own, so a run in flight when its
    worker dies is found by its working directory, which is inside `work`.
    """
    for proc in CHILDREN:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 10
    for proc in CHILDREN:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
    CHILDREN.clear()
    root = work.resolve()
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if Path(os.readlink(entry / "cwd")).is_relative_to(root):
                os.kill(int(entry.name), signal.SIGKILL)
        except (OSError, ValueError):
            continue


def _terminate(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


DOCS_BEGIN = (
    "<!-- mutation:begin (generated by `uv run python benchmarks/mutation_score.py --docs`:"
    " do not edit) -->"
)
DOCS_END = "<!-- mutation:end -->"


def render_docs(reports: list[dict[str, Any]]) -> str:
    """The docs page's generated section for committed run records (each the JSON one run
    wrote): per run, its command, commit and date, then a row per module and the total."""
    lines = [DOCS_BEGIN, ""]
    for report in reports:
        sample = report.get("sample")
        drawn = (
            f", a seeded {sample['fraction']:.0%} sample (seed {sample['seed']})" if sample else ""
        )
        lines += [
            f"`{report['command']}`: cosmic-ray {report['tool']['version']}, commit"
            f" `{report['commit'][:7]}`, {report['date'][:10]}, {report['wall_s'] / 60:.0f} min"
            f" on {report['jobs']} workers{drawn}.",
            "",
            "| module | file | mutants | skipped (annotations) | not sampled | killed | timeouts"
            " | survived | % killed |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        rows = [*report["modules"], {"module": "**total**", "source": "", **report["total"]}]
        for row in rows:
            interval = row.get("interval_95")
            killed = f"{row['percent_killed']}" + (
                f" (95%: {interval[0]}-{interval[1]})" if interval else ""
            )
            source = f"`{row['source'].removeprefix(PACKAGE + '/')}`" if row["source"] else ""
            lines.append(
                f"| {row['module']} | {source} | {row['mutants']} | {row['skipped']}"
                f" | {row.get('unsampled', 0)} | {row['killed']} | {row['timeouts']}"
                f" | {row['survived']} | {killed} |"
            )
        lines.append("")
    lines.append(DOCS_END)
    return "\n".join(lines)


def write_docs(page: Path, records: list[Path]) -> None:
    """Replace the page's generated section with the one the records render."""
    text = page.read_text(encoding="utf-8")
    start, end = text.find(DOCS_BEGIN), text.find(DOCS_END)
    if start < 0 or end < start:
        raise SystemExit(f"{page} has no section between {DOCS_BEGIN} and {DOCS_END}")
    reports = [json.loads(path.read_text(encoding="utf-8")) for path in records]
    section = render_docs(reports)
    page.write_text(text[:start] + section + text[end + len(DOCS_END) :], encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--modules", default=",".join(SELECTIONS), help="comma-separated subset")
    parser.add_argument("--out", type=Path, default=Path("mutation.json"), help="JSON results")
    parser.add_argument("--jobs", type=int, default=2, help="parallel workers (one clone each)")
    parser.add_argument("--timeout", type=float, default=None, help="seconds per mutant")
    parser.add_argument("--mutate-annotations", action="store_true", help="run those mutants too")
    parser.add_argument(
        "--sample", type=float, default=None, help="run only this fraction (0-1] of the mutants"
    )
    parser.add_argument("--seed", type=int, default=0, help="the sample's random seed")
    parser.add_argument("--repo", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--keep", action="store_true", help="keep the temporary clones")
    parser.add_argument(
        "--docs", type=Path, help="render the page's generated section from --from, run nothing"
    )
    parser.add_argument("--from", dest="records", type=Path, nargs="+", help="run records (JSON)")
    args = parser.parse_args(argv)
    if args.docs is not None:
        if not args.records:
            parser.error("--docs needs --from RECORD.json ...")
        write_docs(args.docs, args.records)
        return 0
    if args.sample is not None and not 0 < args.sample <= 1:
        parser.error(f"--sample must be a fraction in (0, 1], not {args.sample}")
    modules = [m.strip() for m in args.modules.split(",") if m.strip()]
    unknown = sorted(set(modules) - set(SELECTIONS))
    if unknown or not modules:
        parser.error(f"unknown module(s) {unknown}; choose from {sorted(SELECTIONS)}")
    signal.signal(signal.SIGTERM, _terminate)  # so that `finally` ends the workers

    repo = Path(_run(["git", "rev-parse", "--show-toplevel"], args.repo).stdout.strip())
    commit = _run(["git", "rev-parse", "HEAD"], repo).stdout.strip()
    if _run(["git", "status", "--porcelain", "--untracked-files=no"], repo).stdout.strip():
        print("note: the working tree has uncommitted changes; HEAD is what gets measured")
    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="mutation-score-"))
    clones = [work / f"clone{i}" for i in range(max(1, args.jobs))]
    print(f"cloning {repo} @ {commit[:12]} into {work} ({len(clones)} clones)", flush=True)
    scores: list[ModuleScore] = []
    mutants: list[Mutant] = []
    try:
        threads = [threading.Thread(target=make_clone, args=(repo, commit, c)) for c in clones]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if not all((c / PACKAGE).is_dir() for c in clones):
            raise SystemExit("could not clone the repository")
        python = make_environment(clones[0], work / "venv")
        for clone in clones:
            check_import(clone, python)
        warm_up(clones[0], python)
        version = tool_version(clones[0])
        ports: list[int] = []
        for clone in clones:
            port = free_port()
            log = work / f"worker-{port}.log"
            proc = _start(cr_command("http-worker", "--port", str(port)), clone, log)
            wait_for_port(port, proc)
            ports.append(port)
        print(f"cosmic-ray {version}: {len(ports)} workers on ports {ports}", flush=True)
        for module in modules:
            score, found = score_module(
                module,
                clones,
                python,
                ports,
                work,
                timeout=args.timeout,
                mutate_annotations=args.mutate_annotations,
                sample=args.sample,
                seed=args.seed,
            )
            scores.append(score)
            mutants.extend(found)
            so_far = time.monotonic() - started
            write_report(
                args.out,
                scores,
                mutants,
                version,
                commit,
                len(clones),
                so_far,
                args.sample,
                args.seed,
            )
    finally:
        stop_children(work)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    wall = time.monotonic() - started
    print()
    print(table(scores))
    survivors = write_report(
        args.out, scores, mutants, version, commit, len(clones), wall, args.sample, args.seed
    )
    print(f"\n{survivors} survivors; wall time {wall / 60:.1f} min; details in {args.out}")
    return 0


def write_report(
    out: Path,
    scores: list[ModuleScore],
    mutants: list[Mutant],
    version: str,
    commit: str,
    jobs: int,
    wall: float,
    sample: float | None = None,
    seed: int = 0,
) -> int:
    """Write the JSON report (after every module, so an interrupted run keeps the modules it
    finished); returns the number of survivors."""
    total = total_of(scores)
    survivors = [m for m in mutants if m.outcome == "survived"]
    report: dict[str, Any] = {
        "tool": {"name": "cosmic-ray", "version": version},
        "commit": commit,
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": " ".join(["uv run python benchmarks/mutation_score.py", *sys.argv[1:]]),
        "jobs": jobs,
        "wall_s": round(wall, 1),
        "skipped_reason": SKIP_REASON,
        "sample": {"fraction": sample, "seed": seed, "reason": SAMPLE_REASON} if sample else None,
        "modules": [
            {**asdict(s), "percent_killed": s.percent, "interval_95": s.interval} for s in scores
        ],
        "total": {name: getattr(total, name) for name in COUNTED}
        | {"percent_killed": total.percent},
        "survivors": [asdict(m) for m in survivors],
        "timeouts": [asdict(m) for m in mutants if m.outcome == "timeouts"],
        "incompetent": [asdict(m) for m in mutants if m.outcome == "incompetent"],
    }
    out.write_text(json.dumps(report, indent=2) + "\n")
    return len(survivors)


if __name__ == "__main__":
    sys.exit(main())
