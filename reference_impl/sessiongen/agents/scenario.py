"""Scenarios: what `sessiongen agents run` has the scripted model do, in files users copy and
edit (TOML, in `agents/scenarios/`). A scenario names a small project's files and a list of
turns; each turn is a prompt, the virtual time idle before it, and the model's steps: text,
thinking and tool calls in words every client can act on (`Intent`), which each client turns
into its own tool calls."""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .clients import Intent

MAX_SCENARIO_BYTES = 1024 * 1024


class ScenarioError(ValueError):
    """A scenario that cannot be read: unknown name, not TOML, or not the scenario shape."""


class Step(BaseModel):
    """One reply of the scripted model in the agent loop."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    say: str | None = None
    think: str | None = None
    calls: list[Intent] = Field(default_factory=list)


class Turn(BaseModel):
    """One user prompt, run as one invocation of the client (a fresh process: the session's
    history is reloaded from the client's own store, as after a restart)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    prompt: str = ""
    command: Literal["compact"] | None = None
    """Instead of a prompt, the client's own command: `compact` is its compaction
    (Claude Code's `/compact`, Gemini CLI's `/compress`, ...); its steps, if any, answer
    whatever request the command makes."""
    idle_before: float = Field(default=0.0, ge=0.0, le=30 * 86_400)
    """Virtual seconds between the previous turn and this one (the cache's clock)."""
    new_session: bool = False
    """Start a new session instead of continuing the previous turn's."""
    fork_session: bool = False
    """Continue in a fork of the previous turn's session: a new session with its history
    copied (opencode `run --fork`, Claude Code `--fork-session`, Codex `exec fork`)."""
    steps: list[Step] = Field(default_factory=list)

    @model_validator(mode="after")
    def _prompt_or_command(self) -> Turn:
        if bool(self.prompt) == (self.command is not None):
            raise ValueError("give a prompt or a command, not both")
        if self.new_session and (self.fork_session or self.command):
            raise ValueError("a new session has nothing to fork or compact")
        if self.command is None and not self.steps:
            raise ValueError("a prompt needs at least one step")
        return self


class Scenario(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    description: str = ""
    files: dict[str, str] = Field(default_factory=dict)
    """The project's files, relative path to text."""
    turns: list[Turn] = Field(min_length=1)

    @model_validator(mode="after")
    def _first_turn_opens_the_session(self) -> Scenario:
        first = self.turns[0]
        if first.command is not None or first.fork_session:
            raise ValueError("the first turn opens the session: a prompt, not a command or a fork")
        return self


def scenario_names() -> list[str]:
    """The scenarios shipped with sessiongen."""
    folder = resources.files(__package__).joinpath("scenarios")
    return sorted(
        p.name.removesuffix(".toml") for p in folder.iterdir() if p.name.endswith(".toml")
    )


def load_scenario(name_or_path: str) -> Scenario:
    """A shipped scenario by name, or a scenario file by path."""
    path = Path(name_or_path)
    if path.suffix == ".toml" or path.exists():
        try:
            if path.stat().st_size > MAX_SCENARIO_BYTES:
                raise ScenarioError(f"{path}: over {MAX_SCENARIO_BYTES} bytes")
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ScenarioError(f"{path}: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise ScenarioError(f"{path}: not UTF-8 text") from None
        where = str(path)
    else:
        if name_or_path not in scenario_names():
            raise ScenarioError(
                f"no scenario {name_or_path!r}; shipped: {', '.join(scenario_names())} "
                "(or give a path to a .toml file)"
            )
        resource = resources.files(__package__).joinpath("scenarios", f"{name_or_path}.toml")
        text = resource.read_text(encoding="utf-8")
        where = f"scenario {name_or_path}"
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"{where}: not TOML: {exc}") from None
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        place = ".".join(str(part) for part in first["loc"])
        raise ScenarioError(f"{where}: {place}: {first['msg']}") from None
    for relative in scenario.files:
        parts = Path(relative).parts
        if Path(relative).is_absolute() or ".." in parts or not parts:
            raise ScenarioError(f"{where}: files: {relative!r} must stay inside the project")
    return scenario
