"""SessionModelRequest.prepare: the one function that shapes what the provider receives.

The durable Step, session.generate and compaction all call `prepare`. It builds the request
from a snapshot (agent, model, system and instruction baseline, active history, permitted
tool definitions, headers, prompt-cache key, provider options), appends the caller's
transient messages, runs the request hooks, and finally places cache breakpoints.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from .cache_policy import CachePolicy, block_count, opencode_default
from .context import Snapshot
from .llm.types import LLMRequest, SystemPart, ToolChoice
from .model import Message
from .transcript import to_llm_messages

Operation = Literal["step", "generate", "compaction"]
CacheAnchor = Literal["tail", "shared"]


@dataclass(frozen=True)
class RequestInfo:
    """What a hook is told about the request it may transform."""

    operation: Operation
    session_id: str
    revision: int
    step: int | None = None
    tag: str | None = None


class RequestHook(Protocol):
    def __call__(self, request: LLMRequest, info: RequestInfo) -> LLMRequest: ...


def prompt_cache_key(snapshot: Snapshot) -> str:
    """Session-derived cache identity: forks share their root's key."""
    return snapshot.session.parent_id or snapshot.session.id


def session_headers(snapshot: Snapshot) -> dict[str, str]:
    headers = {"x-session-id": snapshot.session.id}
    if snapshot.session.parent_id:
        headers["x-parent-session-id"] = snapshot.session.parent_id
    return headers


@dataclass(frozen=True)
class SessionModelRequest:
    """Request preparation with its hooks and cache policy."""

    hooks: Sequence[RequestHook] = ()
    cache_policy: CachePolicy = field(default=opencode_default)

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
        return LLMRequest(
            model=agent.model.id,
            system=system,
            messages=to_llm_messages((*snapshot.history, *transient)),
            tools=tuple(tool.definition() for tool in snapshot.tools),
            tool_choice=ToolChoice(type="none") if last_step and snapshot.tools else None,
            max_output_tokens=agent.max_output_tokens,
            prompt_cache_key=prompt_cache_key(snapshot),
            headers=session_headers(snapshot),
            provider_options=dict(agent.provider_options),
        )

    def prepare(
        self,
        snapshot: Snapshot,
        *,
        operation: Operation,
        step: int | None = None,
        transient: Sequence[Message] = (),
        tag: str | None = None,
        cache_anchor: CacheAnchor = "tail",
    ) -> LLMRequest:
        """Build the request for `snapshot`, run the hooks, place cache breakpoints.

        `transient` messages are appended in memory. `cache_anchor="shared"` puts the tail
        breakpoint on the last block of the snapshot's history instead of the last block of
        the request (the warming shape).
        """
        request = self.build(snapshot, operation=operation, step=step, transient=transient)
        info = RequestInfo(
            operation=operation,
            session_id=snapshot.session.id,
            revision=snapshot.revision,
            step=step,
            tag=tag,
        )
        for hook in self.hooks:
            request = hook(request, info)
        anchor = None
        if cache_anchor == "shared":
            anchor = block_count(to_llm_messages(snapshot.history)) - 1
        return self.cache_policy(request, anchor=anchor, ttl=snapshot.agent.cache_ttl)
