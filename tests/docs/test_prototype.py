"""The prototype page (docs/prototype.md) shows a real file, docs/examples/prototype.py: it
runs here against an emulator served on a socket and prints what the page says it prints
(tests/test_typing.py checks it with mypy --strict); the page includes only sections the
file has. And the API reference names no private class where a reader would follow it."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import griffe

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "docs" / "examples" / "prototype.py"
PAGE = ROOT / "docs" / "prototype.md"
OUTPUT = ROOT / "tests" / "docs" / "prototype_output.txt"


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("prototype_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_example_runs_and_prints_what_the_page_shows() -> None:
    lines: list[str] = _example().run()
    assert lines == OUTPUT.read_text().splitlines()
    assert "read 0 cached" not in "\n".join(lines)  # generate read the turn's prefix
    assert any(line.endswith("-> '9 words'") for line in lines)  # the user's tool ran


def test_the_page_includes_sections_the_example_has_and_is_in_the_nav() -> None:
    page = PAGE.read_text()
    source = EXAMPLE.read_text()
    included = re.findall(r'--8<-- "docs/examples/prototype\.py:(\w+)"', page)
    assert included == ["tool", "unregistered", "turn", "generate", "keeper"]
    for name in included:
        assert source.count(f"# --8<-- [start:{name}]") == 1, name
        assert source.count(f"# --8<-- [end:{name}]") == 1, name
    assert '--8<-- "docs/examples/prototype.py"\n' in page  # and the whole file
    assert '--8<-- "tests/docs/prototype_output.txt"' in page
    nav = (ROOT / "mkdocs.yml").read_text().split("\nnav:\n")[1]
    assert "\n  - Your own tool: prototype.md\n" in nav


DOCUMENTED = ("", "tools", "errors", "client", "plugins", "providers", "warming")
"""The modules docs/api.md renders (the top-level package through its `__all__`)."""
PRIVATE = re.compile(r"(?<!\w)_[A-Za-z]\w*")


def _named_types(obj: griffe.Object) -> list[str]:
    """The type expressions the reference prints for `obj`: its bases, its parameters'
    and return annotations, an attribute's annotation."""
    if isinstance(obj, griffe.Class):
        return [str(base) for base in obj.bases]
    if isinstance(obj, griffe.Function):
        found = [str(p.annotation) for p in obj.parameters if p.annotation is not None]
        return found + ([str(obj.returns)] if obj.returns is not None else [])
    if isinstance(obj, griffe.Attribute) and obj.annotation is not None:
        return [str(obj.annotation)]
    return []


def test_the_api_reference_names_no_private_type() -> None:
    """A user's code cannot name `_Args` or `_DomainModel`, so the reference must not show
    them as a base or in a signature (a tool's `args: type[_Args]` once did)."""
    package = griffe.load("sessiongen", search_paths=[str(ROOT / "reference_impl")])
    assert isinstance(package, griffe.Module)
    seen: set[str] = set()
    private: list[tuple[str, str]] = []

    def walk(container: griffe.Object | griffe.Alias) -> None:
        for name, member in container.members.items():
            if name.startswith("_") and name != "__init__":
                continue
            try:
                target = member.final_target if isinstance(member, griffe.Alias) else member
            except (griffe.AliasResolutionError, griffe.CyclicAliasError):
                continue  # outside the package (pydantic's, the SDK's): not ours to name
            if target.path in seen:
                continue
            seen.add(target.path)
            private.extend((target.path, t) for t in _named_types(target) if PRIVATE.search(t))
            if isinstance(target, griffe.Class):
                walk(target)

    for name in DOCUMENTED:
        walk(package[name] if name else package)
    assert "sessiongen.tools.Tool" in seen and "sessiongen.model.Agent" in seen
    assert private == []


def test_the_api_reference_has_the_tools_a_prototype_registers() -> None:
    api = (ROOT / "docs" / "api.md").read_text()
    assert "## `sessiongen.tools`" in api and "(prototype.md)" in api
