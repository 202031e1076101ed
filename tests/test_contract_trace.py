"""Every clause of the contract is executed by a test marked `@pytest.mark.clause("SG-…")`,
and every marked clause exists. Prose that mentions a clause id proves nothing: only the
marker counts, so a clause without a test that executes its behaviour fails here.

How clauses and markers are read lives in `sessiongen_tooling.traceability`, shared with the docs site's
generated traceability page, so the page and this test cannot disagree.
"""

from __future__ import annotations

import ast
from pathlib import Path

from sessiongen_tooling import traceability

ROOT = Path(__file__).resolve().parent.parent
CONTRACT = ROOT / traceability.CONTRACT_PATH
_marked = traceability.marked_clauses


def contract_clauses() -> set[str]:
    """The clause ids the contract defines (each opens a bold clause heading)."""
    return {clause.id for clause in traceability.contract_clauses(ROOT)}


def marked_tests() -> dict[str, set[str]]:
    """clause id -> the tests (`path::name`) marked as executing it."""
    return {
        clause: {test.node_id for test in tests}
        for clause, tests in traceability.marked_tests(ROOT).items()
    }


def test_every_clause_is_executed_by_a_marked_test() -> None:
    clauses = contract_clauses()
    assert len(clauses) >= 20
    untested = sorted(clauses - set(marked_tests()))
    assert untested == [], f"clauses no marked test executes: {untested}"


def test_every_marked_clause_exists() -> None:
    unknown = sorted(set(marked_tests()) - contract_clauses())
    assert unknown == [], f"tests are marked with clauses the contract does not define: {unknown}"


def test_every_clause_heading_has_a_title_or_none() -> None:
    """The heading parser sees every bold clause id, with its title and line."""
    text = CONTRACT.read_text(encoding="utf-8").splitlines()
    for clause in traceability.contract_clauses(ROOT):
        assert f"**{clause.id}" in text[clause.line - 1], clause
        assert clause.title == "" or clause.title in " ".join(text[clause.line - 1 :][:3]), clause


def test_a_mention_is_not_a_marker(tmp_path: Path) -> None:
    """The trace reads decorators, not text: a docstring naming a clause does not count."""
    source = (
        "import pytest\n"
        "def test_a():\n    '''SG-INV-1: says so.'''\n"
        "@pytest.mark.clause('SG-INV-2')\ndef test_b():\n    pass\n"
    )
    tree = ast.parse(source)
    ids = [
        c
        for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef)
        for d in n.decorator_list
        for c in _marked(d)
    ]
    assert ids == ["SG-INV-2"]
