"""`sessiongen workbench`: the reviewer's one command.

It executes every notebook in `notebooks/` against the embedded emulator and stores the
fresh outputs in place, regenerates every evidence table the contract includes
(`contract/evidence/`, as `python -m sessiongen_tooling.evidence` does), then builds the site
(contract with clause anchors, traceability, decision records, plan, notebooks, API
reference) into `site/` and prints where to open it. With `--serve` it then serves that
build on loopback and rebuilds it when the contract, the plan, the notebooks or the docs
change.

Fast and incremental:

- Independent work runs in parallel, as many jobs at a time as the machine has cores: each
  notebook in its own kernel, each group of evidence tables (`evidence.TABLE_GROUPS`) in its
  own process, the longest first (the durations of the last run are recorded).
- Each notebook, each group of tables and the site is redone only when what it is made of
  changed. Its inputs are hashed and recorded in `.workbench/manifest.json` (ignored by git):
  a notebook's are its cells' sources, the sources of the `sessiongen` and
  `sessiongen_tooling` packages, `uv.lock`, the committed real logs and the Mooncake traces
  (present or not, and their content); a table group's are the same without a notebook; the
  site's are every file of the repository outside caches and build output. What it wrote is
  hashed too, so a notebook or table edited, reverted or checked out since is redone. An
  unchanged one prints "unchanged, skipped"; `--force` redoes everything and `--check`
  executes everything (and writes nothing back).
- The site is built in this process with mkdocs-jupyter's cache in `.workbench/`, so a
  notebook page is converted again only when the notebook changed.
- `--serve` serves the site it just built (mkdocs' live-reload server, rooted at the built
  directory, without a second build), prints the address once it answers, and on a change
  rebuilds in the same warm process, where unchanged notebooks come from the cache.

Any failure stops it with exit status 1 and one line naming what failed; a notebook's
names the notebook and the cell (counted from 1, markdown cells included, as a reader
counts them in JupyterLab), e.g. `notebooks/04-failure-modes.ipynb, cell 7: KeyError: 'x'`.
A file that is not a notebook (wrong suffix, missing, not JSON, merge-conflict markers,
not nbformat) is named with its problem before anything runs. A notebook that fails is not
written back: its stored outputs stay as they were. Set `SESSIONGEN_TRACEBACK=1` to see the
traceback of an unexpected error instead of its one line.

Notebook 03's stored outputs come from the Mooncake traces (`../shared/data/mooncake`
beside the repository). Where they are absent the notebook still runs (it degrades to the
generated trace, and a failure still fails the workbench), but its outputs are not written
back, so the stored Mooncake outputs survive a run on a machine without the data.

The work is in plain functions (`run_notebook`, `regenerate_evidence`, `build_site`,
`serve_site`) and `run`, which the command calls; nbclient and mkdocs are development
dependencies, imported only here, which `uv run` installs on first use.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .site_search import write_search_script

if TYPE_CHECKING:
    from nbformat import NotebookNode
    from rich.console import Console

NOTEBOOKS_DIR = "notebooks"
SITE_DIR = "site"
STATE_DIR = ".workbench"
MANIFEST = "manifest.json"
MANIFEST_VERSION = 1
DEFAULT_PORT = 8000
LOOPBACK = "127.0.0.1"
# One cell's limit: notebook 03's sweeps over the Mooncake traces take minutes on a busy machine.
CELL_TIMEOUT_S = 3600
NEEDS_MOONCAKE = ("03-cache-ttl-warming.ipynb",)  # as notebooks/conftest.py
MOONCAKE_TRACES = ("conversation_trace_first_half.jsonl", "synthetic_trace.jsonl")
# What the notebooks and the evidence read besides their own cells: the packages' sources,
# the locked dependencies and the committed real logs (the Mooncake traces are added).
LIBRARIES = ("sessiongen", "sessiongen_tooling")
DATA = ("uv.lock", "tests/warming/fixtures")
# What `--serve` watches: what the site is made of, as mkdocs.yml's `watch:` and docs_dir.
WATCH = ("docs", "contract", "plans", "notebooks", "docs_hooks", "mkdocs.yml")
# Never inputs of the site: caches, environments, build output.
_NOT_INPUTS = frozenset({"__pycache__", "node_modules", SITE_DIR})
# evidence.TABLE_GROUPS and evidence.EVIDENCE_DIR, named here so that a run with nothing to
# measure does not import the evidence (and the emulator and the SDKs with it).
TABLE_GROUPS = (
    "warming",
    "real-logs",
    "tools-policy",
    "tools-policy-providers",
    "warming-placement",
    "agents",
)
EVIDENCE_DIR = Path("contract") / "evidence"
# Before a first run records durations: the slowest first, so the rest fills the other cores.
# (Seconds of a run on a busy 2-core machine; only their order matters.)
PRIOR_SECONDS = {
    "03-cache-ttl-warming": 116.0,
    "evidence: warming": 107.0,
    "evidence: tools-policy-providers": 61.0,
    "01-tools-policy": 44.0,
}
SERVE_READY_S = 60


class WorkbenchError(Exception):
    """A step failed; the message is the one line the command prints."""


@dataclass(frozen=True)
class NotebookRun:
    """One notebook: executed (whether its outputs were written back, and why not) or
    skipped because nothing it depends on changed."""

    path: Path
    cells: int
    seconds: float
    written: bool
    note: str = ""
    skipped: bool = False


@dataclass
class Report:
    """What a workbench run did, for the summary it prints."""

    notebooks: list[NotebookRun] = field(default_factory=list)
    evidence: list[Path] = field(default_factory=list)
    evidence_skipped: list[str] = field(default_factory=list)
    site: Path | None = None
    site_skipped: bool = False
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
    return all(f.is_file() for f in _mooncake_files())


def _mooncake_files() -> list[Path]:
    from sessiongen.warming.traces.mooncake import shared_mooncake_dir

    data = shared_mooncake_dir()
    return [data / name for name in MOONCAKE_TRACES]


# --- reading a notebook: one line for every way it can be wrong ----------------------------

_CONFLICT_MARKERS = ("<<<<<<< ", ">>>>>>> ", "<<<<<<<\n", ">>>>>>>\n", "=======\n")


def read_notebook(path: Path, root: Path) -> NotebookNode:
    """The notebook at `path`, or WorkbenchError with one line naming the file and what is
    wrong with it: missing, not a `.ipynb`, not UTF-8, merge-conflict markers, not JSON, not
    a notebook nbformat can read."""
    return parse_notebook(path, root, load_notebook(path, root))


def load_notebook(path: Path, root: Path) -> dict[str, Any]:
    """The notebook's JSON, after the checks that need no nbformat (which takes seconds to
    import): `read_notebook`'s one line for all but an invalid notebook."""
    name = shown(path, root)
    if not path.exists():
        raise WorkbenchError(f"{name}: no such notebook")
    if path.is_dir():
        raise WorkbenchError(f"{name}: a directory, not a notebook")
    if path.suffix != ".ipynb":
        raise WorkbenchError(f"{name}: not a notebook (the workbench runs .ipynb files)")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise WorkbenchError(f"{name}: not a notebook: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise WorkbenchError(f"{name}: cannot be read: {exc.strerror}") from None
    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        if line.startswith(_CONFLICT_MARKERS) or line == "=======":
            raise WorkbenchError(
                f"{name}: unresolved merge conflict (line {number}: {line.strip()}): "
                "resolve it, or restore the notebook with git"
            )
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise WorkbenchError(
            f"{name}: not a notebook: invalid JSON at line {exc.lineno}, column {exc.colno} "
            f"({exc.msg})"
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise WorkbenchError(f"{name}: not a notebook: JSON without a list of cells")
    if not isinstance(data.get("nbformat"), int):
        raise WorkbenchError(f"{name}: not a notebook: JSON without an nbformat version")
    return data


def parse_notebook(path: Path, root: Path, data: dict[str, Any]) -> NotebookNode:
    """`load_notebook`'s JSON validated and read by nbformat (as version 4)."""
    import warnings

    import nbformat

    name = shown(path, root)
    try:
        # Validated first: nbformat.reads would only log what is wrong, over many lines; a
        # cell without an id (nbformat 4.5) is a warning nbformat repairs, not a failure.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            nbformat.validate(nbformat.from_dict(data))  # type: ignore[no-untyped-call]
            notebook: NotebookNode = nbformat.reads(json.dumps(data), as_version=4)  # type: ignore[no-untyped-call]
    except Exception as exc:  # nbformat's errors are many and multi-line
        detail = str(getattr(exc, "message", "") or exc).strip().splitlines() or [""]
        raise WorkbenchError(f"{name}: not a valid notebook: {detail[0]}") from None
    return notebook


def code_cells(path: Path, root: Path | None = None) -> int:
    notebook = read_notebook(path, root or path.parent)
    return sum(1 for cell in notebook.cells if cell.cell_type == "code")


# --- inputs and the manifest ---------------------------------------------------------------


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _files_under(path: Path, skip: frozenset[Path] = frozenset()) -> Iterator[Path]:
    if path.is_file():
        yield path
        return
    for here, dirs, files in os.walk(path):
        dirs[:] = sorted(
            d
            for d in dirs
            if not d.startswith(".") and d not in _NOT_INPUTS and Path(here, d) not in skip
        )
        for name in sorted(files):
            if not name.endswith((".pyc", ".pyo")) and not name.startswith(".#"):
                yield Path(here, name)


def tree_digest(paths: Sequence[Path], base: Path, skip: frozenset[Path] = frozenset()) -> str:
    """One hash of every file under `paths` (names relative to `base`, and contents);
    a path that does not exist counts as absent."""
    digest = hashlib.sha256()
    for top in paths:
        if not top.exists():
            digest.update(f"absent {top.name}\0".encode())
            continue
        for file in _files_under(top, skip):
            try:
                name = file.relative_to(base).as_posix()
            except ValueError:
                name = file.as_posix()
            digest.update(f"{name}\0".encode())
            digest.update(hashlib.sha256(file.read_bytes()).digest())
    return digest.hexdigest()


def library_digest(root: Path) -> str:
    """What every notebook and table depends on besides itself: the sources of the
    `sessiongen` and `sessiongen_tooling` packages (where this interpreter imports them
    from), `uv.lock`, the committed real logs and the Mooncake traces (present or not)."""
    import importlib.util

    packages = []
    for name in LIBRARIES:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin is not None:
            packages.append(Path(spec.origin).parent)
    lib = tree_digest(packages, root)
    data = tree_digest([root / p for p in DATA], root)
    mooncake = tree_digest(_mooncake_files(), root)
    return _sha(f"{lib} {data} {mooncake}".encode())


def notebook_digest(data: dict[str, Any], library: str) -> str:
    """A notebook's inputs (`data`: its JSON): its cells' types and sources, in order, and
    `library`."""
    cells = [[cell.get("cell_type"), _text(cell.get("source", ""))] for cell in data["cells"]]
    return _sha(json.dumps([library, cells], ensure_ascii=False).encode())


def _text(source: Any) -> str:
    return "".join(source) if isinstance(source, list) else str(source)


def _code_cells(data: dict[str, Any]) -> int:
    return sum(1 for cell in data["cells"] if cell.get("cell_type") == "code")


def site_digest(root: Path, site_dir: Path) -> str:
    """The site's inputs: every file of the repository but dot-directories (.git, .venv,
    caches, .workbench), `__pycache__`, `site/` and the site directory being built."""
    return tree_digest([root], root, skip=frozenset({site_dir.resolve()}))


class Manifest:
    """`.workbench/manifest.json`: per notebook, table group and site directory, the hash of
    its inputs and of what it wrote, and how long it took."""

    def __init__(self, root: Path) -> None:
        self.path = root / STATE_DIR / MANIFEST
        self.data: dict[str, dict[str, dict[str, Any]]] = {}
        try:
            loaded = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            loaded = None
        if isinstance(loaded, dict) and loaded.get("version") == MANIFEST_VERSION:
            self.data = {k: v for k, v in loaded.items() if isinstance(v, dict)}
        # A site directory removed since (a test's, a temporary one) is forgotten.
        sites = self.data.get("site", {})
        for key in [k for k in sites if not Path(k).is_dir()]:
            del sites[key]

    def get(self, kind: str, key: str) -> dict[str, Any]:
        record = self.data.get(kind, {}).get(key)
        return record if isinstance(record, dict) else {}

    def put(self, kind: str, key: str, record: dict[str, Any]) -> None:
        self.data.setdefault(kind, {})[key] = record
        self.save()

    def forget(self, kind: str, key: str) -> None:
        if self.data.get(kind, {}).pop(key, None) is not None:
            self.save()

    def save(self) -> None:
        state = self.path.parent
        state.mkdir(exist_ok=True)
        ignore = state / ".gitignore"
        if not ignore.exists():
            ignore.write_text("# sessiongen workbench state: never committed\n*\n")
        temporary = self.path.with_suffix(".tmp")
        temporary.write_text(
            json.dumps({"version": MANIFEST_VERSION, **self.data}, indent=1, sort_keys=True),
            encoding="utf-8",
        )
        temporary.replace(self.path)


def _file_sha(path: Path) -> str | None:
    try:
        return _sha(path.read_bytes())
    except OSError:
        return None


# --- notebooks -----------------------------------------------------------------------------


async def execute_notebook(
    path: Path,
    notebook: NotebookNode,
    *,
    root: Path,
    on_cell: Callable[[], None] | None = None,
) -> NotebookNode:
    """Execute `notebook` (read from `path`) top to bottom in a fresh kernel of this
    environment, from the notebook's directory (as JupyterLab and nbval run it). A failing
    cell raises WorkbenchError naming the notebook and the cell."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

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

    def where() -> str:
        return f"{shown(path, root)}, cell {current['index'] + 1}"

    try:
        # The kernel's own startup chatter is not ours to print.
        await client.async_execute(stderr=subprocess.DEVNULL)
    except CellExecutionError as exc:
        error = f"{exc.ename}: {exc.evalue}" if exc.ename else str(exc).strip().splitlines()[-1]
        raise WorkbenchError(f"{where()}: {error}") from None
    except CellTimeoutError:
        raise WorkbenchError(f"{where()}: timed out after {CELL_TIMEOUT_S} s") from None
    except DeadKernelError as exc:
        raise WorkbenchError(f"{where()}: the kernel died ({exc})") from None
    return notebook


def store_notebook(path: Path, notebook: NotebookNode) -> None:
    """Store executed outputs in place as the repository keeps them (nbformat's JSON,
    indent 1, a final newline, no per-cell timing metadata, consecutive stream outputs of
    one stream as one: how the kernel happened to flush a print is not an output, and
    split differently on another run it left git dirty)."""
    import nbformat

    for cell in notebook.cells:
        cell.metadata.pop("execution", None)
        if cell.cell_type == "code":
            cell.outputs = _coalesced(cell.outputs)
    text: str = nbformat.writes(notebook)  # type: ignore[no-untyped-call]
    path.write_text(text + "\n", encoding="utf-8")


def _coalesced(outputs: list[Any]) -> list[Any]:
    """`outputs` with each run of stream outputs to the same stream merged into the first."""
    merged: list[Any] = []
    for output in outputs:
        last = merged[-1] if merged else None
        if (
            output.get("output_type") == "stream"
            and last is not None
            and last.get("output_type") == "stream"
            and last.get("name") == output.get("name")
        ):
            last["text"] = _text(last["text"]) + _text(output["text"])
        else:
            merged.append(output)
    return merged


async def run_notebook_async(
    path: Path,
    *,
    root: Path,
    write: bool = True,
    on_cell: Callable[[], None] | None = None,
    notebook: NotebookNode | None = None,
) -> NotebookRun:
    """Execute one notebook and, unless `write` is false or it needs the Mooncake traces
    that are absent here, store its outputs in place."""
    started = time.monotonic()
    if notebook is None:
        notebook = read_notebook(path, root)
    await execute_notebook(path, notebook, root=root, on_cell=on_cell)
    note = ""
    if write and path.name in NEEDS_MOONCAKE and not mooncake_present():
        write = False
        note = "ran on the generated trace only (no Mooncake traces here): outputs not stored"
    if write:
        store_notebook(path, notebook)
    cells = sum(1 for cell in notebook.cells if cell.cell_type == "code")
    return NotebookRun(path, cells, time.monotonic() - started, write, note)


def run_notebook(
    path: Path,
    *,
    root: Path,
    write: bool = True,
    on_cell: Callable[[], None] | None = None,
) -> NotebookRun:
    """`run_notebook_async` for callers without an event loop."""
    return asyncio.run(run_notebook_async(path, root=root, write=write, on_cell=on_cell))


# --- evidence ------------------------------------------------------------------------------


def regenerate_evidence(root: Path) -> list[Path]:
    """Measure and write every table the contract includes (`contract/evidence/*.md`): the
    work of `python -m sessiongen_tooling.evidence`, in this process."""
    import tempfile

    from .evidence import write_contract_tables

    with tempfile.TemporaryDirectory(prefix="sessiongen-evidence-") as scratch:
        return asyncio.run(write_contract_tables(root, Path(scratch)))


async def measure_table_group(name: str, root: Path) -> dict[str, str]:
    """One group of the contract's tables (`evidence.TABLE_GROUPS`), measured in a child
    process of this interpreter (so groups run in parallel); file name -> markdown."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "sessiongen_tooling.workbench",
        "--table-group",
        name,
        str(root),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=root,
    )
    try:
        out, err = await proc.communicate()
    except asyncio.CancelledError:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        raise
    if proc.returncode != 0:
        lines = err.decode(errors="replace").strip().splitlines() or [f"exit {proc.returncode}"]
        raise WorkbenchError(f"evidence tables ({name}): {lines[-1]}")
    tables: dict[str, str] = json.loads(out)
    return tables


def _table_group_main(name: str, root: Path) -> int:
    """The child process of `measure_table_group`: the tables as JSON on stdout, or one
    line on stderr."""
    import tempfile

    from .evidence import table_group

    try:
        with tempfile.TemporaryDirectory(prefix="sessiongen-evidence-") as scratch:
            tables = asyncio.run(table_group(name, Path(scratch), root))
    except Exception as exc:
        if os.environ.get("SESSIONGEN_TRACEBACK"):
            raise
        print(f"{type(exc).__name__}: {exc}".splitlines()[0], file=sys.stderr)
        return 1
    sys.stdout.write(json.dumps(tables))
    return 0


# --- the site ------------------------------------------------------------------------------


class _Warnings:
    """Collects what mkdocs logs at WARNING and above during a build, instead of printing."""

    def __init__(self) -> None:
        import logging

        class Collect(logging.Handler):
            def __init__(self, lines: list[str]) -> None:
                super().__init__(logging.WARNING)
                self.lines = lines

            def emit(self, record: logging.LogRecord) -> None:
                text = record.getMessage().strip().splitlines()
                self.lines.append(f"{record.levelname}: {text[0] if text else ''}")

        self.lines: list[str] = []
        self.handler = Collect(self.lines)
        self.logger = logging.getLogger("mkdocs")

    def __enter__(self) -> _Warnings:
        self.propagate = self.logger.propagate
        self.logger.propagate = False
        self.logger.addHandler(self.handler)
        return self

    def __exit__(self, *exc: object) -> None:
        self.logger.removeHandler(self.handler)
        self.logger.propagate = self.propagate


@contextlib.contextmanager
def _in_directory(path: Path) -> Iterator[None]:
    before = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


DIRTY_NOTICE = "A 'dirty' build is being performed"


def build_site(root: Path, site_dir: Path, *, dirty: bool = False) -> Path:
    """`mkdocs build --strict` of the repository into `site_dir`, in this process (so the hook
    imports this sessiongen), from the repository (snippets are relative to it), with
    mkdocs-jupyter's cache in `.workbench/` (a notebook is converted again only when it
    changed); a warning is a failure, reported in one line.

    `dirty` (`--serve`, after a page was edited): mkdocs' `--dirty` build, which renders
    again only the pages whose source is newer than their output (and the generated ones),
    with the search index merged into the previous one; mkdocs' own notice that a build is
    dirty is not a warning here."""
    import warnings

    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    os.environ.setdefault("NO_MKDOCS_2_WARNING", "1")  # Material's end-of-life banner
    index = site_dir / "search" / "search_index.json"
    before = _read_json(index) if dirty else None
    problem = ""
    with _Warnings() as logged, _in_directory(root), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            config = load_config(str(root / "mkdocs.yml"), site_dir=str(site_dir), strict=not dirty)
            jupyter = config.plugins.get("mkdocs-jupyter")
            if jupyter is not None:
                jupyter.config["cache"] = True
                jupyter.config["cache_dir"] = str(root / STATE_DIR / "mkdocs-jupyter")
            build(config, dirty=dirty)
        except (Exception, SystemExit) as exc:  # mkdocs' Abort is a SystemExit
            problem = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    lines = [line for line in logged.lines if DIRTY_NOTICE not in line]
    if dirty and before is not None:
        _merge_search_index(index, before)
    if problem or lines:
        first = lines[0] if lines else problem
        more = len(lines) - 1
        also = f" (and {more} more: `uv run mkdocs build --strict` lists them)" if more > 0 else ""
        raise WorkbenchError(f"the site did not build: {first}{also}")
    return site_dir / "index.html"


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _merge_search_index(path: Path, before: Any) -> None:
    """After a dirty build the index holds only the pages built again: the other pages'
    entries come from the index before it."""
    after = _read_json(path)
    if not isinstance(after, dict) or not isinstance(before, dict):
        return
    rebuilt = {entry["location"].split("#")[0] for entry in after.get("docs", [])}
    kept = [e for e in before.get("docs", []) if e["location"].split("#")[0] not in rebuilt]
    after["docs"] = kept + after.get("docs", [])
    path.write_text(json.dumps(after, separators=(",", ":")), encoding="utf-8")
    write_search_script(path)  # what a page opened from disk searches


def build_site_if_changed(
    root: Path, site_dir: Path, manifest: Manifest, *, force: bool = False
) -> tuple[Path, bool]:
    """Build the site unless its inputs are those of the last build into `site_dir` and that
    build is still there; returns its index page and whether the build was skipped."""
    key = str(site_dir)
    inputs = site_digest(root, site_dir)
    index = site_dir / "index.html"
    if not force and manifest.get("site", key).get("inputs") == inputs and index.is_file():
        return index, True
    started = time.monotonic()
    build_site(root, site_dir)
    manifest.put("site", key, {"inputs": inputs, "seconds": time.monotonic() - started})
    return index, False


def _load_site_config(root: Path) -> None:
    """Load mkdocs.yml as a build does (its plugins, the theme and the hooks imported) and
    nothing else. `--serve` does it before it announces the address, so that the first edit
    is rendered by a warm process even when this run skipped the build (after a build, only the
    config is read again). Cold, that first edit took 7 s, most of it importing mkdocs-jupyter (nbformat,
    then jsonschema, whose IRI format checker builds its grammars at import)."""
    import importlib
    import warnings

    # Imported here first: through mkdocs' plugin loading in the `sessiongen` process the same
    # import took 4.9 s instead of 2.2 (its grammar building ran slower; why, not established).
    importlib.import_module("mkdocs_jupyter.plugin")
    from mkdocs.commands import build  # noqa: F401  (imported for the first rebuild)
    from mkdocs.config import load_config

    os.environ.setdefault("NO_MKDOCS_2_WARNING", "1")
    with _Warnings(), _in_directory(root), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with contextlib.suppress(Exception, SystemExit):  # the build reports what is wrong
            load_config(str(root / "mkdocs.yml"))


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """What `--serve` watches, as it is now: path -> (mtime, size)."""
    seen = {}
    for name in WATCH:
        for file in _files_under(root / name) if (root / name).exists() else ():
            stat = file.stat()
            seen[file.relative_to(root).as_posix()] = (stat.st_mtime_ns, stat.st_size)
    return seen


def serve_site(
    root: Path,
    site_dir: Path,
    port: int,
    *,
    manifest: Manifest | None = None,
    announce: Callable[[str], None] | None = None,
) -> int:
    """Serve the built `site_dir` on loopback with mkdocs' live-reload server until
    interrupted (Ctrl-C or SIGTERM). The address is announced once a request to it answers;
    a change under `WATCH` rebuilds the site in this process and reloads the open pages."""
    import signal
    import threading
    import urllib.request

    from mkdocs.livereload import LiveReloadServer

    manifest = manifest or Manifest(root)
    _load_site_config(root)
    seen = _snapshot(root)

    def rebuild() -> None:
        nonlocal seen
        started = time.monotonic()
        now = _snapshot(root)
        changed = sorted(p for p in seen.keys() | now.keys() if seen.get(p) != now.get(p))
        # An edited page (or asset) under docs/: only it is rendered again. Anything else
        # (a page added or removed, the contract, the plan, a notebook, the hooks, the
        # config) can change every page: all of it, unchanged notebooks from the cache.
        pages = bool(changed) and all(p.startswith("docs/") for p in changed)
        pages = pages and seen.keys() == now.keys()
        seen = now
        try:
            if pages:
                build_site(root, site_dir, dirty=True)
                manifest.forget("site", str(site_dir))  # the next run builds it whole
            else:
                build_site_if_changed(root, site_dir, manifest)
        except WorkbenchError as exc:
            print(f"sessiongen: error: {exc} (still serving)", file=sys.stderr, flush=True)
            return
        except Exception as exc:
            print(f"sessiongen: error: the rebuild failed: {exc!r}", file=sys.stderr, flush=True)
            return
        what = ", ".join(changed[:3]) + (
            f" and {len(changed) - 3} more" if len(changed) > 3 else ""
        )
        done = "its page" if pages else "the site"
        print(
            f"{what or 'a change'}: rebuilt {done} in {time.monotonic() - started:.1f} s",
            flush=True,
        )

    server = LiveReloadServer(builder=rebuild, host=LOOPBACK, port=port, root=str(site_dir))
    # mkdocs starts its request thread as a non-daemon: a second signal arriving during
    # `shutdown` (`timeout` sends SIGTERM to the process and again to its group) left the
    # process waiting on that thread for ever. As a daemon it cannot hold the exit
    # (tests/test_workbench.py::test_serve_exits_even_when_its_shutdown_is_interrupted).
    server.serve_thread.daemon = True
    for name in WATCH:
        if (root / name).exists():
            server.watch(str(root / name))
    failure: list[BaseException] = []

    def serve() -> None:
        try:
            server.serve()  # type: ignore[no-untyped-call]
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=serve, name="workbench-serve", daemon=True)
    # Stopped by a signal rather than Ctrl-C, the server stops too.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    url = f"http://{LOOPBACK}:{port}/"
    thread.start()
    try:
        deadline = time.monotonic() + SERVE_READY_S
        while True:
            if failure:
                error = failure[0]
                reason = getattr(error, "strerror", None) or str(error)
                raise WorkbenchError(f"cannot serve on {LOOPBACK}:{port}: {reason}")
            try:
                with urllib.request.urlopen(url, timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise WorkbenchError(f"{url} did not answer within {SERVE_READY_S} s")
            time.sleep(0.05)
        (announce or print)(
            f"serving {shown(site_dir, root)}/ on {url} (rebuilt on changes to "
            f"{', '.join(n for n in WATCH if (root / n).exists())}; Ctrl-C stops)"
        )
        while thread.is_alive():
            thread.join(0.5)
        return 0 if not failure else 1
    except KeyboardInterrupt:
        return 0
    finally:
        server.shutdown(wait=False)


# --- the whole run -------------------------------------------------------------------------


@dataclass
class _Job:
    name: str
    seconds: float
    run: Callable[[], Awaitable[None]]


async def _run_jobs(jobs: list[_Job], slots: int, running: Callable[[list[str]], None]) -> None:
    """Run `jobs`, the longest first, at most `slots` at a time; the first failure cancels
    the others (their kernels and processes are stopped) and is raised."""
    gate = asyncio.Semaphore(max(1, slots))
    active: list[str] = []
    failures: list[Exception] = []

    async def one(job: _Job) -> None:
        async with gate:
            active.append(job.name)
            running(active)
            try:
                await job.run()
            except Exception as exc:
                failures.append(exc)  # a job cancelled for it may fail in turn, later
                raise
            finally:
                active.remove(job.name)
                running(active)

    tasks = [asyncio.ensure_future(one(j)) for j in sorted(jobs, key=lambda j: -j.seconds)]
    if not tasks:
        return
    done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    for task in pending:
        task.cancel()
    # Every task's outcome is collected, the failed ones' too: an exception left unread is
    # printed by asyncio at exit ("Task exception was never retrieved") after the one line.
    await asyncio.gather(*tasks, return_exceptions=True)
    if failures:
        raise failures[0]


def run(
    *,
    root: Path,
    notebooks: Sequence[Path] | None = None,
    skip_notebooks: bool = False,
    skip_evidence: bool = False,
    write: bool = True,
    force: bool = False,
    site_dir: Path | None = None,
    console: Console | None = None,
    jobs: int | None = None,
) -> Report:
    """Notebooks and evidence tables (in parallel, each only when its inputs changed), then
    the site (only when its inputs changed); raises WorkbenchError at the first failure.
    `skip_notebooks` executes no notebook and measures no table: only the site is built.
    `write=False` (`--check`) executes and measures everything and writes nothing back."""
    from rich.console import Console
    from sessiongen._progress import progress_bar

    out = console or Console(stderr=True, highlight=False)
    report = Report()
    manifest = Manifest(root)
    redo = force or not write
    paths = [] if skip_notebooks else list(notebooks or default_notebooks(root))
    read = {path: load_notebook(path, root) for path in paths}  # every bad file, up front
    started = time.monotonic()
    library = library_digest(root) if paths or not (skip_evidence or skip_notebooks) else ""

    def say(text: str) -> None:
        out.print(text, soft_wrap=True)

    todo: list[_Job] = []
    for path, data in read.items():
        key = shown(path, root)
        inputs = notebook_digest(data, library)
        record = manifest.get("notebooks", key)
        if not redo and record.get("inputs") == inputs and record.get("stored") == _file_sha(path):
            report.notebooks.append(NotebookRun(path, _code_cells(data), 0.0, False, skipped=True))
            say(f"{key}: unchanged, skipped")
            continue
        notebook = parse_notebook(path, root, data)  # an invalid one, before anything runs

        async def run_one(
            path: Path = path, notebook: Any = notebook, inputs: str = inputs
        ) -> None:
            key = shown(path, root)
            if not out.is_terminal:  # no bar in a log: say what is running
                say(f"running {key} ...")
            result = await run_notebook_async(
                path, root=root, write=write, notebook=notebook, on_cell=advance
            )
            report.notebooks.append(result)
            if write:
                manifest.put(
                    "notebooks",
                    key,
                    {"inputs": inputs, "stored": _file_sha(path), "seconds": result.seconds},
                )
            stored = "outputs stored" if result.written else (result.note or "not stored")
            say(f"ran {key}: {result.cells} code cells in {result.seconds:.0f} s, {stored}")

        seconds = record.get("seconds") or PRIOR_SECONDS.get(path.stem, 30.0)
        todo.append(_Job(path.stem, float(seconds), run_one))

    measure = not (skip_evidence or skip_notebooks)
    evidence_dir = root / EVIDENCE_DIR
    if measure:
        inputs = _sha(f"evidence {library}".encode())
        for group in TABLE_GROUPS:
            record = manifest.get("evidence", group)
            files: dict[str, str] = record.get("files") or {}
            if (
                not redo
                and record.get("inputs") == inputs
                and files
                and all(_file_sha(evidence_dir / n) == sha for n, sha in files.items())
            ):
                report.evidence_skipped.append(group)
                say(f"evidence tables ({group}): unchanged, skipped")
                continue

            async def measure_one(group: str = group, inputs: str = inputs) -> None:
                if not out.is_terminal:
                    say(f"measuring the evidence tables ({group}) ...")
                began = time.monotonic()
                tables = await measure_table_group(group, root)
                seconds = time.monotonic() - began
                advance()
                if not write:
                    say(f"evidence tables ({group}): measured in {seconds:.0f} s, not written")
                    return
                evidence_dir.mkdir(parents=True, exist_ok=True)
                for name, text in tables.items():
                    (evidence_dir / name).write_text(text, encoding="utf-8")
                    report.evidence.append(evidence_dir / name)
                shas = {name: _file_sha(evidence_dir / name) for name in tables}
                manifest.put(
                    "evidence", group, {"inputs": inputs, "files": shas, "seconds": seconds}
                )
                written = ", ".join(sorted(tables))
                say(f"evidence tables ({group}): wrote {written} in {seconds:.0f} s")

            job = f"evidence: {group}"
            seconds = record.get("seconds") or PRIOR_SECONDS.get(job, 25.0)
            todo.append(_Job(job, float(seconds), measure_one))

    slots = jobs or os.cpu_count() or 1
    skipped = {r.path for r in report.notebooks if r.skipped}
    steps = sum(_code_cells(data) for p, data in read.items() if p not in skipped)
    steps += sum(1 for j in todo if j.name.startswith("evidence: ")) + 1
    with progress_bar(out) as bar:
        task = bar.add_task("starting", total=steps)

        def advance() -> None:
            bar.advance(task)

        def running(names: list[str]) -> None:
            bar.update(task, description=", ".join(names) or "…")

        asyncio.run(_run_jobs(todo, slots, running))
        report.seconds["notebooks and evidence"] = time.monotonic() - started
        bar.update(task, description="building the site")
        started = time.monotonic()
        target = (site_dir if site_dir is not None else root / SITE_DIR).resolve()
        report.site, report.site_skipped = build_site_if_changed(
            root, target, manifest, force=force
        )
        report.seconds["site"] = time.monotonic() - started
        if report.site_skipped:
            say(f"site ({shown(target, root)}): unchanged, skipped")
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
    force: bool = False,
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
            force=force,
            site_dir=site_dir,
            console=errors,
        )
        assert report.site is not None
        built = "unchanged" if report.site_skipped else "built"
        print(
            f"site {built}, {time.monotonic() - started:.0f} s in all: open {report.site.as_uri()}",
            flush=True,
        )
        if not serve:
            print(
                f"(or serve it with live reload: uv run sessiongen workbench --serve --port {port})"
            )
            return 0
        return serve_site(root, report.site.parent, port, announce=lambda s: print(s, flush=True))
    except WorkbenchError as exc:
        print(f"sessiongen: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("sessiongen: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if os.environ.get("SESSIONGEN_TRACEBACK"):
            raise
        line = (str(exc).strip().splitlines() or [""])[0]
        print(
            f"sessiongen: error: {type(exc).__name__}: {line} (SESSIONGEN_TRACEBACK=1 shows where)",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":  # the child process of measure_table_group
    if len(sys.argv) == 4 and sys.argv[1] == "--table-group":
        sys.exit(_table_group_main(sys.argv[2], Path(sys.argv[3])))
    sys.exit("usage: python -m sessiongen_tooling.workbench --table-group NAME ROOT")
