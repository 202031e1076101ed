"""sessiongen: a durable agent Session engine and session.generate on a shared preparation seam.

Prototypes import from here, and their tests take the test doubles from `sessiongen.testing`;
everything else is internal and may move.
"""

from .cache_policy import CachePolicy, no_cache, opencode_default, previous_tail
from .context import SessionContext, Snapshot
from .engine import SessionEngine
from .errors import (
    AgentNotFound,
    ContextOverflow,
    EmptyPrompt,
    InstructionsInitializationBlocked,
    InvalidArgument,
    InvalidInput,
    InvalidToolArguments,
    MalformedRequest,
    NotFound,
    PathOutsideWorkspace,
    PromptTooLarge,
    ProviderAuthenticationError,
    ProviderConnectionError,
    ProviderError,
    ProviderInvalidRequest,
    ProviderNotFound,
    ProviderOverloaded,
    ProviderRateLimited,
    ProviderServerError,
    ProviderStreamInterrupted,
    ProviderTimeout,
    SessionExists,
    SessiongenError,
    SessionNotFound,
    ToolError,
    ToolExecutionFailed,
    UnknownTool,
)
from .generate import GenerateResult, ToolResult, ToolsPolicy
from .llm import LLMClient, LLMRequest, LLMResponse
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
    "InvalidArgument",
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
    "ProviderAuthenticationError",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderInvalidRequest",
    "ProviderNotFound",
    "ProviderOverloaded",
    "ProviderRateLimited",
    "ProviderServerError",
    "ProviderStreamInterrupted",
    "ProviderTimeout",
    "RequestHook",
    "RequestInfo",
    "Session",
    "SessionContext",
    "SessionEngine",
    "SessionExists",
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
