"""SessionModelRequest.prepare: the one function that shapes what the provider receives.

The durable Step, session.generate and compaction all call `prepare`. It builds the request
from a snapshot (agent, model, system and instruction baseline, active history, permitted
tool definitions, headers, prompt-cache key, provider options), appends the caller's
transient messages, applies the operation's shape (generate's tools policy, the warming
output limit), runs the request hooks on the result, and finally places cache breakpoints.
Hooks see the request as it will be sent, except for the breakpoints.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from ..llm.types import LLMRequest, SystemPart, ToolChoice
from ..model import Message
from .breakpoints import DEFAULT_CACHE_POLICY, CachePolicy
from .context import Snapshot
from .counting import ContextBudget
from .transcript import LLMMessages, to_llm_messages

Operation = Literal["step", "generate", "compaction"]
RequestShape = Callable[[LLMRequest], LLMRequest]


TRANSIENT_LOWERINGS = 16
"""How many transient message sequences' lowerings one preparation keeps."""


class _TransientLowerings:
    """The lowerings of the transient messages a preparation was last given, by value (the
    messages are immutable and compared whole): the same prompt again, as a warming ping
    or a repeated question sends it, is the same provider messages, which keep their marked
    variants. Replaced whole, never edited, so threads share it."""

    def __init__(self) -> None:
        self._known: dict[tuple[Message, ...], LLMMessages] = {}

    def lower(self, transient: Sequence[Message]) -> LLMMessages:
        key = tuple(transient)
        try:
            found = self._known.get(key)
        except TypeError:  # an unhashable part (a tool call's input): converted each time
            return to_llm_messages(key)
        if found is None:
            found = to_llm_messages(key)
            kept = list(self._known.items())[-(TRANSIENT_LOWERINGS - 1) :]
            self._known = {**dict(kept), key: found}
        return found


@dataclass(frozen=True)
class RequestInfo:
    """What a hook is told about the request it may transform."""

    operation: Operation
    session_id: str
    revision: int
    step: int | None = None
    tag: str | None = None
    warming: bool = False
    """A keep-alive ping: recognise warming by this flag, never by the prompt text."""


class RequestHook(Protocol):
    """Transforms a prepared request just before it is sent; `info` says which one."""

    def __call__(self, request: LLMRequest, info: RequestInfo) -> LLMRequest: ...


def prompt_cache_key(snapshot: Snapshot) -> str:
    """Session-derived cache identity: every fork of a tree shares its root's key."""
    return snapshot.session.root_id


def session_headers(snapshot: Snapshot) -> dict[str, str]:
    headers = {"x-session-id": snapshot.session.id}
    if snapshot.session.parent_id:
        headers["x-parent-session-id"] = snapshot.session.parent_id
    return headers


@dataclass(frozen=True)
class SessionModelRequest:
    """Request preparation with its hooks and cache policy."""

    hooks: Sequence[RequestHook] = ()
    cache_policy: CachePolicy = field(default=DEFAULT_CACHE_POLICY)
    budget: ContextBudget = field(default_factory=ContextBudget, repr=False, compare=False)
    """Decides whether a prepared request fits (the Drain's compaction check, generate's
    overflow check), with the counts it keeps."""
    _transient: _TransientLowerings = field(
        default_factory=lambda: _TransientLowerings(), init=False, repr=False, compare=False
    )

    def build(
        self,
        snapshot: Snapshot,
        *,
        operation: Operation,
        step: int | None = None,
        transient: Sequence[Message] = (),
    ) -> LLMRequest:
        """The request before hooks and cache breakpoints (pure; used to measure size)."""
        agent = snapshot.agent
        system = tuple(
            SystemPart(text=text) for text in (agent.system, snapshot.instructions.baseline) if text
        )
        last_step = operation == "step" and step is not None and step >= agent.steps
        messages = snapshot.lowered
        if transient:
            messages = snapshot.join(self._transient.lower(transient))
        request = LLMRequest(
            model=agent.model.id,
            system=system,
            tools=tuple(tool.definition() for tool in snapshot.tools),
            tool_choice=ToolChoice(type="none") if last_step and snapshot.tools else None,
            max_output_tokens=agent.max_output_tokens,
            prompt_cache_key=prompt_cache_key(snapshot),
            headers=session_headers(snapshot),
            provider_options=dict(agent.provider_options),
        )
        # The messages are LLMMessages built here: set, not validated one by one again.
        return request.model_copy(update={"messages": messages})

    def prepare(
        self,
        snapshot: Snapshot,
        *,
        operation: Operation,
        step: int | None = None,
        transient: Sequence[Message] = (),
        tag: str | None = None,
        warming: bool = False,
        shape: RequestShape | None = None,
    ) -> LLMRequest:
        """Build the request for `snapshot`, shape it, run the hooks, place cache breakpoints.

        `transient` messages are appended in memory. `warming` asks for no output
        (`max_output_tokens` 0) and puts the tail breakpoint on the last block of the
        snapshot's history instead of the last block of the request. `shape` is the caller's
        own change (generate's tools policy); it runs before the hooks, so what a hook sees
        and edits is what reaches the wire.
        """
        request = self.build(snapshot, operation=operation, step=step, transient=transient)
        if warming:
            # No output wanted; an adapter whose provider cannot pre-warm raises it minimally.
            request = request.model_copy(update={"max_output_tokens": 0})
        if shape is not None:
            request = shape(request)
        info = RequestInfo(
            operation=operation,
            session_id=snapshot.session.id,
            revision=snapshot.revision,
            step=step,
            tag=tag,
            warming=warming,
        )
        for hook in self.hooks:
            request = hook(request, info)
        anchor = None
        if warming:
            anchor = snapshot.lowered.blocks - 1
        return self.cache_policy(request, anchor=anchor, ttl=snapshot.agent.cache_ttl)
