"""Dollar cost of a usage record, from per-model prices kept as data in `pricing.json`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from .catalog import UnknownModel, _load_json, get_model

PER_TOKENS = 1_000_000


@dataclass(frozen=True)
class Price:
    """USD per million tokens for each billed kind of token."""

    input: float
    cache_write_5m: float
    cache_write_1h: float
    cache_read: float
    output: float


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
    raw: dict[str, dict[str, float]] = _load_json("pricing.json")["models"]
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


def _field(usage: Mapping[str, Any] | object, name: str) -> int:
    value = usage.get(name) if isinstance(usage, Mapping) else getattr(usage, name, None)
    return int(value) if isinstance(value, int | float) else 0


def token_counts(usage: Mapping[str, Any] | object) -> dict[str, int]:
    """Token counts by billed kind from an API usage dict, an SDK `Usage` or a `CacheUsage`.

    When the per-TTL split (`cache_creation`) is missing, every write is taken as a 5m write,
    which is what the API did before 1h caching existed.
    """
    split = usage.get("cache_creation") if isinstance(usage, Mapping) else None
    if split is None and not isinstance(usage, Mapping):
        split = getattr(usage, "cache_creation", None)
    writes = _field(usage, "cache_creation_input_tokens")
    if split is not None:
        w5m = _field(split, "ephemeral_5m_input_tokens")
        w1h = _field(split, "ephemeral_1h_input_tokens")
    else:
        w5m = _field(usage, "ephemeral_5m_input_tokens") or writes
        w1h = _field(usage, "ephemeral_1h_input_tokens")
    return {
        "input": _field(usage, "input_tokens"),
        "cache_write_5m": w5m,
        "cache_write_1h": w1h,
        "cache_read": _field(usage, "cache_read_input_tokens"),
        "output": _field(usage, "output_tokens"),
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


def cost(usage: Mapping[str, Any] | object, model: str) -> float:
    """USD cost of one usage record (API dict, SDK `Usage` or `CacheUsage`) on `model`."""
    return cost_breakdown(usage, model).total
