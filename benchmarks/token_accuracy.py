"""Prompt-token accuracy of the emulator against real provider usage.

Replays every request of `benchmarks/data/token_recordings.jsonl` (real requests to Anthropic,
OpenAI Chat Completions and Responses, Gemini and Bedrock Converse, recorded with their real
`usage` by pydantic-ai's and simonw/llm's VCR cassettes; see the README beside it) against the
in-process emulator, over its own HTTP endpoints (the path the official SDKs take), and
compares the prompt tokens the emulator bills with the ones the provider billed:

* Anthropic `/v1/messages`: `input_tokens + cache_read_input_tokens +
  cache_creation_input_tokens`;
* OpenAI `/v1/chat/completions` `usage.prompt_tokens`, `/v1/responses` `usage.input_tokens`;
* Gemini `:generateContent` `usageMetadata.promptTokenCount`;
* Bedrock `/model/{id}/converse` `usage.inputTokens` plus its cache read and write counts.

The error of one request is |emulated - real| / real. Each figure is a median or a 90th
percentile of it, in percent, over the requests of one provider (OpenAI per endpoint), over
all of them, and over the requests with media (images) alone. A request the emulator answers
with an error counts 100% (it bills nothing). The set is split by cassette (a stable hash of
its path, so the turns of one conversation stay together) into a part the counter's constants
were fitted on and a held-back part, reported on its own: `held_*` figures.

A recorded model the catalog does not serve is replayed as a stand-in of the same tokenizer
family (`STAND_INS`); a retired catalogued one is served as if it were not retired; models of
other vendors on Bedrock (Nova) are not served by the emulator and are left out (counted).

Run: uv run python benchmarks/token_accuracy.py [--rows] (`--rows` prints every request)
`run()` returns the figures for `sessiongen bench`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import urllib.parse
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from sessiongen.catalog import get_model, list_models, override_model
from sessiongen.emulator import EmulatorState, create_app

DATA = Path(__file__).resolve().parent / "data" / "token_recordings.jsonl"
HELD_BACK_MODULO = 3  # a cassette is held back when its path hash is 0 modulo this

STAND_INS = {
    # Retired or uncatalogued Claude models: the same tokenizer family (and, where the
    # pricing page gives one, a tool-use prompt of the same size).
    "claude-3-opus-latest": "claude-sonnet-4-5",
    "claude-3-5-sonnet-latest": "claude-sonnet-4-5",
    "us.anthropic.claude-3-7-sonnet-20250219-v1:0": "anthropic.claude-sonnet-4-20250514-v1:0",
    # Gemini models the catalog does not list.
    "gemini-2.0-flash": "gemini-2.5-flash",
    "gemini-3-pro-preview": "gemini-3.1-pro-preview",
}


@dataclass(frozen=True)
class Row:
    """One replayed request: its provider, endpoint, recorded and emulated prompt tokens."""

    source: str
    provider: str
    endpoint: str
    model: str
    real: int
    emulated: int | None
    media: bool
    held_back: bool
    status: int

    @property
    def error(self) -> float:
        """|emulated - real| / real, in percent; a refused request bills nothing (100%)."""
        if self.emulated is None:
            return 100.0
        return abs(self.emulated - self.real) / self.real * 100

    @property
    def group(self) -> str:
        return (
            f"openai_{self.endpoint.split('.')[0]}" if self.provider == "openai" else self.provider
        )


def load(path: Path = DATA) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def held_back(record: Mapping[str, Any]) -> bool:
    key = f"{record['source']['repo']}/{record['source']['path']}"
    return int(hashlib.sha256(key.encode()).hexdigest(), 16) % HELD_BACK_MODULO == 0


@contextmanager
def _unretired() -> Iterator[None]:
    """Every retired catalogued model served as if it were not retired (for the replay)."""
    with ExitStack() as stack:
        for info in list_models():
            if info.retired is not None:
                stack.enter_context(override_model(info.id, retired=None))
        yield


def _served_model(model: str) -> str | None:
    name = STAND_INS.get(model, model)
    try:
        get_model(name)
    except KeyError:
        return None
    return name


def _replay(client: TestClient, record: Mapping[str, Any], model: str) -> tuple[int, int | None]:
    """(HTTP status, emulated prompt tokens or None) of one recorded request."""
    body = dict(record["body"])
    provider, endpoint = record["provider"], record["endpoint"]
    if provider == "anthropic":
        body["model"], body["stream"] = model, False
        response = client.post("/v1/messages", json=body)
        if response.status_code != 200:
            return response.status_code, None
        usage = response.json()["usage"]
        total = (
            usage["input_tokens"]
            + (usage.get("cache_read_input_tokens") or 0)
            + (usage.get("cache_creation_input_tokens") or 0)
        )
        return 200, int(total)
    if provider == "openai":
        body["model"], body["stream"] = model, False
        path = "/v1/chat/completions" if endpoint == "chat.completions" else "/v1/responses"
        response = client.post(path, json=body)
        if response.status_code != 200:
            return response.status_code, None
        usage = response.json()["usage"]
        return 200, int(
            usage["prompt_tokens" if endpoint == "chat.completions" else "input_tokens"]
        )
    if provider == "gemini":
        response = client.post(f"/v1beta/models/{model}:generateContent", json=body)
        if response.status_code != 200:
            return response.status_code, None
        return 200, int(response.json()["usageMetadata"]["promptTokenCount"])
    if provider == "bedrock":
        quoted = urllib.parse.quote(model, safe="")
        response = client.post(f"/model/{quoted}/converse", json=body)
        if response.status_code != 200:
            return response.status_code, None
        usage = response.json()["usage"]
        total = (
            usage["inputTokens"]
            + (usage.get("cacheReadInputTokens") or 0)
            + (usage.get("cacheWriteInputTokens") or 0)
        )
        return 200, int(total)
    raise ValueError(f"unknown provider {provider!r}")


def replay_all(records: list[dict[str, Any]]) -> tuple[list[Row], int]:
    """The rows of every served record, and how many records were not served."""
    rows: list[Row] = []
    unserved = 0
    with _unretired():
        for record in records:
            model = _served_model(str(record["model"]))
            if model is None:
                unserved += 1
                continue
            # A fresh emulator per request: no cache state carries over between cassettes.
            with TestClient(create_app(EmulatorState())) as client:
                status, emulated = _replay(client, record, model)
            src = record["source"]
            rows.append(
                Row(
                    source=f"{src['repo']}:{src['path']}",
                    provider=record["provider"],
                    endpoint=record["endpoint"],
                    model=str(record["model"]),
                    real=int(record["prompt_tokens"]),
                    emulated=emulated,
                    media=bool(record.get("media")),
                    held_back=held_back(record),
                    status=status,
                )
            )
    return rows, unserved


def percentile(values: list[float], q: float) -> float:
    """The q-quantile (0..1) by linear interpolation between closest ranks."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    pos = (len(ordered) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


GROUPS = ("anthropic", "bedrock", "openai_chat", "openai_responses", "gemini")


def figures(rows: list[Row]) -> dict[str, float]:
    """`{group}_median`, `{group}_p90`, `all_*`, `media_*`, and the same over the held-back
    part as `held_*`; `requests`, `held_requests`."""
    out: dict[str, float] = {"requests": float(len(rows))}

    def add(prefix: str, chosen: list[Row]) -> None:
        errors = [r.error for r in chosen]
        if errors:
            out[f"{prefix}_median"] = round(statistics.median(errors), 2)
            out[f"{prefix}_p90"] = round(percentile(errors, 0.9), 2)

    for group in GROUPS:
        add(group, [r for r in rows if r.group == group])
    add("all", rows)
    add("media", [r for r in rows if r.media])
    held = [r for r in rows if r.held_back]
    out["held_requests"] = float(len(held))
    add("held_all", held)
    for group in GROUPS:
        add(f"held_{group}", [r for r in held if r.group == group])
    return out


def run() -> dict[str, float]:
    rows, _ = replay_all(load())
    return figures(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rows", action="store_true", help="print every replayed request")
    args = parser.parse_args()
    rows, unserved = replay_all(load())
    if args.rows:
        for r in rows:
            mark = "H" if r.held_back else " "
            print(
                f"{mark} {r.group:17} {r.real:6} {r.emulated!s:>6} {r.error:6.1f}%  "
                f"{r.model[:28]:28} {r.source.split('/')[-1][:60]}"
            )
    values = figures(rows)
    print(
        f"{len(rows)} requests replayed ({int(values['held_requests'])} held back), "
        f"{unserved} not served by the emulator"
    )
    print(
        f"{'group':18} {'n':>4} {'median %':>9} {'p90 %':>8}   held-back: {'n':>3} "
        f"{'median %':>9} {'p90 %':>8}"
    )
    for group in (*GROUPS, "media", "all"):
        chosen = [
            r
            for r in rows
            if (r.media if group == "media" else True if group == "all" else r.group == group)
        ]
        held = [r for r in chosen if r.held_back]
        med = values.get(f"{group}_median", float("nan"))
        p90 = values.get(f"{group}_p90", float("nan"))
        hmed = statistics.median([r.error for r in held]) if held else float("nan")
        hp90 = percentile([r.error for r in held], 0.9) if held else float("nan")
        print(
            f"{group:18} {len(chosen):4} {med:9.1f} {p90:8.1f}              {len(held):3} "
            f"{hmed:9.1f} {hp90:8.1f}"
        )


if __name__ == "__main__":
    main()
