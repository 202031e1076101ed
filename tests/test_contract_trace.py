"""Every clause of the contract is executed by a test marked `@pytest.mark.clause("SG-…")`,
and every marked clause exists. Prose that mentions a clause id proves nothing: only the
marker counts, so a clause without a test that executes its behaviour fails here.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONTRACT = ROOT / "contract" / "session-generate.md"


def contract_clauses() -> set[str]:
    """The clause ids the contract defines (each opens a bold clause heading)."""
    return set(re.findall(r"\*\*(SG-[A-Z]+-\d+)\b", CONTRACT.read_text()))


def _marked(decorator: ast.expr) -> list[str]:
    """The clause ids of one `pytest.mark.clause("…", …)` decorator, else []."""
    if not (
        isinstance(decorator, ast.Call) and ast.unparse(decorator.func) == "pytest.mark.clause"
    ):
        return []
    return [a.value for a in decorator.args if isinstance(a, ast.Constant)]


def marked_tests() -> dict[str, set[str]]:
    """clause id -> the tests (`path::name`) marked as executing it."""
    found: dict[str, set[str]] = {}
    for path in sorted(ROOT.joinpath("tests").rglob("test_*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            if not node.name.startswith("test"):
                continue
            for decorator in node.decorator_list:
                for clause in _marked(decorator):
                    test = f"{path.relative_to(ROOT)}::{node.name}"
                    found.setdefault(clause, set()).add(test)
    return found


def test_every_clause_is_executed_by_a_marked_test() -> None:
    clauses = contract_clauses()
    assert len(clauses) >= 20
    untested = sorted(clauses - set(marked_tests()))
    assert untested == [], f"clauses no marked test executes: {untested}"


def test_every_marked_clause_exists() -> None:
    unknown = sorted(set(marked_tests()) - contract_clauses())
    assert unknown == [], f"tests are marked with clauses the contract does not define: {unknown}"


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
