"""`sessiongen agents conform`, the conformance kit: every law passes against the real
`sessiongen serve` (its own process, its provider an emulator), and each deliberately broken
server (`sessiongen.agents.conform_broken`) fails the law it breaks, and only the laws its
bug explains. The adapter for opencode's routes runs against an opencode-shaped facade of
our engine, and against a live `opencode serve` when one is configured."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from sessiongen.agents.conform_adapters import (
    Adapter,
    OpencodeAdapter,
    SessiongenAdapter,
    Unreachable,
)
from sessiongen.agents.conform_broken import VARIANTS, BrokenServer
from sessiongen.agents.conform_laws import LAW_NAMES, LAWS, EmulatorAdmin, Verdict, run_laws
from sessiongen.cli import main as cli_main
from sessiongen.emulator import BackgroundServer
from sessiongen.lab import write_workspace
from sessiongen.session.engine import SessionEngine

from ..client.conftest import local_url, process
from ..test_cli import _cli, _one_line_error
from ._opencode_facade import opencode_facade

ROOT = Path(__file__).resolve().parents[2]
OPENCODE_URL_ENV = "SESSIONGEN_CONFORM_OPENCODE_URL"
OPENCODE_EMULATOR_ENV = "SESSIONGEN_CONFORM_EMULATOR"


@pytest.fixture(scope="module")
def emulator() -> Iterator[BackgroundServer]:
    """One emulator on loopback for the module; the kit resets it before each law."""
    server = BackgroundServer().start()
    try:
        yield server
    finally:
        server.stop()


def _verdicts(adapter: Adapter, emulator: BackgroundServer) -> list[Verdict]:
    with closing(adapter), closing(EmulatorAdmin(emulator.url)) as admin:
        return run_laws(adapter, admin)


def _failed(verdicts: list[Verdict]) -> set[str]:
    return {v.law for v in verdicts if v.status == "FAIL"}


@pytest.mark.clause("SG-INV-1")
@pytest.mark.clause("SG-INV-3")
@pytest.mark.clause("SG-RESULT-1")
@pytest.mark.clause("SG-RESULT-3")
@pytest.mark.clause("SG-TOOLS-1")
@pytest.mark.clause("SG-CACHE-1")
@pytest.mark.clause("SG-HTTP-4")
def test_every_law_passes_against_sessiongen_serve(
    tmp_path: Path, emulator: BackgroundServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command as a user runs it, against `sessiongen serve --provider anthropic` in a
    process of its own, pointed at the emulator: one PASS line per law, in order, exit 0."""
    port, url = local_url()
    env = {
        "ANTHROPIC_BASE_URL": emulator.url,
        "ANTHROPIC_API_KEY": "conform-test-key",
        "SESSIONGEN_TOKEN": "",
    }
    serve = ("serve", "--provider", "anthropic", "--port", str(port))
    db = str(tmp_path / "sessions.db")
    workspace = str(write_workspace(tmp_path / "workspace"))
    with process(
        tmp_path, "server", *serve, "--db", db, "--workspace", workspace,
        env=env, ready=f"{url}/api/health",
    ):  # fmt: skip
        code = cli_main(["agents", "conform", "--base-url", url, "--emulator", emulator.url])
    out = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in out] == [f"PASS {name}" for name in LAW_NAMES], out
    assert code == 0
    same_prefix = next(line for line in out if line.startswith("PASS same-prefix"))
    assert "read all" in same_prefix  # the sample agent's prefix is cacheable: a real check


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_each_broken_server_fails_its_law(name: str, emulator: BackgroundServer) -> None:
    variant = VARIANTS[name]
    with BrokenServer(name, emulator.url) as server:
        verdicts = _verdicts(SessiongenAdapter(server.url), emulator)
    assert variant.breaks in _failed(verdicts)
    assert _failed(verdicts) == variant.fails, [v.line() for v in verdicts]


def test_every_law_is_broken_by_some_named_variant() -> None:
    """A check no broken server fails could be checking nothing."""
    assert len(VARIANTS) >= 5
    assert {v.breaks for v in VARIANTS.values()} == set(LAW_NAMES)
    assert [law.name for law in LAWS] == list(LAW_NAMES)
    assert all(law.clauses and law.summary for law in LAWS)


def _docs_example() -> str:
    text = (ROOT / "docs" / "conformance.md").read_text(encoding="utf-8")
    after = text.split("<!-- conformance-example -->\n```python\n", 1)[1]
    return after.split("\n```", 1)[0]


def test_the_adapter_example_in_the_docs_runs(
    emulator: BackgroundServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/conformance.md's example adapter, as written: it passes our server and catches
    a broken one."""
    namespace: dict[str, Any] = {"__name__": "conformance_example"}
    exec(compile(_docs_example(), "docs/conformance.md", "exec"), namespace)
    with BrokenServer(None, emulator.url) as server:
        assert namespace["check"](server.url, emulator.url) is True
    with BrokenServer("bumps-revision", emulator.url) as server:
        assert namespace["check"](server.url, emulator.url) is False
    out = capsys.readouterr().out
    assert "FAIL revision-unchanged: a successful generate moved the revision" in out


def test_the_unbroken_in_process_server_passes(emulator: BackgroundServer) -> None:
    """The variants' own base, unbroken: what each variant differs from."""
    with BrokenServer(None, emulator.url) as server:
        verdicts = _verdicts(SessiongenAdapter(server.url), emulator)
    assert _failed(verdicts) == set(), [v.line() for v in verdicts]


@pytest.mark.parametrize(
    ("variant", "fails"),
    [
        (None, set()),
        ("retries-on-5xx", {"one-attempt"}),
        ("persists-generate", {"no-mutation", "revision-unchanged"}),
        ("different-prefix", {"same-prefix"}),
    ],
    ids=["unbroken", "retries-on-5xx", "persists-generate", "different-prefix"],
)
def test_the_opencode_adapter_on_opencode_shaped_routes(
    variant: str | None, fails: set[str], emulator: BackgroundServer
) -> None:
    """opencode's generate takes no tools policy and reports only text: the laws still
    hold or fail on what the wire shows."""
    with BrokenServer(variant, emulator.url, make_app=opencode_facade) as server:
        verdicts = _verdicts(OpencodeAdapter(server.url), emulator)
    assert _failed(verdicts) == fails, [v.line() for v in verdicts]
    tools = next(v for v in verdicts if v.law == "tools-per-policy")
    assert "choice_none" not in tools.reason  # not offered by opencode's route


def test_a_running_opencode_serve(capsys: pytest.CaptureFixture[str]) -> None:
    """Against a live `opencode serve` whose provider is a sessiongen emulator, when one is
    configured: $SESSIONGEN_CONFORM_OPENCODE_URL and $SESSIONGEN_CONFORM_EMULATOR."""
    url, emulator = os.environ.get(OPENCODE_URL_ENV), os.environ.get(OPENCODE_EMULATOR_ENV)
    if not url or not emulator:
        pytest.skip(
            f"no opencode serve configured (set ${OPENCODE_URL_ENV} and ${OPENCODE_EMULATOR_ENV})"
        )
    with closing(OpencodeAdapter(url)) as adapter:
        try:
            adapter.check()
        except Unreachable as exc:
            pytest.skip(str(exc))
    code = cli_main(
        ["agents", "conform", "--adapter", "opencode", "--base-url", url, "--emulator", emulator]
    )
    out = capsys.readouterr().out
    assert code == 0, out


def test_an_opencode_without_the_generate_route_is_one_line(
    emulator: BackgroundServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """opencode 1.18.33 has no generate route and answers it with its web app (200, HTML):
    the adapter reads the served OpenAPI document first and stops with one line."""

    def facade(engine: SessionEngine) -> FastAPI:
        return opencode_facade(engine, generate=False)

    with BrokenServer(None, emulator.url, make_app=facade) as server:
        code = cli_main(
            ["agents", "conform", "--adapter", "opencode", "--base-url", server.url,
             "--emulator", emulator.url]
        )  # fmt: skip
    assert code == 2
    assert _one_line(capsys) == (
        f"sessiongen agents conform: opencode facade at {server.url} serves no POST "
        "/api/session/{sessionID}/generate (anomalyco/opencode#37433): its generate cannot "
        "be checked"
    )


def test_one_law_by_name_and_its_failure_exit(
    emulator: BackgroundServer, capsys: pytest.CaptureFixture[str]
) -> None:
    with BrokenServer("retries-on-5xx", emulator.url) as server:
        code = cli_main(
            ["agents", "conform", "--base-url", server.url, "--emulator", emulator.url,
             "--law", "one-attempt"]
        )  # fmt: skip
    out = capsys.readouterr().out.splitlines()
    assert code == 1
    assert len(out) == 1 and out[0].startswith("FAIL one-attempt: provider 500: 2 requests")


def test_a_server_not_on_the_emulator_is_one_line(
    emulator: BackgroundServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """The kit cannot observe a server whose provider is another emulator: it says so, exit
    2, rather than failing every law."""
    other = BackgroundServer().start()
    try:
        with BrokenServer(None, other.url) as server:
            code = cli_main(
                ["agents", "conform", "--base-url", server.url, "--emulator", emulator.url]
            )
    finally:
        other.stop()
    assert code == 2
    assert "left no request at the emulator" in _one_line(capsys)


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    assert captured.out == "" and "Traceback" not in captured.err, captured
    assert captured.err.endswith("\n") and captured.err.count("\n") == 1, captured.err
    return captured.err.rstrip("\n")


@pytest.mark.parametrize("adapter", ["sessiongen", "opencode"])
def test_an_unreachable_server_is_one_line(
    adapter: str, emulator: BackgroundServer, capsys: pytest.CaptureFixture[str]
) -> None:
    _, nowhere = local_url()
    code = cli_main(
        ["agents", "conform", "--adapter", adapter, "--base-url", nowhere,
         "--emulator", emulator.url]
    )  # fmt: skip
    assert code == 2
    assert _one_line(capsys).startswith(
        f"sessiongen agents conform: cannot reach the {adapter} server at {nowhere}: "
    )


def test_an_unreachable_emulator_is_one_line(
    emulator: BackgroundServer, capsys: pytest.CaptureFixture[str]
) -> None:
    _, nowhere = local_url()
    with BrokenServer(None, emulator.url) as server:
        code = cli_main(["agents", "conform", "--base-url", server.url, "--emulator", nowhere])
    assert code == 2
    assert _one_line(capsys).startswith(
        f"sessiongen agents conform: cannot reach the emulator at {nowhere}: "
    )


def test_the_command_line_as_a_user_meets_it() -> None:
    """The real command in a child process: its help names every law and adapter, an
    unknown law and an unreachable server are one line each, exit 2."""
    result = _cli("agents", "conform", "--help")
    assert result.returncode == 0
    help_text = "".join(result.stdout.split())  # argparse wraps lines at hyphens too
    assert all(name in help_text for name in LAW_NAMES)
    assert "{sessiongen,opencode}" in help_text
    result = _cli("agents", "conform", "--base-url", "u", "--emulator", "e", "--law", "nope")
    assert result.returncode == 2
    assert _one_line_error(result) == (
        "sessiongen agents conform: argument --law: no law 'nope'; the laws: "
        + ", ".join(LAW_NAMES)
    )
    _, nowhere = local_url()
    result = _cli("agents", "conform", "--base-url", nowhere, "--emulator", nowhere)
    assert result.returncode == 2
    assert "cannot reach the sessiongen server" in _one_line_error(result)
