"""`sessiongen workbench`: the reviewer's one command.

It executes every notebook in `notebooks/` against the embedded emulator and stores the
fresh outputs in place, regenerates every evidence table the contract includes
(`contract/evidence/`, as `python -m sessiongen_tooling.evidence` does), then builds the site
(contract with clause anchors, traceability, decision records, plan, notebooks, API
reference) into `site/` and prints where to open it. With `--serve` it then serves the
site on loopback and rebuilds it when the contract, the plan, the notebooks or the docs
change.

Any failure stops it with exit status 1 and one line naming what failed; a notebook's
names the notebook and the cell (counted from 1, markdown cells included, as a reader
counts them in JupyterLab), e.g. `notebooks/04-failure-modes.ipynb, cell 7: KeyError: 'x'`.
A notebook that fails is not written back: its stored outputs stay as they were.

Notebook 03's stored outputs come from the Mooncake traces (`../shared/data/mooncake`
beside the repository). Where they are absent the notebook still runs (it degrades to the
generated trace, and a failure still fails the workbench), but its outputs are not written
back, so the stored Mooncake outputs survive a run on a machine without the data.

The work is in plain functions (`run_notebook`, `regenerate_evidence`, `build_site`,
`serve_site`) and `run`, which the command calls; nbclient and mkdocs are development
dependencies, imported only here, which `uv run` installs on first use.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

NOTEBOOKS_DIR = "notebooks"
SITE_DIR = "site"
DEFAULT_PORT = 8000
LOOPBACK = "127.0.0.1"
# One cell's limit: notebook 03's sweeps over the Mooncake traces take minutes on a busy machine.
CELL_TIMEOUT_S = 3600
NEEDS_MOONCAKE = ("03-cache-ttl-warming.ipynb",)  # as notebooks/conftest.py
MOONCAKE_TRACES = ("conversation_trace_first_half.jsonl", "synthetic_trace.jsonl")
# What `--serve` watches besides docs/ (mkdocs watches its docs_dir itself).
WATCH = ("contract", "plans", "notebooks", "docs_hooks", "mkdocs.yml")
BUILD_TIMEOUT_S = 600


class WorkbenchError(Exception):
    """A step failed; the message is the one line the command prints."""


@dataclass(frozen=True)
class NotebookRun:
    """One executed notebook: whether its outputs were written back, and why not."""

    path: Path
    cells: int
    seconds: float
    written: bool
    note: str = ""


@dataclass
class Report:
    """What a workbench run did, for the summary it prints."""

    notebooks: list[NotebookRun] = field(default_factory=list)
    evidence: list[Path] = field(default_factory=list)
    site: Path | None = None
    seconds: dict[str, float] = field(default_factory=dict)


def find_root(start: Path | None = None) -> Path:
    """The repository: the nearest directory from `start` (default: the current directory)
    upwards that has `mkdocs.yml` and `notebooks/`."""
    here = (start or Path.cwd()).resolve()
    for candidate in (here, *here.parents):
        if (candidate / "mkdocs.yml").is_file() and (candidate / NOTEBOOKS_DIR).is_dir():
            return candidate
    raise WorkbenchError(
        f"no sessiongen repository at or above {here} (a directory with mkdocs.yml and "
        f"{NOTEBOOKS_DIR}/): run the workbench from a clone"
    )


def shown(path: Path, root: Path) -> str:
    """A path as the user should read it: relative to the repository when inside it."""
    try:
        return path.resolve().relative_to(root).as_posix()
    except ValueError:
        return str(path)


def default_notebooks(root: Path) -> list[Path]:
    """Every notebook of the repository, in reading order."""
    return sorted((root / NOTEBOOKS_DIR).glob("*.ipynb"))


def mooncake_present() -> bool:
    from sessiongen.warming.mooncake import shared_mooncake_dir

    data = shared_mooncake_dir()
    return all((data / name).is_file() for name in MOONCAKE_TRACES)


def code_cells(path: Path) -> int:
    import nbformat

    notebook = nbformat.read(path, as_version=4)  # type: ignore[no-untyped-call]
    return sum(1 for cell in notebook.cells if cell.cell_type == "code")


def run_notebook(
    path: Path,
    *,
    root: Path,
    write: bool = True,
    on_cell: Callable[[], None] | None = None,
) -> NotebookRun:
    """Execute one notebook top to bottom in a fresh kernel of this environment, from the
    notebook's directory (as JupyterLab and nbval run it), and store its outputs in place
    as the repository keeps them (nbformat's JSON, indent 1, no per-cell timing metadata).
    A failing cell raises WorkbenchError naming the notebook and the cell."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    started = time.monotonic()
    notebook = nbformat.read(path, as_version=4)  # type: ignore[no-untyped-call]
    current = {"index": 0}

    def cell_started(cell: Any, cell_index: int, **_: Any) -> None:
        current["index"] = cell_index

    def cell_done(cell: Any, cell_index: int, **_: Any) -> None:
        if on_cell is not None:
            on_cell()

    client = NotebookClient(
        notebook,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",  # this environment's ipykernel, as --nbval-current-env
        resources={"metadata": {"path": str(path.parent)}},
        record_timing=False,
        on_cell_start=cell_started,
        on_cell_complete=cell_done,
    )
    try:
        client.execute(stderr=subprocess.DEVNULL)  # the kernel's own startup chatter
    except CellExecutionError as exc:
        where = f"{shown(path, root)}, cell {current['index'] + 1}"
        error = f"{exc.ename}: {exc.evalue}" if exc.ename else str(exc).strip().splitlines()[-1]
        raise WorkbenchError(f"{where}: {error}") from None
    except CellTimeoutError:
        where = f"{shown(path, root)}, cell {current['index'] + 1}"
        raise WorkbenchError(f"{where}: timed out after {CELL_TIMEOUT_S} s") from None
    except DeadKernelError as exc:
        where = f"{shown(path, root)}, cell {current['index'] + 1}"
        raise WorkbenchError(f"{where}: the kernel died ({exc})") from None
    note = ""
    if write and path.name in NEEDS_MOONCAKE and not mooncake_present():
        write = False
        note = "ran on the generated trace only (no Mooncake traces here): outputs not stored"
    if write:
        for cell in notebook.cells:
            cell.metadata.pop("execution", None)
        text: str = nbformat.writes(notebook)  # type: ignore[no-untyped-call]
        path.write_text(text + "\n", encoding="utf-8")
    cells = sum(1 for cell in notebook.cells if cell.cell_type == "code")
    return NotebookRun(path, cells, time.monotonic() - started, write, note)


def regenerate_evidence(root: Path) -> list[Path]:
    """Measure and write every table the contract includes (`contract/evidence/*.md`): the
    work of `python -m sessiongen_tooling.evidence`."""
    import asyncio
    import tempfile

    from .evidence import write_contract_tables

    with tempfile.TemporaryDirectory(prefix="sessiongen-evidence-") as scratch:
        return asyncio.run(write_contract_tables(root, Path(scratch)))


def _mkdocs_env() -> dict[str, str]:
    return {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's end-of-life banner


def build_site(root: Path, site_dir: Path) -> Path:
    """`mkdocs build --strict` of the repository into `site_dir`, in a child process of this
    interpreter (so the hook imports this sessiongen); a warning is a failure."""
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site_dir)],
        cwd=root,
        env=_mkdocs_env(),
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
        check=False,
    )
    if proc.returncode != 0:
        output = (proc.stdout + proc.stderr).strip().splitlines()
        problems = [line for line in output if "WARNING" in line or "ERROR" in line]
        detail = "\n".join(problems[-10:] or output[-10:])
        raise WorkbenchError(f"the site did not build (mkdocs exit {proc.returncode}):\n{detail}")
    return site_dir / "index.html"


def serve_command(root: Path, port: int) -> list[str]:
    """The `mkdocs serve` command line: loopback only, watching what the site is made of."""
    command = [sys.executable, "-m", "mkdocs", "serve", "--dev-addr", f"{LOOPBACK}:{port}"]
    for name in WATCH:
        if (root / name).exists():
            command += ["--watch", name]
    return command


def serve_site(root: Path, port: int) -> int:
    """Serve until interrupted (Ctrl-C); mkdocs rebuilds and reloads the open pages."""
    import signal

    server = subprocess.Popen(serve_command(root, port), cwd=root, env=_mkdocs_env())
    # Stopped by a signal rather than Ctrl-C, the server is stopped too, not orphaned.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    try:
        return server.wait()
    except KeyboardInterrupt:
        return 0
    finally:
        if server.poll() is None:
            server.terminate()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()


def run(
    *,
    root: Path,
    notebooks: Sequence[Path] | None = None,
    skip_notebooks: bool = False,
    skip_evidence: bool = False,
    write: bool = True,
    site_dir: Path | None = None,
    console: Console | None = None,
) -> Report:
    """Notebooks, then evidence, then the site; raises WorkbenchError at the first failure."""
    from rich.console import Console
    from sessiongen._progress import progress_bar

    out = console or Console(stderr=True, highlight=False)
    report = Report()
    paths = [] if skip_notebooks else list(notebooks or default_notebooks(root))
    for path in paths:
        if not path.is_file():
            raise WorkbenchError(f"{path}: no such notebook")
    steps = sum(code_cells(p) for p in paths) + (0 if skip_evidence else 1) + 1
    with progress_bar(out) as bar:
        task = bar.add_task("starting", total=steps)
        started = time.monotonic()
        for path in paths:
            bar.update(task, description=shown(path, root))
            if not out.is_terminal:  # no bar in a log: say what is running
                out.print(f"running {shown(path, root)} ...", soft_wrap=True)
            result = run_notebook(path, root=root, write=write, on_cell=lambda: bar.advance(task))
            report.notebooks.append(result)
            stored = "outputs stored" if result.written else (result.note or "not stored")
            out.print(
                f"ran {shown(path, root)}: {result.cells} code cells in "
                f"{result.seconds:.0f} s, {stored}",
                soft_wrap=True,
            )
        report.seconds["notebooks"] = time.monotonic() - started
        if not skip_evidence:
            bar.update(task, description="measuring the contract's evidence tables")
            started = time.monotonic()
            if write:
                report.evidence = regenerate_evidence(root)
            else:
                import asyncio
                import tempfile

                from .evidence import contract_tables

                with tempfile.TemporaryDirectory(prefix="sessiongen-evidence-") as scratch:
                    asyncio.run(contract_tables(Path(scratch), root))
            report.seconds["evidence"] = time.monotonic() - started
            bar.advance(task)
            written = ", ".join(shown(p, root) for p in report.evidence) or "nothing (--check)"
            out.print(f"evidence tables: wrote {written}", soft_wrap=True)
        bar.update(task, description="building the site")
        started = time.monotonic()
        target = site_dir if site_dir is not None else root / SITE_DIR
        report.site = build_site(root, target.resolve())
        report.seconds["site"] = time.monotonic() - started
        bar.advance(task)
    return report


def main(
    *,
    notebooks: Sequence[Path],
    skip_notebooks: bool,
    skip_evidence: bool,
    check: bool,
    site_dir: Path | None,
    serve: bool,
    port: int,
) -> int:
    """The command: run, print where the site is (and serve it), or one error line, exit 1."""
    from rich.console import Console

    errors = Console(stderr=True, highlight=False)
    started = time.monotonic()
    try:
        root = find_root()
        report = run(
            root=root,
            notebooks=notebooks or None,
            skip_notebooks=skip_notebooks,
            skip_evidence=skip_evidence,
            write=not check,
            site_dir=site_dir,
            console=errors,
        )
    except WorkbenchError as exc:
        print(f"sessiongen: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("sessiongen: interrupted", file=sys.stderr)
        return 130
    assert report.site is not None
    print(f"site built in {time.monotonic() - started:.0f} s: open {report.site.as_uri()}")
    if not serve:
        print(f"(or serve it with live reload: uv run sessiongen workbench --serve --port {port})")
        return 0
    print(f"serving on http://{LOOPBACK}:{port}/ (rebuilds on changes; Ctrl-C stops)", flush=True)
    return serve_site(root, port)
