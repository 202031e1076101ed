"""Cache breakpoint placement measured on tool-heavy coding-agent sessions, through the real
engine and the emulator.

The provider looks back at most 20 content blocks from each breakpoint, and a Step with N
parallel tool calls adds 2N + 1 blocks (the reply's text and N tool_use blocks, then N
tool_result blocks), so a placement that only marks the tail misses the previous request's
entry after a Step of 10 or more calls. Which placement should be the default is decided
here by measurement:

- `build_scenario` draws sessions as engine turns from one `random.Random(seed)`: a human
  prompt per turn, the Steps of each turn (scripted replies with parallel calls of the real
  workspace tools on the sample files, then a final text reply) and the virtual time before
  every request. Turns, Steps, gaps and text sizes come from `SessionMix` (its defaults,
  imported, not copied); the number of parallel calls per tool Step is `PlacementMix.
  tool_calls`, a heavy-tailed lognormal of 1 to 16.
- `run_scenario` drives an engine through it on a lab, spending each gap on the emulator's
  virtual clock just before the request it precedes.
- `measure_placement` runs the same scenario once per cache policy, each in a fresh lab, and
  reads what was billed from the emulator's request log (the wire), not from the engine.
"""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import reduce
from operator import add
from typing import Any

from ...cache.pricing import cost
from ...cache.store import TTL_SECONDS
from ...lab import EmulatorLab, emulator_lab, logged_usage
from ...llm.client import LLMClient
from ...llm.types import LLMRequest, LLMResponse, StreamEvent, Usage
from ...model import Agent
from ...sample import SAMPLE_AGENT, SAMPLE_WORKSPACE
from ...session.breakpoints import CachePolicy, lookback_ladder, opencode_default, previous_tail
from ...tokens import BYTES_PER_TOKEN, count_text_tokens, count_tool_call_tokens
from ..traces.generator import LogNormal, SessionMix

PLACEMENT_POLICIES: Mapping[str, CachePolicy] = {
    "opencode_default": opencode_default,
    "previous_tail": previous_tail,
    "lookback_ladder": lookback_ladder,
}
"""The policies `measure_placement` compares when given none."""


@dataclass(frozen=True, slots=True)
class PlacementMix:
    """What `build_scenario` draws from.

    `session`: turns per session (geometric, `end_p`, at most `max_turns`), model requests
    per turn (1 + geometric with `tool_step_p`, at most `max_calls_per_turn`; all but the
    last are tool Steps), the gaps (`step_gap_s` between Steps, `short_gap_s` / `long_gap_s`
    between turns, exponential `session_gap_s` between sessions) and the sizes of the human
    prompts (`human_tokens`) and of the replies' text (`output_tokens`, clipped so text and
    calls fit the agent's output limit). Tool results are whatever the real tools return on
    the sample workspace.

    `tool_calls`: parallel calls in one tool Step, `round` of a lognormal with median 3 and
    sigma 0.9 clipped to 1..16: half the Steps make 3 or fewer calls, about one in ten makes
    10 or more (21+ blocks, past the 20-block lookback) and about one in thirty hits 16.
    """

    session: SessionMix = SessionMix()
    tool_calls: LogNormal = LogNormal(median=3, sigma=0.9, low=1, high=16)


def placement_agent(mix: PlacementMix) -> Agent:
    """The sample agent with a step limit above the longest drawn turn: the engine's last
    Step sends `tool_choice: none`, which changes the messages section's hash for every
    policy alike, so no scripted Step may be the last one."""
    return SAMPLE_AGENT.model_copy(update={"steps": mix.session.max_calls_per_turn + 1})


@dataclass(frozen=True)
class ScriptedStep:
    """One model request: the virtual seconds spent before it, and the emulator's reply."""

    gap_s: float
    reply: dict[str, Any]

    @property
    def tool_calls(self) -> int:
        """Parallel tool calls in the reply: the Step adds 2N + 1 blocks (N = 0: one)."""
        return len(self.reply.get("tool_calls", []))


@dataclass(frozen=True)
class ScriptedTurn:
    """One human prompt and the Steps the Drain runs for it (the last one answers in text)."""

    prompt: str
    steps: tuple[ScriptedStep, ...]


@dataclass(frozen=True)
class ScriptedSession:
    """One session's turns; `id` becomes the engine's session id, so logs line up."""

    id: str
    turns: tuple[ScriptedTurn, ...]

    @property
    def steps(self) -> tuple[ScriptedStep, ...]:
        return tuple(step for turn in self.turns for step in turn.steps)


_QUESTIONS = (
    "What does this repository do, and where should I start?",
    "Is anything left to do in the code? Check the TODOs.",
    "Does mean() handle an empty list? Look at the tests too.",
    "Which functions lack tests?",
    "Summarise the layout of src/ and tests/.",
    "Are the AGENTS.md rules followed everywhere?",
)
_PROMPT_FILLER = "Context: we keep functions small, tested and documented in this repository. "
_TOOL_TEXT = "Let me look at the workspace files that matter for this. "
_FINAL_TEXT = "Here is what I found in the workspace, file by file. "


def _workspace_calls() -> tuple[dict[str, Any], ...]:
    """Every call the scenario may make: the sample agent's real tools on the sample files."""
    files = sorted(SAMPLE_WORKSPACE)
    dirs = sorted({"."} | {name.rsplit("/", 1)[0] for name in files if "/" in name})
    patterns = ("TODO", "def ", "import", "assert", "return")
    return (
        *({"name": "read_file", "input": {"path": f}} for f in files),
        *({"name": "list_files", "input": {"path": d}} for d in dirs),
        *({"name": "grep", "input": {"pattern": p}} for p in patterns),
        *({"name": "grep", "input": {"pattern": p, "path": d}} for p in patterns for d in dirs),
    )


WORKSPACE_CALLS = _workspace_calls()


def _text(filler: str, tokens: int) -> str:
    """Repeats of `filler` cut to `tokens` tokens (ASCII only, so 4 characters a token)."""
    size = tokens * BYTES_PER_TOKEN
    return (filler * (size // len(filler) + 1))[:size].strip()


def _prompt(question: str, tokens: int) -> str:
    """`question`, padded with context to about `tokens` tokens."""
    missing = tokens - count_text_tokens(question)
    return f"{question}\n\n{_text(_PROMPT_FILLER, missing)}" if missing > 0 else question


def _reply(
    rng: random.Random, mix: PlacementMix, agent: Agent, *, tool_step: bool
) -> dict[str, Any]:
    """A scripted reply: text of a drawn size and, for a tool Step, parallel calls; the text is
    clipped so the whole reply fits `agent.max_output_tokens` (no truncated call)."""
    calls: list[dict[str, Any]] = []
    if tool_step:
        n = round(mix.tool_calls.draw(rng))
        calls = [dict(rng.choice(WORKSPACE_CALLS)) for _ in range(n)]
    call_tokens = sum(count_tool_call_tokens(c["name"], c["input"]) for c in calls)
    text_tokens = min(
        round(mix.session.output_tokens.draw(rng)), agent.max_output_tokens - call_tokens
    )
    text = _text(_TOOL_TEXT if tool_step else _FINAL_TEXT, max(text_tokens, 1))
    reply: dict[str, Any] = {"text": text}
    if calls:
        reply["tool_calls"] = calls
    return reply


def _session(
    index: int, rng: random.Random, mix: PlacementMix, agent: Agent, start_gap: float
) -> ScriptedSession:
    """One session, deciding in `generator._session`'s order: a turn's calls, then whether
    the session ends, then the human gap (the prompt and replies are drawn in between)."""
    sm = mix.session
    turns: list[ScriptedTurn] = []
    gap = start_gap
    for turn in range(sm.max_turns):
        calls = 1
        while calls < sm.max_calls_per_turn and rng.random() < sm.tool_step_p:
            calls += 1
        prompt = _prompt(rng.choice(_QUESTIONS), round(sm.human_tokens.draw(rng)))
        steps: list[ScriptedStep] = []
        for call in range(calls):
            if call:
                gap = sm.step_gap_s.draw(rng)
            steps.append(ScriptedStep(gap, _reply(rng, mix, agent, tool_step=call < calls - 1)))
        turns.append(ScriptedTurn(prompt, tuple(steps)))
        if turn == sm.max_turns - 1 or rng.random() < sm.end_p:
            break
        if rng.random() < sm.long_gap_p:
            low, high = sm.long_gap_s
            gap = math.exp(rng.uniform(math.log(low), math.log(high)))
        else:
            gap = sm.short_gap_s.draw(rng)
    return ScriptedSession(f"placement-{index}", tuple(turns))


def build_scenario(
    sessions: int, seed: int, mix: PlacementMix | None = None
) -> tuple[ScriptedSession, ...]:
    """`sessions` tool-heavy sessions, deterministic for `seed`: every draw comes from one
    `random.Random(seed)` in a fixed order. Sessions run one after another on one clock (the
    Drain runs a turn's Steps back to back, so sessions cannot interleave at Step
    granularity); the pause before each session after the first is exponential with mean
    `session_gap_s`, so consecutive sessions share the agent's tools+system entries."""
    if sessions < 0:
        raise ValueError("sessions must be >= 0")
    mix = mix or PlacementMix()
    agent = placement_agent(mix)
    rng = random.Random(seed)
    out: list[ScriptedSession] = []
    for index in range(sessions):
        start_gap = rng.expovariate(1 / mix.session.session_gap_s) if index else 0.0
        out.append(_session(index, rng, mix, agent, start_gap))
    return tuple(out)


@dataclass
class _PacedClient:
    """Forwards each call to `inner` after moving the virtual clock by the next scripted gap.
    The Drain runs a turn's Steps back to back, so the time between Steps has to be spent at
    the call; a call the scenario did not script (a compaction) finds no gap and fails."""

    inner: LLMClient
    advance: Callable[[float], float]
    gaps: deque[float] = field(default_factory=deque)

    def _tick(self) -> None:
        if not self.gaps:
            raise RuntimeError("the engine made a provider call the scenario did not script")
        self.advance(self.gaps.popleft())

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        self._tick()
        async for event in self.inner.stream(request):
            yield event

    async def generate(self, request: LLMRequest) -> LLMResponse:
        self._tick()
        return await self.inner.generate(request)


async def run_scenario(
    lab: EmulatorLab, policy: CachePolicy, scenario: Sequence[ScriptedSession]
) -> None:
    """Drive an engine with `policy` over `lab` through `scenario`, turn by turn: script the
    turn's replies, queue its gaps, run it, and check the Drain made exactly those calls."""
    paced = _PacedClient(lab.llm, lab.advance_by)
    engine = lab.rebuild(llm=paced, cache_policy=policy)
    for session in scenario:
        engine.create_session(SAMPLE_AGENT.name, workspace=lab.workspace, session_id=session.id)
        for turn in session.turns:
            lab.script(*(step.reply for step in turn.steps))
            paced.gaps.extend(step.gap_s for step in turn.steps)
            result = await engine.run(session.id, turn.prompt)
            if result.steps != len(turn.steps) or paced.gaps:
                raise RuntimeError(
                    f"{session.id}: the Drain ran {result.steps} Steps for a turn scripted "
                    f"with {len(turn.steps)}"
                )


@dataclass(frozen=True)
class PlacementRow:
    """What one cache policy cost over a scenario, as the emulator billed it: the summed
    token counts (`usage`), and:

    `misses`: requests whose previous request in the same session wrote an entry, but which
    read less than that previous request's whole prompt. `expired_misses`: those of them that
    came more than the TTL after the previous request, when its entry was already gone, so
    that no placement could have read it.
    """

    policy: str
    model: str
    requests: int
    usage: Usage
    cost_usd: float
    misses: int
    expired_misses: int

    @property
    def hit_ratio(self) -> float:
        """Read tokens over all input tokens."""
        total = self.usage.total_input_tokens
        return self.usage.cache_read_tokens / total if total else 0.0


def placement_row(
    policy: str, logged: Sequence[Mapping[str, Any]], *, ttl_s: float
) -> PlacementRow:
    """A row from the emulator's request log: usage summed as billed, misses per session (by
    the `x-session-id` header the engine sends), cost by the one pricing rule."""
    usages = [logged_usage(r) for r in logged]
    models = {str(r["body"]["model"]) for r in logged}
    if len(models) > 1:
        raise ValueError(f"one row prices one model, the log has {sorted(models)}")
    model = models.pop() if models else SAMPLE_AGENT.model.id
    misses = expired = 0
    previous: dict[str, tuple[Usage, float]] = {}
    for r, u in zip(logged, usages, strict=True):
        session = r["headers"].get("x-session-id", "")
        at = float(r["started_at"])
        if session in previous:
            before, before_at = previous[session]
            written = before.cache_write_5m_tokens + before.cache_write_1h_tokens
            if written > 0 and u.cache_read_tokens < before.total_input_tokens:
                misses += 1
                expired += at - before_at > ttl_s
        previous[session] = (u, at)
    total = reduce(add, usages, Usage())
    return PlacementRow(
        policy=policy,
        model=model,
        requests=len(logged),
        usage=total,
        cost_usd=cost(total, model),
        misses=misses,
        expired_misses=expired,
    )


async def measure_policy(
    name: str,
    policy: CachePolicy,
    scenario: Sequence[ScriptedSession],
    mix: PlacementMix | None = None,
) -> PlacementRow:
    """One policy over `scenario` in a fresh lab, read from the wire."""
    agent = placement_agent(mix or PlacementMix())
    async with emulator_lab(agents=(agent,)) as lab:
        await run_scenario(lab, policy, scenario)
        return placement_row(name, lab.requests(), ttl_s=TTL_SECONDS[agent.cache_ttl])


async def measure_placement(
    policies: Mapping[str, CachePolicy] | None = None,
    *,
    sessions: int,
    seed: int,
    mix: PlacementMix | None = None,
) -> list[PlacementRow]:
    """Each policy (default `PLACEMENT_POLICIES`) over the same seeded scenario: the same
    scripted replies and the same clock, each in a fresh emulator; one row per policy, in
    the mapping's order."""
    scenario = build_scenario(sessions, seed, mix)
    chosen = PLACEMENT_POLICIES if policies is None else policies
    return [await measure_policy(name, p, scenario, mix) for name, p in chosen.items()]


def placement_table(rows: Sequence[PlacementRow]) -> str:
    """The rows as markdown, with each policy's cost relative to the first row's."""
    lines = [
        "| policy | requests | read | write 5m | write 1h | uncached | hit ratio "
        "| misses (expired) | cost | vs first |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    base = rows[0].cost_usd if rows else 0.0
    for r in rows:
        change = f"{(r.cost_usd / base - 1):+.1%}" if base else "—"
        u = r.usage
        lines.append(
            f"| {r.policy} | {r.requests:,} | {u.cache_read_tokens:,} "
            f"| {u.cache_write_5m_tokens:,} | {u.cache_write_1h_tokens:,} "
            f"| {u.input_tokens:,} | {r.hit_ratio:.1%} | {r.misses} ({r.expired_misses}) "
            f"| ${r.cost_usd:.4f} | {change} |"
        )
    return "\n".join(lines) + "\n"
