"""`sessiongen agents list|install|run|conform`: the command line of the agents package."""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from .._choices import AGENT_CLIENTS
from . import conform

if TYPE_CHECKING:
    from .clients import AgentClient, ClientName

INSTALL_TIMEOUT = 900.0
TURN_TIMEOUT = 180.0
"""Seconds a turn may take by default (`run.TURN_TIMEOUT`, repeated here so that building the
command line imports neither pydantic nor the emulator)."""
SCENARIOS = Path(__file__).parent / "scenarios"


def add_agents_parser(commands: Any) -> argparse.ArgumentParser:
    """Add `agents` and its subcommands to the `sessiongen` command's subparsers."""
    agents: argparse.ArgumentParser = commands.add_parser(
        "agents",
        help="run real agent clients (opencode, Claude Code, Codex, Gemini CLI) on the emulator",
        description="Run the agents users run against the emulator on a scenario, and check a "
        "server's session.generate against the contract (conform).",
    )
    sub = agents.add_subparsers(dest="agents_command", required=True)
    listing = sub.add_parser(
        "list", help="which clients are installed, and how to install the rest"
    )
    listing.add_argument(
        "--dir", type=Path, help="where clients are installed (default: %(default)s)"
    )
    install = sub.add_parser("install", help="install a client with npm, at its pinned version")
    install.add_argument("--client", choices=AGENT_CLIENTS, required=True)
    install.add_argument(
        "--dir", type=Path, help="where to install (default: $SESSIONGEN_AGENTS_DIR)"
    )
    run = sub.add_parser("run", help="run a client on a scenario against a fresh emulator")
    run.add_argument("--client", choices=AGENT_CLIENTS, required=True)
    run.add_argument(
        "--scenario",
        required=True,
        help="a shipped scenario ("
        + ", ".join(sorted(p.stem for p in SCENARIOS.glob("*.toml")))
        + ") or a path to a .toml file",
    )
    run.add_argument("--out", type=Path, required=True, help="the directory to write into")
    run.add_argument("--model", help="the model to ask the client for (default: the client's own)")
    run.add_argument("--dir", type=Path, help="where clients are installed")
    run.add_argument(
        "--timeout",
        type=float,
        default=TURN_TIMEOUT,
        help=f"seconds a turn may take before it is killed (default {TURN_TIMEOUT:g})",
    )
    check = sub.add_parser(
        "conform", help="check a server's session.generate against the contract's black-box laws"
    )
    conform.add_arguments(check)
    return agents


def run_agents_command(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if args.agents_command == "conform":
        return conform.main(args)
    # startup: the command line loads only what the command it runs needs
    from .clients import CLIENTS, ClientNotInstalled, UnsupportedIntent, agents_dir
    from .run import run_scenario
    from .scenario import ScenarioError, load_scenario

    root = args.dir if args.dir is not None else agents_dir()
    if args.agents_command == "list":
        return _list(root)
    client = CLIENTS[cast("ClientName", args.client)]()
    if args.agents_command == "install":
        return _install(client, root)
    try:
        scenario = load_scenario(args.scenario)
    except ScenarioError as exc:
        print(f"sessiongen agents run: {exc}", file=sys.stderr)
        return 2
    if args.timeout <= 0:
        parser.error("argument --timeout: must be above 0")
    try:
        run = run_scenario(
            client.name, scenario, args.out, root=root, model=args.model, timeout=args.timeout
        )
    except (ClientNotInstalled, UnsupportedIntent) as exc:
        print(f"sessiongen agents run: {exc}", file=sys.stderr)
        return 2
    for turn in run.turns:
        state = "timed out" if turn.exit_code is None else f"exit {turn.exit_code}"
        unused = f", {turn.unused_steps} scripted steps unused" if turn.unused_steps else ""
        print(f"turn {turn.turn}: {state}, {turn.requests} requests{unused}")
    kinds: dict[str, int] = {}
    for row in run.rows:
        kinds[row.kind] = kinds.get(row.kind, 0) + 1
    refused = sum(1 for row in run.rows if row.status >= 400)
    print(
        f"{client.name} {client.version} on {scenario.name}: {len(run.rows)} calls ("
        + ", ".join(f"{n} {k}" for k, n in kinds.items())
        + f"), {refused} answered 4xx/5xx; wrote {args.out}/report.csv, requests.jsonl, "
        "trace.events.jsonl"
    )
    return 0 if run.completed and not refused else 1


def _list(root: Path) -> int:
    # startup: the command line loads only what the command it runs needs
    from .clients import CLIENTS

    print(f"clients under {root} (set $SESSIONGEN_AGENTS_DIR or --dir to change):")
    for name, kind in CLIENTS.items():
        client = kind()
        found = client.binary(root)
        where = (
            f"installed: {found}"
            if found
            else "not installed: " + " ".join(client.install_command(root))
        )
        print(f"  {name:<12} {client.spec:<34} {where}")
    if shutil.which("npm") is None:
        print("npm is not on PATH: install Node.js 20+ (with npm) to install the clients")
    return 0


def _install(client: AgentClient, root: Path) -> int:
    if shutil.which("npm") is None:
        print(
            "sessiongen agents install: npm is not on PATH; install Node.js 20+ with npm",
            file=sys.stderr,
        )
        return 2
    client.prefix(root).mkdir(parents=True, exist_ok=True)
    command = client.install_command(root)
    print(" ".join(command))
    try:
        done = subprocess.run(command, timeout=INSTALL_TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        print(f"sessiongen agents install: npm ran past {INSTALL_TIMEOUT:g} s", file=sys.stderr)
        return 1
    if done.returncode != 0 or client.binary(root) is None:
        print(f"sessiongen agents install: npm did not install {client.spec}", file=sys.stderr)
        return 1
    print(f"installed {client.spec}: {client.binary(root)}")
    return 0
