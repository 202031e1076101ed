"""sessiongen: a durable agent Session engine and session.generate on a shared preparation seam.

Prototypes import from here; everything else is internal and may move.
"""

from .cache_policy import CachePolicy, no_cache, opencode_default, previous_tail
from .context import SessionContext, Snapshot
from .engine import SessionEngine
from .errors import (
    AgentNotFound,
    ContextOverflow,
    EmptyPrompt,
    InstructionsInitializationBlocked,
    InvalidInput,
    InvalidToolArguments,
    MalformedRequest,
    NotFound,
    PathOutsideWorkspace,
    PromptTooLarge,
    ProviderError,
    ProviderOverloaded,
    ProviderRateLimited,
    ProviderServerError,
    ProviderStreamInterrupted,
    ProviderTimeout,
    SessiongenError,
    SessionNotFound,
    ToolError,
    ToolExecutionFailed,
    UnknownTool,
)
from .generate import GenerateResult, ToolResult, ToolsPolicy
from .llm import (
    LLMClient,
    LLMRequest,
    LLMResponse,
    RecordingLLMClient,
    ScriptedLLMClient,
    ScriptedReply,
)
from .llm.anthropic import AnthropicLLMClient
from .llm.types import Usage
from .model import Agent, ModelRef, Session
from .request import RequestHook, RequestInfo, SessionModelRequest
from .runner import DrainResult
from .store import SessionStore

__all__ = [
    "Agent",
    "AgentNotFound",
    "AnthropicLLMClient",
    "CachePolicy",
    "ContextOverflow",
    "DrainResult",
    "EmptyPrompt",
    "GenerateResult",
    "InstructionsInitializationBlocked",
    "InvalidInput",
    "InvalidToolArguments",
    "LLMClient",
    "LLMRequest",
    "LLMResponse",
    "MalformedRequest",
    "ModelRef",
    "NotFound",
    "PathOutsideWorkspace",
    "PromptTooLarge",
    "ProviderError",
    "ProviderOverloaded",
    "ProviderRateLimited",
    "ProviderServerError",
    "ProviderStreamInterrupted",
    "ProviderTimeout",
    "RecordingLLMClient",
    "RequestHook",
    "RequestInfo",
    "ScriptedLLMClient",
    "ScriptedReply",
    "Session",
    "SessionContext",
    "SessionEngine",
    "SessionModelRequest",
    "SessionNotFound",
    "SessionStore",
    "SessiongenError",
    "Snapshot",
    "ToolError",
    "ToolExecutionFailed",
    "ToolResult",
    "ToolsPolicy",
    "UnknownTool",
    "Usage",
    "no_cache",
    "opencode_default",
    "previous_tail",
]
