"""`sessiongen agents conform`: the contract's black-box laws of `session.generate`, run
against any server through an adapter (docs/conformance.md).

The server under test must send its provider calls to a sessiongen emulator (`--emulator`),
whose admin API the kit uses to read the request log, script replies and inject faults;
the kit resets that emulator before each law. One line per law, `PASS name: reason` or
`FAIL name: reason`; exit 0 when every law passes, 1 when one fails, 2 when the server or
the emulator cannot be reached (one line, no traceback).

The laws are `conform_laws.LAWS`, the adapters `conform_adapters`, and the deliberately
broken servers the kit's own tests run it against `conform_broken`.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from .._bind import EMULATOR_TOKEN_ENV
from .._bind import SERVER_TOKEN_ENV as TOKEN_ENV

if TYPE_CHECKING:
    from .conform_adapters import Adapter

__all__ = ["ADAPTERS", "add_arguments", "main", "make_adapter"]

ADAPTERS = ("sessiongen", "opencode")
OPENCODE_PASSWORD_ENV = "OPENCODE_SERVER_PASSWORD"
DEFAULT_TIMEOUT = 60.0
"""Seconds one server call may take. The kit's modules (httpx, pydantic, the wire views) are
imported when it runs, not when `sessiongen` builds its command line."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `sessiongen agents conform`."""
    parser.description = (
        "Check a server's session.generate against the contract's black-box laws. The "
        "server's provider must be a sessiongen emulator (--emulator): the kit reads its "
        "request log, scripts its replies and injects faults, and resets it before each law."
    )
    parser.add_argument("--base-url", required=True, help="the server under test")
    parser.add_argument(
        "--emulator",
        required=True,
        metavar="URL",
        help="the sessiongen emulator the server sends its provider calls to",
    )
    parser.add_argument(
        "--adapter",
        choices=ADAPTERS,
        default="sessiongen",
        help="the server's API: sessiongen (sessiongen serve, the default) or opencode "
        "(opencode serve)",
    )
    parser.add_argument(
        "--token",
        help=f"the server's token: a bearer token for sessiongen (default: ${TOKEN_ENV}), the "
        f"basic-auth password for opencode (default: ${OPENCODE_PASSWORD_ENV})",
    )
    parser.add_argument(
        "--emulator-token",
        help=f"the emulator's admin token (default: ${EMULATOR_TOKEN_ENV})",
    )
    parser.add_argument("--agent", help="the agent sessions are created for (server default)")
    parser.add_argument(
        "--law",
        action="append",
        metavar="NAME",
        help="check only this law (repeatable; default: all of no-mutation, "
        "revision-unchanged, one-attempt, tools-per-policy, same-prefix, empty-is-success)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        help=f"seconds one server call may take (default {DEFAULT_TIMEOUT:g})",
    )


def make_adapter(
    name: str,
    base_url: str,
    *,
    token: str | None = None,
    agent: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> Adapter:
    """The adapter `name` (one of `ADAPTERS`) on `base_url`."""
    # startup: the command line loads only what the command it runs needs
    from .conform_adapters import OpencodeAdapter, SessiongenAdapter

    if name == "opencode":
        return OpencodeAdapter(base_url, token=token, agent=agent, timeout=timeout)
    if name == "sessiongen":
        return SessiongenAdapter(base_url, token=token, agent=agent, timeout=timeout)
    raise ValueError(f"no adapter {name!r}; known: {', '.join(ADAPTERS)}")


def main(args: argparse.Namespace) -> int:
    """Run the kit; the exit status is 0 when every law holds."""
    # startup: the command line loads only what the command it runs needs
    from .conform_adapters import Unreachable
    from .conform_laws import LAW_NAMES, LAWS, EmulatorAdmin, Kit, check_law

    if args.timeout <= 0:
        return _error("argument --timeout: must be above 0")
    unknown = [name for name in args.law or () if name not in LAW_NAMES]
    if unknown:
        return _error(f"argument --law: no law {unknown[0]!r}; the laws: {', '.join(LAW_NAMES)}")
    env = OPENCODE_PASSWORD_ENV if args.adapter == "opencode" else TOKEN_ENV
    token = args.token if args.token is not None else os.environ.get(env) or None
    emulator_token = args.emulator_token or os.environ.get(EMULATOR_TOKEN_ENV) or None
    adapter = make_adapter(
        args.adapter, args.base_url, token=token, agent=args.agent, timeout=args.timeout
    )
    emulator = EmulatorAdmin(args.emulator, token=emulator_token, timeout=args.timeout)
    chosen = [law for law in LAWS if not args.law or law.name in args.law]
    failed = 0
    try:
        adapter.check()
        emulator.check()
        kit = Kit(adapter, emulator)
        for law in chosen:
            verdict = check_law(kit, law)
            failed += verdict.status == "FAIL"
            print(verdict.line(), flush=True)
    except Unreachable as exc:
        return _error(str(exc))
    finally:
        adapter.close()
        emulator.close()
    return 1 if failed else 0


def _error(message: str) -> int:
    print(f"sessiongen agents conform: {message}", file=sys.stderr)
    return 2
