"""Prompt-token accuracy of the emulator against real provider usage.

Replays every request of `benchmarks/data/token_recordings.jsonl` and
`benchmarks/data/recordings/*.jsonl` (real requests to Anthropic, OpenAI Chat Completions and
Responses, Gemini and Bedrock Converse, recorded with their real `usage` by the test suites of
many open-source projects; see the READMEs beside them) against the in-process emulator, over its own HTTP endpoints (the path the official SDKs take), and
compares the prompt tokens the emulator bills with the ones the provider billed:

* Anthropic `/v1/messages`: `input_tokens + cache_read_input_tokens +
  cache_creation_input_tokens`;
* OpenAI `/v1/chat/completions` `usage.prompt_tokens`, `/v1/responses` `usage.input_tokens`;
* Gemini `:generateContent` `usageMetadata.promptTokenCount`;
* Bedrock `/model/{id}/converse` `usage.inputTokens` plus its cache read and write counts.

The error of one request is |emulated - real| / real. Each figure is a median or a 90th
percentile of it, in percent, over the requests of one provider (OpenAI per endpoint), over
all of them, and over the requests with media (images) alone. A request the emulator answers
with an error counts 100% (it bills nothing). The set is split by PROJECT (a stable hash of
the source repository's name, fixed before any constant was fitted on these recordings) into a
part the counter's constants were fitted on and a held-back part, reported on its own:
`held_*` figures, the ones the targets are on. So a held-back figure measures the counter on
other projects' requests, written by other people, that no constant ever saw.

A recorded model the catalog does not serve is replayed as a stand-in of the same tokenizer
family (`STAND_INS`); a retired catalogued one is served as if it were not retired; models of
other vendors on Bedrock (Nova) are not served by the emulator and are left out (counted).

Run: uv run python benchmarks/token_accuracy.py [--rows] (`--rows` prints every request)
`run()` returns the figures for `sessiongen bench`.
"""

from __future__ import annotations

import argparse
import dataclasses
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
from sessiongen.catalog import ModelInfo, added_model, get_model, list_models, override_model
from sessiongen.emulator import EmulatorState, create_app

DATA = Path(__file__).resolve().parent / "data" / "token_recordings.jsonl"
MORE = Path(__file__).resolve().parent / "data" / "recordings"
ALWAYS_FITTED = ("pydantic/pydantic-ai", "simonw/")  # the first set, fitted on before the split

STAND_INS = {
    # Retired or uncatalogued Claude models: the same tokenizer family (and, where the
    # pricing page gives one, a tool-use prompt of the same size).
    "claude-3-5-sonnet-latest": "claude-sonnet-4-5",
    "us.anthropic.claude-3-7-sonnet-20250219-v1:0": "anthropic.claude-sonnet-4-20250514-v1:0",
    "gemini-3-pro-preview": "gemini-3.1-pro-preview",
}

# A recorded model the catalog does not list is served as a copy of a catalogued model of its
# family under its own id (so rules keyed by id, like Gemini's image count per generation,
# read the recorded id): (provider, id prefixes, template, tokenizer or None to keep).
CLONES: tuple[tuple[str, tuple[str, ...], str, str | None], ...] = (
    ("openai", ("gpt-3.5", "gpt-4-", "gpt-4"), "gpt-4o", "cl100k_base"),  # after gpt-4o/4.1
    ("openai", ("gpt-", "o1", "o3", "o4"), "gpt-4o", "o200k_base"),
    ("gemini", ("gemini-", "gemma-"), "gemini-2.5-flash", None),
    ("anthropic", ("claude-",), "claude-opus-4-0", None),
    (
        "bedrock",
        ("anthropic.", "us.anthropic.", "arn:aws:bedrock:"),
        "anthropic.claude-sonnet-4-20250514-v1:0",
        None,
    ),
)
_O200K_FIRST = ("gpt-4o", "gpt-4.1")


def _clone_of(provider: str, model: str) -> ModelInfo | None:
    """The catalog entry a recorded, uncatalogued model is served as (None: not served,
    e.g. Amazon's own models on Bedrock)."""
    if provider == "bedrock" and "anthropic." not in model:
        return None
    if provider == "bedrock":  # a Claude the Bedrock catalog lacks is the Claude API's model
        same = model.split("anthropic.", 1)[1].rsplit("-v", 1)[0]
        try:
            claude = get_model(same)
        except KeyError:
            pass
        else:
            return dataclasses.replace(
                claude, id=model, aliases=(), retired=None, provider="bedrock", one_hour_ttl=False
            )
    for family, prefixes, template, tokenizer in CLONES:
        if family != provider or not model.startswith(prefixes):
            continue
        if tokenizer == "cl100k_base" and model.startswith(_O200K_FIRST):
            continue
        base = get_model(template)
        return dataclasses.replace(
            base, id=model, aliases=(), retired=None, tokenizer=tokenizer or base.tokenizer
        )
    return None


@contextmanager
def _catalogued(records: list[dict[str, Any]]) -> Iterator[None]:
    """Every recorded model served: catalogued ones as they are (retired ones as if not),
    the rest as their family's clone (`_clone_of`) for the duration."""
    with ExitStack() as stack:
        stack.enter_context(_unretired())
        seen: set[str] = set()
        for record in records:
            model = str(record["model"])
            if model in seen or model in STAND_INS:
                continue
            seen.add(model)
            try:
                get_model(model)
            except KeyError:
                clone = _clone_of(str(record["provider"]), model)
                if clone is not None:
                    stack.enter_context(added_model(clone))
        yield


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
    project: str = ""

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


def load(*paths: Path) -> list[dict[str, Any]]:
    """The records of `paths` (default: the first set and every file of `recordings/`)."""
    chosen = paths or (DATA, *sorted(MORE.glob("*.jsonl")))
    return [
        json.loads(line)
        for path in chosen
        for line in path.read_text(encoding="utf-8").splitlines()
        if line
    ]


def held_back(record: Mapping[str, Any]) -> bool:
    """Whether the record's project is held back from fitting: an odd SHA-256 of its
    repository's name (`owner/name`); the first set's projects never are."""
    repo = str(record["source"]["repo"])
    if repo.startswith(ALWAYS_FITTED):
        return False
    return int(hashlib.sha256(repo.encode()).hexdigest(), 16) % 2 == 1


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
    records = [r for r in records if not r.get("superseded")]
    # One emulator for all: a request's prompt tokens (input, reads and writes together) do
    # not depend on what earlier requests left in the cache.
    with _catalogued(records), TestClient(create_app(EmulatorState())) as client:
        for record in records:
            model = _served_model(str(record["model"]))
            if model is None:
                unserved += 1
                continue
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
                    project=str(src["repo"]),
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
    parser.add_argument(
        "--projects", action="store_true", help="the figures per source project too"
    )
    args = parser.parse_args()
    rows, unserved = replay_all(load())
    if args.projects:
        print(f"{'project':45} {'group':17} {'n':>4} {'median %':>9} {'p90 %':>8}")
        keys = sorted({(r.project, r.group) for r in rows})
        for project, kind in keys:
            errors = [r.error for r in rows if r.project == project and r.group == kind]
            mark = "H" if held_back({"source": {"repo": project}}) else " "
            print(
                f"{mark} {project[:43]:43} {kind:17} {len(errors):4} "
                f"{statistics.median(errors):9.1f} {percentile(errors, 0.9):8.1f}"
            )
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
