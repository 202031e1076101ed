"""The public surface of `sessiongen` is exactly what prototypes may import."""

from __future__ import annotations

import sessiongen

PUBLIC = [
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


def test_all_is_pinned_and_sorted() -> None:
    assert sessiongen.__all__ == PUBLIC
    assert PUBLIC == sorted(PUBLIC, key=lambda n: (n[0].islower(), n))


def test_every_public_name_resolves() -> None:
    for name in PUBLIC:
        assert getattr(sessiongen, name) is not None
