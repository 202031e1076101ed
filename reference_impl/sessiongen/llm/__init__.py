"""The provider-neutral LLM layer: request types and the client protocol.

The test doubles (scripted and recording clients) are public in `sessiongen.testing`.
"""

from .client import LLMClient, collect
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
