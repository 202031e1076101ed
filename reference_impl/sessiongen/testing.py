"""Test doubles for code built on sessiongen: run an engine without a provider.

`ScriptedLLMClient` answers from a script of `ScriptedReply`s and records every request;
`RecordingLLMClient` wraps any LLMClient (a scripted one, or a real one in production) and
records what it forwards. They are kept out of the top-level `sessiongen` namespace, which
holds what production code needs.
"""

from __future__ import annotations

from .llm.recording import RecordingLLMClient
from .llm.scripted import ScriptedLLMClient, ScriptedReply

__all__ = ["RecordingLLMClient", "ScriptedLLMClient", "ScriptedReply"]
