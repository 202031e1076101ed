"""`sessiongen workbench`: it builds the site, and a failing notebook stops it with exit 1
and one line naming the notebook and the cell, without touching the stored notebook."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest
from sessiongen.cli import main
from sessiongen_tooling import workbench

from tests.docs.test_site import DECISIONS

ROOT = Path(__file__).resolve().parent.parent


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


def test_skip_notebooks_takes_no_notebook_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit:
        main(["workbench", "--skip-notebooks", "notebooks/05-return-shape.ipynb"])
    assert exit.value.code == 2
    assert "--skip-notebooks" in capsys.readouterr().err


def test_serve_is_loopback_and_watches_the_sources() -> None:
    command = workbench.serve_command(ROOT, 8123)
    assert command[command.index("--dev-addr") + 1] == "127.0.0.1:8123"
    watched = {command[i + 1] for i, arg in enumerate(command) if arg == "--watch"}
    assert {"contract", "plans", "notebooks"} <= watched
