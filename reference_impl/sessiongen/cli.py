"""The `sessiongen` command: `demo` runs the main job, `emulator` serves the emulator."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from importlib.metadata import version
from typing import NoReturn

PORTS = range(1, 65536)


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line on stderr (exit 2), so they read as errors, not as help."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def port(text: str) -> int:
    """An argparse type: a TCP port a server can listen on."""
    try:
        number = int(text)
    except ValueError:
        number = -1
    if number not in PORTS:
        raise argparse.ArgumentTypeError(
            f"must be a port from {PORTS.start} to {PORTS.stop - 1}, got {text!r}"
        )
    return number


def main(argv: Sequence[str] | None = None) -> int:
    parser = _Parser(prog="sessiongen", description=__doc__)
    parser.add_argument("--version", action="version", version=f"%(prog)s {version('sessiongen')}")
    commands = parser.add_subparsers(dest="command", required=True)

    commands.add_parser(
        "demo", help="three durable turns and a generate on the embedded emulator and SQLite"
    )

    emulator = commands.add_parser("emulator", help="serve the Anthropic-compatible emulator")
    emulator.add_argument("--host", default="127.0.0.1", help="bind address (loopback default)")
    emulator.add_argument("--port", type=port, default=8765, help="1 to 65535 (default 8765)")

    args = parser.parse_args(argv)
    if args.command == "demo":
        from ._demo import print_demo

        asyncio.run(print_demo())
        return 0
    from .emulator import serve

    try:
        serve(host=args.host, port=args.port)
    except OSError as exc:  # serve checks the address before it serves, so this is binding
        address = f"[{args.host}]:{args.port}" if ":" in args.host else f"{args.host}:{args.port}"
        print(f"sessiongen: error: cannot bind {address}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
