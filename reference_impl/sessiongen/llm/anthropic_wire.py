"""Facts of the Anthropic Messages wire that more than one part of sessiongen reads.

The adapter, the emulator and the cost model each speak this wire; the error table and the
usage shape are written here once so that they cannot drift apart. This module imports
nothing but the standard library and the provider-neutral `Usage`.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from .types import Usage

__all__ = ["ERROR_TYPES", "usage_from_anthropic"]

# AD:api/errors: the error `type` the API sends with each HTTP status, in the error body and
# in an `error` event inside a 200 stream. Read-only, since every reader shares this one.
ERROR_TYPES: Mapping[int, str] = MappingProxyType(
    {
        400: "invalid_request_error",
        401: "authentication_error",
        402: "billing_error",
        403: "permission_error",
        404: "not_found_error",
        409: "conflict_error",
        413: "request_too_large",
        429: "rate_limit_error",
        500: "api_error",
        504: "timeout_error",
        529: "overloaded_error",
    }
)


def _get(source: Mapping[str, Any] | object, name: str) -> Any:
    # API dicts and SDK objects spell the fields alike; absent and null both read as None.
    return source.get(name) if isinstance(source, Mapping) else getattr(source, name, None)


def _count(source: Mapping[str, Any] | object, name: str) -> int | None:
    value = _get(source, name)
    return int(value) if isinstance(value, int | float) else None


def usage_from_anthropic(usage: Mapping[str, Any] | object, previous: Usage | None = None) -> Usage:
    """Token counts by kind from an Anthropic `usage`: an API dict or an SDK usage object.

    A field the usage omits (absent or null) keeps its value in `previous`, so a stream's
    cumulative usage events fold with `previous` set to the usage so far; a one-off usage
    leaves it out (all zero). Cache writes come from the per-TTL `cache_creation` split. A
    total `cache_creation_input_tokens` without that split counts as 5m writes (the API's
    default TTL, and all it had before 1h caching), keeping any 1h share already in
    `previous`.
    """
    if previous is None:
        previous = Usage()
    split = _get(usage, "cache_creation")
    write_5m, write_1h = previous.cache_write_5m_tokens, previous.cache_write_1h_tokens
    total_writes = _count(usage, "cache_creation_input_tokens")
    if split is not None:
        write_5m = _count(split, "ephemeral_5m_input_tokens") or 0
        write_1h = _count(split, "ephemeral_1h_input_tokens") or 0
    elif total_writes is not None:
        write_1h = min(write_1h, total_writes)
        write_5m = total_writes - write_1h
    return Usage(
        input_tokens=_or(_count(usage, "input_tokens"), previous.input_tokens),
        output_tokens=_or(_count(usage, "output_tokens"), previous.output_tokens),
        cache_read_tokens=_or(_count(usage, "cache_read_input_tokens"), previous.cache_read_tokens),
        cache_write_5m_tokens=write_5m,
        cache_write_1h_tokens=write_1h,
    )


def _or(value: int | None, default: int) -> int:
    return default if value is None else value
