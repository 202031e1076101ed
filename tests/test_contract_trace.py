"""Every clause of the contract is established by a test or notebook that cites its id, and
every cited id exists in the contract."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLAUSE = re.compile(r"\bSG-[A-Z]+-\d+\b")


def _clauses() -> set[str]:
    text = (ROOT / "contract" / "session-generate.md").read_text()
    return set(re.findall(r"\*\*(SG-[A-Z]+-\d+)\b", text))


def _citations() -> dict[str, set[str]]:
    cited: dict[str, set[str]] = {}
    for path in [
        *ROOT.joinpath("tests").rglob("*.py"),
        *ROOT.joinpath("notebooks").glob("*.ipynb"),
    ]:
        if path.name == Path(__file__).name:
            continue
        for clause in CLAUSE.findall(path.read_text()):
            cited.setdefault(clause, set()).add(str(path.relative_to(ROOT)))
    return cited


def test_every_clause_is_established_by_a_test() -> None:
    clauses = _clauses()
    assert len(clauses) >= 20
    untested = sorted(clauses - set(_citations()))
    assert untested == [], f"clauses without a test or notebook citing them: {untested}"


def test_every_cited_clause_exists() -> None:
    unknown = sorted(set(_citations()) - _clauses())
    assert unknown == [], f"tests cite clauses the contract does not define: {unknown}"
