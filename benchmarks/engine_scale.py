"""How the engine's costs grow with a session's history (issue 12).

Figures (ratios are medians of repeats, so they travel between machines):

  step_prep_over_json_10000   a Step's preparation (`select` + `prepare`, after one new turn
                              was recorded) / `json.dumps` of the Anthropic wire body it
                              lowers to, at 10,000 messages (target <= 3)
  turn_10000_over_100         a durable turn (`engine.run`, scripted provider, SQLite file)
                              at 10,000 messages / at 100 (target <= 10)
  generate_over_step_N        `session.generate`'s preparation / (`select` + the Step's
                              `prepare`), at N = 100, 1,000, 10,000 messages, on a session
                              that has not changed since the last read (target <= 1.05)
  generate_over_step_after_turn_N
                              the same, each timing after one new turn was recorded
  generate_over_drain_step_after_turn_N
                              the same over what the Drain does before a Step's call:
                              `select`, the compaction check (the same `ContextBudget` as
                              generate's overflow check), `prepare`
  generate_*_10000_us         where generate's extra preparation goes at 10,000 messages:
                              all of it (generate minus select + the Step's prepare),
                              checking its options, appending and marking its prompt, its
                              overflow check (`sessiongen bench` writes them as a sentence)
  import_over_json(_cpu)      `import sessiongen` / `import json`, each in a fresh
                              interpreter: wall time, and CPU time, the steadier one on a
                              shared machine (target <= 5: the package loads a module
                              when one of its names is first used)
  import_engine_over_json     `from sessiongen import SessionEngine, SessionStore` / `import
                              json`: what a prototype that runs sessions pays (pydantic, SQLite)

plus the absolute medians behind them (`*_ms`). Sessions are seeded by appending the events
real turns record (a user prompt, a settled answer, now and then a tool call and its
result), in one transaction, since building 10,000 messages by real turns is what this
benchmark measures, not how it sets up. Run: uv run python benchmarks/engine_scale.py
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from sessiongen import SessionEngine, SessionStore
from sessiongen.llm.types import Usage
from sessiongen.model import (
    Event,
    InputAdmitted,
    InputPromoted,
    StepSettled,
    StepStarted,
    TextPart,
    ToolCallPart,
    ToolExecuted,
    UserMessage,
    input_id,
    message_id,
)
from sessiongen.providers.anthropic.wire import lower_request
from sessiongen.sample import SAMPLE_AGENT, SAMPLE_WORKSPACE
from sessiongen.session.generate import GenerateOptions
from sessiongen.testing import ScriptedLLMClient

ANSWER = "An answer of moderate length, as a coding agent gives it. " * 4
RECAP = "Recap in one sentence."
RESULT = "def add(a, b):\n    return a + b\n" * 6


def turn_events(revision: int, turn: int) -> list[Event]:
    """The events one real turn records: every fifth turn calls a tool, then answers."""
    events: list[Event] = []

    def next_revision() -> int:
        return revision + len(events) + 1

    events.append(InputAdmitted(input_id=input_id(next_revision()), text=f"Question {turn}?"))
    events.append(
        InputPromoted(
            input_id=input_id(next_revision() - 1), message_id=message_id(next_revision())
        )
    )
    model = SAMPLE_AGENT.model.id
    usage = Usage(input_tokens=100, output_tokens=50)
    if turn % 5 == 4:
        call = f"call_{turn}"
        events.append(StepStarted(message_id=message_id(next_revision()), step=1, model=model))
        started = message_id(next_revision() - 1)
        part = ToolCallPart(id=call, name="read_file", input={"path": "src/app.py"})
        events.append(
            StepSettled(message_id=started, parts=(part,), finish_reason="tool_use", usage=usage)
        )
        events.append(ToolExecuted(message_id=started, call_id=call, result=RESULT))
    events.append(StepStarted(message_id=message_id(next_revision()), step=1, model=model))
    started = message_id(next_revision() - 1)
    text = (TextPart(text=ANSWER),)
    events.append(
        StepSettled(message_id=started, parts=text, finish_reason="end_turn", usage=usage)
    )
    return events


def seed(store: SessionStore, session_id: str, messages: int) -> None:
    """Append turns until the session holds at least `messages` messages."""

    def build(revision: int) -> list[Event]:
        events: list[Event] = []
        count, turn = 0, 0
        while count < messages:
            batch = turn_events(revision + len(events), turn)
            events += batch
            count += 3 if turn % 5 == 4 else 2
            turn += 1
        return events

    store.append(session_id, build)


def median_ms(
    fn: Callable[[], object], repeats: int, setup: Callable[[], object] | None = None
) -> float:
    samples = []
    for _ in range(repeats):
        if setup is not None:
            setup()
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e3


def median_pair_ms(
    a: Callable[[], object],
    b: Callable[[], object],
    repeats: int,
    setup: Callable[[], object] | None = None,
) -> tuple[float, float]:
    """Medians of `a` and `b`, timed alternately (each after its own `setup`)."""
    samples: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeats):
        for fn, into in ((a, samples[0]), (b, samples[1])):
            if setup is not None:
                setup()
            start = time.perf_counter()
            fn()
            into.append(time.perf_counter() - start)
    return statistics.median(samples[0]) * 1e3, statistics.median(samples[1]) * 1e3


class Fixture:
    """One engine over a file store with a session of `messages` messages."""

    def __init__(self, root: Path, messages: int) -> None:
        workspace = root / f"ws{messages}"
        for name, text in SAMPLE_WORKSPACE.items():
            (workspace / name).parent.mkdir(parents=True, exist_ok=True)
            (workspace / name).write_text(text, encoding="utf-8")
        self.store = SessionStore(root / f"s{messages}.sqlite")
        self.llm = ScriptedLLMClient(default_text=ANSWER)
        self.engine = SessionEngine(self.store, self.llm, [SAMPLE_AGENT])
        self.sid = self.engine.create_session("forge", workspace=workspace).id
        asyncio.run(self.engine.run(self.sid, "Start."))  # commits the instructions
        seed(self.store, self.sid, messages - 2)
        self.turn = 10**6

    def record_turn(self) -> None:
        """One more turn, recorded directly (untimed): what a Step finds new."""
        self.turn += 1
        self.store.append(self.sid, lambda revision: turn_events(revision, self.turn))

    def step_prepare(self) -> None:
        snapshot = self.engine.select(self.sid)
        self.engine.preparation.prepare(snapshot, operation="step", step=1)

    def drain_step_prepare(self) -> None:
        """What the Drain does before a Step's provider call, writes left out: select, the
        compaction check on the request with the pending prompt, then `prepare`."""
        snapshot = self.engine.select(self.sid)
        preparation = self.engine.preparation
        incoming = (UserMessage(id="in_next", parts=(TextPart(text="Next question?"),)),)
        probe = preparation.build(snapshot, operation="step", step=1, transient=incoming)
        preparation.budget.compaction_required(snapshot, probe)
        preparation.prepare(snapshot, operation="step", step=1)

    def generate_prepare(self) -> None:
        self.engine.prepare_generate(self.sid, RECAP)

    def generate_parts(self, repeats: int) -> dict[str, float]:
        """Where generate's preparation spends what the Step's does not, in µs (medians):
        checking its options, appending and marking its prompt (the preparation with the
        prompt minus without), its overflow check."""
        snapshot = self.engine.select(self.sid)
        preparation = self.engine.preparation
        prompt = (UserMessage(id="transient-prompt", parts=(TextPart(text=RECAP),)),)
        request = preparation.prepare(snapshot, operation="generate", transient=prompt)

        def with_prompt() -> None:
            preparation.prepare(snapshot, operation="generate", transient=prompt)

        def without() -> None:
            preparation.prepare(snapshot, operation="step", step=1)

        plain, appended = median_pair_ms(without, with_prompt, repeats)
        return {
            "options": median_ms(lambda: GenerateOptions(RECAP), repeats) * 1e3,
            "append": (appended - plain) * 1e3,
            "overflow": median_ms(lambda: preparation.budget.check_fits(snapshot, request), repeats)
            * 1e3,
        }

    def durable_turn(self) -> None:
        self.llm.requests.clear()
        asyncio.run(self.engine.run(self.sid, "Next question?"))

    def wire_json(self) -> Callable[[], object]:
        request = self.engine.preparation.prepare(
            self.engine.select(self.sid), operation="step", step=1
        )
        body = lower_request(request)
        return lambda: json.dumps(body)


def import_ms(statement: str, repeats: int, pycache: str) -> tuple[float, float]:
    """Median wall time and median CPU time (user + system) of a fresh interpreter running
    `statement`, with compiled bytecode cached (in `pycache`, after one run to fill it) as
    in any installed package: a sandbox setting PYTHONDONTWRITEBYTECODE would otherwise
    recompile the package's sources on every start. CPU time is the steadier figure on a
    shared machine."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = pycache
    command = [sys.executable, "-c", statement]
    subprocess.run(command, check=True, env=env)
    walls, cpus = [], []
    for _ in range(repeats):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(command, check=True, env=env)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(walls) * 1e3, statistics.median(cpus) * 1e3


def run(quick: bool = False) -> dict[str, float]:
    """All figures by name; `quick` uses fewer repeats (same sizes)."""
    repeats = 5 if quick else 11
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="sessiongen-scale-") as scratch:
        root = Path(scratch)
        fixtures = {n: Fixture(root, n) for n in (100, 1000, 10000)}
        for n, fx in fixtures.items():
            fx.step_prepare()  # a first read fills whatever caches there are
            # Interleaved, so load on the machine falls on both alike.
            step, gen = median_pair_ms(fx.step_prepare, fx.generate_prepare, repeats * 3)
            figures[f"step_prep_{n}_ms"] = step
            figures[f"generate_prep_{n}_ms"] = gen
            figures[f"generate_over_step_{n}"] = gen / step
            step, gen = median_pair_ms(
                fx.step_prepare, fx.generate_prepare, repeats * 3, setup=fx.record_turn
            )
            figures[f"generate_over_step_after_turn_{n}"] = gen / step
            drain, gen = median_pair_ms(
                fx.drain_step_prepare, fx.generate_prepare, repeats * 3, setup=fx.record_turn
            )
            figures[f"generate_over_drain_step_after_turn_{n}"] = gen / drain
        big = fixtures[10000]
        step, gen = median_pair_ms(big.step_prepare, big.generate_prepare, repeats * 30)
        figures["generate_extra_10000_us"] = (gen - step) * 1e3
        for part, micros in big.generate_parts(repeats * 30).items():
            figures[f"generate_{part}_10000_us"] = micros
        step_new = median_ms(big.step_prepare, repeats, setup=big.record_turn)
        dumps = median_ms(big.wire_json(), repeats)
        figures["step_prep_after_turn_10000_ms"] = step_new
        figures["json_dumps_10000_ms"] = dumps
        figures["step_prep_over_json_10000"] = step_new / dumps
        turns = {n: median_ms(fixtures[n].durable_turn, repeats) for n in (100, 10000)}
        figures["turn_100_ms"] = turns[100]
        figures["turn_10000_ms"] = turns[10000]
        figures["turn_10000_over_100"] = turns[10000] / turns[100]
        for fx in fixtures.values():
            fx.store.close()
    with tempfile.TemporaryDirectory(prefix="sessiongen-pycache-") as pycache:
        package, package_cpu = import_ms("import sessiongen", repeats, pycache)
        plain, plain_cpu = import_ms("import json", repeats, pycache)
        engine, _ = import_ms(
            "from sessiongen import SessionEngine, SessionStore", repeats, pycache
        )
    figures["import_sessiongen_ms"] = package
    figures["import_json_ms"] = plain
    figures["import_over_json"] = package / plain
    figures["import_sessiongen_cpu_ms"] = package_cpu
    figures["import_json_cpu_ms"] = plain_cpu
    figures["import_over_json_cpu"] = package_cpu / plain_cpu
    figures["import_engine_ms"] = engine
    figures["import_engine_over_json"] = engine / plain
    return figures


if __name__ == "__main__":
    started = time.perf_counter()
    results = run(quick="--quick" in sys.argv)
    width = max(map(len, results))
    for name, value in results.items():
        print(f"{name:<{width}}  {value:10.3f}")
    print(f"{'(seconds)':<{width}}  {time.perf_counter() - started:10.1f}")
