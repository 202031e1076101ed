"""Dollar cost of a usage record, from per-model prices kept as data in `pricing.json`."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, fields, replace
from functools import cache
from typing import Any

from ..catalog import UnknownModel, _data_files, _load_json, get_model
from ..llm.types import Usage
from ..providers.anthropic.wire import usage_from_anthropic
from .store import CacheUsage

PER_TOKENS = 1_000_000


@dataclass(frozen=True)
class Price:
    """USD per million tokens for each billed kind of token."""

    input: float
    cache_write_5m: float
    cache_write_1h: float
    cache_read: float
    output: float
    cache_storage_per_mtok_hour: float = 0.0
    """USD per million tokens per hour an explicit cache is stored (Gemini `cachedContents`);
    0 where the provider bills no storage."""


_PRICE_NAMES = "input, cache_write_5m, cache_write_1h, cache_read, output"


@dataclass(frozen=True)
class CostBreakdown:
    """USD per kind of token; `total` is their sum."""

    input: float
    cache_write_5m: float
    cache_write_1h: float
    cache_read: float
    output: float

    @property
    def total(self) -> float:
        return (
            self.input + self.cache_write_5m + self.cache_write_1h + self.cache_read + self.output
        )


@cache
def _prices() -> dict[str, Price]:
    raw: dict[str, dict[str, float]] = {}
    for name in _data_files("pricing"):
        raw.update(_load_json(name)["models"])
    return {name: Price(**{k: float(v) for k, v in row.items()}) for name, row in raw.items()}


def price(model: str) -> Price:
    """The price row of a model id or alias; raises `UnknownModel` when there is none."""
    prices = _prices()
    if model in prices:
        return prices[model]
    canonical = get_model(model).id
    if canonical not in prices:
        raise UnknownModel(model)
    return prices[canonical]


@contextmanager
def override_price(model: str, **changes: float) -> Iterator[Price]:
    """Change a catalogued model's prices (USD per million tokens, e.g. `input=2.5`) inside a
    `with` block and restore them on exit; yields the changed row. For experiments: every
    cost in the process (replays, the optimum, the bound) reads the row through `price`."""
    canonical = get_model(model).id
    table = _prices()
    original = price(model)
    unknown = changes.keys() - {f.name for f in fields(Price)}
    if unknown:
        raise ValueError(f"no price named {sorted(unknown)[0]!r}; prices: {_PRICE_NAMES}")
    bad = {k: v for k, v in changes.items() if not (v >= 0 and math.isfinite(v))}
    if bad:
        name, value = next(iter(bad.items()))
        raise ValueError(f"the {name} price must be a finite number >= 0, got {value!r}")
    changed = replace(original, **{k: float(v) for k, v in changes.items()})
    table[canonical] = changed
    try:
        yield changed
    finally:
        table[canonical] = original


def token_counts(usage: Mapping[str, Any] | object) -> dict[str, int]:
    """Token counts by billed kind from an API usage dict, an SDK `Usage`, a `CacheUsage` or
    sessiongen's own `Usage` (a `GenerateResult`'s).

    Read by the one usage rule, `usage_from_anthropic`: when the per-TTL split
    (`cache_creation`) is missing, every write is taken as a 5m write, which is what the API
    did before 1h caching existed.
    """
    if isinstance(usage, CacheUsage):
        # Its TTL split sits in flat fields; the API spelling carries it as `cache_creation`.
        usage = usage.to_api()
    counts = usage if isinstance(usage, Usage) else usage_from_anthropic(usage)
    return {
        "input": counts.input_tokens,
        "cache_write_5m": counts.cache_write_5m_tokens,
        "cache_write_1h": counts.cache_write_1h_tokens,
        "cache_read": counts.cache_read_tokens,
        "output": counts.output_tokens,
    }


def cost_breakdown(usage: Mapping[str, Any] | object, model: str) -> CostBreakdown:
    p = price(model)
    n = token_counts(usage)
    return CostBreakdown(
        input=n["input"] * p.input / PER_TOKENS,
        cache_write_5m=n["cache_write_5m"] * p.cache_write_5m / PER_TOKENS,
        cache_write_1h=n["cache_write_1h"] * p.cache_write_1h / PER_TOKENS,
        cache_read=n["cache_read"] * p.cache_read / PER_TOKENS,
        output=n["output"] * p.output / PER_TOKENS,
    )


def storage_cost(model: str, tokens: int, seconds: float) -> float:
    """USD of storing `tokens` in an explicit cache of `model` for `seconds`, at the model's
    `cache_storage_per_mtok_hour` (0 for a model without a storage price)."""
    hours = max(seconds, 0.0) / 3600
    return tokens * price(model).cache_storage_per_mtok_hour * hours / PER_TOKENS


def cost(usage: Mapping[str, Any] | object, model: str) -> float:
    """USD cost of one usage record (API dict, SDK `Usage`, `CacheUsage` or sessiongen `Usage`)
    on `model`."""
    return cost_breakdown(usage, model).total
