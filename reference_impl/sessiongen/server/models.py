"""The HTTP boundary's request and response bodies (pydantic v2).

Request bodies forbid unknown fields and take strict strings and booleans, so a typo or a
wrong type is a 422 before anything runs, never a silently coerced value. Prompt content
(empty, too long) is left to the engine's one prompt check, so the server answers with the
same `EmptyPrompt` / `PromptTooLarge` problems as the Python API. Responses reuse the
engine's own models (`GenerateResult`, `Usage`, messages) so the wire is the engine's result,
serialized as it is.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr

from ..llm.types import FinishReason, ToolCall, Usage
from ..model import Message, PendingInput
from ..session.generate import DEFAULT_TOOLS_POLICY, ToolsPolicy

__all__ = [
    "CreateSessionRequest",
    "CreatedSession",
    "GenerateRequest",
    "Health",
    "LedgerEntryView",
    "MessagesView",
    "Problem",
    "PromptRequest",
    "SessionView",
    "TurnResult",
    "WarmingView",
]


class _Request(BaseModel):
    """A request body: unknown fields are a 422, not ignored."""

    model_config = ConfigDict(extra="forbid")


class CreateSessionRequest(_Request):
    agent: StrictStr | None = Field(
        default=None,
        description="The agent the session runs; the server's default agent when omitted.",
    )


class PromptRequest(_Request):
    prompt: StrictStr = Field(
        description="The user's text: not empty or whitespace (422 empty-prompt), at most "
        "200,000 characters (413 prompt-too-large).",
    )


class GenerateRequest(_Request):
    prompt: StrictStr = Field(
        description="The transient prompt, appended to the session's context and never "
        "stored: not empty (422 empty-prompt), at most 200,000 characters (413).",
    )
    tools_policy: ToolsPolicy = Field(
        default=DEFAULT_TOOLS_POLICY,
        description="What the call does with the agent's tools (contract section 3): "
        "`definitions` keeps them and returns calls unexecuted.",
    )
    warming: StrictBool = Field(
        default=False,
        description="A keep-alive ping: no output requested, breakpoint on the shared prefix.",
    )
    tag: StrictStr | None = Field(
        default=None, description="The caller's label, passed to request hooks."
    )


class CreatedSession(BaseModel):
    id: str


class SessionView(BaseModel):
    """A session as stored: `revision` moves with every durable change; a generate result
    whose revision differs is stale."""

    id: str
    agent: str
    workspace: str | None
    parent_id: str | None
    root_id: str
    revision: int
    pending: list[PendingInput]
    usage: Usage = Field(description="Summed usage of the session's durable provider calls.")
    calls: int = Field(description="How many durable provider calls the usage sums.")


class MessagesView(BaseModel):
    session_id: str
    revision: int
    messages: list[Message]


class TurnResult(BaseModel):
    """A settled durable turn: the session's revision after it, and the final answer."""

    session_id: str
    revision: int
    steps: int = Field(description="Provider calls the turn made (tool rounds + 1).")
    finish_reason: FinishReason | None
    text: str = Field(description="The text of the turn's last assistant message.")
    tool_calls: list[ToolCall] = Field(
        description="Tool calls the turn's steps made (each was run and settled)."
    )
    usage: Usage = Field(description="The turn's summed usage over its steps.")
    below_cache_minimum: bool = Field(
        default=False,
        description="A step's prompt was under the model's minimum cacheable length: nothing "
        "of it was cached.",
    )


class LedgerEntryView(BaseModel):
    at: float = Field(description="When the ping went, in seconds on the keeper's clock.")
    revision: int | None
    usage: Usage
    cost_usd: float
    hit: bool
    error: str | None


class WarmingView(BaseModel):
    """A session's warming state. Times are seconds on the keeper's clock (`now`)."""

    session_id: str
    watched: bool
    now: float
    next_ping_at: float | None
    why_not_pinging: str | None = Field(
        default=None, description="Why no ping is scheduled (None when one is)."
    )
    total_cost_usd: float
    entries: list[LedgerEntryView]


class Health(BaseModel):
    status: Literal["ok"] = "ok"


class Problem(BaseModel):
    """An RFC 9457 problem: `type` is `https://sessiongen.dev/problems/<slug>` for a
    sessiongen error (docs/errors.md), `about:blank` for a plain HTTP refusal no sessiongen error names. Some types add members (provider errors: `provider_status`, `provider_request_id`,
    `provider_error_type`, `retry_after`; a session's errors: `session_id`; an unknown agent:
    `agent`; validation: `errors`)."""

    model_config = ConfigDict(extra="allow")

    type: str
    title: str
    status: int
    detail: str
    instance: str
    errors: list[dict[str, Any]] | None = None
