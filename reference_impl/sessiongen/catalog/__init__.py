"""Per-model facts (minimum cacheable length, context window, output limit, prefill,
retirement, tokenizer family, tool-use system prompt, thinking default and preservation,
mid-conversation system messages) loaded from `models.json` (Anthropic's models) and one
`models_<provider>.json` per other provider, with alias resolution."""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources
from typing import Any


class UnknownModel(KeyError):
    """The model id is neither a known id nor an alias of one."""

    def __init__(self, model: str) -> None:
        super().__init__(model)
        self.model = model

    def __str__(self) -> str:
        return f"unknown model {self.model!r}"


TTL_UNITS = {"m": 60.0, "h": 3600.0}


def ttl_seconds(ttl: str) -> float:
    """A lifetime spelled as the APIs spell it (`"5m"`, `"30m"`, `"1h"`, `"12h"`) in
    seconds; anything else is a `ValueError`."""
    number, unit = ttl[:-1], ttl[-1:]
    if unit not in TTL_UNITS or not number.isdigit() or int(number) < 1:
        raise ValueError(f"not a lifetime: {ttl!r}")
    return int(number) * TTL_UNITS[unit]


@dataclass(frozen=True)
class PromptCacheRules:
    """OpenAI's caching of GPT-5.6 and later (`prompt_cache_options`, explicit
    `prompt_cache_breakpoint` markers, cache writes), as the catalog gives it per model; the
    provider's emulator applies it (`providers/openai/emulator.py`)."""

    ttls: tuple[str, ...] = ("30m",)
    """The `prompt_cache_options.ttl` values the model accepts, the default first: an entry
    stays usable this long after its latest write or reuse."""
    max_writes: int = 4
    """The most cache writes one request makes (implicit mode: the implicit breakpoint and
    the latest explicit ones; explicit mode: the latest explicit ones)."""
    first_explicit: int = 2
    latest_explicit: int = 50
    """A request looks its prefix up at its first `first_explicit` and latest
    `latest_explicit` explicit breakpoints..."""
    earlier_message_ends: int = 20
    """...and, in implicit mode, at the implicit breakpoint, up to this many earlier eligible
    message endings and the end of the initial block of developer messages."""
    cached_tokens_increment: int = 1
    """`cached_tokens` is reported in multiples of this (1: the exact boundary)."""
    diagnostics: bool = True
    """Responses answers `prompt_cache_options.comparison_response_id` with
    `prompt_cache_diagnostics`."""
    prewarm: bool = True
    """Responses accepts `prompt_cache_options.prewarm` (fill the cache, no output)."""

    @property
    def default_ttl(self) -> str:
        return self.ttls[0]


def _prompt_cache_rules(raw: dict[str, Any] | None) -> PromptCacheRules | None:
    if raw is None:
        return None
    rules = PromptCacheRules(
        ttls=tuple(raw["ttls"]),
        max_writes=int(raw["max_writes"]),
        first_explicit=int(raw["lookup"]["first_explicit"]),
        latest_explicit=int(raw["lookup"]["latest_explicit"]),
        earlier_message_ends=int(raw["lookup"]["earlier_message_ends"]),
        cached_tokens_increment=int(raw["cached_tokens_increment"]),
        diagnostics=bool(raw["diagnostics"]),
        prewarm=bool(raw["prewarm"]),
    )
    for ttl in rules.ttls:
        ttl_seconds(ttl)  # a bad one fails at load, not on a request
    return rules


@dataclass(frozen=True)
class ModelInfo:
    """What the cache model and the emulator need to know about one model."""

    id: str
    display_name: str
    aliases: tuple[str, ...]
    min_cacheable_tokens: int
    context_window: int
    max_output_tokens: int
    prefill_allowed: bool
    unconfirmed: tuple[str, ...]
    provider: str = "anthropic"
    retired: str | None = None
    """The retirement date (ISO) on the provider's own API; requests to the model then fail."""
    tokenizer: str = "claude"
    token_multiplier: float = 1.0
    """How many tokens the model's tokenizer makes of what the base counter (`tokens.count_text_tokens`, o200k) calls one
    (the `tokenizers` table of the data file, by `tokenizer` family)."""
    thinking_types: tuple[str, ...] = ("enabled", "disabled", "adaptive")
    """The `thinking.type` values the model accepts; any other is a 400."""
    tool_system_prompt_tokens: tuple[int, int] = (0, 0)
    """Tokens of the system prompt the API adds when `tools` are present: with tool choice
    `auto` or `none`, and with `any` or `tool`."""
    thinking_default: str = "disabled"
    """The `thinking.type` a request that omits `thinking` runs with (`adaptive` where
    thinking is on by default); spelling it out is the same prompt as omitting it."""
    strips_prior_thinking: bool = False
    """Whether the API drops thinking blocks of earlier turns from context ("keep the last
    turn only"); otherwise they stay in context, cached and counted ("keep all")."""
    mid_conversation_system: bool = False
    """Whether `messages` may carry `{"role": "system"}` messages."""
    implicit_breakpoint_interval: int = 0
    """Implicit prefix caching (OpenAI, Gemini): the provider places a breakpoint every this
    many tokens from the start of the prompt, and a request reads up to the last one it
    shares with a live entry (`CacheStore.apply_implicit`). 0: the model has no implicit
    caching (Anthropic's models, Claude on Bedrock: explicit breakpoints only)."""
    extended_retention: bool = False
    """OpenAI: the model supports `prompt_cache_retention: "24h"` (extended retention), which
    is then its default; without it only `"in_memory"` is accepted."""
    one_hour_ttl: bool = True
    """A breakpoint may ask for the 1h TTL (every model on Anthropic's API; on Bedrock only
    the models AWS lists)."""
    prompt_cache: PromptCacheRules | None = None
    """OpenAI GPT-5.6 and later: `prompt_cache_options`, explicit breakpoints, cache writes
    and a 30-minute lifetime in place of the implicit breakpoints and retentions of the
    earlier models (None: those earlier rules)."""

    def below_cache_minimum(self, prompt_tokens: int) -> bool:
        """Whether a prompt of `prompt_tokens` input tokens is too short for any prefix of it
        to be cached: under `min_cacheable_tokens`, the minimum a breakpoint's prefix must
        reach, so such a prompt reads 0 and writes nothing whatever its breakpoints. 0 (no
        usage reported) is no prompt, so not below."""
        return 0 < prompt_tokens < self.min_cacheable_tokens

    def tool_prompt_tokens(self, tool_choice: str | None) -> int:
        """The tool-use system prompt for a request with tools and this tool choice type."""
        auto_none, any_tool = self.tool_system_prompt_tokens
        return any_tool if tool_choice in ("any", "tool") else auto_none


def _load_json(name: str) -> dict[str, Any]:
    text = resources.files(__package__).joinpath(name).read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def _data_files(stem: str) -> list[str]:
    """`<stem>.json` and every `<stem>_<provider>.json` beside it, in name order."""
    names = [p.name for p in resources.files(__package__).iterdir()]
    return [
        f"{stem}.json",
        *sorted(n for n in names if n.startswith(f"{stem}_") and n.endswith(".json")),
    ]


def _tool_prompt_table() -> dict[str, Any]:
    """`tokens.json`'s `tool_prompts`: tool-use system prompt counts for models whose own
    catalog entry has none (Claude on Bedrock bills as Claude on the Anthropic API)."""
    table: dict[str, Any] = _load_json("tokens.json").get("tool_prompts") or {}
    return table


@cache
def _catalog() -> dict[str, ModelInfo]:
    table: dict[str, ModelInfo] = {}
    fallback_prompts = _tool_prompt_table()
    files = [_load_json(name) for name in _data_files("models")]
    multipliers: dict[str, float] = {}
    for data in files:
        multipliers.update(data.get("tokenizers") or {})
    raws = [raw for data in files for raw in data["models"]]
    for raw in raws:
        tokenizer = str(raw.get("tokenizer", "claude"))
        tool_prompt = raw.get("tool_system_prompt_tokens") or fallback_prompts.get(raw["id"]) or {}
        info = ModelInfo(
            id=raw["id"],
            display_name=raw["display_name"],
            aliases=tuple(raw["aliases"]),
            min_cacheable_tokens=int(raw["min_cacheable_tokens"]),
            context_window=int(raw["context_window"]),
            max_output_tokens=int(raw["max_output_tokens"]),
            prefill_allowed=bool(raw["prefill_allowed"]),
            unconfirmed=tuple(raw["unconfirmed"]),
            provider=raw.get("provider", "anthropic"),
            retired=raw.get("retired"),
            tokenizer=tokenizer,
            token_multiplier=float(multipliers.get(tokenizer, 1.0)),
            thinking_types=tuple(raw.get("thinking_types", ("enabled", "disabled", "adaptive"))),
            tool_system_prompt_tokens=(
                int(tool_prompt.get("auto_none", 0)),
                int(tool_prompt.get("any_tool", 0)),
            ),
            thinking_default=str(raw.get("thinking_default", "disabled")),
            strips_prior_thinking=bool(raw.get("strips_prior_thinking", False)),
            mid_conversation_system=bool(raw.get("mid_conversation_system", False)),
            implicit_breakpoint_interval=int(raw.get("implicit_breakpoint_interval", 0)),
            extended_retention=bool(raw.get("extended_retention", False)),
            one_hour_ttl=bool(raw.get("one_hour_ttl", True)),
            prompt_cache=_prompt_cache_rules(raw.get("prompt_cache_options")),
        )
        for name in (info.id, *info.aliases):
            if name in table:
                raise ValueError(f"model {name!r} is catalogued twice")
            table[name] = info
    return table


def get_model(model: str) -> ModelInfo:
    """The facts for a model id or alias; raises `UnknownModel`."""
    try:
        return _catalog()[model]
    except KeyError:
        raise UnknownModel(model) from None


@contextmanager
def override_model(model: str, **changes: Any) -> Iterator[ModelInfo]:
    """Change a catalogued model's facts (e.g. `context_window=1200`) inside a `with` block,
    under its id and every alias, and restore them on exit; yields the changed facts.

    For experiments and tests: the catalog is the one source of these facts, so the engine
    (compaction, overflow checks) and an emulator in the same process both see the change.
    """
    original = get_model(model)
    if {"id", "aliases"} & changes.keys():
        raise ValueError("override_model changes a model's facts, not its names")
    changed = replace(original, **changes)
    table = _catalog()
    names = (original.id, *original.aliases)
    for name in names:
        table[name] = changed
    try:
        yield changed
    finally:
        for name in names:
            table[name] = original


@contextmanager
def alias_model(alias: str, model: str) -> Iterator[ModelInfo]:
    """Answer `alias` with a catalogued model's facts inside a `with` block (a client's model
    id the catalog does not know yet, served as the nearest known one); yields those facts.
    An id the catalog already knows cannot be an alias (`ValueError`)."""
    info = get_model(model)
    table = _catalog()
    if alias in table:
        raise ValueError(f"{alias!r} is a catalogued model, not a new name")
    table[alias] = info
    try:
        yield info
    finally:
        del table[alias]


@contextmanager
def added_model(info: ModelInfo) -> Iterator[ModelInfo]:
    """Catalog a new model (`info`, under its id and aliases) inside a `with` block: a model
    the data files do not list yet, for example one of a provider being added. A name the
    catalog already knows is a `ValueError`."""
    table = _catalog()
    names = (info.id, *info.aliases)
    taken = [name for name in names if name in table]
    if taken:
        raise ValueError(f"{taken[0]!r} is a catalogued model already")
    for name in names:
        table[name] = info
    try:
        yield info
    finally:
        for name in names:
            del table[name]


def nearest_models(model: str, provider: str, count: int = 3) -> list[str]:
    """The catalogued ids of `provider` (not retired) most like `model`, nearest first: what
    an unknown-model answer suggests."""
    known = [m.id for m in list_models() if m.provider == provider and m.retired is None]
    return difflib.get_close_matches(model, known, n=count, cutoff=0.0)


def unknown_model_hint(model: str, provider: str) -> str:
    """The emulator's addition to a provider's unknown-model message (the provider's own
    wording comes first, unchanged): the nearest known ids and how to alias one."""
    nearest = ", ".join(nearest_models(model, provider))
    return (
        f" [emulator: nearest known: {nearest}; serve it as one of them with "
        f"`sessiongen emulator --alias {model}=<id>`]"
    )


def is_known_model(model: str) -> bool:
    return model in _catalog()


def list_models() -> list[ModelInfo]:
    """Every known model once, in file order."""
    seen: dict[str, ModelInfo] = {}
    for info in _catalog().values():
        seen.setdefault(info.id, info)
    return list(seen.values())
