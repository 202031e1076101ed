"""Cache breakpoint policies (public home): where a prepared request asks the provider to
cache. They live with the request preparation that applies them, `sessiongen.session.breakpoints`;
see there for each policy and the measurement behind the default."""

from __future__ import annotations

from .session.breakpoints import (
    DEFAULT_CACHE_POLICY,
    CachePolicy,
    lookback_ladder,
    no_cache,
    opencode_default,
    previous_tail,
)

__all__ = [
    "DEFAULT_CACHE_POLICY",
    "CachePolicy",
    "lookback_ladder",
    "no_cache",
    "opencode_default",
    "previous_tail",
]
