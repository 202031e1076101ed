"""The names the command line offers, each defined once here and imported by the module that
owns it, so `sessiongen --help` can list them without importing those modules (the server,
the lab and the trace loaders pull in pydantic, SQLite and the provider SDKs)."""

from __future__ import annotations

from typing import Literal, get_args

Provider = Literal["anthropic", "bedrock", "openai", "gemini"]
PROVIDERS: tuple[Provider, ...] = get_args(Provider)
"""The four provider APIs, each driven through its official SDK (the lab, the probe)."""

ServeProvider = Literal["emulator", "anthropic"]
SERVE_PROVIDERS: tuple[ServeProvider, ...] = get_args(ServeProvider)
"""What `sessiongen serve` can run its sessions on."""

TraceFormat = Literal["mooncake", "events", "claude-code", "opencode"]
TRACE_FORMATS: tuple[TraceFormat, ...] = get_args(TraceFormat)
"""The trace formats `load_trace` reads."""

AgentClientName = Literal["opencode", "claude-code", "codex", "gemini-cli"]
AGENT_CLIENTS: tuple[AgentClientName, ...] = get_args(AgentClientName)
"""The real agent clients `sessiongen agents` runs."""
