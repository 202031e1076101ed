"""How each provider's emulator part reads a logged request (the agents' reports): the model,
the tools offered and the system prompt with the last user text, from each API's own body
shape (the bodies below are minimal requests of each API as its SDK sends them)."""

from __future__ import annotations

from typing import Any

import pytest
from sessiongen.providers import PROVIDERS

LOGGED: dict[str, tuple[str, dict[str, Any]]] = {
    "anthropic": (
        "/v1/messages",
        {
            "model": "claude-sonnet-4-6",
            "system": [{"type": "text", "text": "Be brief."}],
            "tools": [{"name": "read_file", "input_schema": {}}],
            "messages": [
                {"role": "user", "content": "first"},
                {"role": "assistant", "content": "ok"},
                {"role": "user", "content": [{"type": "text", "text": "last"}]},
            ],
        },
    ),
    "bedrock": (
        "/model/us.anthropic.claude-sonnet-4-6/converse",
        {
            "system": [{"text": "Be brief."}],
            "toolConfig": {"tools": [{"toolSpec": {"name": "read_file"}}, {"cachePoint": {}}]},
            "messages": [
                {"role": "user", "content": [{"text": "first"}]},
                {"role": "assistant", "content": [{"text": "ok"}]},
                {"role": "user", "content": [{"text": "last"}]},
            ],
        },
    ),
    "openai": (
        "/v1/responses",
        {
            "model": "gpt-4.1",
            "instructions": "Be brief.",
            "tools": [{"type": "function", "name": "read_file"}],
            "input": [
                {"role": "user", "content": "first"},
                {"type": "additional_tools", "tools": [{"type": "function", "name": "grep"}]},
                {"role": "assistant", "content": "ok"},
                {"role": "user", "content": [{"type": "input_text", "text": "last"}]},
            ],
        },
    ),
    "gemini": (
        "/v1beta/models/gemini-3-flash-preview:generateContent",
        {
            "systemInstruction": {"parts": [{"text": "Be brief."}]},
            "tools": [{"functionDeclarations": [{"name": "read_file"}]}],
            "contents": [
                {"role": "user", "parts": [{"text": "first"}]},
                {"role": "model", "parts": [{"text": "ok"}]},
                {"role": "user", "parts": [{"text": "last"}]},
            ],
        },
    ),
}
MODELS = {
    "anthropic": "claude-sonnet-4-6",
    "bedrock": "us.anthropic.claude-sonnet-4-6",
    "openai": "gpt-4.1",
    "gemini": "gemini-3-flash-preview",
}
TOOLS = {"openai": ["read_file", "grep"]}


@pytest.mark.parametrize("provider", sorted(LOGGED))
def test_a_logged_request_reads_in_its_providers_shape(provider: str) -> None:
    path, body = LOGGED[provider]
    part = PROVIDERS[provider].part("emulator")
    assert part.logged_model(path, body) == MODELS[provider]
    assert part.logged_tool_names(body) == TOOLS.get(provider, ["read_file"])
    assert part.logged_texts(body) == ("Be brief.", "last")
