"""A provider emulator (Anthropic Messages, OpenAI Chat Completions and Responses, Bedrock
Converse, Gemini) on one prompt-cache model and a virtual clock, so each provider's official
SDK can run cache and TTL experiments offline.

The cache rules live in `sessiongen.cache`; this package is HTTP, validation, replies and
state. Not modelled (by design or for lack of a source): the tool-use system-prompt overhead
and real tokenization (the shared approximate counter is used; images cost their JSON);
thinking-block stripping on older models; thinking/effort invalidating tools or system on
some models; server tools running and their automatic 5m breakpoints; mid-conversation
system messages and tool changes; cache diagnostics; workspace isolation; rate limits and
pricing modifiers (only injectable as faults / not applied; of the size limits, only the
body limit, `EmulatorState(max_body_bytes=...)`, is applied); message
rules beyond tool_use/tool_result pairing and prefill (alternation, empty content, thinking
signatures); `input + max_tokens` over the context window; generation time (the clock only
moves when told; time to first token is a setting, 0 by default).
"""

from .app import create_app
from .client import SyncASGITransport, async_client, sync_client
from .clock import VirtualClock
from .errors import ERROR_TYPES, APIError, error_body
from .responder import Reply, build_reply, default_text
from .server import BackgroundServer, free_port, serve
from .state import EmulatorState, FaultSpec, ScriptedResponse, ScriptedToolCall, ScriptMatch
from .streaming import message_events

__all__ = [
    "ERROR_TYPES",
    "APIError",
    "BackgroundServer",
    "EmulatorState",
    "FaultSpec",
    "Reply",
    "ScriptedResponse",
    "ScriptedToolCall",
    "ScriptMatch",
    "SyncASGITransport",
    "VirtualClock",
    "async_client",
    "build_reply",
    "create_app",
    "default_text",
    "error_body",
    "free_port",
    "message_events",
    "serve",
    "sync_client",
]
