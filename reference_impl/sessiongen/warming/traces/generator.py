"""A seeded generator of coding-agent session traces: a long prefix shared by every session of
an agent, tool-loop calls seconds apart, and human gaps between turns from a documented mix.

Same seed, same trace: every draw comes from one `random.Random(seed)` in a fixed order, and
nothing reads the clock.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from . import Trace, TraceRequest
from .segments import SegmentChain


@dataclass(frozen=True, slots=True)
class LogNormal:
    """A lognormal draw given by its median and sigma (of the log), clipped to [low, high]."""

    median: float
    sigma: float
    low: float
    high: float

    def draw(self, rng: random.Random) -> float:
        return min(max(rng.lognormvariate(math.log(self.median), self.sigma), self.low), self.high)


@dataclass(frozen=True, slots=True)
class SessionMix:
    """What `generate_sessions` draws from; the defaults describe a coding agent at work.

    Tokens:
    - `agents` agents, each with one tools+system prefix of `prefix_tokens` (uniform in the
      range) shared by all its sessions; a session picks its agent uniformly.
    - The first prompt is the prefix plus a human message (`human_tokens`). Every later call
      appends the previous call's output (`output_tokens`) plus either tool results
      (`tool_tokens`, within a turn) or a new human message (first call of a turn).
    - A prompt that would pass `context_limit` is compacted: the next prompt is the agent
      prefix, a `summary_tokens` summary and the new content.

    Time:
    - Sessions start as a Poisson process: exponential gaps of mean `session_gap_s`, the first
      at 0.
    - A turn is 1 + Geometric calls: after each call another follows with probability
      `tool_step_p` (mean 1 / (1 - p) calls, 4 by default), `step_gap_s` apart (model time
      plus the tool run), at most `max_calls_per_turn`.
    - After each turn the session ends with probability `end_p` (geometric turns, mean 5), or
      at `max_turns`; otherwise the human answers after a gap: with probability
      `long_gap_p` a long one, log-uniform in `long_gap_s` (a break: 5 to 60 min), else a short
      one from `short_gap_s` (lognormal, median 60 s, clipped to 20 s - 3 min). Gaps are
      request to request.
    """

    agents: int = 2
    prefix_tokens: tuple[int, int] = (12_000, 20_000)
    human_tokens: LogNormal = LogNormal(median=150, sigma=0.9, low=10, high=4_000)
    tool_tokens: LogNormal = LogNormal(median=900, sigma=1.0, low=100, high=8_000)
    output_tokens: LogNormal = LogNormal(median=250, sigma=0.8, low=20, high=4_000)
    context_limit: int = 160_000
    summary_tokens: int = 3_000
    session_gap_s: float = 90.0
    tool_step_p: float = 0.75
    max_calls_per_turn: int = 40
    step_gap_s: LogNormal = LogNormal(median=6, sigma=0.6, low=1, high=60)
    end_p: float = 0.2
    max_turns: int = 50
    long_gap_p: float = 0.15
    long_gap_s: tuple[float, float] = (300.0, 3_600.0)
    short_gap_s: LogNormal = LogNormal(median=60, sigma=0.6, low=20, high=180)

    def __post_init__(self) -> None:
        if self.agents < 1:
            raise ValueError("a mix needs at least one agent")
        for name in ("tool_step_p", "end_p", "long_gap_p"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"{name} must be a probability")


def generate_sessions(
    n_sessions: int, seed: int, mix: SessionMix | None = None, name: str | None = None
) -> Trace:
    """A trace of `n_sessions` coding-agent sessions drawn from `mix` (see `SessionMix` for
    the distributions), deterministic for `seed`. Sessions are `g0`, `g1`, ...; `at` is
    seconds from the first session's start."""
    if n_sessions < 0:
        raise ValueError("n_sessions must be >= 0")
    mix = mix or SessionMix()
    rng = random.Random(seed)
    chain = SegmentChain()
    prefixes = [(chain.new_id(), rng.randint(*mix.prefix_tokens)) for _ in range(mix.agents)]
    requests: list[TraceRequest] = []
    start = 0.0
    for index in range(n_sessions):
        if index:
            start += rng.expovariate(1 / mix.session_gap_s)
        requests.extend(_session(f"g{index}", start, rng.choice(prefixes), mix, rng, chain))
    return Trace.ordered(name or f"generated-{n_sessions}-seed{seed}", requests)


def _session(
    session: str,
    at: float,
    prefix: tuple[int, int],
    mix: SessionMix,
    rng: random.Random,
    chain: SegmentChain,
) -> list[TraceRequest]:
    block, prefix_tokens = prefix
    chain.set(session, (block,), (prefix_tokens,))
    requests: list[TraceRequest] = []
    carried = 0  # the previous call's output, part of the next prompt
    for turn in range(mix.max_turns):
        calls = 1
        while calls < mix.max_calls_per_turn and rng.random() < mix.tool_step_p:
            calls += 1
        for call in range(calls):
            content = carried + round((mix.tool_tokens if call else mix.human_tokens).draw(rng))
            previous = chain.prompt_tokens(session)
            if previous + content > mix.context_limit:
                chain.set(session, (block,), (prefix_tokens,))
                previous, content = prefix_tokens, mix.summary_tokens + content
            blocks, tokens = chain.extend(session, previous, content)
            carried = round(mix.output_tokens.draw(rng))
            requests.append(
                TraceRequest(session, at, blocks, tokens, carried, engine_breakpoints(len(blocks)))
            )
            if call < calls - 1:
                at += mix.step_gap_s.draw(rng)
        if turn == mix.max_turns - 1 or rng.random() < mix.end_p:
            break
        if rng.random() < mix.long_gap_p:
            low, high = mix.long_gap_s
            at += math.exp(rng.uniform(math.log(low), math.log(high)))
        else:
            at += mix.short_gap_s.draw(rng)
    return requests


def engine_breakpoints(blocks: int) -> tuple[int, ...]:
    """Where the engine's default cache policy (`cache_policy.previous_tail`) marks a
    generated prompt of `blocks` blocks besides its last: the agent prefix (tools and system,
    block 0) and the block that ended the previous call (the one before the last, since each
    call appends one block)."""
    return tuple(sorted({0, blocks - 2} - {blocks - 1})) if blocks > 1 else ()
