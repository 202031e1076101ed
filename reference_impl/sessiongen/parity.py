"""The parity diff: every difference between a durable Step's wire request and a generate
request for the same snapshot, each classified as allowed or a violation, on any provider.

Allowed: the appended transient message (trailing user text blocks after the shared history,
as many as the Step's own new message has), the warming-only breakpoint move (a cache mark
on the last shared block), the output limit, the streaming switch, and transport headers
the SDK sets per request. Everything else (tools, tool choice, system, history, model,
thinking or effort settings, provider options, headers, prompt-cache key, endpoint) is a
violation: it changes what the provider caches or what the model sees.

Each provider's body layout is read by its own wire module (`wire_view`), so the rule above
is written once and holds for Anthropic, Bedrock Converse, OpenAI Chat Completions and
Gemini alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .llm.types import LLMRequest
from .llm.wire_view import WireView
from .providers import PROVIDERS

Verdict = Literal["allowed", "violation"]


@dataclass(frozen=True)
class WireRequest:
    """What reaches the provider: the JSON body, the headers, the prompt-cache key (where
    the provider has no field for it, it never reaches the wire), the provider whose layout
    the body has, and the endpoint path when known."""

    body: Mapping[str, Any]
    headers: Mapping[str, str]
    prompt_cache_key: str | None = None
    provider: str = "anthropic"
    path: str | None = None

    @staticmethod
    def of(request: LLMRequest) -> WireRequest:
        """An Anthropic request as lowered (for Anthropic the lowering is the wire body)."""
        return WireRequest(
            PROVIDERS["anthropic"].lower(request), dict(request.headers), request.prompt_cache_key
        )

    @staticmethod
    def logged(entry: Mapping[str, Any], prompt_cache_key: str | None = None) -> WireRequest:
        """A request as the emulator received it (one entry of its request log)."""
        return WireRequest(
            entry["body"],
            dict(entry.get("headers", {})),
            prompt_cache_key,
            entry.get("provider", "anthropic"),
            entry.get("path"),
        )

    def view(self) -> WireView:
        """The body's layout, read by its provider's wire module (the one place that knows
        it); an unknown provider is a `ValueError` naming the known ones."""
        return PROVIDERS[self.provider].view(self.body)


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


# Headers an SDK or its HTTP stack sets per request: they carry no cache identity, so a
# difference there is allowed (the body's length, an invocation id, a client timeout, and the
# address the client was pointed at, which generate and the Step share by construction).
TRANSPORT_HEADERS = ("content-length", "x-stainless-", "amz-sdk-", "x-amz-", "host")

# The streamed and the unstreamed endpoint of one operation (warming is sent unstreamed).
_UNSTREAMED = (("/converse-stream", "/converse"), (":streamGenerateContent", ":generateContent"))


def _endpoint(path: str | None) -> str | None:
    if path is None:
        return None
    path = path.split("?", 1)[0]
    for streamed, plain in _UNSTREAMED:
        path = path.replace(streamed, plain)
    return path


def _diff_settings(step: WireView, generate: WireView, out: list[Difference]) -> None:
    keys = dict.fromkeys((*step.settings.keys(), *generate.settings.keys()))
    for key in keys:
        a, b = step.settings.get(key), generate.settings.get(key)
        if a == b:
            continue
        if key == generate.output_limit:
            out.append(Difference(key, a, b, "allowed", "output limit (warming sends 0)"))
        elif key in ("stream", "stream_options"):
            out.append(Difference(key, a, b, "allowed", "transport (warming is unstreamed)"))
        else:
            what = generate.sections.get(key, "provider options")
            out.append(Difference(key, a, b, "violation", f"changes the {what}"))


def _diff_history(step: WireView, generate: WireView, out: list[Difference]) -> None:
    a, b = step.blocks, generate.blocks
    shared = 0
    while (
        shared < min(len(a), len(b))
        and a[shared].role == b[shared].role
        and a[shared].content == b[shared].content
    ):
        shared += 1
    for i in range(shared):
        mark_a, mark_b = a[i].mark, b[i].mark
        if mark_a != mark_b:
            warming_move = i == shared - 1 and mark_b is not None
            out.append(
                Difference(
                    b[i].mark_path if mark_b is not None else a[i].mark_path,
                    mark_a,
                    mark_b,
                    "allowed" if warming_move else "violation",
                    "warming breakpoint on the last shared block"
                    if warming_move
                    else "cache breakpoint moved inside the shared history",
                )
            )
    a_tail, b_tail = a[shared:], b[shared:]
    # The transient message replaces the Step's own new message: the same number of trailing
    # user text blocks on both sides (the prompt, with the instruction update if pending).
    # An extra block on one side is something else, e.g. a hook injecting text.
    same_shape = len(a_tail) == len(b_tail)
    for side, tail, other in (("step", a_tail, b_tail), ("generate", b_tail, a_tail)):
        for block in tail:
            user_text = block.role == "user" and block.kind == "text"
            transient = user_text and same_shape
            if transient:
                reason = f"{side}'s own trailing user text (the transient message)"
            elif user_text:
                reason = (
                    f"{side} appends {len(tail)} trailing blocks where the other side "
                    f"appends {len(other)}"
                )
            else:
                reason = f"history differs ({side} has a {block.role} {block.kind} block)"
            out.append(
                Difference(
                    block.path,
                    block.content if side == "step" else None,
                    block.content if side == "generate" else None,
                    "allowed" if transient else "violation",
                    reason,
                )
            )


def diff(step: WireRequest, generate: WireRequest) -> ParityReport:
    """Every difference between the two wire requests, classified."""
    if step.provider != generate.provider:
        raise ValueError(f"cannot compare a {step.provider} body with a {generate.provider} one")
    out: list[Difference] = []
    if _endpoint(step.path) != _endpoint(generate.path):
        out.append(
            Difference("path", step.path, generate.path, "violation", "changes the endpoint")
        )
    elif step.path != generate.path:
        out.append(
            Difference(
                "path", step.path, generate.path, "allowed", "transport (warming is unstreamed)"
            )
        )
    step_view, generate_view = step.view(), generate.view()
    _diff_settings(step_view, generate_view, out)
    _diff_history(step_view, generate_view, out)
    for name in sorted({*step.headers, *generate.headers}):
        a, b = step.headers.get(name), generate.headers.get(name)
        if a == b:
            continue
        if name.lower().startswith(TRANSPORT_HEADERS):
            out.append(Difference(f"headers.{name}", a, b, "allowed", "transport header"))
        else:
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
