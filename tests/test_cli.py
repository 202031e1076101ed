"""The user-facing commands: `sessiongen demo`, `sessiongen emulator`, `sessiongen --version`,
and their one-line errors for bad arguments."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

import anthropic
import pytest
from sessiongen._demo import run_demo
from sessiongen.emulator import free_port


async def test_demo_reads_back_the_prefix_each_turn_wrote(tmp_path: Path) -> None:
    """Turns two and three (and the generate) read exactly the prefix written before."""
    rows = await run_demo(database=tmp_path / "demo.db")
    assert [r.operation for r in rows] == [
        "turn 1 step 1",
        "turn 1 step 2",
        "turn 2 step 1",
        "turn 3 step 1",
        "generate",
    ]
    first = rows[0].usage
    assert (
        first.cache_read_tokens == 0 and first.cache_write_5m_tokens > 1024
    )  # the prefix passes the minimum
    for previous, current in zip(rows, rows[1:], strict=False):
        assert (
            current.usage.cache_read_tokens
            == previous.usage.cache_read_tokens + previous.usage.cache_write_5m_tokens
        )
        assert current.usage.cache_write_5m_tokens > 0


def test_demo_command_prints_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    from sessiongen.cli import main

    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "embedded emulator" in out and "turn 3 step 1" in out and "generate" in out


def _wait_for_port(port: int, deadline: float) -> None:
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"the emulator never listened on port {port}")


def test_emulator_command_answers_the_sdk_from_another_process() -> None:
    port = free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "sessiongen.cli", "emulator", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for_port(port, time.monotonic() + 30)
        with anthropic.Anthropic(
            api_key="x", base_url=f"http://127.0.0.1:{port}", max_retries=0
        ) as client:
            message = client.messages.create(
                model="claude-sonnet-4-6",
                max_tokens=64,
                messages=[{"role": "user", "content": "Hello"}],
            )
        assert message.content[0].type == "text" and message.stop_reason == "end_turn"
        assert message.usage.input_tokens > 0
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The real command in a child process, as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "sessiongen.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def _one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    assert result.stderr.endswith("\n") and result.stderr.count("\n") == 1, result.stderr
    return result.stderr.rstrip("\n")


def test_version_prints_the_package_version() -> None:
    result = _cli("--version")
    assert (result.returncode, result.stdout) == (0, f"sessiongen {version('sessiongen')}\n")


@pytest.mark.parametrize("port", ["99999", "0", "65536", "-1", "eighty"])
def test_a_bad_port_is_a_one_line_usage_error(port: str) -> None:
    result = _cli("emulator", "--port", port)
    line = _one_line_error(result)
    assert result.returncode == 2 and result.stdout == ""
    assert line.startswith("sessiongen: error: argument --port:") and "1 to 65535" in line


def test_a_port_in_use_is_a_one_line_bind_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = _cli("emulator", "--port", str(port))
    line = _one_line_error(result)
    assert result.returncode == 1
    assert line.startswith(f"sessiongen: error: cannot bind 127.0.0.1:{port}: "), line


def test_an_unknown_host_is_a_one_line_bind_error() -> None:
    result = _cli("emulator", "--host", "no-such-host.invalid", "--port", "8765")
    line = _one_line_error(result)
    assert result.returncode == 1
    assert line.startswith("sessiongen: error: cannot bind no-such-host.invalid:8765: "), line


def test_serve_refuses_a_port_out_of_range_before_binding() -> None:
    """Programmatic callers get a typed error, not uvicorn's OverflowError traceback."""
    from sessiongen.emulator import serve

    with pytest.raises(ValueError, match="1 to 65535"):
        serve(port=70000)


@pytest.mark.parametrize("capacity", ["-1", "many", "1.5"])
def test_a_bad_log_capacity_is_a_one_line_usage_error(capacity: str) -> None:
    result = _cli("emulator", "--log-capacity", capacity)
    line = _one_line_error(result)
    assert result.returncode == 2 and result.stdout == ""
    assert line.startswith("sessiongen: error: argument --log-capacity:")


def test_the_log_capacity_reaches_the_emulator(monkeypatch: pytest.MonkeyPatch) -> None:
    """`--log-capacity N` bounds the served emulator's log; 0 keeps every request."""
    from sessiongen import cli, emulator

    seen: list[int | None] = []
    monkeypatch.setattr(
        emulator, "serve", lambda **kw: seen.append(kw["state"].log_status()["capacity"])
    )
    assert cli.main(["emulator", "--log-capacity", "50"]) == 0
    assert cli.main(["emulator", "--log-capacity", "0"]) == 0
    assert cli.main(["emulator"]) == 0
    assert seen == [50, None, 10_000]


def test_serve_runs_a_saved_warming_policy(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`serve --warming-policy FILE` hands the keeper the policy `experiment warming
    --save-policy` wrote, loaded as it was fitted."""

    from sessiongen import cli
    from sessiongen.warming.keeper import FromPolicy
    from sessiongen.warming.policies import Tracking
    from sessiongen.warming.policies.saved import policy_document, save_policy
    from sessiongen.warming.traces.generator import generate_sessions

    fitted = Tracking().fit(generate_sessions(4, seed=2))
    path = save_policy(fitted, tmp_path / "policy.json")
    import sessiongen.server.serving as serving

    seen: list[object] = []
    monkeypatch.setattr(serving, "serve", lambda *a, **kw: seen.append(kw["warming_policy"]))
    assert cli.main(["serve", "--warming-policy", str(path)]) == 0
    (policy,) = seen
    assert isinstance(policy, FromPolicy) and isinstance(policy.policy, Tracking)
    assert policy_document(policy.policy) == policy_document(fitted)


@pytest.mark.parametrize(
    ("content", "says"),
    [(None, "No such file"), ("{", "not JSON"), ('{"format": "x"}', "not a saved warming policy")],
)
def test_serve_refuses_a_bad_warming_policy_file(
    tmp_path: Path, content: str | None, says: str
) -> None:
    path = tmp_path / "policy.json"
    if content is not None:
        path.write_text(content)
    result = _cli("serve", "--warming-policy", str(path))
    line = _one_line_error(result)
    assert result.returncode == 1
    assert line.startswith("sessiongen: error: --warming-policy: ") and says in line


def test_an_unknown_option_before_the_command_names_itself() -> None:
    """Not "the following arguments are required: command": the mistake is the option."""
    result = _cli("--bogus")
    line = _one_line_error(result)
    assert result.returncode == 2
    assert line.startswith("sessiongen: error: unrecognized argument '--bogus'; a command comes")
    assert "demo, serve, emulator, experiment, bench, agents, workbench" in line


@pytest.mark.parametrize("argv", [("--help",), ("emulator", "--help")])
def test_the_emulators_help_names_its_four_providers(argv: tuple[str, ...]) -> None:
    """Not "Anthropic-compatible": the emulator serves four providers' APIs."""
    result = _cli(*argv)
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    assert "Anthropic-compatible" not in text
    assert "Anthropic, OpenAI, Bedrock and Gemini" in text


# --- one convention for every error ----------------------------------------------------------

_WITHOUT_OPENAI = (
    "import sys; sys.modules['openai'] = None  # as if installed without the providers extra\n"
    "from sessiongen.cli import main\n"
    "raise SystemExit(main(sys.argv[1:]))\n"
)


def test_demo_without_the_providers_extra_is_a_one_line_error_naming_it() -> None:
    """Installed without extras, `demo --provider openai` says which extra to install, in one
    line on stderr (exit 1, nothing on stdout), not with a traceback."""
    result = subprocess.run(
        [sys.executable, "-c", _WITHOUT_OPENAI, "demo", "--provider", "openai"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    line = _one_line_error(result)
    assert (result.returncode, result.stdout) == (1, "")
    assert line.startswith("sessiongen: error: ") and "'openai' package" in line, line
    assert 'pip install "sessiongen[providers]"' in line, line


def test_a_missing_sdk_is_the_typed_missing_extra_error() -> None:
    """What the CLI prints is the message of `sessiongen.errors.MissingExtra`, which is also
    an ImportError (code that guards an optional import keeps working)."""
    from sessiongen.errors import MissingExtra
    from sessiongen.llm._adapter import require

    with pytest.raises(MissingExtra, match=r"needs the 'no_such_sdk' package") as raised:
        require("no_such_sdk", "no_such_sdk", "SomeClient")
    assert isinstance(raised.value, ImportError) and raised.value.name == "no_such_sdk"


@pytest.mark.parametrize(
    ("args", "status"),
    [
        (("serve", "--port", "0"), 2),  # a bad value
        (("emulator", "--host", "0.0.0.0"), 2),  # a public bind without a token
        (("emulator", "--port", "9", "probe", "--provider", "anthropic"), 2),  # do not go together
        (("--bogus",), 2),  # before the command
        (("serve", "--db", ":memory:", "--warming-policy", "/no/such/policy.json"), 1),
        (("emulator", "probe", "--provider", "anthropic", "--base-url", "http://127.0.0.1:9"), 1),
    ],
)
def test_every_error_is_one_line_with_one_prefix_and_the_documented_status(
    args: tuple[str, ...], status: int
) -> None:
    """The convention of `sessiongen.cli` (USAGE_ERROR, RUNTIME_ERROR, ERROR_PREFIX) as a
    user meets it: the command line is wrong, 2; the command could not do its job, 1; the
    same prefix either way, and a usage error names the --help to read."""
    from sessiongen.cli import ERROR_PREFIX, RUNTIME_ERROR, USAGE_ERROR

    result = _cli(*args)
    line = _one_line_error(result)
    assert result.returncode == status, (result.returncode, line)
    assert line.startswith(ERROR_PREFIX), line
    assert (status == USAGE_ERROR) == line.endswith(" --help)"), line
    assert {USAGE_ERROR, RUNTIME_ERROR} == {2, 1}


def test_the_errors_page_states_the_cli_convention() -> None:
    """docs/errors.md says what the constants say: the prefix and both statuses."""
    from sessiongen.cli import ERROR_PREFIX, RUNTIME_ERROR, USAGE_ERROR

    page = (Path(__file__).resolve().parents[1] / "docs" / "errors.md").read_text("utf-8")
    section = page.split("## The sessiongen command", 1)[1].split("\n## ", 1)[0]
    assert f"`{ERROR_PREFIX.strip()}`" in section
    assert f"| {USAGE_ERROR} |" in section and f"| {RUNTIME_ERROR} |" in section
