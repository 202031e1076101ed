"""The public surface of `sessiongen` is exactly what prototypes may import, by rule."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import types

import pytest
import sessiongen
import sessiongen.errors
import sessiongen.testing

PUBLIC = list(sessiongen.__all__)


def _defined_errors() -> list[str]:
    return [
        name
        for name, value in vars(sessiongen.errors).items()
        if isinstance(value, type)
        and issubclass(value, sessiongen.SessiongenError)
        and value.__module__ == sessiongen.errors.__name__
    ]


def test_every_error_the_package_defines_is_exported() -> None:
    defined = _defined_errors()
    assert "ProviderConnectionError" in defined  # the rule sees the hierarchy at all
    assert sorted(set(defined) - set(PUBLIC)) == []
    for name in defined:
        assert getattr(sessiongen, name) is getattr(sessiongen.errors, name)


@pytest.mark.parametrize("name", PUBLIC)
def test_every_public_name_reports_a_public_module_that_has_it(name: str) -> None:
    """What a traceback, the docs and a pickle name: `sessiongen.SessionEngine`, not the
    internal `sessiongen.session.engine`; a name defined in a public module keeps that module."""
    value = getattr(sessiongen, name)
    module = getattr(value, "__module__", None)
    if module is None:  # a type alias (ToolsPolicy) names no module
        return
    assert module == "sessiongen" or module.startswith("sessiongen."), (name, module)
    assert not any(part.startswith("_") for part in module.split(".")), (name, module)
    assert getattr(importlib.import_module(module), name) is value


def test_public_classes_pickle_under_their_public_name() -> None:
    """A result pickled by a prototype loads back by the public name it reports."""
    import pickle

    from sessiongen import GenerateResult, Usage

    result = GenerateResult(
        text="A recap.",
        finish_reason="end_turn",
        usage=Usage(input_tokens=3),
        model="m",
        revision=4,
    )
    data = pickle.dumps(result)
    assert b"sessiongen._" not in data
    assert pickle.loads(data) == result


def test_importing_the_package_loads_nothing_until_a_name_is_used() -> None:
    """`import sessiongen` (what `sessiongen --version` pays) loads none of its modules and
    neither pydantic nor SQLite; the first use of a name loads what defines it."""
    import subprocess
    import sys

    probe = (
        "import sys, sessiongen\n"
        "def loaded(): return sorted(m for m in sys.modules if m.startswith('sessiongen'))\n"
        "print(loaded(), 'pydantic' in sys.modules, 'sqlite3' in sys.modules)\n"
        "sessiongen.SessionEngine\n"
        "print('sessiongen.session.engine' in loaded(), 'pydantic' in sys.modules)\n"
        "print('SessionEngine' in dir(sessiongen), 'GenerateResult' in dir(sessiongen))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert out == ["['sessiongen'] False False", "True True", "True True"]
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        sessiongen.Nope  # noqa: B018


def test_all_is_sorted_classes_first() -> None:
    assert PUBLIC == sorted(PUBLIC, key=lambda n: (n[0].islower(), n))
    assert len(set(PUBLIC)) == len(PUBLIC)


def test_no_test_double_is_exported_from_the_top_level() -> None:
    doubles = {name: getattr(sessiongen.testing, name) for name in sessiongen.testing.__all__}
    assert {"ScriptedLLMClient", "ScriptedReply", "RecordingLLMClient"} <= set(doubles)
    assert set(doubles).isdisjoint(PUBLIC)
    exported = [getattr(sessiongen, name) for name in PUBLIC]
    assert not [d for d in doubles.values() if any(d is e for e in exported)]


def _own_docstring(value: object) -> str | None:
    # A class's own docstring only: inherited ones say nothing about the class, and a
    # dataclass without one gets its signature as __doc__.
    if isinstance(value, type):
        doc = value.__dict__.get("__doc__")
        if isinstance(doc, str) and doc.startswith(f"{value.__name__}("):
            return None
        return doc if isinstance(doc, str) else None
    if isinstance(value, types.FunctionType):
        return value.__doc__
    return None


@pytest.mark.parametrize("name", [n for n in PUBLIC if callable(getattr(sessiongen, n))])
def test_every_exported_class_and_function_has_a_docstring(name: str) -> None:
    doc = _own_docstring(getattr(sessiongen, name))
    assert doc and doc.strip(), f"sessiongen.{name} has no docstring of its own"


PUBLIC_MODULES = {
    "agents",
    "cache",
    "cache_policy",
    "catalog",
    "cli",
    "client",
    "emulator",
    "errors",
    "lab",
    "llm",
    "model",
    "parity",
    "plugins",
    "providers",
    "sample",
    "server",
    "session",
    "testing",
    "tokens",
    "tools",
    "warming",
}


def test_internal_modules_are_marked_and_public_ones_documented() -> None:
    """A top-level module is either one of the documented public modules (README, Layout)
    or marked internal by a leading underscore, as pydantic-ai does; each public one says
    what it is for."""
    names = {m.name for m in pkgutil.iter_modules(sessiongen.__path__)}
    unmarked = sorted(n for n in names if not n.startswith("_") and n not in PUBLIC_MODULES)
    assert unmarked == [], f"modules neither public nor underscored: {unmarked}"
    assert PUBLIC_MODULES <= names
    for name in sorted(PUBLIC_MODULES):
        module = importlib.import_module(f"sessiongen.{name}")
        assert (module.__doc__ or "").strip(), f"sessiongen.{name} has no module docstring"


def test_importing_the_package_loads_no_provider_sdk() -> None:
    """`import sessiongen` must not pay for a provider SDK the engine may never use; the
    adapter is imported when `sessiongen.AnthropicLLMClient` is first asked for."""
    import subprocess
    import sys

    probe = (
        "import sys, sessiongen\n"
        "before = 'anthropic' in sys.modules\n"
        "sessiongen.AnthropicLLMClient\n"
        "print(before, 'anthropic' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert out.split() == ["False", "True"]


def test_the_warming_surface_resolves_and_is_documented() -> None:
    """`sessiongen.warming` re-exports its public names from the modules that define them,
    each with a docstring, without loading the plotting or provider libraries."""
    import subprocess
    import sys

    import sessiongen.warming as warming

    for name in warming.__all__:
        value = getattr(warming, name)
        assert inspect.getmodule(value) is not None or not callable(value), name
        if callable(value):
            assert (_own_docstring(value) or "").strip(), f"sessiongen.warming.{name}: no doc"
    probe = (
        "import sys, sessiongen.warming\n"
        "print(*(m in sys.modules for m in ('matplotlib', 'pandas', 'anthropic')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert out.split() == ["False", "False", "False"]


def test_no_exported_name_hides_a_module_of_the_same_name() -> None:
    """`import sessiongen.server.serve` once gave the function `serve`, which the package
    exported over its own module `serve`: a package's exported name and a module beside it
    never share a name (unless the name is the module)."""
    import sessiongen.server

    assert callable(sessiongen.server.serve)
    hidden = []
    for info in pkgutil.walk_packages(sessiongen.__path__, "sessiongen."):
        if not info.ispkg or info.name.split(".")[-1].startswith("_"):
            continue
        package = importlib.import_module(info.name)
        modules = {m.name for m in pkgutil.iter_modules(package.__path__)}
        for name in set(getattr(package, "__all__", ())) & modules:
            if not isinstance(getattr(package, name), types.ModuleType):
                hidden.append(f"{info.name}.{name}")
    assert hidden == []


def test_the_repository_tooling_is_not_part_of_the_library() -> None:
    """The wheel ships `reference_impl/sessiongen` only; the benchmark runner, the workbench,
    the evidence tables and the traceability live in the workspace package
    `sessiongen_tooling`, which nothing in the library imports (the command line asks for it
    by name and says what to do when it is missing)."""
    import ast
    from pathlib import Path

    root = Path(sessiongen.__file__).parent
    names = {p.stem for p in root.rglob("*.py")}
    assert names.isdisjoint({"_bench", "_workbench", "evidence", "_trace", "bench"})
    importers = [
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Import | ast.ImportFrom)
        and any(
            (alias.name if isinstance(node, ast.Import) else node.module or "").startswith(
                "sessiongen_tooling"
            )
            for alias in node.names
        )
    ]
    assert importers == []


@pytest.mark.parametrize("command", ["bench", "workbench"])
def test_bench_and_workbench_outside_a_checkout_say_where_they_run(
    command: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import sys

    from sessiongen import cli

    # The package and every module of it an earlier test imported: a module already in
    # sys.modules would be found without the package.
    for name in [
        "sessiongen_tooling",
        *(m for m in sys.modules if m.startswith("sessiongen_tooling.")),
    ]:
        monkeypatch.setitem(sys.modules, name, None)
    assert cli.main([command]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"sessiongen: error: sessiongen {command} runs on a checkout")
    assert f"uv run sessiongen {command}" in err


@pytest.mark.parametrize("name", ["Agent", "ModelRef"])
def test_configuration_models_show_their_signature_and_document_every_field(name: str) -> None:
    """`help(sessiongen.Agent)` shows its keyword arguments (a deferred model once showed
    `() -> None`), and every field says what it is for."""
    import subprocess
    import sys

    model = getattr(sessiongen, name)
    probe = f"import inspect, sessiongen; print(*inspect.signature(sessiongen.{name}).parameters)"
    out = subprocess.run(  # a fresh interpreter: no earlier use has built the model yet
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert out.split() == list(model.model_fields)
    undocumented = [f for f, info in model.model_fields.items() if not info.description]
    assert undocumented == []


def test_an_agent_takes_its_model_id_alone() -> None:
    agent = sessiongen.Agent(name="a", model="claude-haiku-4-5")
    assert agent.model == sessiongen.ModelRef(id="claude-haiku-4-5")
    assert sessiongen.Agent(name="a").model == sessiongen.ModelRef()
