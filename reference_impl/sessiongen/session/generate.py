"""SessionGenerate: one transient provider call over a live Session's model context.

snapshot -> prepare (the Step's own preparation) -> append the transient prompt (and a
pending instruction update, in memory only) -> apply the tools policy -> one
`LLMClient.generate` -> GenerateResult. No admission, events, usage, instruction commit,
compaction, settlement or tool execution in the Session.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from functools import partial

from pydantic import ConfigDict

from ..errors import InvalidArgument, SessionNotFound
from ..llm.client import LLMClient
from ..llm.types import FinishReason, FrozenModel, LLMRequest, ToolCall, ToolChoice, Usage
from ..model import InstructionMessage, Message, TextPart, UserMessage
from ..tools import ToolRegistry, Workspace, run_tool_call
from .admission import validate_prompt
from .context import SessionContext
from .counting import below_cache_minimum
from .request import SessionModelRequest


class ToolsPolicy(StrEnum):
    """What a transient request does with the agent's tools (policies A-D of the contract)."""

    DEFINITIONS = "definitions"
    """A: definitions kept with the normal tool choice; calls returned, never executed."""
    NO_TOOLS = "no_tools"
    """B: no tool definitions on the wire."""
    CHOICE_NONE = "choice_none"
    """C: definitions kept, tool choice none."""
    EXECUTE_ONCE = "execute_once"
    """D: calls executed once on an isolated view of the workspace; results returned."""

    @property
    def letter(self) -> str:
        """The contract's name for the policy: A, B, C or D."""
        return "ABCD"[list(ToolsPolicy).index(self)]

    @classmethod
    def parse(cls, value: object) -> ToolsPolicy:
        """The policy named by `value` (a ToolsPolicy or its word); anything else is an
        `InvalidArgument` (a ValueError) naming the choices."""
        if isinstance(value, str):
            try:
                return cls(value)
            except ValueError:
                pass
        choices = ", ".join(p.value for p in cls)
        raise InvalidArgument(f"tools_policy must be one of {choices}; got {value!r}")


DEFAULT_TOOLS_POLICY = ToolsPolicy.DEFINITIONS
APPENDED_KEPT = 16
"""How many (instruction update, prompt) pairs' appended messages a generator keeps."""


class ToolResult(FrozenModel):
    """The result of one tool call that a transient call ran (see `GenerateResult`)."""

    model_config = ConfigDict(defer_build=True)  # built at first use, not at import

    call_id: str
    text: str
    is_error: bool = False


class GenerateResult(FrozenModel):
    """What one transient call returns. `revision` is the snapshot's: a caller can tell a
    stale result (the Session moved on) and a warming caller can check its cache read."""

    model_config = ConfigDict(defer_build=True)

    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: FinishReason
    usage: Usage
    model: str
    revision: int
    tool_results: tuple[ToolResult, ...] = ()
    below_cache_minimum: bool = False
    """The prompt was under the model's minimum cacheable length (the model catalog's
    `min_cacheable_tokens`): nothing of it was cached, so its cache reads are 0 and stay 0
    (also logged as a warning on the `sessiongen.engine` logger)."""


@dataclass(frozen=True)
class GenerateOptions:
    """What one session.generate asks for, checked once where it comes in (the engine's and
    the plugin context's keywords, the HTTP body) and passed down whole: the prompt
    (`EmptyPrompt`, `PromptTooLarge`, `InvalidArgument`), the tools policy (its word or
    the enum; `InvalidArgument` otherwise), whether it is a warming ping, and the caller's
    tag for request hooks."""

    prompt: str
    tools_policy: ToolsPolicy = DEFAULT_TOOLS_POLICY
    warming: bool = False
    tag: str | None = None

    def __post_init__(self) -> None:
        # The enum itself, from its word too (checked before the prompt, as the HTTP API did).
        object.__setattr__(self, "tools_policy", ToolsPolicy.parse(self.tools_policy))
        validate_prompt(self.prompt)
        if not isinstance(self.warming, bool):
            raise InvalidArgument(f"warming must be a bool, not {type(self.warming).__name__}")
        if self.tag is not None and not isinstance(self.tag, str):
            raise InvalidArgument(f"tag must be a string or None, not {type(self.tag).__name__}")


def apply_tools_policy(policy: ToolsPolicy, request: LLMRequest) -> LLMRequest:
    if policy is ToolsPolicy.NO_TOOLS:
        return request.model_copy(update={"tools": (), "tool_choice": None})
    if policy is ToolsPolicy.CHOICE_NONE and request.tools:
        return request.model_copy(update={"tool_choice": ToolChoice(type="none")})
    return request


_SHAPES = {policy: partial(apply_tools_policy, policy) for policy in ToolsPolicy}


@dataclass(frozen=True)
class PreparedGenerate:
    """The request generate would send, with the snapshot it was prepared from."""

    request: LLMRequest
    tools_policy: ToolsPolicy
    revision: int
    workspace: str | None
    permitted: tuple[str, ...]


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
        self._appended: dict[tuple[str | None, str], tuple[Message, ...]] = {}

    def prepare(self, session_id: str, options: GenerateOptions) -> PreparedGenerate:
        """The request generate would send, without sending it."""
        snapshot = self.context.select(session_id)
        transient = self._transient(snapshot.instructions.update, options.prompt)
        request = self.preparation.prepare(
            snapshot,
            operation="generate",
            transient=transient,
            tag=options.tag,
            warming=options.warming,
            shape=_SHAPES[options.tools_policy],
        )
        self.preparation.budget.check_fits(snapshot, request)
        return PreparedGenerate(
            request,
            options.tools_policy,
            snapshot.revision,
            snapshot.session.workspace,
            snapshot.agent.tools,
        )

    def _transient(self, update: str | None, prompt: str) -> tuple[Message, ...]:
        """The messages generate appends (a pending instruction update, then the prompt).
        The last few are kept by their texts, so a prompt sent again is the same messages
        (whose provider messages keep their marked variants)."""
        key = (update, prompt)
        found = self._appended.get(key)
        if found is None:
            made: list[Message] = []
            if update is not None:
                made.append(InstructionMessage(id="transient-update", text=update))
            made.append(UserMessage(id="transient-prompt", parts=(TextPart(text=prompt),)))
            found = tuple(made)
            kept = list(self._appended.items())[-(APPENDED_KEPT - 1) :]
            self._appended = {**dict(kept), key: found}  # replaced whole: threads share it
        return found

    async def generate(self, session_id: str, options: GenerateOptions) -> GenerateResult:
        prepared = self.prepare(session_id, options)
        response = await self.llm.generate(prepared.request)
        if not self.context.store.exists(session_id):
            # Deleted while the call ran: the answer would speak for a session that is gone.
            raise SessionNotFound(session_id)
        results: tuple[ToolResult, ...] = ()
        if prepared.tools_policy is ToolsPolicy.EXECUTE_ONCE and response.tool_calls:
            results = await self._execute_isolated(response.tool_calls, prepared)
        return GenerateResult(
            text=response.text,
            tool_calls=response.tool_calls,
            finish_reason=response.finish_reason,
            usage=response.usage,
            model=response.model,
            revision=prepared.revision,
            tool_results=results,
            below_cache_minimum=below_cache_minimum(prepared.request, response.usage),
        )

    async def _execute_isolated(
        self, calls: tuple[ToolCall, ...], prepared: PreparedGenerate
    ) -> tuple[ToolResult, ...]:
        """Policy D: run each call once, in order, on an isolated view of the workspace:
        the durable tools' confinement and limits, writes kept in memory (later calls of
        this generate see them), the Session's workspace never written and nothing
        copied."""
        view = None if prepared.workspace is None else Workspace.isolated(prepared.workspace)
        results: list[ToolResult] = []
        for call in calls:
            outcome = await run_tool_call(self.tools, call, prepared.permitted, view)
            results.append(
                ToolResult(call_id=call.id, text=outcome.text, is_error=outcome.is_error)
            )
        return tuple(results)
