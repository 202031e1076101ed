"""The contract's clauses and the tests and notebooks that trace to them, read from the
repository: one implementation for `tests/test_contract_trace.py` (which fails on a clause
without a marked test) and the docs site's generated traceability page.

A clause opens with a bold heading, `**SG-XXX-N · Title.**` (or `**SG-XXX-N.**`). A test
executes a clause when it carries the decorator `@pytest.mark.clause("SG-XXX-N", ...)`; a
mention in prose or a docstring counts for nothing. Internal: not part of the public surface.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from pathlib import Path

CONTRACT_PATH = Path("contract") / "session-generate.md"
CLAUSE_ID = re.compile(r"\bSG-[A-Z]+-\d+\b")
_HEADING = re.compile(r"\*\*(SG-[A-Z]+-\d+)\b(?:\s*·\s*(.*?))?\.?\*\*", re.S)


@dataclass(frozen=True)
class Clause:
    """One clause of the contract: its id, its title ("" when it has none) and the line of
    the contract file where its heading is."""

    id: str
    title: str
    line: int

    @property
    def anchor(self) -> str:
        """The HTML id of the clause on the rendered contract page (`sg-warm-1`)."""
        return anchor(self.id)


@dataclass(frozen=True)
class MarkedTest:
    """A test function marked as executing a clause: the file (relative to the repository
    root, POSIX separators), the function's name and the line of its `def`."""

    path: str
    name: str
    line: int

    @property
    def node_id(self) -> str:
        return f"{self.path}::{self.name}"


def anchor(clause_id: str) -> str:
    """The HTML id of a clause id: lower case, `SG-WARM-1` -> `sg-warm-1`."""
    return clause_id.lower()


def contract_clauses(root: Path) -> list[Clause]:
    """The clauses the contract defines, in the contract's order."""
    text = (root / CONTRACT_PATH).read_text(encoding="utf-8")
    clauses: dict[str, Clause] = {}
    for match in _HEADING.finditer(text):
        clause_id, title = match.group(1), " ".join((match.group(2) or "").split())
        line = text.count("\n", 0, match.start()) + 1
        clauses.setdefault(clause_id, Clause(clause_id, title.rstrip("."), line))
    return list(clauses.values())


def marked_clauses(decorator: ast.expr) -> list[str]:
    """The clause ids of one `pytest.mark.clause("…", …)` decorator, else []."""
    if not (
        isinstance(decorator, ast.Call) and ast.unparse(decorator.func) == "pytest.mark.clause"
    ):
        return []
    return [
        a.value for a in decorator.args if isinstance(a, ast.Constant) and isinstance(a.value, str)
    ]


def marked_tests(root: Path) -> dict[str, list[MarkedTest]]:
    """clause id -> the tests marked as executing it, by file then line."""
    found: dict[str, list[MarkedTest]] = {}
    for path in sorted(root.joinpath("tests").rglob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        rel = path.relative_to(root).as_posix()
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            if not node.name.startswith("test"):
                continue
            for decorator in node.decorator_list:
                for clause in marked_clauses(decorator):
                    test = MarkedTest(rel, node.name, node.lineno)
                    if test not in found.setdefault(clause, []):
                        found[clause].append(test)
    for tests in found.values():
        tests.sort(key=lambda t: (t.path, t.line))
    return found


def notebook_mentions(root: Path) -> dict[str, list[str]]:
    """clause id -> the notebooks (file names under notebooks/) whose cells, markdown or
    code, mention it."""
    found: dict[str, list[str]] = {}
    for path in sorted(root.joinpath("notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8")).get("cells", [])
        text = "\n".join(
            "".join(c["source"]) if isinstance(c.get("source"), list) else str(c.get("source"))
            for c in cells
        )
        for clause_id in sorted(set(CLAUSE_ID.findall(text))):
            found.setdefault(clause_id, []).append(path.name)
    return found
