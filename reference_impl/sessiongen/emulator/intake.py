"""How every emulated API reads an incoming request for its log: the body as parsed JSON or
as received text, and the headers by lower-case name. One place, so the Anthropic endpoint
and each provider module log requests alike."""

from __future__ import annotations

import json
from typing import Any

from fastapi import Request


def parse_body(raw: bytes) -> tuple[Any, bool]:
    """(body, parsed): the JSON value, or the raw text when it is not JSON (kept for the
    request log, which records bodies as received)."""
    try:
        return json.loads(raw), True
    except (json.JSONDecodeError, UnicodeDecodeError):
        return raw.decode("utf-8", errors="replace"), False


def request_headers(request: Request) -> dict[str, str]:
    """The request headers by lower-case name; a repeated header's values joined by ", "."""
    return {name: ", ".join(request.headers.getlist(name)) for name in request.headers}
