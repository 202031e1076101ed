"""What later requests say about earlier Steps, read at the wire (the emulator's request log).

Two lies the durable transcript must never tell the model, each once a surviving mutant:
a failed tool call lowered as a success, and the tool calls of an interrupted Step (calls
that never ran) carried into the history of every later request."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sessiongen import ProviderStreamInterrupted
from sessiongen.lab import Provider, emulator_lab
from sessiongen.llm.client import LLMClient
from sessiongen.llm.types import LLMRequest, LLMResponse, StreamEvent, ToolCallEvent
from sessiongen.model import AssistantMessage, TextPart

TOOL_THEN_TEXT: tuple[dict[str, Any], ...] = (
    {
        "text": "Let me read both.",
        "tool_calls": [
            {"name": "read_file", "input": {"path": "missing.txt"}},
            {"name": "read_file", "input": {"path": "src/app.py"}},
        ],
    },
    {"text": "One of them is missing."},
)


class _Seen:
    """The lab's client, keeping every stream event it passes on."""

    def __init__(self, inner: LLMClient) -> None:
        self.inner = inner
        self.events: list[StreamEvent] = []

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        async for event in self.inner.stream(request):
            self.events.append(event)
            yield event

    async def generate(self, request: LLMRequest) -> LLMResponse:
        return await self.inner.generate(request)


def _tool_results(provider: str, body: dict[str, Any]) -> list[tuple[str, bool]]:
    """(the result's text, whether the wire marks it an error) for each tool result in a
    logged request body, in the provider's own spelling."""
    found: list[tuple[str, bool]] = []
    if provider == "anthropic":
        for message in body["messages"]:
            for block in message["content"] if isinstance(message["content"], list) else ():
                if block.get("type") == "tool_result":
                    content = block["content"]
                    text = content if isinstance(content, str) else content[0]["text"]
                    found.append((text, block.get("is_error", False)))
    elif provider == "bedrock":
        for message in body["messages"]:
            for block in message["content"]:
                if "toolResult" in block:
                    result = block["toolResult"]
                    text = result["content"][0]["text"]
                    found.append((text, result.get("status") == "error"))
    elif provider == "gemini":
        for content in body["contents"]:
            for part in content["parts"]:
                if "functionResponse" in part:
                    response = part["functionResponse"]["response"]
                    found.append(
                        (str(response.get("error", response.get("output"))), "error" in response)
                    )
    return found


@pytest.mark.parametrize("provider", ["anthropic", "bedrock", "gemini"])
async def test_a_failed_tool_call_stays_a_failure_in_every_later_request(
    tmp_path: Path, provider: Provider
) -> None:
    """After a tool call fails, the next Step and a later generate both send its result
    marked as an error, and the call that succeeded as a success (OpenAI's Chat Completions
    tool message has no error flag, so it is not in this list)."""
    async with emulator_lab(tmp_path / "ws", provider=provider) as lab:
        lab.script(*TOOL_THEN_TEXT)
        session = lab.engine.create_session("forge", workspace=lab.workspace)
        await lab.engine.run(session.id, "Read missing.txt and src/app.py.")
        lab.script({"text": "A recap."})
        await lab.engine.generate(session.id, "Recap in one sentence.")
        requests = lab.requests()
    step, generate = requests[1]["body"], requests[2]["body"]
    for body in (step, generate):
        results = _tool_results(provider, body)
        assert [error for _, error in results] == [True, False], results
        assert results[0][0].startswith("ToolExecutionFailed")
        assert "def add" in results[1][0]


async def test_an_interrupted_steps_tool_calls_never_reach_the_transcript(tmp_path: Path) -> None:
    """A stream cut after a whole tool_use block but before message_stop: the Step is
    interrupted, its text kept, and the call (which never ran) is in neither the durable
    transcript nor the next request's history."""
    async with emulator_lab(tmp_path / "ws") as lab:
        lab.script({"text": "Let me read it.", "tool_calls": [{"name": "read_file", "input": {}}]})
        # The emulator streams this reply's text in several deltas; its 11th event closes
        # the tool_use block, and the stream then ends without message_stop.
        lab.faults(cut_after_events=11)
        seen = _Seen(lab.llm)
        engine = lab.rebuild(llm=seen)
        session = engine.create_session("forge", workspace=lab.workspace)
        with pytest.raises(ProviderStreamInterrupted):
            await engine.run(session.id, "What is in app.py?")
        assert any(isinstance(e, ToolCallEvent) for e in seen.events), "the call must arrive"
        last = engine.store.read(session.id).messages[-1]
        assert isinstance(last, AssistantMessage) and last.interrupted
        assert last.parts == (TextPart(text="Let me read it."),)
        lab.script({"text": "It defines add()."})
        await engine.run(session.id, "Try again.")
        history = lab.requests()[-1]["body"]["messages"]
    kinds = [
        block["type"]
        for message in history
        for block in (message["content"] if isinstance(message["content"], list) else [])
    ]
    assert "tool_use" not in kinds and "tool_result" not in kinds, kinds
    assert any(
        block.get("text") == "Let me read it."
        for message in history
        if message["role"] == "assistant"
        for block in message["content"]
    )
