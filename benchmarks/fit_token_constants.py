"""Fit the counter's calibrated framing constants (`catalog/tokens.json`) on the fitting part
of the recorded set (`benchmarks/data/token_recordings.jsonl`; the held-back cassettes of
`token_accuracy.held_back` are never looked at).

Coordinate descent: for each provider's constants in turn, try every candidate value and
keep the one that lowers the mean absolute relative error of that provider's fitting
requests (Bedrock's rows count for the Anthropic constants: Converse lowers to Messages),
replayed through the emulator's endpoints as `token_accuracy.py` replays them. Three rounds.

Run: uv run python benchmarks/fit_token_constants.py [--write]
(prints the fitted constants and the fitting-part error; `--write` stores them in
`reference_impl/sessiongen/catalog/tokens.json`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import token_accuracy as ta
from fastapi.testclient import TestClient
from sessiongen.emulator import EmulatorState, create_app
from sessiongen.tokens import token_facts

FACTS_FILE = (
    Path(__file__).resolve().parents[1]
    / "reference_impl"
    / "sessiongen"
    / "catalog"
    / "tokens.json"
)
INTS = [float(v) for v in range(16)]
SIGNED = [float(v) for v in range(-12, 16)]
SCALES = [0.2, 0.3, 0.4, 0.5, 0.6, 0.65, 0.7, 0.8, 0.9, 1.0]
# section -> constant -> candidate values; the groups whose rows judge that section
SEARCH: dict[str, tuple[tuple[str, ...], dict[str, list[float]]]] = {
    "anthropic": (
        ("anthropic", "bedrock"),
        {
            "text_scale": [1.0, 1.05, 1.1, 1.15, 1.2, 1.25],
            "request": INTS,
            "message": INTS,
            "system": INTS,
            "tool": [float(v) for v in range(0, 61, 3)],
            "tool_use": INTS,
            "tool_result": INTS,
            "id_chars_per_token": [1.5, 2.0, 2.5, 3.0, 4.0],
            "structured_output": [float(v) for v in range(0, 401, 10)],
            "thinking": [float(v) for v in range(0, 81, 2)],
            "citations": [float(v) for v in range(0, 1001, 10)],
        },
    ),
    # Responses renders function tools as Chat does: its `tools` and `tool` are Chat's (the
    # Responses rows disagree among themselves on strict tools). OpenAI's own figures are
    # kept, not fitted: "every message follows
    # <|start|>{role/name}\n{content}<|end|>\n" (3 tokens, 1 more for a name) and "every reply
    # is primed with <|start|>assistant<|message|>" (3), openai-cookbook "How to count tokens
    # with tiktoken"; likewise per Responses item.
    "openai_chat": (
        ("openai_chat",),
        {
            **{k: SIGNED for k in ("tools", "tool", "tool_call", "format")},
        },
    ),
    "openai_responses": (
        ("openai_responses",),
        {
            k: SIGNED
            for k in (
                "tools",
                "tool",
                "function_call",
                "function_call_output",
                "format",
            )
        }
        | {"encrypted_chars_per_token": [0.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 12.0, 16.0]},
    ),
    "gemini": (
        ("gemini",),
        {
            "request": INTS,
            "content": INTS,
            "text_scale": [0.8, 0.85, 0.9, 0.95, 1.0, 1.05, 1.1, 1.15, 1.2],
            "declarations": [float(v) for v in range(0, 31, 2)],
            "declaration": INTS,
            "schema_scale": SCALES,
            "function_call": INTS,
            "function_response": INTS,
            # Not the signature figures: the new recordings cut signatures to a prefix, so
            # only the first set's whole ones can fit them (0.3 a byte over 120).
        },
    ),
}


def _group(record: dict[str, Any]) -> str:
    if record["provider"] == "openai":
        return f"openai_{record['endpoint'].split('.')[0]}"
    return str(record["provider"])


def _emulated(client: TestClient, records: list[dict[str, Any]]) -> list[float | None]:
    out: list[float | None] = []
    for record in records:
        model = ta._served_model(str(record["model"]))
        _, emulated = ta._replay(client, record, model or str(record["model"]))
        out.append(None if emulated is None else float(emulated))
    return out


def _loss(emulated: list[float | None], real: list[float]) -> float:
    """The mean relative error, each capped at 100% (a refused request, or a record the
    counter cannot know, weighs no more than one wrong by the whole count)."""
    errors = [
        1.0 if e is None else min(1.0, abs(e - r) / r) for e, r in zip(emulated, real, strict=True)
    ]
    return statistics.fmean(errors) if errors else 0.0


def _error(client: TestClient, records: list[dict[str, Any]]) -> float:
    return _loss(_emulated(client, records), [float(r["prompt_tokens"]) for r in records])


def _fit_integers(
    client: TestClient,
    rows: list[dict[str, Any]],
    facts: dict[str, Any],
    keys: dict[str, list[float]],
) -> None:
    """The integer constants of one section at once: each one's effect on every row measured
    by replaying with it one higher (the count is linear in them), then coordinate descent
    over their candidates on those vectors, without replaying again."""
    real = [float(r["prompt_tokens"]) for r in rows]
    base = _emulated(client, rows)
    effect: dict[str, list[float]] = {}
    for key in keys:
        facts[key] += 1
        moved = _emulated(client, rows)
        facts[key] -= 1
        effect[key] = [
            0.0 if a is None or b is None else a - b for a, b in zip(moved, base, strict=True)
        ]
    start = {key: float(facts[key]) for key in keys}
    chosen = dict(start)

    def loss(values: dict[str, float]) -> float:
        shifted: list[float | None] = []
        for i, b in enumerate(base):
            if b is None:
                shifted.append(None)
                continue
            shifted.append(b + sum(effect[k][i] * (values[k] - start[k]) for k in keys))
        return _loss(shifted, real)

    for _ in range(4):
        for key, candidates in keys.items():
            chosen[key] = min(candidates, key=lambda v: loss({**chosen, key: v}))
    for key, value in chosen.items():
        facts[key] = int(value)


def fit(rounds: int = 2, sections: tuple[str, ...] = tuple(SEARCH)) -> dict[str, dict[str, float]]:
    records = [r for r in ta.load() if not ta.held_back(r) and not r.get("superseded")]
    facts = token_facts()  # the cached dict the counter reads: changed in place here
    fitted: dict[str, dict[str, float]] = {}
    with ta._catalogued(records), TestClient(create_app(EmulatorState())) as client:
        for section, (groups, space) in SEARCH.items():
            if section not in sections:
                continue
            rows = [r for r in records if _group(r) in groups]
            # the count is linear in the integer constants, not in rates and scales
            integers = {
                k: c
                for k, c in space.items()
                if all(v.is_integer() for v in c) and not k.endswith(("_per_token", "scale"))
            }
            for _ in range(rounds):
                _fit_integers(client, rows, facts[section], integers)
                for key, candidates in space.items():
                    if key in integers:
                        continue
                    best = (float("inf"), facts[section][key])
                    for value in candidates:
                        facts[section][key] = value
                        best = min(best, (_error(client, rows), facts[section][key]))
                    facts[section][key] = best[1]
            fitted[section] = {k: facts[section][k] for k in space}
            print(f"{section}: mean error {_error(client, rows) * 100:.1f}% on {len(rows)} rows")
            print("   ", json.dumps(fitted[section]))
    return fitted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--write", action="store_true", help="store them in tokens.json")
    parser.add_argument(
        "--sections", default=",".join(SEARCH), help="comma-separated sections to fit"
    )
    args = parser.parse_args()
    fitted = fit(sections=tuple(args.sections.split(",")))
    if args.write:
        data = json.loads(FACTS_FILE.read_text(encoding="utf-8"))
        for section, values in fitted.items():
            data[section].update(values)
        FACTS_FILE.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", "utf-8")
        print(f"written to {FACTS_FILE}")


if __name__ == "__main__":
    main()
