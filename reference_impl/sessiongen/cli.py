"""The `sessiongen` command: `demo` runs the main job, `emulator` serves the emulator."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sessiongen", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    commands.add_parser(
        "demo", help="three durable turns and a generate on the embedded emulator and SQLite"
    )

    emulator = commands.add_parser("emulator", help="serve the Anthropic-compatible emulator")
    emulator.add_argument("--host", default="127.0.0.1", help="bind address (loopback default)")
    emulator.add_argument("--port", type=int, default=8765)

    args = parser.parse_args(argv)
    if args.command == "demo":
        from .demo import print_demo

        asyncio.run(print_demo())
        return 0
    from .emulator import serve

    serve(host=args.host, port=args.port)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
