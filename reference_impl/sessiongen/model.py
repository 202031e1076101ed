"""The Session domain: agents, sessions, messages with parts, usage, and the durable events."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, field_validator

from .llm.types import CacheTTL, FinishReason, FrozenModel, Usage

__all__ = [
    "Agent",
    "DomainModel",
    "AssistantMessage",
    "CompactionCompleted",
    "CompactionMessage",
    "Event",
    "InputAdmitted",
    "InputPromoted",
    "InstructionMessage",
    "InstructionsCommitted",
    "Message",
    "ModelRef",
    "PendingInput",
    "ReasoningPart",
    "Session",
    "SessionCreated",
    "StepInterrupted",
    "StepSettled",
    "StepStarted",
    "TextPart",
    "ToolCallPart",
    "ToolExecuted",
    "Usage",
    "UserMessage",
    "input_id",
    "message_id",
]


class DomainModel(FrozenModel):
    """The base of the Session domain's values: immutable (a `FrozenModel`), its validator
    built when first used, not when `sessiongen` is imported. A field's docstring is its
    description (in the API reference and the JSON schema)."""

    model_config = ConfigDict(defer_build=True, use_attribute_docstrings=True)


class ModelRef(DomainModel):
    """Which model a Session's agent talks to; its facts (context window, ...) come from the
    model catalog, `sessiongen.cache.get_model(id)`. An `Agent` also takes the model id
    alone: `Agent(name="a", model="claude-sonnet-4-6")`."""

    provider: Literal["anthropic"] = "anthropic"
    """The API family of the model id; the LLM client decides which provider is called."""
    id: str = "claude-sonnet-4-6"
    """The model id, as the model catalog (`sessiongen.cache.list_models()`) names it."""


class Agent(DomainModel):
    """What the model is told and allowed: system prompt, permitted tools, step limit."""

    name: str
    """The agent's name; a Session is created for an agent by this name."""
    model: ModelRef = ModelRef()
    """The model, as a `ModelRef` or its id alone (a string)."""
    system: str = "You are a helpful coding agent."
    """The system prompt, first in every request."""
    tools: tuple[str, ...] = ()
    """The names of the tools the model may call, each registered in the engine's
    `ToolRegistry` (the built-in workspace tools of `sessiongen.tools`, and yours); a name
    it does not have is `ToolNotRegistered` when the engine is built."""
    steps: int = Field(default=8, ge=1)
    """The most provider calls one turn makes; the last is sent with tool choice `none`."""
    max_output_tokens: int = Field(default=1024, ge=1)
    """The output limit of each call."""
    instruction_files: tuple[str, ...] = ("AGENTS.md",)
    """Workspace files whose text joins the instructions, read when a Session first runs
    and committed with it."""
    instructions: tuple[str, ...] = ()
    """Instruction texts given inline, committed like the files' texts."""
    cache_ttl: CacheTTL = "5m"
    """The lifetime asked for the prompt-cache entries its requests write: "5m" or "1h"."""
    provider_options: dict[str, Any] = Field(default_factory=dict)
    """Extra fields passed to the provider unchanged (part of the shared request prefix)."""
    compaction_threshold: float = Field(default=0.8, gt=0, le=1)
    """The share of the context window past which a turn compacts the history first."""

    @field_validator("model", mode="before")
    @classmethod
    def _model_id_alone(cls, value: object) -> object:
        return ModelRef(id=value) if isinstance(value, str) else value


class Session(DomainModel):
    """A durable Session. A fork records its parent and the root of its fork tree, so every
    Session of one tree shares one prompt-cache identity (`root_id`, itself for a root)."""

    id: str
    agent: str
    workspace: str | None = None
    parent_id: str | None = None
    root_id: str
    revision: int = 0


def message_id(revision: int) -> str:
    """The id of a message created by the event at `revision`: unique within a Session
    without a read-then-write race, since the revision is allocated in the write transaction."""
    return f"msg_{revision:06d}"


def input_id(revision: int) -> str:
    """The id of a pending input admitted by the event at `revision`."""
    return f"in_{revision:06d}"


# --- message parts -------------------------------------------------------------------------


class TextPart(DomainModel):
    """Text the model (or the user) wrote: one part of a message's `parts`."""

    type: Literal["text"] = "text"
    text: str


class ReasoningPart(DomainModel):
    type: Literal["reasoning"] = "reasoning"
    text: str
    signature: str | None = None


ToolState = Literal["pending", "completed", "error"]


class ToolCallPart(DomainModel):
    """A tool call the model made, with its state and, once run, its result."""

    type: Literal["tool_call"] = "tool_call"
    id: str
    name: str
    input: dict[str, Any]
    state: ToolState = "pending"
    result: str | None = None


Part = Annotated[TextPart | ReasoningPart | ToolCallPart, Field(discriminator="type")]


# --- messages of Session History -----------------------------------------------------------


class UserMessage(DomainModel):
    kind: Literal["user"] = "user"
    id: str
    parts: tuple[TextPart, ...]


class AssistantMessage(DomainModel):
    """One Step's output. `completed` is set by Settlement; `interrupted` when it never was."""

    kind: Literal["assistant"] = "assistant"
    id: str
    step: int
    model: str
    parts: tuple[Part, ...] = ()
    completed: bool = False
    interrupted: bool = False
    finish_reason: FinishReason | None = None
    usage: Usage = Usage()

    @property
    def settled(self) -> bool:
        """Settled: finished (or marked interrupted) with no tool call still pending."""
        done = self.completed or self.interrupted
        return done and not any(
            isinstance(p, ToolCallPart) and p.state == "pending" for p in self.parts
        )


class InstructionMessage(DomainModel):
    """An instruction update, delivered once where it was committed."""

    kind: Literal["instruction"] = "instruction"
    id: str
    text: str


class CompactionMessage(DomainModel):
    """A completed compaction's summary: active history starts here."""

    kind: Literal["compaction"] = "compaction"
    id: str
    summary: str


Message = Annotated[
    UserMessage | AssistantMessage | InstructionMessage | CompactionMessage,
    Field(discriminator="kind"),
]


class PendingInput(DomainModel):
    id: str
    text: str


# --- durable events ------------------------------------------------------------------------


class SessionCreated(DomainModel):
    type: Literal["session_created"] = "session_created"
    session_id: str
    agent: str
    workspace: str | None = None
    parent_id: str | None = None
    root_id: str | None = None  # None: the session is its own root


class InputAdmitted(DomainModel):
    type: Literal["input_admitted"] = "input_admitted"
    input_id: str
    text: str


class InputPromoted(DomainModel):
    type: Literal["input_promoted"] = "input_promoted"
    input_id: str
    message_id: str


class InstructionsCommitted(DomainModel):
    """The canonical model's instruction state; `update` is the text the model was shown."""

    type: Literal["instructions_committed"] = "instructions_committed"
    values: dict[str, str]
    update: str | None = None
    message_id: str | None = None


class StepStarted(DomainModel):
    type: Literal["step_started"] = "step_started"
    message_id: str
    step: int
    model: str


class StepSettled(DomainModel):
    type: Literal["step_settled"] = "step_settled"
    message_id: str
    parts: tuple[Part, ...]
    finish_reason: FinishReason
    usage: Usage


class ToolExecuted(DomainModel):
    type: Literal["tool_executed"] = "tool_executed"
    message_id: str
    call_id: str
    result: str
    is_error: bool = False


class StepInterrupted(DomainModel):
    type: Literal["step_interrupted"] = "step_interrupted"
    message_id: str
    reason: str
    parts: tuple[Part, ...] = ()


class CompactionCompleted(DomainModel):
    type: Literal["compaction_completed"] = "compaction_completed"
    message_id: str
    summary: str
    usage: Usage


Event = Annotated[
    SessionCreated
    | InputAdmitted
    | InputPromoted
    | InstructionsCommitted
    | StepStarted
    | StepSettled
    | ToolExecuted
    | StepInterrupted
    | CompactionCompleted,
    Field(discriminator="type"),
]
