"""The real agents as the judge: run opencode, Claude Code, Codex and Gemini CLI against the
emulator on a scenario (`run_scenario`), and check any server's `session.generate` against
the contract's black-box laws (`sessiongen agents conform`). See docs/agents.md.

The names load on first use, so `sessiongen --help` (which builds the `agents` command line
from this package) imports neither pydantic nor the emulator."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .clients import (
        AGENTS_DIR_ENV,
        CLIENTS,
        AgentClient,
        ClientName,
        ClientNotInstalled,
        Intent,
        agents_dir,
    )
    from .run import REPORT_COLUMNS, AgentRun, CallRow, TurnOutcome, report_rows, run_scenario
    from .scenario import Scenario, ScenarioError, Step, Turn, load_scenario, scenario_names
    from .wire import WireCall, read_call, shared_prefix_tokens

__all__ = [
    "AGENTS_DIR_ENV",
    "CLIENTS",
    "REPORT_COLUMNS",
    "AgentClient",
    "AgentRun",
    "CallRow",
    "ClientName",
    "ClientNotInstalled",
    "Intent",
    "Scenario",
    "ScenarioError",
    "Step",
    "Turn",
    "TurnOutcome",
    "WireCall",
    "agents_dir",
    "load_scenario",
    "read_call",
    "report_rows",
    "run_scenario",
    "scenario_names",
    "shared_prefix_tokens",
]


_HOMES = {
    **dict.fromkeys(
        [
            "AGENTS_DIR_ENV",
            "CLIENTS",
            "AgentClient",
            "ClientName",
            "ClientNotInstalled",
            "Intent",
            "agents_dir",
        ],
        "clients",
    ),
    **dict.fromkeys(
        ["REPORT_COLUMNS", "AgentRun", "CallRow", "TurnOutcome", "report_rows", "run_scenario"],
        "run",
    ),
    **dict.fromkeys(
        ["Scenario", "ScenarioError", "Step", "Turn", "load_scenario", "scenario_names"], "scenario"
    ),
    **dict.fromkeys(["WireCall", "read_call", "shared_prefix_tokens"], "wire"),
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
