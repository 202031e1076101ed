"""Typed for its users (issue 20): a prototype that imports sessiongen the way README.md does
type-checks under `mypy --strict` against the installed package, with no ignores, and the
public names it uses have precise types, not Any. Without py.typed mypy would not analyse the
installed package at all (`import-untyped`), so this fails if the marker goes missing."""

from __future__ import annotations

import hashlib
import re
import shutil
import tempfile
from pathlib import Path

import sessiongen
from mypy import api

from tests import typed_prototype

PROTOTYPE = Path(typed_prototype.__file__)
PAGE_EXAMPLE = Path(__file__).resolve().parent.parent / "docs" / "examples" / "prototype.py"

# Appended to a copy of the prototype: what mypy says a few public things are.
REVEALS = {
    "engine": "reveal_type(build([])[0])",
    "generate": "reveal_type(SessionEngine.generate)",
    "usage": "reveal_type(GenerateResult.model_construct().usage.cache_read_tokens)",
    "script": "reveal_type(ScriptedLLMClient().requests)",
    "status": "reveal_type(ProviderError('x').provider_status)",
}
B = r"(builtins\.)?"  # how mypy names a builtin depends on its version
EXPECTED = {
    "engine": r"^sessiongen\.session\.engine\.SessionEngine$",
    "generate": rf"^def \(self: sessiongen\.session\.engine\.SessionEngine, session_id: {B}str, "
    rf"prompt: {B}str, \*, tools_policy: sessiongen\.session\.generate\.ToolsPolicy \| {B}str =.*\) "
    r"-> typing\.Coroutine\[Any, Any, sessiongen\.session\.generate\.GenerateResult\]$",
    "usage": rf"^{B}int$",
    "script": rf"^{B}list\[sessiongen\.llm\.types\.LLMRequest\]$",
    "status": rf"^{B}int \| None$",
}


def _cache_dir() -> Path:
    """A mypy cache kept between runs (a cold check of sessiongen, pydantic and the Anthropic
    SDK takes tens of seconds; a warm one about a second), one per checkout of the package."""
    package = Path(sessiongen.__file__).resolve().parent
    key = hashlib.sha256(str(package).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"sessiongen-typing-mypy-cache-{key}"


def _mypy_strict(source: Path, tmp_path: Path) -> tuple[list[str], list[str]]:
    """mypy --strict on `source` alone, with none of this repository's configuration (no
    pydantic plugin, no source paths): the package is found installed, as a user's is.
    Returns the error lines and the revealed types."""
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\nstrict = True\npython_version = 3.11\n")
    stdout, stderr, _ = api.run(
        ["--config-file", str(config), "--cache-dir", str(_cache_dir()), str(source)]
    )
    assert not stderr, stderr
    errors = [line for line in stdout.splitlines() if ": error:" in line]
    revealed = re.findall(r'note: Revealed type is "(.*)"', stdout)
    return errors, revealed


def test_the_package_ships_its_marker() -> None:
    assert (Path(sessiongen.__file__).parent / "py.typed").is_file()


def test_a_readme_prototype_type_checks_strictly_with_precise_types(tmp_path: Path) -> None:
    source = PROTOTYPE.read_text()
    assert "# type:" not in source  # no ignores
    checked = tmp_path / "prototype.py"
    shutil.copy(PROTOTYPE, checked)
    with checked.open("a") as file:
        file.write("\n\n" + "\n".join(REVEALS.values()) + "\n")
    errors, revealed = _mypy_strict(checked, tmp_path)
    assert errors == []
    assert len(revealed) == len(REVEALS), revealed
    for (name, pattern), shown in zip(EXPECTED.items(), revealed, strict=True):
        assert "Any" not in shown.replace("Coroutine[Any, Any,", ""), (name, shown)
        assert re.search(pattern, shown), (name, shown)


async def test_the_prototype_runs() -> None:
    """The type-checked prototype is real code: it runs on the test doubles."""
    assert await typed_prototype.main() == [
        "Greetings end_turn claude-sonnet-4-6 0 tools",
        "same revision: True; read 0",
        "2 messages, the revision generate saw: True",
        "overloaded: None",
        "unknown session: None",
        "EmptyPrompt 422",
        "3 provider requests (stream, generate, generate)",
    ]


def test_the_prototype_pages_example_type_checks_strictly(tmp_path: Path) -> None:
    """docs/examples/prototype.py (the "Your own tool" page, run by tests/docs/
    test_prototype.py): a user's tool, a turn's text and parts, generate and the keeper on a
    served emulator, under `mypy --strict` with no ignores and no private name imported."""
    source = PAGE_EXAMPLE.read_text()
    assert "# type:" not in source and not re.search(r"import _|\._[a-z]", source)
    errors, _ = _mypy_strict(PAGE_EXAMPLE, tmp_path)
    assert errors == []


def test_a_tool_whose_run_takes_other_arguments_than_it_declares_is_a_type_error(
    tmp_path: Path,
) -> None:
    """`Tool` is generic over its `ToolArgs` model: a `run` that expects another model than
    `args` names is caught by mypy, not by the model's first call."""
    mismatched = tmp_path / "mismatched.py"
    mismatched.write_text(
        "from sessiongen import Tool, ToolArgs, ToolCallScope\n\n\n"
        "class A(ToolArgs):\n    a: str\n\n\n"
        "class B(ToolArgs):\n    b: int\n\n\n"
        "def run(scope: ToolCallScope, args: B) -> str:\n    return str(args.b)\n\n\n"
        'MATCHED = Tool("b", "Takes B.", B, run)\n'
        'MISMATCHED = Tool("a", "Takes A.", A, run)\n'
    )
    errors, _ = _mypy_strict(mismatched, tmp_path)
    assert len(errors) == 1 and "mismatched.py:17:" in errors[0], errors
