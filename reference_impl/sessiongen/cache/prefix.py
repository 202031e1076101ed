"""Prefix flattening, the first half of the prompt-cache model: a Messages request body
becomes hashed, counted block positions with their breakpoints resolved and checked
(`flatten_request`). The cache rules that run on those positions are in `cache/store.py`. This
module does no I/O.

Block positions (UNCONFIRMED: the docs only say "blocks"). The prefix is `tools` -> `system`
-> `messages`, and one position is:

* one entry of `tools` (one tool definition),
* one `system` text block (a plain-string `system` is one block),
* one content block of one message (a plain-string `content` is one text block; a
  `tool_result` is one block however many sub-blocks it carries).

Positions are 0-based here; the docs' examples count from 1. Each position is counted with the
shared counter (`sessiongen.tokens`), the same functions the engine's count uses.

Prefix hash. Each position carries a cumulative sha256: the previous hash chained with the
canonical JSON of the block without its `cache_control` (keys sorted, except that tool
`input_schema` and `tool_use` `input` keep their key order, because the docs warn that
reordering those keys breaks the cache). Message blocks also hash their role and whether
they open a new message. Request settings that the docs' invalidation table says change part
of the prefix are mixed into the chain where that invalidation starts:

* the model: entries are namespaced by the canonical model id, so a change misses everything;
* tool definitions: they are blocks of the `tools` section themselves;
* before the first `system` block: `speed`, the web search / web fetch server tools (they are
  also ordinary `tools` positions, so appending one after a cached tools breakpoint keeps the
  tools entry) and the citations toggle (any document with `citations.enabled`);
* before the first message block: `tool_choice` (with `disable_parallel_tool_use`), whether
  any image is present anywhere, the thinking config (type and `budget_tokens`; the model's
  `thinking_default` from the catalog counts as absent, so spelling it out changes nothing)
  and `output_config.effort` (`"high"`, the documented default, counts as absent). The docs
  call the thinking/effort effect on tools and system "model-specific"; this model picks
  "messages only" for every model.

What the model sees of `messages` (also rules of this module):

* prior-turn thinking: on a model whose catalog entry has `strips_prior_thinking` ("keep the
  last turn only"), the thinking and redacted_thinking blocks before the last user message
  that carries anything but `tool_result` blocks are dropped from context: they are no
  position, no part of the hash and cost no token (`stripped_thinking`). On the other
  models they stay, cached and counted like any block;
* mid-conversation `{"role": "system"}` messages are ordinary message positions (their role
  is hashed), so appending one after a cached breakpoint keeps tools, system and messages
  entries alike; which models accept them is checked by the emulator's validation;
* server tool results: in a request with at least one `cache_control`, the API places its
  own 5m breakpoint on a server tool result (`*_tool_result` blocks other than
  `tool_result`), see `flatten_request`.

`tool_choice` and images sit at the messages boundary, not the system one: the docs' table
(AD:build-with-claude/prompt-caching#what-invalidates-the-cache) marks both as "only affect
message blocks".
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, NamedTuple, TypeAlias

from ..catalog import ModelInfo, UnknownModel, get_model
from ..providers.anthropic.counting import dropped_blocks
from ..tokens import THINKING_KINDS as _THINKING_KINDS
from ..tokens import (
    canonical_json,
    content_blocks,
    count_content_tokens,
    count_tool_definition_tokens,
)

TTL: TypeAlias = Literal["5m", "1h"]
Section: TypeAlias = Literal["tools", "system", "messages"]

MAX_BREAKPOINTS = 4
DEFAULT_EFFORT = "high"
DEFAULT_THINKING = "disabled"  # the thinking default of a model the catalog does not know
SERVER_TOOL_TTL: TTL = "5m"  # "This automatic breakpoint always uses the default 5-minute TTL"

GENESIS = hashlib.sha256(b"sessiongen.cache/v1").hexdigest()

# Blocks that may not carry a breakpoint: the docs say thinking blocks and empty text blocks
# cannot be cached directly; automatic caching walks back over them.
_UNCACHEABLE_KINDS = _THINKING_KINDS
# Keys whose value is rendered verbatim, so their key order is part of the prefix.
_ORDER_SENSITIVE_KEYS = frozenset({"input", "input_schema"})
_WEB_TOOL_PREFIXES = ("web_search", "web_fetch")


class CacheControlError(ValueError):
    """The request's `cache_control` markers break a rule the API answers with a 400
    `invalid_request_error`; the message is the API's where it is known."""


@dataclass(frozen=True)
class Block:
    """One block position of a flattened request."""

    index: int
    section: Section
    path: str
    kind: str
    tokens: int
    prefix_tokens: int
    prefix_hash: str
    cacheable: bool
    breakpoint: TTL | None
    automatic: bool = False
    """The breakpoint is the automatic one of a top-level `cache_control`."""
    server_tool: bool = False
    """The breakpoint is the API's own 5m one on a server tool result."""


class FlatBlock(NamedTuple):
    """The lower-level input of `CacheStore.apply`: what the cache rules need per position."""

    prefix_hash: str
    tokens: int
    breakpoint: TTL | None


@dataclass(frozen=True)
class PreparedRequest:
    """A request flattened into block positions, with its breakpoints resolved and checked."""

    model: str
    blocks: tuple[Block, ...]

    @property
    def total_tokens(self) -> int:
        return self.blocks[-1].prefix_tokens if self.blocks else 0

    @property
    def breakpoints(self) -> tuple[Block, ...]:
        return tuple(b for b in self.blocks if b.breakpoint is not None)

    def flat(self) -> list[FlatBlock]:
        return [FlatBlock(b.prefix_hash, b.tokens, b.breakpoint) for b in self.blocks]


@dataclass(frozen=True)
class _Raw:
    section: Section
    path: str
    kind: str
    tokens: int
    prefix_hash: str
    cacheable: bool
    breakpoint: TTL | None


def _link(previous: str, payload: str) -> str:
    return hashlib.sha256(f"{previous}\x1f{payload}".encode()).hexdigest()


def _hashable(value: Any, key: str | None = None) -> Any:
    """`value` without `cache_control` keys, order-sensitive values frozen as strings."""
    if key in _ORDER_SENSITIVE_KEYS:
        return "ordered:" + json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    if isinstance(value, Mapping):
        return {k: _hashable(v, k) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_hashable(v) for v in value]
    return value


def _parse_ttl(control: Any, path: str) -> TTL:
    if not isinstance(control, Mapping):
        raise CacheControlError(f"{path}: Input should be a valid dictionary")
    if control.get("type") != "ephemeral":
        raise CacheControlError(f"{path}.type: Input should be 'ephemeral'")
    ttl = control.get("ttl", "5m")
    if ttl == "5m" or ttl is None:
        return "5m"
    if ttl == "1h":
        return "1h"
    raise CacheControlError(f"{path}.ttl: Input should be '5m' or '1h'")


def _is_web_tool(tool: Mapping[str, Any]) -> bool:
    return str(tool.get("type", "")).startswith(_WEB_TOOL_PREFIXES)


def is_server_tool_result(kind: str) -> bool:
    """A server tool's result block (`web_search_tool_result`, `web_fetch_tool_result`,
    `code_execution_tool_result`, ...): every `*_tool_result` type but the client
    `tool_result` (UNCONFIRMED: the docs name web search, web fetch and code execution)."""
    return kind.endswith("_tool_result") and kind != "tool_result"


def _model_info(body: Mapping[str, Any]) -> ModelInfo | None:
    try:
        return get_model(str(body.get("model", "")))
    except UnknownModel:
        return None


def _iter_content(body: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """Every content block of every message, tool_result sub-blocks included."""
    for message in body.get("messages") or []:
        for block in content_blocks(message.get("content")):
            yield block
            if block.get("type") == "tool_result":
                yield from content_blocks(block.get("content"))


def system_settings(body: Mapping[str, Any]) -> dict[str, Any]:
    """Settings mixed into the chain before the first system block (invalidate system and
    messages, keep tools)."""
    tools = body.get("tools") or []
    return {
        "speed": body.get("speed") or "standard",
        "web_tools": [_hashable(t) for t in tools if _is_web_tool(t)],
        "citations": any(
            b.get("type") == "document" and bool((b.get("citations") or {}).get("enabled"))
            for b in _iter_content(body)
        ),
    }


def messages_settings(body: Mapping[str, Any]) -> dict[str, Any]:
    """Settings mixed into the chain before the first message block (invalidate messages)."""
    choice = body.get("tool_choice")
    if choice is None:
        # Absent means the documented default, so spelling the default out changes nothing.
        choice = {"type": "auto" if body.get("tools") else "none"}
    info = _model_info(body)
    default = info.thinking_default if info is not None else DEFAULT_THINKING
    thinking = body.get("thinking") or {}
    # Absent means the model's default, so spelling the default out changes nothing.
    thinking_type = thinking.get("type") or default
    thinking_key = None
    if thinking_type != default:
        thinking_key = {"type": thinking_type, "budget_tokens": thinking.get("budget_tokens")}
    effort = (body.get("output_config") or {}).get("effort")
    return {
        "tool_choice": {
            "type": choice.get("type"),
            "name": choice.get("name"),
            "disable_parallel_tool_use": bool(choice.get("disable_parallel_tool_use", False)),
        },
        "images": any(b.get("type") == "image" for b in _iter_content(body)),
        "thinking": thinking_key,
        "effort": None if effort == DEFAULT_EFFORT else effort,
    }


def _marker(block: Mapping[str, Any], path: str) -> TTL | None:
    control = block.get("cache_control")
    return None if control is None else _parse_ttl(control, f"{path}.cache_control")


def _tool_result_marker(block: dict[str, Any], path: str) -> TTL | None:
    """A marker on a tool_result's last sub-block moves to the parent (release notes
    2025-05-01); a marker on any other sub-block is rejected (message UNCONFIRMED)."""
    marker = _marker(block, path)
    subs = block.get("content")
    if not isinstance(subs, list):
        return marker
    for k, sub in enumerate(subs):
        if sub.get("cache_control") is None:
            continue
        if k != len(subs) - 1:
            raise CacheControlError(
                f"{path}.content.{k}.cache_control: cache_control may only be set on the "
                "last content block of a tool_result"
            )
        if marker is None:
            marker = _parse_ttl(sub["cache_control"], f"{path}.content.{k}.cache_control")
    return marker


ATTRIBUTION_PREFIX = "x-anthropic-billing-header:"
_ATTRIBUTION_BLOCK = {"type": "text", "text": ATTRIBUTION_PREFIX}


def _is_attribution(block: Mapping[str, Any]) -> bool:
    """Claude Code's attribution line (its first system block, `x-anthropic-billing-header:
    cc_version=...; cc_entrypoint=...; cch=...;`), which changes with every request (`cch`)
    and marks a subagent (`cc_is_subagent=true`) and yet does not split the cache on
    Anthropic's own API: "Anthropic's official server knows how to handle this header",
    while third-party prefix caches see 0% hits (NanmiCoder/cc-haha#503; anthropics/
    claude-code#68900; sglang PR #21064 strips it for the same reason). Its text is left
    out of the prefix hash; its tokens still count (UNCONFIRMED: whether it is billed)."""
    return block.get("type", "text") == "text" and str(block.get("text", "")).startswith(
        ATTRIBUTION_PREFIX
    )


def _flatten(body: Mapping[str, Any]) -> list[_Raw]:
    raws: list[_Raw] = []
    h = GENESIS

    def add(
        section: Section,
        path: str,
        kind: str,
        block: Mapping[str, Any],
        tokens: int,
        cacheable: bool,
        ttl: TTL | None,
        extra: Mapping[str, Any],
    ) -> None:
        nonlocal h
        if ttl is not None and not cacheable:
            # Message UNCONFIRMED: the docs only say these blocks cannot be cached.
            raise CacheControlError(
                f"{path}.cache_control: cache_control cannot be set for {kind} blocks"
            )
        h = _link(h, canonical_json({"section": section, **extra, "block": _hashable(block)}))
        raws.append(_Raw(section, path, kind, tokens, h, cacheable, ttl))

    for i, tool in enumerate(body.get("tools") or []):
        path = f"tools.{i}"
        kind = str(tool.get("type") or "custom")
        add(
            "tools",
            path,
            kind,
            tool,
            count_tool_definition_tokens(tool),
            True,
            _marker(tool, path),
            {},
        )

    h = _link(h, "@system:" + canonical_json(system_settings(body)))
    system = body.get("system")
    for i, block in enumerate(content_blocks(system)):
        path = "system" if isinstance(system, str) else f"system.{i}"
        text = str(block.get("text", ""))
        cacheable = bool(text)
        add(
            "system",
            path,
            str(block.get("type", "text")),
            _ATTRIBUTION_BLOCK if _is_attribution(block) else block,
            count_content_tokens(block),
            cacheable,
            _marker(block, path),
            {},
        )

    h = _link(h, "@messages:" + canonical_json(messages_settings(body)))
    stripped = dropped_blocks(body)  # prior-turn thinking, and what precedes a compaction
    for i, message in enumerate(body.get("messages") or []):
        content = message.get("content")
        opened = False  # the first block kept opens the message (a stripped one does not)
        for j, block in enumerate(content_blocks(content)):
            path = (
                f"messages.{i}.content" if isinstance(content, str) else f"messages.{i}.content.{j}"
            )
            if (i, j) in stripped and block.get("cache_control") is None:
                continue  # dropped from context: no position (a marker on it is still a 400)
            kind = str(block.get("type", "text"))
            cacheable = kind not in _UNCACHEABLE_KINDS and not (
                kind == "text" and not block.get("text")
            )
            ttl = (
                _tool_result_marker(block, path) if kind == "tool_result" else _marker(block, path)
            )
            extra = {"role": message.get("role"), "opens_message": not opened}
            add("messages", path, kind, block, count_content_tokens(block), cacheable, ttl, extra)
            opened = True
    return raws


def check_breakpoints(marks: Sequence[tuple[str, TTL]]) -> None:
    """The API's breakpoint rules: at most 4, and no 1h breakpoint after a 5m one (in prefix
    order). `marks` are (path, ttl) in prefix order; raises `CacheControlError`."""
    if len(marks) > MAX_BREAKPOINTS:
        raise CacheControlError(
            f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
            f"Found {len(marks)}."
        )
    seen_5m = False
    for path, ttl in marks:
        if ttl == "5m":
            seen_5m = True
        elif seen_5m:
            raise CacheControlError(
                f"{path}.cache_control.ttl: a ttl='1h' cache_control block must not come after "
                "a ttl='5m' cache_control block. Note that blocks are processed in the "
                "following order: `tools`, `system`, `messages`."
            )


def _server_tool_breakpoint(raws: Sequence[_Raw], caching: bool) -> int | None:
    """Where the API's own 5m breakpoint goes (see `flatten_request`), if anywhere."""
    if not caching:
        return None
    target = next(
        (
            i
            for i in range(len(raws) - 1, -1, -1)
            if raws[i].section == "messages" and is_server_tool_result(raws[i].kind)
        ),
        None,
    )
    if target is None or raws[target].breakpoint is not None or not raws[target].cacheable:
        return None
    marks: list[tuple[str, TTL]] = []
    for i, r in enumerate(raws):
        ttl = SERVER_TOOL_TTL if i == target else r.breakpoint
        if ttl is not None:
            marks.append((r.path, ttl))
    try:
        check_breakpoints(marks)
    except CacheControlError:
        return None
    return target


def flatten_request(body: Mapping[str, Any]) -> PreparedRequest:
    """Flatten a Messages request body (as on the wire) into block positions, place the
    automatic breakpoint of a top-level `cache_control`, and check the breakpoint rules.

    Automatic caching puts its breakpoint on the last cacheable block, walking back over
    ineligible ones (thinking, empty text); with none it is skipped. If that block already
    has an explicit marker with the same TTL it is a no-op; a different TTL is a 400
    (message UNCONFIRMED). It takes one of the 4 slots, so 4 explicit markers plus a
    top-level one is a 400 even when it would be a no-op (docs, "Edge cases").

    Server tool results: "When your request has prompt caching enabled and Claude uses a
    server tool such as web search, web fetch, or code execution, the API automatically
    places a cache breakpoint on the server tool result before running the next iteration
    of the agentic loop"; it "always uses the default 5-minute TTL" and "only applies when
    your request already has at least one `cache_control` marker"
    (AD:agents-and-tools/tool-use/tool-use-with-prompt-caching). The emulator runs no agentic
    loop, so it places that breakpoint on the last server tool result in `messages`, the
    point the next iteration would run from (UNCONFIRMED: whether earlier ones get one too).
    It is skipped when that block already has a breakpoint, and when it would not fit the
    breakpoint rules (a fifth breakpoint, or a 5m one before a 1h one): whether it takes one
    of the 4 slots is UNCONFIRMED, and a request is never refused for the API's own marker.
    """
    raws = _flatten(body)
    explicit = [(r.path, r.breakpoint) for r in raws if r.breakpoint is not None]
    auto_index: int | None = None
    top = body.get("cache_control")
    if top is not None:
        auto_ttl = _parse_ttl(top, "cache_control")
        if len(explicit) + 1 > MAX_BREAKPOINTS:
            check_breakpoints([*explicit, ("cache_control", auto_ttl)])
        target = next((i for i in range(len(raws) - 1, -1, -1) if raws[i].cacheable), None)
        if target is not None:
            existing = raws[target].breakpoint
            if existing is None:
                raws[target] = replace(raws[target], breakpoint=auto_ttl)
                auto_index = target
            elif existing != auto_ttl:
                raise CacheControlError(
                    f"cache_control.ttl: the top-level cache_control ttl='{auto_ttl}' conflicts "
                    f"with ttl='{existing}' on the last cacheable block ({raws[target].path})"
                )
    check_breakpoints([(r.path, r.breakpoint) for r in raws if r.breakpoint is not None])
    server_index = _server_tool_breakpoint(raws, top is not None or bool(explicit))
    if server_index is not None:
        raws[server_index] = replace(raws[server_index], breakpoint=SERVER_TOOL_TTL)

    blocks: list[Block] = []
    total = 0
    for index, r in enumerate(raws):
        total += r.tokens
        blocks.append(
            Block(
                index=index,
                section=r.section,
                path=r.path,
                kind=r.kind,
                tokens=r.tokens,
                prefix_tokens=total,
                prefix_hash=r.prefix_hash,
                cacheable=r.cacheable,
                breakpoint=r.breakpoint,
                automatic=index == auto_index,
                server_tool=index == server_index,
            )
        )
    return PreparedRequest(model=str(body.get("model", "")), blocks=tuple(blocks))
