"""sessiongen: a durable agent Session engine and session.generate on a shared preparation seam.

Prototypes import from here, and their tests take the test doubles from `sessiongen.testing`;
everything else is internal and may move.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = [
    "Agent",
    "AgentNotFound",
    "AnthropicLLMClient",
    "AssistantMessage",
    "CachePolicy",
    "ContextOverflow",
    "DrainResult",
    "EmptyPrompt",
    "GenerateOptions",
    "GenerateResult",
    "InstructionsInitializationBlocked",
    "InsufficientStorage",
    "InvalidArgument",
    "InvalidInput",
    "InvalidToolArguments",
    "LLMClient",
    "LLMRequest",
    "LLMResponse",
    "MalformedRequest",
    "MethodNotAllowed",
    "MissingExtra",
    "ModelRef",
    "NotARegularFile",
    "NotFound",
    "PathOutsideWorkspace",
    "PreparedGenerate",
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
    "TextPart",
    "Tool",
    "ToolArgs",
    "ToolCall",
    "ToolCallPart",
    "ToolCallScope",
    "ToolError",
    "ToolExecutionFailed",
    "ToolLimits",
    "ToolNotRegistered",
    "ToolRegistry",
    "ToolResult",
    "ToolTimedOut",
    "ToolsPolicy",
    "Unauthorized",
    "UnknownTool",
    "Usage",
    "no_cache",
    "opencode_default",
    "previous_tail",
]

# Where each public name is defined. `import sessiongen` loads none of them: a name's module is
# imported when the name is first used, so the command line (`sessiongen --version`) and a
# prototype that needs only the errors do not pay for pydantic, SQLite and the provider SDKs.
_DEFINED_IN: dict[str, str] = {
    "Agent": ".model",
    "AgentNotFound": ".errors",
    "AnthropicLLMClient": ".providers.anthropic.adapter",
    "CachePolicy": ".cache_policy",
    "ContextOverflow": ".errors",
    "DrainResult": ".session.runner",
    "EmptyPrompt": ".errors",
    "GenerateOptions": ".session.generate",
    "GenerateResult": ".session.generate",
    "PreparedGenerate": ".session.generate",
    "InstructionsInitializationBlocked": ".errors",
    "InsufficientStorage": ".errors",
    "InvalidArgument": ".errors",
    "InvalidInput": ".errors",
    "InvalidToolArguments": ".errors",
    "MissingExtra": ".errors",
    "LLMClient": ".llm",
    "LLMRequest": ".llm",
    "LLMResponse": ".llm",
    "MalformedRequest": ".errors",
    "MethodNotAllowed": ".errors",
    "ModelRef": ".model",
    "NotARegularFile": ".errors",
    "NotFound": ".errors",
    "PathOutsideWorkspace": ".errors",
    "PromptTooLarge": ".errors",
    "ProviderAuthenticationError": ".errors",
    "ProviderConnectionError": ".errors",
    "ProviderError": ".errors",
    "ProviderInvalidRequest": ".errors",
    "ProviderNotFound": ".errors",
    "ProviderOverloaded": ".errors",
    "ProviderRateLimited": ".errors",
    "ProviderServerError": ".errors",
    "ProviderStreamInterrupted": ".errors",
    "ProviderTimeout": ".errors",
    "RequestHook": ".session.request",
    "RequestInfo": ".session.request",
    "RequestTooLarge": ".errors",
    "Session": ".model",
    "SessionBusy": ".errors",
    "SessionContext": ".session.context",
    "SessionEngine": ".session.engine",
    "SessionExists": ".errors",
    "SessionModelRequest": ".session.request",
    "SessionNotFound": ".errors",
    "SessionRecord": ".session.store",
    "SessionStore": ".session.store",
    "SessiongenError": ".errors",
    "Snapshot": ".session.context",
    "ToolError": ".errors",
    "ToolExecutionFailed": ".errors",
    "ToolResult": ".session.generate",
    "ToolTimedOut": ".errors",
    "ToolsPolicy": ".session.generate",
    "Unauthorized": ".errors",
    "UnknownTool": ".errors",
    "Usage": ".llm.types",
    "no_cache": ".cache_policy",
    "opencode_default": ".cache_policy",
    "previous_tail": ".cache_policy",
    "AssistantMessage": ".model",
    "TextPart": ".model",
    "Tool": ".tools",
    "ToolArgs": ".tools",
    "ToolCall": ".llm.types",
    "ToolCallPart": ".model",
    "ToolCallScope": ".tools",
    "ToolLimits": ".tools",
    "ToolNotRegistered": ".errors",
    "ToolRegistry": ".tools",
}

if TYPE_CHECKING:
    from .cache_policy import (
        CachePolicy,
        no_cache,
        opencode_default,
        previous_tail,
    )
    from .errors import (
        AgentNotFound,
        ContextOverflow,
        EmptyPrompt,
        InstructionsInitializationBlocked,
        InsufficientStorage,
        InvalidArgument,
        InvalidInput,
        InvalidToolArguments,
        MalformedRequest,
        MethodNotAllowed,
        MissingExtra,
        NotARegularFile,
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
        ToolNotRegistered,
        ToolTimedOut,
        Unauthorized,
        UnknownTool,
    )
    from .llm import (
        LLMClient,
        LLMRequest,
        LLMResponse,
    )
    from .llm.types import (
        ToolCall,
        Usage,
    )
    from .model import (
        Agent,
        AssistantMessage,
        ModelRef,
        Session,
        TextPart,
        ToolCallPart,
    )
    from .providers.anthropic.adapter import (
        AnthropicLLMClient,
    )
    from .session.context import (
        SessionContext,
        Snapshot,
    )
    from .session.engine import (
        SessionEngine,
    )
    from .session.generate import (
        GenerateOptions,
        GenerateResult,
        PreparedGenerate,
        ToolResult,
        ToolsPolicy,
    )
    from .session.request import (
        RequestHook,
        RequestInfo,
        SessionModelRequest,
    )
    from .session.runner import (
        DrainResult,
    )
    from .session.store import (
        SessionRecord,
        SessionStore,
    )
    from .tools import (
        Tool,
        ToolArgs,
        ToolCallScope,
        ToolLimits,
        ToolRegistry,
    )

    __version__: str
    """The installed distribution's version (its package metadata), as `sessiongen --version`
    prints it."""


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from importlib.metadata import version  # startup: only when asked for

        globals()[name] = version(__name__)
        return globals()[name]
    module = _DEFINED_IN.get(name)
    if module is None:
        raise AttributeError(f"module 'sessiongen' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    if getattr(value, "__pydantic_complete__", True) is False:
        # A model whose validator is deferred (built at first use) has no signature for
        # help() until built; build it now, while its annotations still resolve in the
        # module that defines it.
        value.model_rebuild()
    if module.startswith(("._", ".session.")) and isinstance(value, type):
        # Defined in an internal module or one of the engine's parts: reported (in reprs,
        # docs and pickles) as the public name it is imported by.
        value.__module__ = __name__
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__) | {"__version__"})
