"""The parity diff: every difference between a durable Step's wire request and a generate
request for the same snapshot, each classified as allowed or a violation.

Allowed: the appended transient message (trailing user text blocks after the shared history,
as many as the Step's own new message has), the
warming-only breakpoint move (a cache mark on the last shared block), and `max_tokens`.
Everything else (tools, tool choice, system, history, model, thinking or effort settings,
provider options, headers, prompt-cache key) is a violation: it changes what the provider
caches or what the model sees.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .llm.anthropic_wire import lower_request
from .llm.types import LLMRequest
from .tokens import without_cache_control

Verdict = Literal["allowed", "violation"]


@dataclass(frozen=True)
class WireRequest:
    """What reaches the provider: the JSON body, the headers, and the prompt-cache key."""

    body: Mapping[str, Any]
    headers: Mapping[str, str]
    prompt_cache_key: str | None = None

    @staticmethod
    def of(request: LLMRequest) -> WireRequest:
        return WireRequest(lower_request(request), dict(request.headers), request.prompt_cache_key)


@dataclass(frozen=True)
class Difference:
    path: str
    step: Any
    generate: Any
    verdict: Verdict
    reason: str


@dataclass(frozen=True)
class ParityReport:
    differences: tuple[Difference, ...]

    @property
    def violations(self) -> tuple[Difference, ...]:
        return tuple(d for d in self.differences if d.verdict == "violation")

    @property
    def allowed(self) -> tuple[Difference, ...]:
        return tuple(d for d in self.differences if d.verdict == "allowed")

    def rows(self) -> list[dict[str, str]]:
        """One row per difference, for tables in notebooks and docs."""
        return [
            {
                "path": d.path,
                "verdict": d.verdict,
                "reason": d.reason,
                "step": _short(d.step),
                "generate": _short(d.generate),
            }
            for d in self.differences
        ]


def _short(value: Any, limit: int = 60) -> str:
    text = "—" if value is None else repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _blocks(body: Mapping[str, Any]) -> list[tuple[str, int, int, Mapping[str, Any]]]:
    """Message content flattened to (role, message index, block index, block)."""
    out: list[tuple[str, int, int, Mapping[str, Any]]] = []
    for m, message in enumerate(body.get("messages", [])):
        content = message["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        for b, block in enumerate(content):
            out.append((message["role"], m, b, block))
    return out


SECTIONS = {
    "model": "model",
    "system": "system prompt",
    "tools": "tool definitions",
    "tool_choice": "tool choice",
    "thinking": "thinking settings",
    "output_config": "effort settings",
}


def _diff_messages(
    step: Mapping[str, Any], generate: Mapping[str, Any], out: list[Difference]
) -> None:
    a, b = _blocks(step), _blocks(generate)
    shared = 0
    while (
        shared < min(len(a), len(b))
        and a[shared][0] == b[shared][0]
        and without_cache_control(a[shared][3]) == without_cache_control(b[shared][3])
    ):
        shared += 1
    for i in range(shared):
        mark_a, mark_b = a[i][3].get("cache_control"), b[i][3].get("cache_control")
        if mark_a != mark_b:
            last_shared = i == shared - 1
            out.append(
                Difference(
                    f"messages[{b[i][1]}].content[{b[i][2]}].cache_control",
                    mark_a,
                    mark_b,
                    "allowed" if last_shared and mark_b is not None else "violation",
                    "warming breakpoint on the last shared block"
                    if last_shared and mark_b is not None
                    else "cache breakpoint moved inside the shared history",
                )
            )
    a_tail, b_tail = a[shared:], b[shared:]
    # The transient message replaces the Step's own new message: the same number of trailing
    # user text blocks on both sides (the prompt, with the instruction update if pending).
    # An extra block on one side is something else, e.g. a hook injecting text.
    same_shape = len(a_tail) == len(b_tail)
    for side, tail in (("step", a_tail), ("generate", b_tail)):
        for role, m, k, block in tail:
            transient = role == "user" and block.get("type") == "text" and same_shape
            if transient:
                reason = f"{side}'s own trailing user text (the transient message)"
            elif role == "user" and block.get("type") == "text":
                reason = (
                    f"{side} appends {len(tail)} trailing blocks where the other side appends "
                    f"{len(b_tail) if side == 'step' else len(a_tail)}"
                )
            else:
                reason = f"history differs ({side} has a {role} {block.get('type')} block)"
            out.append(
                Difference(
                    f"messages[{m}].content[{k}]",
                    block if side == "step" else None,
                    block if side == "generate" else None,
                    "allowed" if transient else "violation",
                    reason,
                )
            )


def diff(step: WireRequest, generate: WireRequest) -> ParityReport:
    """Every difference between the two wire requests, classified."""
    out: list[Difference] = []
    keys = [k for k in (*step.body.keys(), *generate.body.keys()) if k != "messages"]
    for key in dict.fromkeys(keys):
        a, b = step.body.get(key), generate.body.get(key)
        if a == b:
            continue
        if key == "max_tokens":
            out.append(Difference(key, a, b, "allowed", "output limit (warming sends 0)"))
        else:
            what = SECTIONS.get(key, "provider options")
            out.append(Difference(key, a, b, "violation", f"changes the {what}"))
    _diff_messages(step.body, generate.body, out)
    for name in sorted({*step.headers, *generate.headers}):
        a, b = step.headers.get(name), generate.headers.get(name)
        if a != b:
            out.append(Difference(f"headers.{name}", a, b, "violation", "changes the headers"))
    if step.prompt_cache_key != generate.prompt_cache_key:
        out.append(
            Difference(
                "prompt_cache_key",
                step.prompt_cache_key,
                generate.prompt_cache_key,
                "violation",
                "changes the prompt-cache key",
            )
        )
    return ParityReport(tuple(out))
