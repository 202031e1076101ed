"""The provider-neutral LLM layer: request types, the client protocol, test doubles."""

from .client import LLMClient, collect
from .recording import RecordingLLMClient
from .scripted import ScriptedLLMClient, ScriptedReply
from .types import (
    CacheMark,
    CacheTTL,
    FinishReason,
    LLMMessage,
    LLMRequest,
    LLMResponse,
    ReasoningContent,
    StreamEvent,
    SystemPart,
    TextContent,
    ToolCall,
    ToolCallContent,
    ToolChoice,
    ToolDefinition,
    ToolResultContent,
    Usage,
)

__all__ = [
    "CacheMark",
    "CacheTTL",
    "FinishReason",
    "LLMClient",
    "LLMMessage",
    "LLMRequest",
    "LLMResponse",
    "ReasoningContent",
    "RecordingLLMClient",
    "ScriptedLLMClient",
    "ScriptedReply",
    "StreamEvent",
    "SystemPart",
    "TextContent",
    "ToolCall",
    "ToolCallContent",
    "ToolChoice",
    "ToolDefinition",
    "ToolResultContent",
    "Usage",
    "collect",
]
