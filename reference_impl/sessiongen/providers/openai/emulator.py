"""The OpenAI API on the emulator: Chat Completions (`POST /v1/chat/completions`) and
Responses (`POST /v1/responses`), enough for the official `openai` SDK with
`base_url=<emulator>/v1`.

Caching is OpenAI's automatic prefix caching for models before GPT-5.6, on the one
`CacheStore` (`CacheStore.apply_implicit`):

* the request is flattened into positions in prompt order: one per tool definition, then one
  per Chat message (`instructions` and each Responses input item likewise), each hashed into
  a cumulative chain that starts from the request settings the caching guide says break the
  prefix (`parallel_tool_calls`, `response_format` / `text.format`, reasoning effort,
  verbosity, `context_management`). `tool_choice` is not one of them, so changing it keeps
  the cache;
* "OpenAI places implicit breakpoints at model-dependent intervals, counted from the
  beginning": a breakpoint every `implicit_breakpoint_interval` tokens (catalog data, 128),
  eligible from the model's minimum (1,024). A request reads up to the last breakpoint it
  shares with a live entry, so one that ends with a different user message still reads the
  shared system prompt and history; it writes every breakpoint it reaches (no write fee);
* `cached_tokens` is that breakpoint rounded down to a multiple of 128;
* entries are namespaced by model and `prompt_cache_key` (another key misses; UNCONFIRMED);
* retention per model (`extended_retention` in the catalog): a model with extended
  retention defaults to `"24h"`, the others to `"in_memory"`, and `"24h"` on those is the
  400 the API answers; each retention's lifetimes are emulator settings
  (`EmulatorState.lifetimes`).

Replies: a scripted call is shaped by the tool it names (`_call_item`), looked up in `tools`,
in `additional_tools` input items and inside `namespace` tools: a `custom` tool's call is a
`custom_tool_call` with plain-text `input`, a namespaced tool's call names its namespace.
Unscripted, a request for `json_schema` output gets the smallest JSON its schema accepts.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import time
from collections.abc import AsyncIterator, Collection, Mapping
from itertools import accumulate
from typing import Any, NamedTuple

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.types import ASGIApp

from ...cache import (
    FlatBlock,
    ImplicitRule,
    ModelInfo,
    PromptCacheRules,
    UnknownModel,
    get_model,
)
from ...catalog import ttl_seconds, unknown_model_hint
from ...emulator.boundary import CHAT, RESPONSES, Violation, first_error
from ...emulator.client import asgi_http
from ...emulator.intake import Arrival
from ...emulator.logged import text_of, tool_names
from ...emulator.responder import allowed_reply, default_text, fit, schema_instance
from ...emulator.state import EmulatorState, ScriptedResponse
from ...llm._adapter import ProviderAdapter
from ...tokens import canonical_json, count_text_tokens, count_tool_call_tokens
from ..anthropic.counting import forced_server_tool, server_tool_refusal
from .counting import openai_chat_positions, openai_responses_positions
from .wire import CACHE_INCREMENT, error_type_for

PATH_PREFIXES = ("/v1/chat/", "/v1/responses")
CHAT_PATH = "/v1/chat/completions"
RESPONSES_PATH = "/v1/responses"
PROVIDER = "openai"
RETENTION_UNSUPPORTED = "prompt_cache_retention is not supported on this model"
"""The API's 400 for a retention the model does not offer, as public issues quote it
(OpenHands/software-agent-sdk#2295, home-assistant/core#161256 and client code that matches
`{"type": "invalid_request_error", "code": "invalid_parameter", "param":
"prompt_cache_retention"}`)."""
DEFAULT_MESSAGES = {
    400: "Invalid request.",
    401: "Incorrect API key provided.",
    403: "You are not allowed to access this resource.",
    404: "The requested resource was not found.",
    429: "Rate limit reached for requests.",
    500: "The server had an error while processing your request.",
    503: "The engine is currently overloaded, please try again later.",
}


class OpenAIError(Exception):
    def __init__(
        self, status: int, message: str, *, param: str | None = None, code: str | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code


def error_response(
    status: int,
    request_id: str,
    message: str | None = None,
    *,
    error_type: str | None = None,
    param: str | None = None,
    code: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """`{"error": {"message", "type", "param", "code"}}`, as the API sends it."""
    body = {
        "error": {
            "message": message or DEFAULT_MESSAGES.get(status, "Error"),
            "type": error_type or error_type_for(status),
            "param": param,
            "code": code,
        }
    }
    all_headers = {**(headers or {}), "x-request-id": request_id}
    return JSONResponse(body, status_code=status, headers=all_headers)


# --- flattening ----------------------------------------------------------------------------


def _text_of(content: str | list[Mapping[str, Any]] | None) -> str:
    """The text of a (checked) Chat / Responses `content`: a string or a list of parts."""
    if isinstance(content, str):
        return content
    return "".join(str(p.get("text", "")) for p in content or [])


def _chat_positions(body: Mapping[str, Any], framing: bool = True) -> list[tuple[Any, int]]:
    # Counted by the one counter (`tokens.openai_chat_positions`), one count per position.
    positions: list[Any] = [*(body.get("tools") or []), *body["messages"]]
    return list(zip(positions, openai_chat_positions(body, framing=framing), strict=True))


def _responses_input(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    raw = body["input"]
    if isinstance(raw, str):
        return [{"role": "user", "content": raw}]
    return [dict(item) for item in raw]


def _responses_positions(body: Mapping[str, Any], framing: bool = True) -> list[tuple[Any, int]]:
    # Counted by the one counter (`tokens.openai_responses_positions`), one per position.
    positions: list[Any] = list(body.get("tools") or [])
    if body.get("instructions"):
        positions.append({"instructions": str(body["instructions"])})
    # Item ids are server bookkeeping, not prompt text (UNCONFIRMED).
    positions += [{k: v for k, v in item.items() if k != "id"} for item in _responses_input(body)]
    counts = openai_responses_positions(body, framing=framing)
    return list(zip(positions, counts, strict=True))


def _settings(body: Mapping[str, Any], path: str) -> dict[str, Any]:
    """The settings the caching guide lists as breaking the prefix (besides model, tools)."""
    if path == CHAT_PATH:
        return {
            "parallel_tool_calls": body.get("parallel_tool_calls", True),
            "format": body.get("response_format"),
            "effort": body.get("reasoning_effort"),
            "verbosity": body.get("verbosity"),
        }
    text = body.get("text") or {}
    return {
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "format": text.get("format"),
        "effort": (body.get("reasoning") or {}).get("effort"),
        "verbosity": text.get("verbosity"),
        "context_management": body.get("context_management"),
    }


def retention(body: Mapping[str, Any], info: ModelInfo) -> str:
    """The request's `prompt_cache_retention`, defaulted per model: "24h" where the model
    has extended retention (the default "for models that support both ... without Zero Data
    Retention"), else "in_memory"; "24h" on a model without it is a 400."""
    value = body.get("prompt_cache_retention")
    if value is None:
        return "24h" if info.extended_retention else "in_memory"
    if value == "24h" and not info.extended_retention:
        raise OpenAIError(
            400, RETENTION_UNSUPPORTED, param="prompt_cache_retention", code="invalid_parameter"
        )
    return str(value)


def implicit_rule(state: EmulatorState, info: ModelInfo, kept: str) -> ImplicitRule:
    """Where the model's implicit breakpoints are and how long a retention keeps entries."""
    life = state.lifetimes
    if kept == "24h":
        return ImplicitRule(
            info.implicit_breakpoint_interval,
            life["openai_extended_ttl"],
            life["openai_extended_max"],
            label="24h",
        )
    return ImplicitRule(
        info.implicit_breakpoint_interval,
        life["openai_in_memory_ttl"],
        life["openai_in_memory_max"],
        label="in_memory",
    )


def flatten(
    body: Mapping[str, Any], path: str, framing: bool = True
) -> tuple[list[FlatBlock], int]:
    """The store's blocks `(prefix_hash, tokens, None)` for a request, and its total
    (`framing`: the emulator's setting, `EmulatorState.framing`)."""
    if path == CHAT_PATH:
        positions = _chat_positions(body, framing)
    else:
        positions = _responses_positions(body, framing)
    h = hashlib.sha256(canonical_json(_settings(body, path)).encode()).hexdigest()
    blocks: list[FlatBlock] = []
    for item, tokens in positions:
        h = hashlib.sha256((h + canonical_json(item)).encode()).hexdigest()
        blocks.append(FlatBlock(h, tokens, None))
    return blocks, sum(tokens for _, tokens in positions)


# --- GPT-5.6 and later: prompt_cache_options, explicit breakpoints, cache writes -----------

BREAKPOINT = "prompt_cache_breakpoint"
MODES = ("implicit", "explicit")
OPTIONS = {
    CHAT_PATH: frozenset({"mode", "ttl"}),
    RESPONSES_PATH: frozenset({"mode", "ttl", "prewarm", "comparison_response_id"}),
}
"""The `prompt_cache_options` fields each API takes (openai-python 3.57.0: Chat's
`PromptCacheOptions` has `mode` and `ttl`; Responses' adds `prewarm` and
`comparison_response_id`)."""
DIAGNOSTIC_RECORDS = 10_000
"""Responses remembered for `comparison_response_id` (the API's records "expire after a short
period", no number given: the emulator keeps the latest this many, until a reset)."""


class CacheOptions(NamedTuple):
    """A request's `prompt_cache_options`, checked against the model's rules."""

    mode: str
    ttl: str
    prewarm: bool
    comparison: str | None


def cache_options(body: Mapping[str, Any], path: str, rules: PromptCacheRules) -> CacheOptions:
    """`prompt_cache_options`, defaulted ("Defaults to `implicit`"; "`30m`, is also the
    default") and checked: an unknown field, mode or TTL is a 400 naming it."""
    raw = body.get("prompt_cache_options")
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise OpenAIError(
            400,
            "Invalid type for 'prompt_cache_options': expected an object.",
            param="prompt_cache_options",
            code="invalid_type",
        )
    for key in raw:
        if key not in OPTIONS[path]:
            raise OpenAIError(
                400,
                f"Unknown parameter: 'prompt_cache_options.{key}'.",
                param=f"prompt_cache_options.{key}",
                code="unknown_parameter",
            )
    mode = raw.get("mode", "implicit")
    ttl = raw.get("ttl", rules.default_ttl)
    for name, value, allowed in (("mode", mode, MODES), ("ttl", ttl, rules.ttls)):
        if value not in allowed:
            options = ", ".join(f"'{a}'" for a in allowed)
            raise OpenAIError(
                400,
                f"Invalid value for 'prompt_cache_options.{name}': {value!r}. Supported "
                f"values are: {options}.",
                param=f"prompt_cache_options.{name}",
                code="invalid_value",
            )
    prewarm = raw.get("prewarm", False)
    if not isinstance(prewarm, bool) or (prewarm and not rules.prewarm):
        raise OpenAIError(
            400,
            "Invalid value for 'prompt_cache_options.prewarm'.",
            param="prompt_cache_options.prewarm",
            code="invalid_value",
        )
    comparison = raw.get("comparison_response_id")
    return CacheOptions(
        str(mode), str(ttl), prewarm, None if comparison is None else str(comparison)
    )


def _unmarked(value: Any) -> Any:
    """`value` without its `prompt_cache_breakpoint` markers: a marker chooses where a
    prefix may be cached, it is not prompt text (the same tokens, marked or not, are the
    same prefix)."""
    if isinstance(value, Mapping):
        return {k: _unmarked(v) for k, v in value.items() if k != BREAKPOINT}
    if isinstance(value, list):
        return [_unmarked(v) for v in value]
    return value


class Boundary(NamedTuple):
    """One cache position of a GPT-5.6+ request: a tool, or one content block of a message
    or item (a whole item when its content is a string). `kind` names what the position
    ends (`tool`, `developer`, `user`, `tool_response`, `compaction`, `other`), `explicit`
    whether a `prompt_cache_breakpoint` marks it, `end` whether it ends its message."""

    hash: str
    tokens: int
    kind: str
    explicit: bool
    end: bool


def _kind(item: Mapping[str, Any]) -> str:
    role, kind = item.get("role"), item.get("type")
    if role in ("developer", "system") or "instructions" in item:
        return "developer"
    if role == "user":
        return "user"
    if role == "tool" or kind in ("function_call_output", "custom_tool_call_output"):
        return "tool_response"
    if kind == "compaction":
        return "compaction"
    return "other"


def _blocks_of(item: Mapping[str, Any]) -> tuple[str | None, list[Any]]:
    """The key of an item's list of content blocks (`content`, or a tool output's `output`)
    and the blocks; (None, []) when it has none."""
    for key in ("content", "output"):
        value = item.get(key)
        if isinstance(value, list) and value:
            return key, value
    return None, []


def boundaries(body: Mapping[str, Any], path: str, framing: bool = True) -> list[Boundary]:
    """A GPT-5.6+ request's cache positions in prompt order, each hashed into a chain that
    starts from the prefix-breaking settings (as `flatten`). An item with a list of content
    blocks is one position per block, so a marker may end a prefix inside a message (the
    guide: "keep the reusable text in a separate content block and place an explicit
    breakpoint after it"); its tokens are shared out by each block's text, the item's
    framing on its last. Hashes and counts ignore the markers."""
    clean = _unmarked(body)
    if path == CHAT_PATH:
        items: list[Any] = [*(body.get("tools") or []), *body["messages"]]
        counts = openai_chat_positions(clean, framing=framing)
        tools = len(body.get("tools") or [])
    else:
        items = list(body.get("tools") or [])
        tools = len(items)
        if body.get("instructions"):
            items.append({"instructions": str(body["instructions"])})
        items += [{k: v for k, v in i.items() if k != "id"} for i in _responses_input(body)]
        counts = openai_responses_positions(clean, framing=framing)
    h = hashlib.sha256(canonical_json(_settings(body, path)).encode()).hexdigest()
    out: list[Boundary] = []
    for index, (item, tokens) in enumerate(zip(items, counts, strict=True)):
        kind = "tool" if index < tools else _kind(item)
        key, parts = (None, []) if index < tools else _blocks_of(item)
        if key is None:
            h = hashlib.sha256((h + canonical_json(_unmarked(item))).encode()).hexdigest()
            out.append(Boundary(h, tokens, kind, False, True))
            continue
        head = {k: v for k, v in _unmarked(item).items() if k != key}
        left = tokens
        for j, part in enumerate(parts):
            last = j == len(parts) - 1
            text = canonical_json(_unmarked(part))
            share = left if last else min(left, count_text_tokens(text))
            left -= share
            piece = {"item": head, "block": j, key: _unmarked(part)}
            h = hashlib.sha256((h + canonical_json(piece)).encode()).hexdigest()
            marked = isinstance(part, Mapping) and part.get(BREAKPOINT) is not None
            out.append(Boundary(h, share, kind, marked, last))
    return out


def eligible_ends(positions: list[Boundary]) -> tuple[list[int], int | None]:
    """The eligible message endings, in order, and the end of the initial consecutive block
    of developer messages (None without one): "user messages", "the last tool response in
    a consecutive group of tool responses", "the last developer message in the initial
    consecutive group of developer messages" (prompt-caching guide, implicit mode)."""
    ends = [i for i, p in enumerate(positions) if p.end and p.kind != "tool"]
    initial: int | None = None
    for i in ends:
        if positions[i].kind != "developer":
            break
        initial = i
    eligible = [] if initial is None else [initial]
    for n, i in enumerate(ends):
        kind = positions[i].kind
        following = positions[ends[n + 1]].kind if n + 1 < len(ends) else None
        if kind == "user" or (kind == "tool_response" and following != "tool_response"):
            eligible.append(i)
    return sorted(eligible), initial


def lookups_and_writes(
    positions: list[Boundary], mode: str, rules: PromptCacheRules
) -> tuple[list[int], list[int]]:
    """Where a request looks its prefix up and where it writes ("How prefix matching
    works"; "Each request can create up to four cache writes"; implicit mode "writes up to
    the latest three explicit breakpoints", explicit "the latest four"). In explicit mode a
    request without markers neither reads nor writes."""
    explicit = [i for i, p in enumerate(positions) if p.explicit]
    looked = set(explicit[: rules.first_explicit]) | set(explicit[-rules.latest_explicit :])
    if mode == "explicit":
        return sorted(looked), explicit[-rules.max_writes :]
    ends, initial = eligible_ends(positions)
    if not ends:
        return sorted(looked), explicit[-rules.max_writes :]
    implicit = ends[-1]
    looked |= {implicit, *ends[-1 - rules.earlier_message_ends : -1]}
    if initial is not None:
        looked.add(initial)
    writes = (
        [implicit, *explicit[-(rules.max_writes - 1) :]] if rules.max_writes > 1 else [implicit]
    )
    return sorted(looked), sorted(set(writes))


class CacheRecord(NamedTuple):
    """What a response's `prompt_cache_diagnostics` compare: its settings, its positions'
    hashes and prefix sums, and its reusable prefix (the longest it read or wrote)."""

    model: str
    key: str
    service_tier: str
    tools: str
    text_format: str
    effort: str
    verbosity: str
    context_management: str
    hashes: tuple[str, ...]
    prefix: tuple[int, ...]
    kinds: tuple[str, ...]
    reusable: int


def cache_record(
    body: Mapping[str, Any], path: str, info: ModelInfo, positions: list[Boundary], reusable: int
) -> CacheRecord:
    settings = _settings(body, path)
    tools = {"tools": body.get("tools"), "parallel": settings["parallel_tool_calls"]}
    prefix = tuple(accumulate(p.tokens for p in positions))
    return CacheRecord(
        info.id,
        str(body.get("prompt_cache_key") or ""),
        str(body.get("service_tier") or "auto"),
        canonical_json(tools),
        canonical_json(settings["format"]),
        canonical_json(settings["effort"]),
        canonical_json(settings["verbosity"]),
        canonical_json(settings.get("context_management")),
        tuple(p.hash for p in positions),
        prefix,
        tuple(p.kind for p in positions),
        reusable,
    )


REASONS = (
    ("model_changed", "model"),
    ("prompt_cache_key_changed", "key"),
    ("service_tier_changed", "service_tier"),
    ("tools_changed", "tools"),
    ("text_format_changed", "text_format"),
    ("reasoning_effort_changed", "effort"),
    ("verbosity_changed", "verbosity"),
    ("context_compacted", "context_management"),
)
"""The diagnostics' reasons for a changed setting, in the order they are classified
("Diagnostics report the first classified reason"); `input_changed` comes last. A change of
`parallel_tool_calls` is reported as `tools_changed` (UNCONFIRMED: the reasons table names no
such setting)."""


def diagnose(now: CacheRecord, then: CacheRecord | None) -> dict[str, Any]:
    """`prompt_cache_diagnostics` of a request compared with an earlier response: cache_hit
    when it shares that response's reusable prefix, else cache_miss with the first reason,
    `comparison_reusable_tokens` (that prefix) and `cache_missed_tokens` (what of it the
    request does not share)."""
    if then is None:
        return {"type": "comparison_response_not_found"}
    reason = next(
        (name for name, field in REASONS if getattr(now, field) != getattr(then, field)), None
    )
    shared = 0
    if reason is None:
        for i, (a, b) in enumerate(zip(now.hashes, then.hashes, strict=False)):
            if a != b:
                if "compaction" in now.kinds[i:]:
                    reason = "context_compacted"
                break
            shared = then.prefix[i]
        if shared >= then.reusable:
            return {"type": "cache_hit"}
    return {
        "type": "cache_miss",
        "reason": reason or "input_changed",
        "comparison_reusable_tokens": then.reusable,
        "cache_missed_tokens": then.reusable - shared,
    }


# --- validation ----------------------------------------------------------------------------


def _invalid(violation: Violation) -> OpenAIError:
    """A body's first violation of its model (`boundary.CHAT` / `RESPONSES`) as the API
    words such errors: a missing parameter, an empty array, a wrong type or value."""
    param = violation.param()
    if not param:
        return OpenAIError(400, "The request body must be a JSON object.")
    if violation.kind == "missing":
        message, code = f"Missing required parameter: '{param}'.", "missing_required_parameter"
    elif violation.kind == "too_short":
        message = (
            f"Invalid '{param}': empty array. Expected an array with minimum length 1, but "
            "got an empty array instead."
        )
        code = "empty_array"
    elif violation.kind.endswith("_type"):
        message, code = f"Invalid type for '{param}': {violation.msg}.", "invalid_type"
    else:
        message, code = f"Invalid value for '{param}': {violation.msg}.", "invalid_value"
    return OpenAIError(400, message, param=param, code=code)


def _validate_common(body: Any, path: str) -> ModelInfo:
    violation = first_error(CHAT if path == CHAT_PATH else RESPONSES, body)
    if violation is not None:
        raise _invalid(violation)
    model = body["model"]
    try:
        info = get_model(model)
    except UnknownModel:
        info = None
    if info is None or info.provider != PROVIDER:
        raise OpenAIError(
            404,
            f"The model `{model}` does not exist or you do not have access to it."
            + unknown_model_hint(str(model), PROVIDER),
            code="model_not_found",
        )
    choice = body.get("tool_choice")
    if choice is not None and not _tool_choice_allowed(body, path, choice):
        raise OpenAIError(
            400,
            "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are "
            "specified.",
            param="tool_choice",
        )
    forced = forced_server_tool(body)
    if forced is not None:  # counting: a hosted tool's results would be input, not modelled
        raise OpenAIError(400, server_tool_refusal(forced), param="tool_choice")
    return info


def _tool_choice_allowed(body: Mapping[str, Any], path: str, choice: Any) -> bool:
    """Whether a request may set `tool_choice`. Chat Completions: only with `tools` (the
    API's "'tool_choice' is only allowed when 'tools' are specified"). Responses documents
    no such rule: its `ToolChoiceOptions` (OpenAI's API spec, as the SDKs carry it) describe
    the modes only, "`none` means the model will not call any tool and instead generates a
    message. `auto` means the model can pick between generating a message or calling one or
    more tools", and OpenAI's own client relies on that: Codex CLI 0.169.0 sends `tools: []` with `tool_choice: "auto"` on
    every compaction, and no `tools` at all (every tool in an `additional_tools` input item)
    on every turn of its default models. So on Responses `"auto"` and `"none"` need no tools;
    `"required"` or a named tool is still refused when no tool is defined anywhere, not in
    `tools` nor in an `additional_tools` item (UNCONFIRMED: inferred, not documented)."""
    if body.get("tools"):
        return True
    if path == CHAT_PATH:
        return False
    return choice in ("auto", "none") or bool(_callable_tools(body, path))


def _validate_chat(body: dict[str, Any]) -> None:
    pending: list[str] = []
    for i, message in enumerate(body["messages"]):
        role = message["role"]
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in pending:
                raise OpenAIError(
                    400,
                    "Invalid parameter: messages with role 'tool' must be a response to a "
                    "preceeding message with 'tool_calls'.",
                    param=f"messages.[{i}].role",
                )
            pending.remove(call_id)
            continue
        if pending:
            raise OpenAIError(
                400,
                "An assistant message with 'tool_calls' must be followed by tool messages "
                "responding to each 'tool_call_id'. The following tool_call_ids did not have "
                f"response messages: {', '.join(pending)}",
                param="messages",
            )
        if role == "assistant":
            pending = [str(c.get("id")) for c in message.get("tool_calls") or []]


def _max_tokens(body: Mapping[str, Any], path: str) -> int | None:
    if path == CHAT_PATH:
        value = body.get("max_completion_tokens", body.get("max_tokens"))
    else:
        value = body.get("max_output_tokens")
    return int(value) if isinstance(value, int) else None


# --- replies -------------------------------------------------------------------------------


def _last_user_text(body: Mapping[str, Any], path: str) -> str:
    items = body["messages"] if path == CHAT_PATH else _responses_input(body)
    for item in reversed(items):
        if item.get("role") == "user":
            return _text_of(item.get("content"))
    return ""


CALLABLE_TYPES = ("function", "custom")
"""The Responses tool types a scripted call can name (hosted tools run on OpenAI's side)."""


class _Tool(NamedTuple):
    name: str
    kind: str
    namespace: str | None


def _responses_tools(tools: Any, namespace: str | None = None) -> list[_Tool]:
    found: list[_Tool] = []
    for tool in tools if isinstance(tools, list) else []:
        if not isinstance(tool, Mapping):
            continue
        kind = str(tool.get("type", "function"))
        if kind == "namespace" and namespace is None:
            found += _responses_tools(tool.get("tools"), str(tool.get("name")))
        elif kind in CALLABLE_TYPES:
            found.append(_Tool(str(tool.get("name")), kind, namespace))
    return found


def _callable_tools(body: Mapping[str, Any], path: str) -> list[_Tool]:
    """The tools a reply can call, in prompt order. Chat: the function tools. Responses: the
    function and custom tools of `tools`, then of each `additional_tools` input item ("Tools
    in an `additional_tools` item become available only after that item appears in the
    input", OpenAI tool search guide: every item precedes the reply), a tool inside a
    `namespace` tool with that namespace (the guide's call: `{"type": "function_call", "name":
    "list_open_orders", "namespace": "crm", ...}`)."""
    tools = body.get("tools") or []
    if path == CHAT_PATH:
        return [_Tool(str((t.get("function") or {}).get("name")), "function", None) for t in tools]
    found = _responses_tools(tools)
    for item in _responses_input(body):
        if item.get("type") == "additional_tools":
            found += _responses_tools(item.get("tools"))
    return found


def _tool_names(body: Mapping[str, Any], path: str) -> list[str]:
    return [tool.name for tool in _callable_tools(body, path)]


def _json_format(body: Mapping[str, Any], path: str) -> Mapping[str, Any] | None:
    """The JSON schema a request asks the reply to follow (Responses `text.format`, Chat
    `response_format`, of type `json_schema`), or None."""
    fmt = (
        body.get("response_format") if path == CHAT_PATH else (body.get("text") or {}).get("format")
    )
    if not isinstance(fmt, Mapping) or fmt.get("type") != "json_schema":
        return None
    spec = fmt.get("json_schema") if path == CHAT_PATH else fmt
    schema = spec.get("schema") if isinstance(spec, Mapping) else None
    return schema if isinstance(schema, Mapping) else {}


Arguments = dict[str, Any] | str
"""A call's input: a JSON object, or a scripted string (`ScriptedToolCall.freeform`)."""


def _reply(body: Mapping[str, Any], path: str, scripted: ScriptedResponse | None) -> Any:
    if scripted is None:
        choice = body.get("tool_choice")
        names = _tool_names(body, path)
        forced = None
        if choice == "required" and names:
            forced = names[0]
        elif isinstance(choice, dict):
            forced = (choice.get("function") or {}).get("name") or choice.get("name")
        if forced:
            return "", [(None, str(forced), {})], False
        schema = _json_format(body, path)
        if schema is not None:
            # Structured Outputs "ensures the model will always generate responses that
            # adhere to your supplied JSON Schema" (OpenAI structured-outputs guide): an
            # unscripted reply is the smallest conforming object (`schema_instance`), which
            # a client that parses it (Codex's guardian review) accepts instead of retrying.
            text = json.dumps(schema_instance(schema))
        else:
            text = default_text(
                {"messages": [{"role": "user", "content": _last_user_text(body, path)}]}
            )
        scripted = ScriptedResponse(text=text)
    choice = body.get("tool_choice")
    scripted = allowed_reply(
        scripted,
        tools=len(_tool_names(body, path)),
        choice=choice if isinstance(choice, str) else None,
        body={"messages": [{"role": "user", "content": _last_user_text(body, path)}]},
    )
    text = scripted.text or ""
    limit = _max_tokens(body, path)
    truncated = limit is not None and count_text_tokens(text) > limit
    if limit is not None:
        text = fit(text, limit)
    calls: list[tuple[str | None, str, Arguments]] = [
        (c.id, c.name, c.input if c.freeform is None else c.freeform) for c in scripted.tool_calls
    ]
    return text, calls, truncated


def _arguments(args: Arguments) -> str:
    """A function call's `arguments` string: the JSON of an object input, a string as is."""
    return args if isinstance(args, str) else json.dumps(args)


def _call_tokens(name: str, args: Arguments) -> int:
    if isinstance(args, str):
        return count_text_tokens(name) + count_text_tokens(args)
    return count_tool_call_tokens(name, args)


class _Outcome:
    def __init__(
        self,
        state: EmulatorState,
        body: dict[str, Any],
        path: str,
        now: float,
        headers: Collection[str] = (),
    ) -> None:
        info = _validate_common(body, path)
        if path == CHAT_PATH:
            _validate_chat(body)
        namespace = f"openai:{info.id}:{body.get('prompt_cache_key') or ''}"
        self.options: CacheOptions | None = None
        self.diagnostics: dict[str, Any] | None = None
        self.cache_write = 0
        record: CacheRecord | None = None
        rules = info.prompt_cache
        if rules is None:
            # Models before GPT-5.6: implicit breakpoints, no writes billed, retentions.
            rule = implicit_rule(state, info, retention(body, info))
            blocks, total = flatten(body, path, state.framing)
            result = state.cache.apply_implicit(
                blocks,
                model=namespace,
                now=now,
                min_tokens=info.min_cacheable_tokens,
                rule=rule,
                ttft=state.ttft,
            )
            self.prompt_tokens = total
            self.cached = result.read_tokens // CACHE_INCREMENT * CACHE_INCREMENT
            options = body.get("prompt_cache_options")
            if path == RESPONSES_PATH and isinstance(options, Mapping):
                if options.get("comparison_response_id") is not None:
                    # "the model does not support diagnostics" (diagnostics guide)
                    self.diagnostics = {"type": "unavailable"}
        else:
            self.options = cache_options(body, path, rules)
            positions = boundaries(body, path, state.framing)
            looked, writes = lookups_and_writes(positions, self.options.mode, rules)
            outcome = state.cache.apply_boundaries(
                [FlatBlock(p.hash, p.tokens, None) for p in positions],
                model=namespace,
                now=now,
                min_tokens=info.min_cacheable_tokens,
                lookups=looked,
                writes=writes,
                life=ttl_seconds(self.options.ttl),
                label=self.options.ttl,
                ttft=state.ttft,
            )
            self.prompt_tokens = outcome.total_tokens
            step = rules.cached_tokens_increment
            self.cached = outcome.read_tokens // step * step
            self.cache_write = outcome.write_tokens
            reusable = max(outcome.read_tokens, outcome.written_end)
            record = cache_record(body, path, info, positions, reusable)
            comparison = self.options.comparison
            if path == RESPONSES_PATH and comparison is not None:
                if rules.diagnostics:
                    self.diagnostics = diagnose(record, state.prompt_cache_records.get(comparison))
                else:
                    self.diagnostics = {"type": "unavailable"}
        tools = _tool_names(body, path)
        if self.options is not None and self.options.prewarm:
            # "Prepares the prompt cache without generating output": no reply, no script.
            self.scripted = None
            self.text, calls, self.truncated = "", [], False
        else:
            self.scripted = state.pop_response(str(body.get("model")), tools, headers)
            self.text, calls, self.truncated = _reply(body, path, self.scripted)
        self.calls = [
            (cid or "call_" + state.next_tool_use_id().split("_", 1)[1], name, args)
            for cid, name, args in calls
        ]
        out = count_text_tokens(self.text) + sum(_call_tokens(n, a) for _, n, a in self.calls)
        self.tools = {t.name: t for t in reversed(_callable_tools(body, path))}  # first wins
        if self.scripted is not None and self.scripted.output_tokens is not None:
            out = self.scripted.output_tokens
        self.output_tokens = out
        self.id_number = state.next_message_id().split("_", 1)[1]
        if record is not None and path == RESPONSES_PATH:
            records = state.prompt_cache_records
            records[f"resp_{self.id_number}"] = record
            while len(records) > DIAGNOSTIC_RECORDS:
                del records[next(iter(records))]


def _chat_usage(o: _Outcome) -> dict[str, Any]:
    details: dict[str, Any] = {"cached_tokens": o.cached, "audio_tokens": 0}
    if o.options is not None:  # GPT-5.6+: "The unadjusted number of prompt tokens written"
        details["cache_write_tokens"] = o.cache_write
    return {
        "prompt_tokens": o.prompt_tokens,
        "completion_tokens": o.output_tokens,
        "total_tokens": o.prompt_tokens + o.output_tokens,
        "prompt_tokens_details": details,
        "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
    }


def _responses_usage(o: _Outcome) -> dict[str, Any]:
    return {
        "input_tokens": o.prompt_tokens,
        # Before GPT-5.6 no write fee: writes are reported as 0 (UNCONFIRMED); from GPT-5.6
        # on the tokens written beyond the read, billed at 1.25x input.
        "input_tokens_details": {"cached_tokens": o.cached, "cache_write_tokens": o.cache_write},
        "output_tokens": o.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": o.prompt_tokens + o.output_tokens,
    }


def _chat_completion(body: Mapping[str, Any], o: _Outcome, created: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": o.text or None, "refusal": None}
    if o.calls:
        message["tool_calls"] = [
            {"id": cid, "type": "function", "function": {"name": n, "arguments": _arguments(a)}}
            for cid, n, a in o.calls
        ]
    finish = "tool_calls" if o.calls else ("length" if o.truncated else "stop")
    return {
        "id": f"chatcmpl-{o.id_number}",
        "object": "chat.completion",
        "created": created,
        "model": body["model"],
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": _chat_usage(o),
        "service_tier": "default",
        "system_fingerprint": None,
    }


def _chat_chunks(body: Mapping[str, Any], o: _Outcome, created: int) -> list[dict[str, Any]]:
    full = _chat_completion(body, o, created)
    head = {k: full[k] for k in ("id", "model", "created", "system_fingerprint")}
    head["object"] = "chat.completion.chunk"

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    chunks = [chunk({"role": "assistant", "content": ""})]
    if o.text:
        chunks.append(chunk({"content": o.text}))
    for index, call in enumerate(full["choices"][0]["message"].get("tool_calls", [])):
        chunks.append(chunk({"tool_calls": [{"index": index, **call}]}))
    chunks.append(chunk({}, full["choices"][0]["finish_reason"]))
    if (body.get("stream_options") or {}).get("include_usage"):
        chunks.append({**head, "choices": [], "usage": full["usage"]})
    return chunks


def _freeform(args: Arguments) -> str:
    """A custom tool call's plain-text `input`: a scripted string as is; from an object, its
    `input` string (what a string input reads as elsewhere), else "" for `{}` (an unscripted
    forced call), else its JSON."""
    if isinstance(args, str):
        return args
    if set(args) == {"input"} and isinstance(args["input"], str):
        return args["input"]
    return json.dumps(args) if args else ""


def _call_item(cid: str, name: str, args: Arguments, tool: _Tool | None) -> dict[str, Any]:
    """One call as a Responses output item, shaped by the tool it names. A `custom` tool's
    call: "the tool call input is given as plain text", `{"id": "ctc_...", "type":
    "custom_tool_call", "status": "completed", "call_id": ..., "input": ..., "name": ...}`
    (OpenAI function-calling guide, custom tools); anything else a `function_call` with an
    `arguments` string. A tool defined inside a `namespace` tool also names it (`"namespace":
    "crm"` in the tool search guide's function call; the SDK's custom tool call has the same
    field, "The namespace of the custom tool being called"). An unknown name is a plain
    function call, as before."""
    if tool is not None and tool.kind == "custom":
        item: dict[str, Any] = {
            "type": "custom_tool_call",
            "id": f"ctc_{cid}",
            "call_id": cid,
            "name": name,
            "input": _freeform(args),
            "status": "completed",
        }
    else:
        item = {
            "type": "function_call",
            "id": f"fc_{cid}",
            "call_id": cid,
            "name": name,
            "arguments": _arguments(args),
            "status": "completed",
        }
    if tool is not None and tool.namespace is not None:
        item["namespace"] = tool.namespace
    return item


def _response_object(body: Mapping[str, Any], o: _Outcome, created: int) -> dict[str, Any]:
    output: list[dict[str, Any]] = []
    if o.text:
        output.append(
            {
                "type": "message",
                "id": f"msg_{o.id_number}",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": o.text, "annotations": []}],
            }
        )
    for cid, name, args in o.calls:
        output.append(_call_item(cid, name, args, o.tools.get(name)))
    response: dict[str, Any] = {
        "id": f"resp_{o.id_number}",
        "object": "response",
        "created_at": created,
        "status": "incomplete" if o.truncated else "completed",
        "incomplete_details": {"reason": "max_output_tokens"} if o.truncated else None,
        "error": None,
        "model": body["model"],
        "output": output,
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools") or [],
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "prompt_cache_key": body.get("prompt_cache_key"),
        "prompt_cache_retention": body.get("prompt_cache_retention"),
        "temperature": 1.0,
        "top_p": 1.0,
        "usage": _responses_usage(o),
    }
    if o.options is not None:  # "The prompt-caching options that were applied"
        options = {"mode": o.options.mode, "ttl": o.options.ttl}
        response["prompt_cache_options"] = {
            **options,
            "comparison_response_id": o.options.comparison,
        }
    if o.diagnostics is not None:
        response["prompt_cache_diagnostics"] = o.diagnostics
    return response


def _responses_events(response: dict[str, Any]) -> list[dict[str, Any]]:
    """A short but well-formed Responses stream: created, each output item added and done
    (text as one delta; a custom tool call's input as one `response.custom_tool_call_input
    .delta` and its `.done`, the streaming reference's events for "a delta (partial update)
    to the input of a custom tool call" and "input for a custom tool call is complete"),
    completed."""
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": {**response, "status": "in_progress"}}
    ]
    for index, item in enumerate(response["output"]):
        events.append({"type": "response.output_item.added", "output_index": index, "item": item})
        if item["type"] == "message":
            text = item["content"][0]["text"]
            events.append(
                {
                    "type": "response.output_text.delta",
                    "item_id": item["id"],
                    "output_index": index,
                    "content_index": 0,
                    "delta": text,
                    "logprobs": [],
                }
            )
        elif item["type"] == "custom_tool_call":
            where = {"item_id": item["id"], "output_index": index}
            events.append(
                {"type": "response.custom_tool_call_input.delta", **where, "delta": item["input"]}
            )
            events.append(
                {"type": "response.custom_tool_call_input.done", **where, "input": item["input"]}
            )
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    events.append({"type": "response.completed", "response": response})
    for number, event in enumerate(events):
        event["sequence_number"] = number
    return events


async def _sse(
    events: list[dict[str, Any]], named: bool, delay: float, cut: int | None
) -> AsyncIterator[bytes]:
    if delay:
        await asyncio.sleep(delay)
    for event in events[:cut] if cut is not None else events:
        data = json.dumps(event)
        prefix = f"event: {event['type']}\n" if named else ""
        yield f"{prefix}data: {data}\n\n".encode()
    if cut is None and not named:
        yield b"data: [DONE]\n\n"


async def _handle(state: EmulatorState, request: Request, path: str) -> Response:
    arrival = await Arrival.read(state, request, provider=PROVIDER, path=path)
    request_id, started_at, body = arrival.request_id, arrival.started_at, arrival.body
    if arrival.too_large:
        # Before faults, holds and parsing, as on /v1/messages. 413 is invalid_request_error in
        # the API's table; the message and the limit itself are UNCONFIRMED.
        message = f"The request body is over the maximum of {state.max_body_bytes} bytes."
        return arrival.refuse(error_response(413, request_id, message))
    stream = arrival.stream = isinstance(body, dict) and body.get("stream") is True
    record = arrival.record

    # As on /v1/messages: id, start time and fault follow arrival order; the cache, script
    # and log are touched only once a held request is released.
    if not await arrival.admit():
        return error_response(500, request_id, "The emulator was reset while held.")
    fault = arrival.fault
    if fault is not None and fault.effective_status != 200:
        status = fault.effective_status
        record(status, None)
        if fault.delay:
            await asyncio.sleep(fault.delay)
        return error_response(
            status, request_id, fault.message, error_type=fault.error_type, headers=fault.headers
        )
    try:
        if not arrival.parsed:
            raise OpenAIError(400, "We could not parse the JSON body of your request.")
        outcome = _Outcome(state, body, path, started_at, arrival.headers)
    except OpenAIError as exc:
        record(exc.status, None)
        return error_response(exc.status, request_id, exc.message, param=exc.param, code=exc.code)

    created = int(time.time())
    if path == CHAT_PATH:
        usage = _chat_usage(outcome)
        events = _chat_chunks(body, outcome, created) if stream else []
        reply = _chat_completion(body, outcome, created)
    else:
        usage = _responses_usage(outcome)
        reply = _response_object(body, outcome, created)
        events = _responses_events(reply) if stream else []
    record(200, usage)
    extra = {**(fault.headers if fault else {}), "x-request-id": request_id}
    delay = fault.delay if fault else 0.0
    if stream:
        cut = fault.cut_after_events if fault else None
        return StreamingResponse(
            _sse(events, path == RESPONSES_PATH, delay, cut),
            media_type="text/event-stream",
            headers=extra,
        )
    if delay:
        await asyncio.sleep(delay)
    return JSONResponse(reply, headers=extra)


def router(state: EmulatorState) -> APIRouter:
    api = APIRouter()

    @api.post(CHAT_PATH)
    async def chat_completions(request: Request) -> Response:
        return await _handle(state, request, CHAT_PATH)

    @api.post(RESPONSES_PATH)
    async def responses(request: Request) -> Response:
        return await _handle(state, request, RESPONSES_PATH)

    return api


def logged_blocks(body: Any, path: str | None, model: str) -> list[FlatBlock]:
    """A logged Chat Completions or Responses body's cache positions."""
    return flatten(body, path or CHAT_PATH)[0]


async def connect(
    app: ASGIApp,
    state: EmulatorState,
    stack: contextlib.AsyncExitStack,
    *,
    base_url: str,
    api_key: str,
    max_retries: int,
) -> ProviderAdapter:
    """The OpenAI adapter over the official SDK, sending to `app` in-process."""
    # optional extra: openai is imported only when it is used
    from .adapter import OpenAILLMClient

    return OpenAILLMClient(
        api_key=api_key,
        base_url=f"{base_url}/v1",
        http_client=asgi_http(app, base_url),
        max_retries=max_retries,
    )


def logged_model(path: str, body: Mapping[str, Any]) -> str:
    """The model a logged Chat Completions or Responses request named."""
    return str(body.get("model") or "")


def logged_tool_names(body: Mapping[str, Any]) -> list[str]:
    """The tools a logged request offered; on Responses, those added mid-thread in
    `additional_tools` items too."""
    tools = list(body.get("tools") or [])
    if isinstance(body.get("input"), list):
        for item in body["input"]:
            if isinstance(item, Mapping) and item.get("type") == "additional_tools":
                tools += item.get("tools") or []
    return tool_names(tools)


def logged_texts(body: Mapping[str, Any]) -> tuple[str, str]:
    """A logged request's system prompt (instructions and system or developer messages) and
    last user text."""
    items = body.get("input") if "input" in body else body.get("messages")
    items = [items] if isinstance(items, str) else items or []
    system = str(body.get("instructions") or "") + "\n".join(
        text_of(i.get("content")) for i in items if i.get("role") in ("system", "developer")
    )
    users = [i for i in items if isinstance(i, Mapping) and i.get("role") == "user"]
    return system, text_of(users[-1].get("content")) if users else ""
