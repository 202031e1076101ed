"""An Anthropic-compatible Messages API emulator with a prompt-cache model and a virtual
clock, so the official `anthropic` SDK can run cache and TTL experiments offline."""

from .app import create_app
from .client import SyncASGITransport, async_client, sync_client
from .clock import VirtualClock
from .errors import ERROR_TYPES, APIError, error_body
from .responder import Reply, build_reply, default_text
from .server import BackgroundServer, free_port, serve
from .state import EmulatorState, FaultSpec, ScriptedResponse, ScriptedToolCall
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
