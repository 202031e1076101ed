"""A request body as the emulated APIs parse it: strict JSON, or the text kept for the log.

Its own module because both intake (which answers a body that does not parse) and the
request log in `state` (which serves each body as received) read bodies this way, and
intake depends on the state, not the other way round."""

from __future__ import annotations

import json
import math
from typing import Any


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is out of range for a double")
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_body(raw: bytes) -> tuple[Any, bool]:
    """(body, parsed): the JSON value, or the raw text when it is not JSON (kept for the
    request log, which records bodies as received). Strict JSON, as the APIs parse it: no
    NaN or Infinity, no number beyond a double, no integer longer than Python takes, no
    nesting deeper than the parser's recursion, no lone surrogate (each would otherwise
    become a 500 later)."""
    try:
        value = json.loads(raw, parse_float=_finite, parse_constant=_no_constant)
        if b"\\u" in raw:  # a lone surrogate escape is no Unicode text (UTF-8 cannot hold it)
            json.dumps(value, ensure_ascii=False).encode()
        return value, True
    except (ValueError, RecursionError):  # JSONDecodeError, Unicode errors are ValueErrors
        return raw.decode("utf-8", errors="replace"), False
