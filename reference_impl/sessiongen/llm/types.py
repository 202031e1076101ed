"""Provider-neutral request, stream events and response of the LLM layer.

An `LLMRequest` is what request preparation produces and what a provider adapter lowers to
the wire. It carries no Session knowledge: the Session engine fills it, the adapter reads it.
Cache breakpoints are marks on the blocks that carry them (`cache` fields), in prefix order
tools -> system -> messages, so a policy can place them and an adapter can lower them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

CacheTTL = Literal["5m", "1h"]
FinishReason = Literal[
    "end_turn", "tool_use", "max_tokens", "stop_sequence", "refusal", "context_window", "other"
]


def total_input_tokens(uncached: int, cache_read: int, cache_write: int) -> int:
    """Total input, as Anthropic defines it: `cache_read_input_tokens +
    cache_creation_input_tokens + input_tokens`. The one definition: `Usage` and the cache
    model call it."""
    return uncached + cache_read + cache_write


class FrozenModel(BaseModel):
    """The base of every immutable value the package passes around: frozen, no extra fields."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class CacheMark(FrozenModel):
    """A cache breakpoint: the prefix up to and including the marked block is cached."""

    ttl: CacheTTL = "5m"


class SystemPart(FrozenModel):
    text: str
    cache: CacheMark | None = None


class ToolDefinition(FrozenModel):
    name: str
    description: str
    input_schema: dict[str, Any]
    cache: CacheMark | None = None

    def content_key(self) -> tuple[str, str, str]:
        """What the definition costs tokens for (name, description, schema; not its mark),
        as a hashable value."""
        return (self.name, self.description, repr(self.input_schema))

    def with_cache(self, mark: CacheMark | None) -> ToolDefinition:
        """A copy with its cache mark set."""
        return self.model_copy(update={"cache": mark})


class TextContent(FrozenModel):
    type: Literal["text"] = "text"
    text: str
    cache: CacheMark | None = None


class ReasoningContent(FrozenModel):
    type: Literal["reasoning"] = "reasoning"
    text: str
    signature: str | None = None
    cache: CacheMark | None = None


class ToolCallContent(FrozenModel):
    type: Literal["tool_call"] = "tool_call"
    id: str
    name: str
    input: dict[str, Any]
    cache: CacheMark | None = None


class ToolResultContent(FrozenModel):
    type: Literal["tool_result"] = "tool_result"
    tool_call_id: str
    text: str
    is_error: bool = False
    cache: CacheMark | None = None


Content = Annotated[
    TextContent | ReasoningContent | ToolCallContent | ToolResultContent,
    Field(discriminator="type"),
]


class LLMMessage(FrozenModel):
    """One provider message. Tool results travel in user messages, as on Anthropic."""

    role: Literal["user", "assistant"]
    content: tuple[Content, ...]


class ToolChoice(FrozenModel):
    type: Literal["auto", "any", "tool", "none"] = "auto"
    name: str | None = None
    disable_parallel_tool_use: bool = False


class LLMRequest(FrozenModel):
    """Everything one provider call needs, in prefix order."""

    model: str
    system: tuple[SystemPart, ...] = ()
    messages: tuple[LLMMessage, ...] = ()
    tools: tuple[ToolDefinition, ...] = ()
    tool_choice: ToolChoice | None = None
    max_output_tokens: int = 4096
    prompt_cache_key: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    provider_options: dict[str, Any] = Field(default_factory=dict)


class Usage(FrozenModel):
    """Token usage of one provider call, with cache writes split by TTL.

    Total input = input_tokens + cache_read_tokens + cache_write_5m_tokens + cache_write_1h_tokens.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_5m_tokens: int = 0
    cache_write_1h_tokens: int = 0

    @property
    def cache_write_tokens(self) -> int:
        return self.cache_write_5m_tokens + self.cache_write_1h_tokens

    @property
    def total_input_tokens(self) -> int:
        return total_input_tokens(
            self.input_tokens, self.cache_read_tokens, self.cache_write_tokens
        )

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_5m_tokens=self.cache_write_5m_tokens + other.cache_write_5m_tokens,
            cache_write_1h_tokens=self.cache_write_1h_tokens + other.cache_write_1h_tokens,
        )


class ToolCall(FrozenModel):
    """A tool call the model made: its call id, the tool's name and its input (the JSON
    object the model wrote, validated against the tool's `args` only when it is run)."""

    id: str
    name: str
    input: dict[str, Any]


# --- stream events -------------------------------------------------------------------------


class TextDelta(FrozenModel):
    type: Literal["text_delta"] = "text_delta"
    text: str


class ReasoningDelta(FrozenModel):
    type: Literal["reasoning_delta"] = "reasoning_delta"
    text: str
    signature: str | None = None


class ToolCallEvent(FrozenModel):
    type: Literal["tool_call"] = "tool_call"
    call: ToolCall


class UsageEvent(FrozenModel):
    """Cumulative usage so far; the last one wins."""

    type: Literal["usage"] = "usage"
    usage: Usage


class FinishEvent(FrozenModel):
    type: Literal["finish"] = "finish"
    reason: FinishReason
    model: str
    response_id: str | None = None


StreamEvent = TextDelta | ReasoningDelta | ToolCallEvent | UsageEvent | FinishEvent


class LLMResponse(FrozenModel):
    """One collected provider stream."""

    text: str
    reasoning: str = ""
    reasoning_signature: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = Usage()
    finish_reason: FinishReason
    model: str
    response_id: str | None = None
