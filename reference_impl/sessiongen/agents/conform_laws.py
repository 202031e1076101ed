"""The contract's black-box laws of `session.generate`, each one named check observed at the
wire: the server under test talks to an emulator, and the kit reads the emulator's request
log, scripts its replies and injects its faults through the admin API (`/_emulator/*`).

Every law starts from a reset emulator and a fresh session that has had two durable turns
(the second turn's last provider request is "the Step"), so a violation of one law does not
leak into another. Each prompt the kit sends carries a unique marker, so the requests a call caused
are told apart from anything else the server sends (a title call, a warming ping).
"""

from __future__ import annotations

import base64
import json
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal, TypeVar

import httpx

from ..llm.types import Usage
from ..llm.wire_view import WireView
from ..parity import TRANSPORT_HEADERS, WireRequest
from .conform_adapters import Adapter, AdapterError, GenerateOutcome, SessionState, Unreachable
from .wire import read_call

__all__ = [
    "LAWS",
    "LAW_NAMES",
    "EmulatorAdmin",
    "Kit",
    "Law",
    "LawFailed",
    "Verdict",
    "check_law",
    "run_laws",
]

Status = Literal["PASS", "FAIL"]
FAULTS = (500, 529)
"""The provider faults the one-attempt law injects: a server error and an overload, both
of which an SDK retries by default."""
_UNSTREAMED = (("/converse-stream", "/converse"), (":streamGenerateContent", ":generateContent"))
_T = TypeVar("_T")


class LawFailed(Exception):
    """A law does not hold; the message is the one-line reason."""


@dataclass(frozen=True)
class Verdict:
    law: str
    status: Status
    reason: str

    def line(self) -> str:
        return f"{self.status} {self.law}: {self.reason}"


@dataclass(frozen=True)
class Law:
    name: str
    clauses: tuple[str, ...]
    summary: str
    check: Callable[[Kit], str]
    """Returns the PASS reason; raises `LawFailed` with the FAIL reason."""


# --- the emulator ---------------------------------------------------------------------------


class EmulatorAdmin:
    """The emulator's admin API: its request log, script queue, faults and reset."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.client = httpx.Client(
            base_url=self.base_url, headers=headers, timeout=timeout, transport=transport
        )

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        try:
            response = self.client.request(method, path, json=body)
        except httpx.TransportError as exc:
            raise Unreachable(
                f"cannot reach the emulator at {self.base_url}: {' '.join(str(exc).split())}"
            ) from None
        if response.status_code == 401:
            raise Unreachable(
                f"the emulator at {self.base_url} wants its admin token: pass --emulator-token"
            )
        if response.status_code != 200:
            raise Unreachable(
                f"the emulator at {self.base_url} answered {method} {path} with "
                f"{response.status_code}: is it a sessiongen emulator?"
            )
        return response.json()

    def check(self) -> None:
        self._call("GET", "/_emulator/clock")

    def reset(self) -> None:
        self._call("POST", "/_emulator/reset")

    def script(self, *replies: Mapping[str, Any]) -> None:
        self._call("POST", "/_emulator/script", {"responses": list(replies)})

    def faults(self, status: int) -> None:
        self._call("POST", "/_emulator/faults", {"status": status, "count": 1})

    def requests(self, since: int = 0) -> list[Logged]:
        """The logged requests that arrived after arrival number `since`."""
        answer = self._call("GET", f"/_emulator/requests?since={since}")
        return [Logged(entry) for entry in answer["requests"]]

    def close(self) -> None:
        self.client.close()


@dataclass(frozen=True)
class Logged:
    """One request in the emulator's log, read the way the parity diff reads it."""

    entry: Mapping[str, Any]

    @property
    def arrival(self) -> int:
        return int(str(self.entry["id"]).rsplit("_", 1)[-1])

    @property
    def status(self) -> int:
        return int(self.entry["status"])

    @property
    def path(self) -> str:
        return str(self.entry["path"])

    @cached_property
    def raw(self) -> bytes:
        return base64.b64decode(self.entry.get("raw_body") or "")

    def mentions(self, marker: str) -> bool:
        return marker.encode() in self.raw

    @property
    def counts_tokens(self) -> bool:
        """A token-counting call (Anthropic's `count_tokens`, Gemini's `countTokens`): it
        carries the prompt but asks the model nothing."""
        path = self.path.split("?", 1)[0]
        return path.endswith(("/count_tokens", ":countTokens"))

    @cached_property
    def view(self) -> WireView:
        return WireRequest.logged(self.entry).view()

    @property
    def headers(self) -> dict[str, str]:
        return dict(self.entry.get("headers") or {})

    @cached_property
    def usage(self) -> Usage:
        return read_call(self.entry).usage

    def tool_names(self) -> list[str]:
        return read_call(self.entry).tool_names()


# --- the kit: what every law does -----------------------------------------------------------


@dataclass(frozen=True)
class Prompt:
    text: str
    marker: str


@dataclass(frozen=True)
class Turned:
    """A fresh session after its durable turns, and the last turn's last provider request
    (the Step)."""

    session_id: str
    step: Logged


@dataclass
class Kit:
    adapter: Adapter
    emulator: EmulatorAdmin
    run_id: str = field(default_factory=lambda: secrets.token_hex(3))
    _count: int = 0
    _mark: int = 0

    def start(self) -> None:
        """Before each law: a reset emulator (no script, fault, cache or log left over)."""
        self.emulator.reset()
        self._mark = 0

    def prompt(self, text: str) -> Prompt:
        self._count += 1
        marker = f"[conform {self.run_id}.{self._count}]"
        return Prompt(f"{text} {marker}", marker)

    def observe(self, action: Callable[[], _T]) -> tuple[_T, list[Logged]]:
        """`action`'s result and the requests the emulator logged while it ran."""
        result = action()
        logged = self.emulator.requests(since=self._mark)
        if logged:
            self._mark = max(entry.arrival for entry in logged)
        return result, logged

    def session_after_turn(self) -> Turned:
        """A new session after two durable turns (so its history holds a reply), and the
        second turn's Step."""
        session_id = self.adapter.create_session()
        first = self.prompt("What is in this project?")
        self.observe(lambda: self.adapter.turn(session_id, first.text))
        prompt = self.prompt("Which file holds the entry point?")
        _, logged = self.observe(lambda: self.adapter.turn(session_id, prompt.text))
        steps = [
            e
            for e in logged
            if e.status == 200 and e.mentions(prompt.marker) and not e.counts_tokens
        ]
        if not steps:
            raise Unreachable(
                f"the server's turn left no request at the emulator {self.emulator.base_url}: "
                "start the server with its provider pointed at this emulator"
            )
        # The Step is the turn's last request among those offering the most tools (a client's
        # side call, e.g. a title, offers none).
        most = max(len(e.view.settings.get("tools") or ()) for e in steps)
        step = [e for e in steps if len(e.view.settings.get("tools") or ()) == most][-1]
        return Turned(session_id, step)

    def generate(
        self,
        session_id: str,
        text: str,
        *,
        tools_policy: str | None = None,
        reply: Mapping[str, Any] | None = None,
        fault: int | None = None,
    ) -> tuple[GenerateOutcome, list[Logged]]:
        """One generate; its outcome and the model requests that carried its prompt."""
        if reply is not None:
            self.emulator.script(reply)
        if fault is not None:
            self.emulator.faults(fault)
        prompt = self.prompt(text)
        outcome, logged = self.observe(
            lambda: self.adapter.generate(session_id, prompt.text, tools_policy=tools_policy)
        )
        return outcome, [e for e in logged if e.mentions(prompt.marker) and not e.counts_tokens]


def _one_request(outcome: GenerateOutcome, mine: Sequence[Logged]) -> Logged:
    """The generate's single successful provider request, for laws about its shape."""
    if not outcome.ok:
        raise LawFailed(f"cannot observe: the generate answered {outcome.describe()}")
    if not mine:
        raise LawFailed("cannot observe: the generate's prompt reached the emulator in no request")
    return mine[-1]


# --- snapshots ------------------------------------------------------------------------------


def _short(value: Any, limit: int = 70) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _first_text(value: Any) -> str | None:
    if isinstance(value, Mapping):
        if isinstance(value.get("text"), str):
            return str(value["text"])
        values: Any = value.values()
    elif isinstance(value, list):
        values = value
    else:
        return None
    for item in values:
        found = _first_text(item)
        if found is not None:
            return found
    return None


def _message(message: Any) -> str:
    """A message in a few words, whatever the server's shape: its role and first text."""
    info = message.get("info") if isinstance(message, Mapping) else None
    role = "message"
    for source in (message, info):
        if isinstance(source, Mapping):
            role = str(source.get("kind") or source.get("role") or role)
    text = _first_text(message)
    return role if text is None else f"{role} {_short(text, 40)}"


def _state_changes(before: SessionState, after: SessionState) -> str | None:
    """What changed between two `SessionState`s other than the revision, in one line."""
    if before.messages != after.messages:
        old, new = before.messages, after.messages
        if len(new) > len(old) and new[: len(old)] == old:
            added = ", ".join(_message(m) for m in new[len(old) :][:3])
            return f"messages {len(old)} -> {len(new)}, added {added}"
        index = next(
            (i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b),
            min(len(old), len(new)),
        )
        return f"messages {len(old)} -> {len(new)}, message {index} changed"
    keys = sorted({*before.other, *after.other})
    changed = [k for k in keys if before.other.get(k) != after.other.get(k)]
    if changed:
        k = changed[0]
        return f"{k} {_short(before.other.get(k), 50)} -> {_short(after.other.get(k), 50)}"
    return None


# --- the laws -------------------------------------------------------------------------------


def no_mutation(kit: Kit) -> str:
    turned = kit.session_after_turn()
    sid = turned.session_id
    before = kit.adapter.state(sid)
    outcome, _ = kit.generate(sid, "Give this session a short title.")
    if not outcome.ok:
        raise LawFailed(f"cannot observe: the generate answered {outcome.describe()}")
    changed = _state_changes(before, kit.adapter.state(sid))
    if changed:
        raise LawFailed(f"after a successful generate: {changed}")
    failed, _ = kit.generate(sid, "Recap this session in one line.", fault=500)
    changed = _state_changes(before, kit.adapter.state(sid))
    if changed:
        raise LawFailed(f"after a generate whose provider call failed (500): {changed}")
    return (
        f"{len(before.messages)} messages and every other field unchanged after a successful "
        f"generate and one whose provider call failed (answered {failed.describe()})"
    )


def revision_unchanged(kit: Kit) -> str:
    turned = kit.session_after_turn()
    sid = turned.session_id
    before = kit.adapter.state(sid).revision
    if before is None:
        raise LawFailed("cannot observe: the adapter reports no revision for the session")
    outcome, _ = kit.generate(sid, "Give this session a short title.")
    if not outcome.ok:
        raise LawFailed(f"cannot observe: the generate answered {outcome.describe()}")
    if outcome.revision is not None and outcome.revision != before:
        raise LawFailed(f"the result's revision is {outcome.revision}, the snapshot's was {before}")
    after = kit.adapter.state(sid).revision
    if after != before:
        raise LawFailed(f"a successful generate moved the revision {before} -> {after}")
    kit.generate(sid, "Recap this session in one line.", fault=500)
    after = kit.adapter.state(sid).revision
    if after != before:
        raise LawFailed(f"a failed generate moved the revision {before} -> {after}")
    told = "" if outcome.revision is None else ", the result's revision is the snapshot's"
    return f"revision {before} before and after a successful and a failed generate{told}"


def one_attempt(kit: Kit) -> str:
    turned = kit.session_after_turn()
    seen: list[str] = []
    for status in FAULTS:
        outcome, mine = kit.generate(turned.session_id, "Summarise the repo.", fault=status)
        statuses = ", ".join(str(e.status) for e in mine) or "none"
        if len(mine) != 1:
            raise LawFailed(
                f"provider {status}: {len(mine)} requests reached the emulator ({statuses}); "
                f"the server answered {outcome.describe()}"
            )
        if mine[0].status != status:
            raise LawFailed(
                f"provider {status}: the generate's request was answered {mine[0].status}, "
                "not the injected fault (did another request take it?)"
            )
        if outcome.ok or outcome.status < 400:
            raise LawFailed(
                f"provider {status}: the server answered {outcome.status} for a call the "
                "provider failed"
            )
        if outcome.error is None:
            raise LawFailed(f"provider {status}: answered {outcome.status} with no typed error")
        seen.append(f"{status} -> {outcome.status} {outcome.error_name}")
    return "one request each, answered a typed error without a retry: " + "; ".join(seen)


def _tool_settings(view: WireView) -> dict[str, Any]:
    return {k: v for k, v in view.settings.items() if view.sections.get(k) == "tool definitions"}


def tools_per_policy(kit: Kit) -> str:
    turned = kit.session_after_turn()
    sid, step = turned.session_id, turned.step
    offered = step.tool_names()
    step_tools = _tool_settings(step.view)
    if not offered:
        outcome, mine = kit.generate(sid, "Which file should I read first?")
        sent = _one_request(outcome, mine).tool_names()
        if sent:
            raise LawFailed(f"the Step offered no tools, the generate offered {sent}")
        return "the Step offered no tools and neither did the generate"
    reply = {"text": "Let me look.", "tool_calls": [{"name": offered[0], "input": {}}]}
    outcome, mine = kit.generate(sid, "Which file should I read first?", reply=reply)
    if len(mine) > 1:
        raise LawFailed(
            f"answered with a {offered[0]} call, the generate made {len(mine)} provider "
            "requests: a returned call is never executed or continued"
        )
    request = _one_request(outcome, mine)
    if _tool_settings(request.view) != step_tools:
        raise LawFailed(
            f"default policy: tool definitions differ from the Step's (Step {offered}, "
            f"generate {request.tool_names()})"
        )
    if request.view.tool_choice != step.view.tool_choice:
        raise LawFailed(
            f"default policy: tool choice {request.view.tool_choice}, the Step's is "
            f"{step.view.tool_choice}"
        )
    if outcome.tool_calls is not None and offered[0] not in outcome.tool_calls:
        raise LawFailed(f"the model's {offered[0]} call is not in the result's tool calls")
    if outcome.finish_reason is not None and outcome.finish_reason != "tool_use":
        raise LawFailed(f"finish reason {outcome.finish_reason!r} for a tool call, not tool_use")
    done = [f"definitions: {len(offered)} tools and tool choice as the Step's, the call returned"]
    if "choice_none" in kit.adapter.tools_policies:
        outcome, mine = kit.generate(sid, "Answer in text only.", tools_policy="choice_none")
        request = _one_request(outcome, mine)
        if _tool_settings(request.view) != step_tools:
            raise LawFailed(
                f"choice_none: tool definitions differ from the Step's (Step {offered}, "
                f"generate {request.tool_names()}); C never removes them"
            )
        choice = request.view.tool_choice
        if "none" not in choice.lower() and request.entry.get("provider") != "bedrock":
            raise LawFailed(f"choice_none: tool choice {choice}, not none")
        done.append(f"choice_none: tools kept, choice {choice}")
    if "no_tools" in kit.adapter.tools_policies:
        outcome, mine = kit.generate(sid, "Answer in text only.", tools_policy="no_tools")
        request = _one_request(outcome, mine)
        if request.view.tools:
            raise LawFailed(f"no_tools: {request.view.tools} tool definitions on the wire")
        done.append("no_tools: none sent")
    return "; ".join(done)


def _endpoint(path: str) -> str:
    path = path.split("?", 1)[0]
    for streamed, plain in _UNSTREAMED:
        path = path.replace(streamed, plain)
    return path


def same_prefix(kit: Kit) -> str:
    turned = kit.session_after_turn()
    step = turned.step
    outcome, mine = kit.generate(turned.session_id, "Give this session a short title.")
    request = _one_request(outcome, mine)
    a, b = step.view, request.view
    differs: list[str] = []
    if _endpoint(step.path) != _endpoint(request.path):
        differs.append(f"endpoint {request.path} (Step: {step.path})")
    for key in dict.fromkeys([*a.settings, *b.settings]):
        if key == b.output_limit or key in ("stream", "stream_options"):
            continue  # allowed: the output limit and the streaming switch (SG-PARITY-2)
        if a.settings.get(key) != b.settings.get(key):
            differs.append(f"{b.sections.get(key) or a.sections.get(key) or key} ({key})")
    for name in sorted({*step.headers, *request.headers}):
        if name.lower().startswith(TRANSPORT_HEADERS):
            continue
        if step.headers.get(name) != request.headers.get(name):
            differs.append(
                f"header {name} ({step.headers.get(name)!r} -> {request.headers.get(name)!r})"
            )
    for i, block in enumerate(a.blocks):
        other = b.blocks[i] if i < len(b.blocks) else None
        if other is None or (other.role, other.content) != (block.role, block.content):
            differs.append(f"history at {block.path}")
            break
    cached = step.usage.cache_read_tokens + step.usage.cache_write_tokens
    read = request.usage.cache_read_tokens
    if cached and read < cached:
        differs.append(f"it read {read} of the {cached} prefix tokens the Step left cached")
    if differs:
        raise LawFailed("the generate's request differs from the Step's: " + "; ".join(differs))
    cache = (
        f"read all {cached} prefix tokens the Step cached"
        if cached
        else "the Step's prefix was too short to cache, so no cache read to compare"
    )
    return (
        f"model, system, tools, tool choice, the Step's {len(a.blocks)} history blocks and "
        f"headers byte-equal; {cache}"
    )


def empty_is_success(kit: Kit) -> str:
    turned = kit.session_after_turn()
    outcome, mine = kit.generate(turned.session_id, "Say nothing.", reply={"text": ""})
    if not mine:
        raise LawFailed("cannot observe: the generate's prompt reached the emulator in no request")
    if not outcome.ok:
        raise LawFailed(f"an empty reply was answered {outcome.describe()}, not success")
    if outcome.text not in (None, ""):
        raise LawFailed(f"the scripted empty reply came back as text {outcome.text!r}")
    return f"an empty reply answered {outcome.status} with text ''"


LAWS: tuple[Law, ...] = (
    Law(
        "no-mutation",
        ("SG-INV-1", "SG-INV-2", "SG-INV-4"),
        "messages and every other session field equal before and after a generate, "
        "successful or failed",
        no_mutation,
    ),
    Law(
        "revision-unchanged",
        ("SG-RESULT-3", "SG-INV-1"),
        "the session's revision is unchanged and the result reports the snapshot's",
        revision_unchanged,
    ),
    Law(
        "one-attempt",
        ("SG-INV-3", "SG-FAIL-6"),
        "a 500 or 529 from the provider: exactly one request, a typed error, no retry",
        one_attempt,
    ),
    Law(
        "tools-per-policy",
        ("SG-TOOLS-1", "SG-TOOLS-3"),
        "definitions kept with the Step's tool choice, a returned call never executed; "
        "choice_none keeps the definitions",
        tools_per_policy,
    ),
    Law(
        "same-prefix",
        ("SG-PARITY-1", "SG-PARITY-2", "SG-CACHE-1"),
        "model, system, tools, history and headers as the Step's, byte for byte, and the "
        "Step's cached prefix read back",
        same_prefix,
    ),
    Law(
        "empty-is-success",
        ("SG-RESULT-1",),
        "a reply with no text is a success with text ''",
        empty_is_success,
    ),
)
LAW_NAMES: tuple[str, ...] = tuple(law.name for law in LAWS)


def run_laws(
    adapter: Adapter, emulator: EmulatorAdmin, laws: Sequence[Law] = LAWS
) -> list[Verdict]:
    """Every law's verdict, in order. Raises `Unreachable` when the server or the emulator
    stops answering."""
    kit = Kit(adapter, emulator)
    return [check_law(kit, law) for law in laws]


def check_law(kit: Kit, law: Law) -> Verdict:
    """One law on a reset emulator: PASS with its reason, or FAIL with the first violation
    (or what the server answered that the adapter could not use)."""
    kit.start()
    try:
        return Verdict(law.name, "PASS", law.check(kit))
    except (LawFailed, AdapterError) as exc:
        return Verdict(law.name, "FAIL", str(exc))
