"""`sessiongen workbench`: it builds the site, and a failing notebook stops it with exit 1
and one line naming the notebook and the cell, without touching the stored notebook."""

from __future__ import annotations

import contextlib
import json
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nbformat
import pytest
from sessiongen.cli import main
from sessiongen_tooling import workbench

from tests.docs.test_site import DECISIONS

ROOT = Path(__file__).resolve().parent.parent
# The command line as typed, in this interpreter.
SESSIONGEN = [sys.executable, "-c", "import sys; from sessiongen.cli import main; sys.exit(main())"]


def _notebook(path: Path, *sources: str) -> Path:
    # nbformat's functions are unannotated
    notebook = nbformat.v4.new_notebook()  # type: ignore[no-untyped-call]
    markdown = nbformat.v4.new_markdown_cell("# A notebook that fails")  # type: ignore[no-untyped-call]
    code = [nbformat.v4.new_code_cell(source) for source in sources]  # type: ignore[no-untyped-call]
    notebook.cells = [markdown, *code]
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    nbformat.write(notebook, path)  # type: ignore[no-untyped-call]
    return path


def test_builds_the_site_from_stored_outputs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The fast path: no notebook executed, no evidence measured, the whole site built (into
    a temporary directory, so the test writes nothing in the repository)."""
    monkeypatch.chdir(ROOT / "docs")  # found from anywhere inside the clone
    site = tmp_path / "site"
    status = main(["workbench", "--skip-notebooks", "--skip-evidence", "--site-dir", str(site)])
    out = capsys.readouterr().out
    assert status == 0, out
    assert f"open {(site / 'index.html').as_uri()}" in out
    for page in ("index", "contract", "traceability", "plan", "api", "questions"):
        assert (site / f"{page}.html").is_file(), page
    for name in DECISIONS:
        assert (site / "decisions" / f"{name}.html").is_file(), name
    assert (site / "notebooks" / "05-return-shape.html").is_file()


def test_a_failing_cell_exits_1_naming_notebook_and_cell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Cells are counted from 1 with markdown included, as a reader counts them; the failed
    notebook is left as it was, and the site is not built."""
    monkeypatch.chdir(ROOT)
    bad = _notebook(tmp_path / "bad.ipynb", "x = 1", "raise ValueError('the evidence moved')")
    before = bad.read_bytes()
    site = tmp_path / "site"
    status = main(["workbench", str(bad), "--skip-evidence", "--site-dir", str(site)])
    err = capsys.readouterr().err
    assert status == 1
    assert f"{bad}, cell 3: ValueError: the evidence moved" in err
    assert bad.read_bytes() == before
    assert not site.exists()


def test_a_failing_cell_is_one_line_on_stderr_to_the_end(tmp_path: Path) -> None:
    """The command as a process: its stderr is the progress line and the one error line,
    nothing printed after it at exit (a failed job's exception left unread was once printed by asyncio there)."""
    import subprocess
    import sys

    bad = _notebook(tmp_path / "bad.ipynb", "raise ValueError('the evidence moved')")
    command = [sys.executable, "-m", "sessiongen.cli", "workbench", str(bad), "--skip-evidence"]
    command += ["--site-dir", str(tmp_path / "site")]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 1
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if not line.startswith("running ")]  # the progress line
    assert len(errors) == 1 and errors[0].endswith("ValueError: the evidence moved"), lines


def test_a_passing_notebook_is_stored_as_the_repository_keeps_them(tmp_path: Path) -> None:
    """Outputs stored in place, nbformat's JSON with indent 1 and a final newline, no
    per-cell execution timing."""
    good = _notebook(tmp_path / "good.ipynb", "print('hello')")
    run = workbench.run_notebook(good, root=ROOT)
    assert run.written and run.cells == 1
    text = good.read_text(encoding="utf-8")
    assert text.endswith("}\n") and text.startswith('{\n "cells": [')
    cell = json.loads(text)["cells"][1]
    assert cell["outputs"][0]["text"] == ["hello\n"]
    assert "execution" not in cell["metadata"]


def test_a_print_flushed_in_pieces_is_stored_as_one_output(tmp_path: Path) -> None:
    """The kernel sends a line flushed in two pieces as two stream messages, and how a
    print is cut depends on timing: stored, consecutive outputs of one stream are one, so a
    fresh run leaves the notebook as committed (notebook 02 came back split otherwise)."""
    source = (
        "import sys, time\n"
        "print('first half', end='')\nsys.stdout.flush()\ntime.sleep(0.2)\n"
        "print(' second half')\nsys.stdout.flush()\ntime.sleep(0.2)\nprint('after')"
    )
    pieces = _notebook(tmp_path / "pieces.ipynb", source)
    workbench.run_notebook(pieces, root=ROOT)
    outputs = json.loads(pieces.read_text(encoding="utf-8"))["cells"][1]["outputs"]
    assert [(o["name"], "".join(o["text"])) for o in outputs] == [
        ("stdout", "first half second half\nafter\n")
    ]


def test_skip_notebooks_takes_no_notebook_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit:
        main(["workbench", "--skip-notebooks", "notebooks/05-return-shape.ipynb"])
    assert exit.value.code == 2
    assert "--skip-notebooks" in capsys.readouterr().err


def test_serve_watches_what_the_site_is_made_of() -> None:
    assert {"docs", "contract", "plans", "notebooks", "docs_hooks", "mkdocs.yml"} <= set(
        workbench.WATCH
    )
    assert workbench.LOOPBACK == "127.0.0.1"


# --- one line for every file that is not a runnable notebook ---------------------------------


def _conflicted(path: Path) -> Path:
    lines = (ROOT / "notebooks" / "05-return-shape.ipynb").read_text().splitlines()
    merged = [*lines[:10], "<<<<<<< HEAD", *lines[10:12], "=======", *lines[12:14]]
    path.write_text("\n".join([*merged, ">>>>>>> theirs", *lines[14:]]) + "\n")
    return path


BAD_FILES: dict[str, tuple[Callable[[Path], Path], str]] = {
    "not a notebook": (lambda tmp: ROOT / "README.md", "README.md: not a notebook"),
    "missing": (lambda tmp: tmp / "gone.ipynb", "gone.ipynb: no such notebook"),
    "bad JSON": (
        lambda tmp: _write(tmp / "corrupt.ipynb", '{"cells": ['),
        "corrupt.ipynb: not a notebook: invalid JSON at line 1, column 12",
    ),
    "merge conflict": (
        lambda tmp: _conflicted(tmp / "conflict.ipynb"),
        "conflict.ipynb: unresolved merge conflict (line 11: <<<<<<< HEAD)",
    ),
    "not nbformat": (
        lambda tmp: _write(tmp / "odd.ipynb", '{"cells": [{"cell_type": "code"}]}'),
        "odd.ipynb: not a notebook: JSON without an nbformat version",
    ),
    "invalid cell": (
        lambda tmp: _write(
            tmp / "cell.ipynb",
            '{"cells": [{"cell_type": "code"}], "metadata": {}, "nbformat": 4, '
            '"nbformat_minor": 5}',
        ),
        "cell.ipynb: not a valid notebook: 'metadata' is a required property",
    ),
}


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.mark.parametrize("case", BAD_FILES)
def test_a_file_that_is_not_a_runnable_notebook_is_one_line(
    case: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Named with its problem before anything runs: exit 1, one line on stderr, no
    traceback, nothing built."""
    make, expected = BAD_FILES[case]
    monkeypatch.chdir(ROOT)
    bad = make(tmp_path)
    site = tmp_path / "site"
    status = main(["workbench", str(bad), "--check", "--site-dir", str(site)])
    captured = capsys.readouterr()
    assert status == 1
    assert captured.err.count("\n") == 1, captured.err
    assert captured.err.startswith("sessiongen: error: ")
    assert expected in captured.err
    assert "Traceback" not in captured.err + captured.out
    assert not site.exists()


def test_the_issue_s_command_is_one_line_from_the_shell() -> None:
    """`sessiongen workbench README.md --check`, as typed (the command line, not `main`)."""
    proc = subprocess.run(
        [*SESSIONGEN, "workbench", "README.md", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 1
    assert proc.stderr == (
        "sessiongen: error: README.md: not a notebook (the workbench runs .ipynb files)\n"
    )


# --- incremental and parallel ----------------------------------------------------------------


def _fake_repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A root with notebooks/ and no site to build: the site step is stubbed, so these tests
    are about notebooks and tables (the site's own skip is covered above)."""
    root = tmp_path / "repo"
    (root / "notebooks").mkdir(parents=True)
    (root / "mkdocs.yml").write_text("site_name: fake\n")

    def no_site(root: Path, site_dir: Path, manifest: object, *, force: bool = False) -> Any:
        return site_dir / "index.html", True

    monkeypatch.setattr(workbench, "build_site_if_changed", no_site)
    return root


def test_an_unchanged_notebook_is_skipped_and_a_changed_one_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _fake_repository(tmp_path, monkeypatch)
    path = _notebook(root / "notebooks" / "n.ipynb", "print('one')")
    quiet = {"root": root, "skip_evidence": True}

    first = workbench.run(**quiet)  # type: ignore[arg-type]
    assert [(r.skipped, r.written) for r in first.notebooks] == [(False, True)]
    stored = path.read_bytes()
    assert (root / ".workbench" / "manifest.json").is_file()

    second = workbench.run(**quiet)  # type: ignore[arg-type]
    assert [r.skipped for r in second.notebooks] == [True]
    assert "notebooks/n.ipynb: unchanged, skipped" in capsys.readouterr().err
    assert path.read_bytes() == stored

    forced = workbench.run(**quiet, force=True)  # type: ignore[arg-type]
    assert [r.skipped for r in forced.notebooks] == [False]

    notebook = nbformat.read(path, as_version=4)  # type: ignore[no-untyped-call]
    notebook.cells[1].source = "print('two')"
    nbformat.write(notebook, path)  # type: ignore[no-untyped-call]
    changed = workbench.run(**quiet)  # type: ignore[arg-type]
    assert [r.skipped for r in changed.notebooks] == [False]
    assert json.loads(path.read_text())["cells"][1]["outputs"][0]["text"] == ["two\n"]

    # Outputs cleared (or checked out) since the last run: what it stored is gone, so it runs.
    notebook = nbformat.read(path, as_version=4)  # type: ignore[no-untyped-call]
    notebook.cells[1].outputs = []
    nbformat.write(notebook, path)  # type: ignore[no-untyped-call]
    assert [r.skipped for r in workbench.run(**quiet).notebooks] == [False]  # type: ignore[arg-type]


def test_notebooks_run_in_parallel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each of two notebooks waits for the other to start: they finish only if they run at
    the same time (in sequence, the first would time out)."""
    root = _fake_repository(tmp_path, monkeypatch)
    meet = tmp_path / "meet"
    meet.mkdir()

    def waits_for(me: str, other: str) -> str:
        return (
            "import pathlib, time\n"
            f"here = pathlib.Path({str(meet)!r})\n"
            f"(here / {me!r}).touch()\n"
            "deadline = time.monotonic() + 120\n"
            f"while not (here / {other!r}).exists():\n"
            "    assert time.monotonic() < deadline, 'ran alone'\n"
            "    time.sleep(0.05)\n"
        )

    _notebook(root / "notebooks" / "a.ipynb", waits_for("a", "b"))
    _notebook(root / "notebooks" / "b.ipynb", waits_for("b", "a"))
    report = workbench.run(root=root, skip_evidence=True, jobs=2)
    assert sorted(r.path.name for r in report.notebooks if r.written) == ["a.ipynb", "b.ipynb"]


def test_evidence_tables_are_measured_only_when_their_inputs_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sessiongen_tooling.evidence import TABLE_GROUPS

    root = _fake_repository(tmp_path, monkeypatch)
    measured: list[str] = []

    async def measure(name: str, root: Path) -> dict[str, str]:
        measured.append(name)
        return {f"{name}.md": f"| {name} |\n"}

    monkeypatch.setattr(workbench, "measure_table_group", measure)
    workbench.run(root=root)
    assert sorted(measured) == sorted(TABLE_GROUPS)
    assert (root / "contract" / "evidence" / "warming.md").read_text() == "| warming |\n"

    measured.clear()
    report = workbench.run(root=root)
    assert measured == [] and sorted(report.evidence_skipped) == sorted(TABLE_GROUPS)

    (root / "contract" / "evidence" / "warming.md").write_text("edited\n")
    workbench.run(root=root)
    assert measured == ["warming"]

    measured.clear()
    workbench.run(root=root, skip_notebooks=True, force=True)  # only the site
    workbench.run(root=root, write=False)  # --check measures everything, writes nothing
    assert sorted(measured) == sorted(TABLE_GROUPS)


# --- --serve: a real server on a real socket ---------------------------------------------------

_NOT_COPIED = shutil.ignore_patterns(
    ".git", ".venv", ".workbench", "site", "__pycache__", "*_cache", "*.db*", "bench.json"
)


def _copy_repository(target: Path) -> Path:
    """The repository without its git, environment, caches and build output, to edit freely;
    mkdocs-jupyter's cache of this clone comes along when there is one (it is keyed by each
    notebook's content), so the first build does not convert every notebook again."""
    shutil.copytree(ROOT, target, ignore=_NOT_COPIED)
    cache = ROOT / ".workbench" / "mkdocs-jupyter"
    if cache.is_dir():
        shutil.copytree(cache, target / ".workbench" / "mkdocs-jupyter")
    return target


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _get(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.status, response.read().decode()


def test_serve_answers_at_once_and_serves_an_edited_page(
    tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    """`sessiongen workbench --serve` in a child process on a free port, in a copy of the
    repository: the address it announces answers the moment it is printed, and a docs page
    edited afterwards is served changed (the issue's target is 5 s; the bound asserted here
    is generous so a loaded machine does not fail it; the measured latency is printed)."""
    repo = _copy_repository(tmp_path / "repo")
    port = _free_port()
    log = (tmp_path / "stderr").open("w")
    proc = subprocess.Popen(
        [*SESSIONGEN, "workbench", "--serve", "--skip-notebooks", "--skip-evidence"]
        + ["--port", str(port)],
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()

    def read_lines() -> None:
        for line in proc.stdout or ():
            lines.put(line)

    reader = threading.Thread(target=read_lines)
    reader.start()
    try:
        deadline = time.monotonic() + 600  # the first build of the copy, on a busy machine
        announced = ""
        while "serving" not in announced:
            assert proc.poll() is None, (tmp_path / "stderr").read_text()
            with contextlib.suppress(queue.Empty):
                announced = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            assert time.monotonic() < deadline, "no address announced"
        url = re.search(r"on (http://\S+/) ", announced).group(1)  # type: ignore[union-attr]
        assert url == f"http://127.0.0.1:{port}/"
        status, _ = _get(url)  # at once: no retry
        assert status == 200

        page = repo / "docs" / "questions.md"
        marker = f"edited-{port}-{time.monotonic_ns()}"
        edited = time.monotonic()
        page.write_text(page.read_text(encoding="utf-8") + f"\n\n{marker}\n", encoding="utf-8")
        latency = None
        while time.monotonic() - edited < 60:
            status, body = _get(url + "questions.html")
            if marker in body:
                latency = time.monotonic() - edited
                break
            time.sleep(0.1)
        assert latency is not None, "the edit was not served within 60 s"
        record_property("edit_served_s", round(latency, 2))
        print(f"\nthe edited page was served {latency:.1f} s after the edit")
        assert status == 200
        # the server says what it rebuilt before it serves the result: that page alone
        said = lines.get(timeout=10)
        assert said.startswith("docs/questions.md: rebuilt its page in "), said
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise AssertionError("--serve did not exit on SIGTERM") from None
        finally:
            reader.join(timeout=30)
        if proc.stdout is not None:
            proc.stdout.close()
        log.close()


def test_the_workbench_names_the_evidence_groups_as_the_evidence_does() -> None:
    """Named in the workbench so that a run with nothing to measure does not import them."""
    from sessiongen_tooling import evidence

    assert workbench.TABLE_GROUPS == tuple(evidence.TABLE_GROUPS)
    assert workbench.EVIDENCE_DIR == evidence.EVIDENCE_DIR


def test_the_first_failure_stops_the_notebooks_running_beside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The failure reported is the notebook that failed, not the one stopped for it (whose
    kernel is shut down rather than waited for, and whose file is left as it was)."""
    root = _fake_repository(tmp_path, monkeypatch)
    slow = _notebook(root / "notebooks" / "a-slow.ipynb", "import time\ntime.sleep(600)")
    _notebook(root / "notebooks" / "b-fails.ipynb", "import time\ntime.sleep(2)\n1 / 0")
    before = slow.read_bytes()
    started = time.monotonic()
    with pytest.raises(workbench.WorkbenchError) as failed:
        workbench.run(root=root, skip_evidence=True, jobs=2)
    assert (
        str(failed.value) == "notebooks/b-fails.ipynb, cell 2: ZeroDivisionError: division by zero"
    )
    assert slow.read_bytes() == before
    assert time.monotonic() - started < 300


INTERRUPTED_SHUTDOWN = """
import os, signal, sys, threading
from pathlib import Path
from mkdocs.livereload import LiveReloadServer
from sessiongen_tooling.workbench import serve_site

def interrupted(self, wait=False):  # a second SIGTERM, landing as the shutdown starts
    raise SystemExit(143)

LiveReloadServer.shutdown = interrupted
root, site = Path(sys.argv[1]), Path(sys.argv[1]) / "site"
site.mkdir()
(site / "index.html").write_text("<p>served</p>")

def announce(line):
    print(line, flush=True)
    threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGTERM)).start()

serve_site(root, site, int(sys.argv[2]), announce=announce)
"""


def test_serve_exits_even_when_its_shutdown_is_interrupted(tmp_path: Path) -> None:
    """`timeout` sends SIGTERM to the process and again to its group: the second can land
    while the server shuts down, so its request thread is never told to stop. The process
    must exit anyway (it waited for that thread for ever, in about 1 run of 8 under
    `timeout`); here the interruption is made certain by a shutdown that raises at once."""
    proc = subprocess.run(
        [sys.executable, "-c", INTERRUPTED_SHUTDOWN, str(tmp_path), str(_free_port())],
        capture_output=True,
        text=True,
        timeout=60,  # TimeoutExpired: it did not exit
    )
    assert "serving site/ on http://127.0.0.1:" in proc.stdout, proc.stderr[-2000:]
    assert proc.returncode == 143, proc.stderr[-2000:]
