"""SessionGenerate: one transient provider call over a live Session's model context.

snapshot -> prepare (the Step's own preparation) -> append the transient prompt (and a
pending instruction update, in memory only) -> apply the tools policy -> one
`LLMClient.generate` -> GenerateResult. No admission, events, usage, instruction commit,
compaction, settlement or tool execution in the Session.
"""

from __future__ import annotations

import shutil
import tempfile
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from .admission import validate_prompt
from .compaction import check_fits
from .context import SessionContext
from .errors import ToolError
from .llm.client import LLMClient
from .llm.types import FinishReason, LLMRequest, ToolCall, ToolChoice, Usage
from .model import InstructionMessage, Message, TextPart, UserMessage
from .request import SessionModelRequest
from .tools import ToolRegistry


class ToolsPolicy(StrEnum):
    """What a transient request does with the agent's tools."""

    DEFINITIONS = "A"
    """A: definitions kept with the normal tool choice; calls returned, never executed."""
    NO_TOOLS = "B"
    """B: no tool definitions on the wire."""
    CHOICE_NONE = "C"
    """C: definitions kept, tool choice none."""
    EXECUTE_ONCE = "D"
    """D: calls executed once in an isolated copy of the workspace; results returned."""


DEFAULT_TOOLS_POLICY = ToolsPolicy.DEFINITIONS


class ToolResult(BaseModel):
    model_config = ConfigDict(frozen=True)
    call_id: str
    text: str
    is_error: bool = False


class GenerateResult(BaseModel):
    """What one transient call returns. `revision` is the snapshot's: a caller can tell a
    stale result (the Session moved on) and a warming caller can check its cache read."""

    model_config = ConfigDict(frozen=True)

    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: FinishReason
    usage: Usage
    model: str
    revision: int
    tool_results: tuple[ToolResult, ...] = ()


def apply_tools_policy(request: LLMRequest, policy: ToolsPolicy) -> LLMRequest:
    if policy is ToolsPolicy.NO_TOOLS:
        return request.model_copy(update={"tools": (), "tool_choice": None})
    if policy is ToolsPolicy.CHOICE_NONE and request.tools:
        return request.model_copy(update={"tool_choice": ToolChoice(type="none")})
    return request


def warming_shape(request: LLMRequest) -> LLMRequest:
    """max_tokens 0 where the provider allows it (not with extended thinking)."""
    thinking = request.provider_options.get("anthropic", {}).get("thinking", {})
    allowed = thinking.get("type") != "enabled"
    return request.model_copy(update={"max_output_tokens": 0 if allowed else 1})


class SessionGenerate:
    def __init__(
        self,
        context: SessionContext,
        preparation: SessionModelRequest,
        llm: LLMClient,
        tools: ToolRegistry,
    ) -> None:
        self.context = context
        self.preparation = preparation
        self.llm = llm
        self.tools = tools

    def prepare(
        self,
        session_id: str,
        prompt: str,
        *,
        tools_policy: ToolsPolicy = DEFAULT_TOOLS_POLICY,
        warming: bool = False,
        tag: str | None = None,
    ) -> tuple[LLMRequest, int, str | None]:
        """The request generate would send, its snapshot revision and workspace."""
        validate_prompt(prompt)
        snapshot = self.context.select(session_id)
        transient: list[Message] = []
        if snapshot.instructions.update is not None:
            transient.append(
                InstructionMessage(id="transient-update", text=snapshot.instructions.update)
            )
        transient.append(UserMessage(id="transient-prompt", parts=(TextPart(text=prompt),)))
        request = self.preparation.prepare(
            snapshot,
            operation="generate",
            transient=transient,
            tag=tag,
            cache_anchor="shared" if warming else "tail",
        )
        if warming:
            request = warming_shape(request)
        request = apply_tools_policy(request, tools_policy)
        check_fits(snapshot, request)
        return request, snapshot.revision, snapshot.session.workspace

    async def generate(
        self,
        session_id: str,
        prompt: str,
        *,
        tools_policy: ToolsPolicy = DEFAULT_TOOLS_POLICY,
        warming: bool = False,
        tag: str | None = None,
    ) -> GenerateResult:
        request, revision, workspace = self.prepare(
            session_id, prompt, tools_policy=tools_policy, warming=warming, tag=tag
        )
        response = await self.llm.generate(request)
        results: tuple[ToolResult, ...] = ()
        if tools_policy is ToolsPolicy.EXECUTE_ONCE and response.tool_calls:
            results = self._execute_isolated(response.tool_calls, workspace)
        return GenerateResult(
            text=response.text,
            tool_calls=response.tool_calls,
            finish_reason=response.finish_reason,
            usage=response.usage,
            model=response.model,
            revision=revision,
            tool_results=results,
        )

    def _execute_isolated(
        self, calls: tuple[ToolCall, ...], workspace: str | None
    ) -> tuple[ToolResult, ...]:
        """Policy D: run each call once in a throwaway copy, never the session's workspace."""
        with tempfile.TemporaryDirectory(prefix="sessiongen-d-") as scratch:
            copy = Path(scratch) / "workspace"
            if workspace is not None:
                shutil.copytree(workspace, copy)
            else:
                copy.mkdir()
            results = []
            for call in calls:
                try:
                    text, is_error = self.tools.get(call.name).execute(copy, call.input), False
                except ToolError as error:
                    text, is_error = f"{type(error).__name__}: {error}", True
                results.append(ToolResult(call_id=call.id, text=text, is_error=is_error))
            return tuple(results)
