"""The package's import graph has no cycles: each module's imports, at any depth (inside
functions and under TYPE_CHECKING too), point one way, so a module can be read, changed and
tested from its dependencies up. Its top-level packages form the layers `pyproject.toml`
declares (checked by import-linter), and an import inside a function says why it is there."""

from __future__ import annotations

import ast
from pathlib import Path

import sessiongen

ROOT = Path(sessiongen.__file__).parent


def _module_names() -> dict[str, tuple[Path, list[str]]]:
    """Each module's dotted name, its file and the package its relative imports start in."""
    found: dict[str, tuple[Path, list[str]]] = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        package = parts[:-1]
        if parts[-1] == "__init__":
            parts = package = parts[:-1]
        found[".".join(parts)] = (path, package)
    return found


def import_graph() -> dict[str, set[str]]:
    """module -> the package modules it imports (an imported name that is a module counts as
    that module; a package's own `__init__` is counted only when imported by name)."""
    modules = _module_names()
    graph: dict[str, set[str]] = {}
    for name, (path, package) in modules.items():
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else []
                target = ".".join([*base, *([node.module] if node.module else [])])
                for alias in node.names:
                    child = f"{target}.{alias.name}"
                    targets.add(child if child in modules else target)
            elif isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for child in edges:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_the_rule_sees_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_package_has_no_import_cycle() -> None:
    graph = import_graph()
    assert (
        "sessiongen.emulator.state" in graph["sessiongen.emulator.client"]
    )  # TYPE_CHECKING counts
    assert cycles(graph) == []


PLUGIN_PARTS = ("emulator", "probe")
"""A provider folder's parts that are plugins of an upper layer (found by name, never
imported by the provider table): each is its own node of the package graph."""


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The graph between the root's children (`sessiongen.session`, `sessiongen.tokens`):
    each module stands for the top-level package or module it is in, except a provider's
    plugin parts (`sessiongen.providers.openai.emulator`), which stand for themselves."""

    def top(name: str) -> str:
        parts = name.split(".")
        if parts[1:2] == ["providers"] and parts[3:4] and parts[3] in PLUGIN_PARTS:
            return ".".join(parts[:4])
        return ".".join(parts[:2])

    packages: dict[str, set[str]] = {}
    for module, targets in graph.items():
        if module == "sessiongen":
            continue  # the root re-exports from everything below it
        into = packages.setdefault(top(module), set())
        into.update(top(t) for t in targets if t != "sessiongen" and top(t) != top(module))
    return packages


def test_the_packages_have_no_import_cycle() -> None:
    """Issue 30: cache -> llm -> cache, tokens <-> cache, llm -> session and cache_policy <->
    session were cycles between packages, dodged with imports inside functions."""
    packages = package_graph(import_graph())
    assert "sessiongen.catalog" in packages["sessiongen.tokens"]
    assert cycles(packages) == []


def test_the_declared_layers_hold() -> None:
    """import-linter's layers contract (`[tool.importlinter]` in pyproject.toml)."""
    import subprocess
    import sys

    tool = Path(sys.executable).parent / "lint-imports"
    root = Path(__file__).resolve().parents[1]
    result = subprocess.run(
        [str(tool), "--no-cache", "--config", str(root / "pyproject.toml")],
        capture_output=True,
        text=True,
        cwd=root,
        timeout=300,
    )
    assert result.returncode == 0 and "4 kept, 0 broken" in result.stdout, result.stdout


REASONS = ("optional extra", "startup")
"""Why an import may sit inside a function: a package only some users install, or keeping
the command line's start (`sessiongen --version`, `--help`) free of the engine."""


def unexplained_inner_imports() -> list[str]:
    """Each import inside a function whose group (it and the imports right above it) has no
    comment naming one of `REASONS`, on its lines or in the comment right above, as
    `path:line`."""
    found: list[str] = []
    for path in sorted(ROOT.rglob("*.py")):
        lines = path.read_text(encoding="utf-8").split("\n")
        for function in ast.walk(ast.parse("\n".join(lines))):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(function):
                if not isinstance(node, (ast.Import, ast.ImportFrom)):
                    continue
                first = node.lineno - 1
                while first > 0 and lines[first - 1].strip().startswith(("import ", "from ")):
                    first -= 1
                while first > 0 and lines[first - 1].strip().startswith("#"):
                    first -= 1  # the comment above the group
                said = " ".join(lines[first : node.end_lineno])
                if not any(f"# {reason}" in said or f"#{reason}" in said for reason in REASONS):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_an_import_inside_a_function_says_why() -> None:
    assert unexplained_inner_imports() == []


def test_the_version_loads_neither_the_engine_nor_pydantic() -> None:
    """`sessiongen --version` answers from the command line's own module: the package's
    names load only when used (issue 20: it once imported the whole package)."""
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "from sessiongen import cli\n"
        "try:\n"
        "    cli.main(['--version'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = ('pydantic', 'sqlite3', 'anthropic', 'sessiongen.session.engine')\n"
        "print(*(name in sys.modules for name in heavy))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out[-4:] == ["False", "False", "False", "False"], out
