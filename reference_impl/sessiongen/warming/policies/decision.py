"""What every warming policy is made of: the `Decision` it answers, the client-side `History`
it decides from, the `Policy` protocol the replay and the keeper drive, and the fixed
schedules (`Fixed`) the other policies build on. `policies` holds the catalogue of policies;
this module is what the replay (`trace_replay`) needs, so the two import in one direction."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ...cache import TTL, TTL_SECONDS, price
from ..traces import TraceRequest

DEFAULT_MODEL = "claude-sonnet-4-6"
_TTLS: tuple[TTL, ...] = ("5m", "1h")
PING_MARGIN = 5.0  # seconds a "just before expiry" ping leaves between itself and the expiry


@dataclass(frozen=True, slots=True)
class Decision:
    """The client's choice for one request: its breakpoint TTL and keep-alive ping offsets."""

    ttl: TTL | None
    ping_offsets: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if self.ttl is None and self.ping_offsets:
            raise ValueError("a ping needs a breakpoint: ttl None takes no pings")
        previous = 0.0
        for offset in self.ping_offsets:
            if not offset > previous:
                raise ValueError(f"ping offsets must be positive and increasing: {self}")
            previous = offset


@dataclass(frozen=True, slots=True)
class History:
    """What the client knows about the request's session when the request arrives.

    `readable_tokens` is the previous prompt's size when that prompt is a prefix of this one
    (within the lookback window) and the client's bookkeeping says its entry is still alive:
    what a breakpoint on this request expects to read. `index` is the request's position in
    the trace; only offline policies may use it to look ahead.
    """

    index: int
    turn: int
    gap: float | None
    previous_tokens: int
    readable_tokens: int
    extends: bool = True
    """Whether the session's previous prompt is a prefix of this one (within the lookback
    window): whether this request could read what the previous one left cached."""


class Policy(Protocol):
    """A warming policy. `reset` starts a fresh run; `observe` sees every arrival in time
    order just before `decide` is asked about it."""

    @property
    def name(self) -> str: ...

    @property
    def online(self) -> bool: ...

    @property
    def ping_may_rewrite(self) -> bool: ...

    def reset(self) -> None: ...

    def observe(self, request: TraceRequest, history: History) -> None: ...

    def decide(self, request: TraceRequest, history: History) -> Decision: ...


class PolicyBase:
    """What a `Policy` inherits unless it says otherwise: online, stateless, pings never
    rewrite, no state across sessions (so a replay may shard it by session)."""

    name: str = ""
    online: bool = True
    ping_may_rewrite: bool = False
    shardable: bool = True
    """Whether a replay may split the trace by session (`warming.study.shards`): False for a
    policy whose decisions depend on other sessions' requests (one that learns)."""

    def reset(self) -> None:
        pass

    def observe(self, request: TraceRequest, history: History) -> None:
        pass


class _Rates:
    """A model's prices as USD per token, for policies that weigh costs."""

    def __init__(self, model: str) -> None:
        p = price(model)
        self.input = p.input / 1e6
        self.read = p.cache_read / 1e6
        self.write = {"5m": p.cache_write_5m / 1e6, "1h": p.cache_write_1h / 1e6}


def _just_before_expiry(ttl: TTL, horizon: float, margin: float = PING_MARGIN) -> tuple[float, ...]:
    """Ping offsets one `margin` before each expiry, while they fall before `horizon`."""
    interval = TTL_SECONDS[ttl] - margin
    return tuple(
        interval * k for k in range(1, int(horizon // interval) + 1) if interval * k < horizon
    )


class Fixed(PolicyBase):
    """The same decision for every request."""

    def __init__(self, name: str, ttl: TTL | None, ping_offsets: Sequence[float] = ()) -> None:
        self.name = name
        self._decision = Decision(ttl, tuple(ping_offsets))

    def decide(self, request: TraceRequest, history: History) -> Decision:
        return self._decision
