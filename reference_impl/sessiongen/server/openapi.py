"""Write the server's OpenAPI document: `uv run python -m sessiongen.server.openapi [PATH]`.

The committed copy is `docs/openapi.json` (the default PATH, from the repository root); a
test fails when it differs from what `create_app(...).openapi()` returns, so the interface
users script against changes only on purpose.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from ..sample import SAMPLE_AGENT
from ..session.engine import SessionEngine
from ..session.store import SessionStore
from ..testing import ScriptedLLMClient
from .app import create_app

DEFAULT_PATH = Path("docs/openapi.json")


def openapi_document() -> dict[str, Any]:
    """The app's OpenAPI document. It does not depend on the engine, the store or the
    provider, so a placeholder engine (never called) builds it."""

    store = SessionStore()
    try:
        return create_app(SessionEngine(store, ScriptedLLMClient(), [SAMPLE_AGENT])).openapi()
    finally:
        store.close()


def render(document: dict[str, Any]) -> str:
    """The committed text: two-space indents, FastAPI's key order, a final newline."""
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) > 1:
        print("usage: python -m sessiongen.server.openapi [PATH]", file=sys.stderr)
        return 2
    path = Path(args[0]) if args else DEFAULT_PATH
    path.write_text(render(openapi_document()), encoding="utf-8")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
