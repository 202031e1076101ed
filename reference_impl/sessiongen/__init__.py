"""sessiongen: a durable agent Session engine and session.generate on a shared preparation seam.

Prototypes import from here, and their tests take the test doubles from `sessiongen.testing`;
everything else is internal and may move.
"""

from typing import TYPE_CHECKING, Any

from ._context import SessionContext, Snapshot
from ._engine import SessionEngine
from ._generate import GenerateResult, ToolResult, ToolsPolicy
from ._request import RequestHook, RequestInfo, SessionModelRequest
from ._runner import DrainResult
from ._store import SessionRecord, SessionStore
from .cache_policy import CachePolicy, no_cache, opencode_default, previous_tail
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
    RequestTooLarge,
    SessionBusy,
    SessionExists,
    SessiongenError,
    SessionNotFound,
    ToolError,
    ToolExecutionFailed,
    Unauthorized,
    UnknownTool,
)
from .llm import LLMClient, LLMRequest, LLMResponse
from .llm.types import Usage
from .model import Agent, ModelRef, Session

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
    "RequestTooLarge",
    "Session",
    "SessionBusy",
    "SessionContext",
    "SessionEngine",
    "SessionExists",
    "SessionModelRequest",
    "SessionNotFound",
    "SessionRecord",
    "SessionStore",
    "SessiongenError",
    "Snapshot",
    "ToolError",
    "ToolExecutionFailed",
    "ToolResult",
    "ToolsPolicy",
    "Unauthorized",
    "UnknownTool",
    "Usage",
    "no_cache",
    "opencode_default",
    "previous_tail",
]


if TYPE_CHECKING:
    from .llm.anthropic import AnthropicLLMClient


def __getattr__(name: str) -> Any:
    # The provider SDK is imported when a provider client is first asked for, not with the
    # package: the engine, the store and the cache model never need it.
    if name == "AnthropicLLMClient":
        from .llm.anthropic import AnthropicLLMClient

        return AnthropicLLMClient
    raise AttributeError(f"module 'sessiongen' has no attribute {name!r}")
