"""The deterministic responder: turns a request (and an optional scripted response) into
content blocks, a stop reason and an output token count, within `max_tokens`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..tokens import BYTES_PER_TOKEN, count_content_tokens, count_text_tokens
from .state import ScriptedResponse, ScriptedToolCall

ECHO_PREFIX = "Emulated reply to: "
ECHO_CHARS = 80
FALLBACK_TEXT = "Emulated reply."
THINKING_SIGNATURE = "emulator-signature"


@dataclass(frozen=True)
class Reply:
    content: list[dict[str, Any]]
    stop_reason: str
    stop_sequence: str | None
    output_tokens: int


def _last_user_text(body: Mapping[str, Any]) -> str:
    for message in reversed(body.get("messages") or []):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        parts: list[str] = []
        for block in content or []:
            if block.get("type") == "text":
                parts.append(str(block.get("text", "")))
            elif block.get("type") == "tool_result" and isinstance(block.get("content"), str):
                parts.append(block["content"])
        return " ".join(parts)
    return ""


def default_text(body: Mapping[str, Any]) -> str:
    """The unscripted reply: an echo of the last user text, whitespace collapsed, cut to
    `ECHO_CHARS` characters."""
    snippet = " ".join(_last_user_text(body).split())[:ECHO_CHARS]
    return ECHO_PREFIX + snippet if snippet else FALLBACK_TEXT


def schema_instance(schema: Any, depth: int = 0) -> Any:
    """The smallest value a JSON schema accepts, for an unscripted reply to a request that
    asks for structured output: required properties only, the first `enum` or `const`, the
    first branch of `anyOf` / `oneOf`, `minimum` for numbers, `minLength` padding, `minItems`
    items. Type names in either case (Gemini's OpenAPI subset spells them `OBJECT`). A real
    model's reply conforms, so a client that parses it (a router, a reviewer) goes on instead
    of retrying an echo it cannot parse."""
    if not isinstance(schema, Mapping) or depth > 32:
        return {}
    for key in ("const", "default"):
        if key in schema:
            return schema[key]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if schema.get(key):
            return schema_instance(schema[key][0], depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if str(k).lower() != "null"), "null")
    kind = str(kind).lower() if kind is not None else ("object" if "properties" in schema else "")
    if kind == "object":
        properties = schema.get("properties") or {}
        return {
            name: schema_instance(properties.get(name), depth + 1)
            for name in schema.get("required") or []
        }
    if kind == "array":
        count = int(schema.get("minItems") or 0)
        return [schema_instance(schema.get("items"), depth + 1) for _ in range(min(count, 64))]
    if kind in ("integer", "number"):
        low = schema.get("minimum", schema.get("exclusiveMinimum"))
        value = low if isinstance(low, int | float) else 0
        return int(value) if kind == "integer" else value
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    return "x" * min(int(schema.get("minLength") or 0), 4096)


def _unscripted(body: Mapping[str, Any]) -> ScriptedResponse:
    """The echo text; a forced tool choice (`any` / `tool`) calls the tool with `{}` instead,
    since those choices prefill the assistant turn with a tool_use (AD:…/define-tools)."""
    choice = body.get("tool_choice") or {}
    tools = [t for t in body.get("tools") or [] if t.get("name")]
    if choice.get("type") == "tool":
        return ScriptedResponse(tool_calls=[ScriptedToolCall(name=str(choice["name"]))])
    if choice.get("type") == "any" and tools:
        return ScriptedResponse(tool_calls=[ScriptedToolCall(name=str(tools[0]["name"]))])
    return ScriptedResponse(text=default_text(body))


def offered_tools(body: Mapping[str, Any]) -> list[str]:
    """The names of the tools a Messages body offers (what a `ScriptMatch` checks)."""
    return [str(tool.get("name")) for tool in body.get("tools") or [] if isinstance(tool, Mapping)]


def may_call_tools(tools: int, choice: str | None) -> bool:
    """Whether a model can answer with a tool call: it was given tools, and the tool choice
    (the provider's own spelling, lower-cased) is not `none`. Anthropic: none "prevents
    Claude from using any tools"; OpenAI: none means the model "will not call any tool";
    Gemini: NONE "Model will not predict any function call" (shared/reference/providers.md)."""
    return tools > 0 and (choice or "").lower() != "none"


def allowed_reply(
    script: ScriptedResponse, *, tools: int, choice: str | None, body: Mapping[str, Any]
) -> ScriptedResponse:
    """`script` as the model may give it: a scripted tool call is dropped where the request
    rules tool calls out (`may_call_tools`), so an experiment that scripts a call sees what
    the provider would do under `none` or without tools. A reply left with nothing to say
    gets the unscripted echo of `body` (Anthropic-shaped): a model that may not call a tool
    answers in text."""
    if not script.tool_calls or may_call_tools(tools, choice):
        return script
    text = script.text or (None if script.thinking else default_text(body))
    return script.model_copy(update={"tool_calls": [], "text": text})


def fit(text: str, budget: int) -> str:
    """A prefix of `text` that costs at most `budget` tokens: about `budget` tokens' bytes,
    shortened until it fits (a token is 4 bytes or fewer on typical text)."""
    if count_text_tokens(text) <= budget:
        return text
    size = budget * BYTES_PER_TOKEN
    cut = text.encode("utf-8")[:size].decode("utf-8", errors="ignore")
    while cut and count_text_tokens(cut) > budget:
        cut = cut[: max(0, len(cut) - max(1, len(cut) // 8))]
    return cut


def _stop_at_sequence(text: str, stops: Sequence[str]) -> tuple[str, str | None]:
    """Cut `text` before the earliest stop sequence it contains."""
    found = [(text.find(s), s) for s in stops if s and s in text]
    if not found:
        return text, None
    index, sequence = min(found)
    return text[:index], sequence


def build_reply(
    body: Mapping[str, Any],
    scripted: ScriptedResponse | None,
    new_tool_use_id: Callable[[], str],
) -> Reply:
    """Content = thinking, text, tool_use blocks, in that order, cut at `max_tokens`.

    `max_tokens: 0` is a pre-warm: no content, stop_reason max_tokens, 0 output tokens (and
    no scripted response is consumed by the caller for it).
    """
    budget: int = body["max_tokens"]
    if budget == 0:
        return Reply([], "max_tokens", None, 0)
    choice = (body.get("tool_choice") or {}).get("type")
    script = allowed_reply(
        scripted or _unscripted(body), tools=len(body.get("tools") or []), choice=choice, body=body
    )
    content: list[dict[str, Any]] = []
    used = 0
    truncated = False
    stop_sequence: str | None = None

    if script.thinking is not None:
        thinking = fit(script.thinking, budget)
        truncated = thinking != script.thinking
        content.append({"type": "thinking", "thinking": thinking, "signature": THINKING_SIGNATURE})
        used += count_content_tokens(content[-1])
    if not truncated and script.text:
        text, stop_sequence = _stop_at_sequence(script.text, body.get("stop_sequences") or [])
        fitted = fit(text, budget - used)
        if fitted != text:
            truncated, stop_sequence = True, None
        if fitted:
            content.append({"type": "text", "text": fitted})
            used += count_content_tokens(content[-1])
    if not truncated and stop_sequence is None:
        for call in script.tool_calls:
            block = {"type": "tool_use", "id": "", "name": call.name, "input": call.input}
            cost = count_content_tokens(block)  # the id is not counted
            if used + cost > budget:
                truncated = True
                break
            # The id is drawn only for a call that fits, so ids stay consecutive.
            content.append({**block, "id": call.id or new_tool_use_id()})
            used += cost

    if truncated:
        stop_reason = "max_tokens"
    elif stop_sequence is not None:
        stop_reason = "stop_sequence"
    elif script.stop_reason is not None:
        stop_reason = script.stop_reason
    else:
        has_tools = any(block["type"] == "tool_use" for block in content)
        stop_reason = "tool_use" if has_tools else "end_turn"
    output_tokens = script.output_tokens if script.output_tokens is not None else used
    return Reply(content, stop_reason, stop_sequence, output_tokens)
