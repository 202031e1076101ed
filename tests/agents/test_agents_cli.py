"""`sessiongen agents list|run` as a user meets them before any client is installed, and
with bad scenarios: one line, never a traceback, nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest
from sessiongen.agents import CLIENTS, ScenarioError, load_scenario, scenario_names

from ..test_cli import _cli, _one_line_error


def test_list_names_every_client_and_its_pinned_install_command(tmp_path: Path) -> None:
    """The pins are the issue's: opencode-ai 1.18.33, claude-code 2.1.328, codex 0.169.0,
    gemini-cli 0.61.0; each uninstalled client shows the npm command that installs it."""
    result = _cli("agents", "list", "--dir", str(tmp_path))
    assert result.returncode == 0, result.stderr
    for spec in (
        "opencode-ai@1.18.33",
        "@anthropic-ai/claude-code@2.1.328",
        "@openai/codex@0.169.0",
        "@google/gemini-cli@0.61.0",
    ):
        line = next(line for line in result.stdout.splitlines() if spec in line)
        assert f"not installed: npm install --prefix {tmp_path}/" in line
        assert line.endswith(f"--save-exact --no-audit --no-fund {spec}")
    assert set(CLIENTS) == {"opencode", "claude-code", "codex", "gemini-cli"}


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_a_client_not_installed_is_one_line(client: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = _cli(
        "agents", "run", "--client", client, "--scenario", "coding", "--out", str(out),
        "--dir", str(tmp_path / "empty"),
    )  # fmt: skip
    assert result.returncode == 2
    line = _one_line_error(result)
    assert f"is not installed under {tmp_path / 'empty'}" in line
    assert f"sessiongen agents install --client {client}" in line
    assert not out.exists()


def test_an_unknown_scenario_names_the_shipped_ones(tmp_path: Path) -> None:
    result = _cli(
        "agents", "run", "--client", "codex", "--scenario", "nope", "--out", str(tmp_path / "o")
    )
    assert result.returncode == 2
    line = _one_line_error(result)
    assert (
        "no scenario 'nope'; shipped: coding, compaction, fork, history-reload, idle-gaps, "
        "session-fork, subagent" in line
    )


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("name = ", "not TOML"),
        ('name = "x"\n', "turns: Field required"),
        ('name = "x"\n[[turns]]\nprompt = "p"\nsteps = []\n', "a prompt needs at least one step"),
        ('name = "x"\n[[turns]]\nprompt = "p"\ncommand = "compact"\n', "a prompt or a command"),
        ('name = "x"\n[[turns]]\ncommand = "undo"\n', "turns.0.command"),
        ('name = "x"\n[[turns]]\ncommand = "compact"\n', "the first turn opens the session"),
        ('name = "x"\n[[turns]]\nprompt = "p"\n[[turns.steps]]\nsay = "ok"\n[[turns]]\n'
         'prompt = "q"\nnew_session = true\nfork_session = true\n[[turns.steps]]\nsay = "ok"\n',
         "a new session has nothing to fork or compact"),
        ('name = "x"\n[files]\n"../escape.py" = "x"\n[[turns]]\nprompt = "p"\n'
         '[[turns.steps]]\nsay = "ok"\n', "must stay inside the project"),
        ('name = "x"\n[[turns]]\nprompt = "p"\n[[turns.steps]]\n'
         'calls = [{ tool = "rm" }]\n', "turns.0.steps.0.calls.0.tool"),
    ],
)  # fmt: skip
def test_a_bad_scenario_file_is_one_line(text: str, error: str, tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ScenarioError, match=error.replace(".", r"\.")):
        load_scenario(str(path))
    result = _cli(
        "agents", "run", "--client", "codex", "--scenario", str(path), "--out", str(tmp_path / "o")
    )
    assert result.returncode == 2
    assert error in _one_line_error(result)


def test_every_shipped_scenario_loads() -> None:
    """Each has a tool loop or at least one reply per turn, and the files stay inside."""
    for name in scenario_names():
        scenario = load_scenario(name)
        assert scenario.name == name
        assert all(turn.steps for turn in scenario.turns)


@pytest.mark.parametrize(
    ("client", "scenario", "error"),
    [
        ("opencode", "fork", "opencode has no subagent that inherits the conversation"),
        ("gemini-cli", "fork", "gemini-cli has no subagent that inherits the conversation"),
        ("gemini-cli", "session-fork", "gemini-cli cannot continue in a fork of the session"),
    ],
)
def test_a_side_call_a_client_cannot_make_is_one_line(
    client: str, scenario: str, error: str, tmp_path: Path
) -> None:
    """Said before anything runs, installed or not."""
    out = tmp_path / "o"
    result = _cli("agents", "run", "--client", client, "--scenario", scenario, "--out", str(out))
    assert result.returncode == 2
    assert error in _one_line_error(result)
    assert not out.exists()
