"""A prototype built on sessiongen the way README.md shows: the engine, the store, an agent on a
catalogued model, the test doubles from `sessiongen.testing`, `engine.generate` and its result,
and the errors a caller catches. tests/test_typing.py type-checks it with `mypy --strict`
against the installed package (its py.typed) and runs it; it silences no error."""

from __future__ import annotations

from typing import assert_type

from sessiongen import (
    Agent,
    DrainResult,
    EmptyPrompt,
    GenerateResult,
    ModelRef,
    ProviderError,
    ProviderOverloaded,
    SessionEngine,
    SessiongenError,
    SessionNotFound,
    SessionRecord,
    SessionStore,
    ToolsPolicy,
    Usage,
)
from sessiongen.testing import RecordingLLMClient, ScriptedLLMClient, ScriptedReply

TITLER = Agent(
    name="titler",
    model=ModelRef(id="claude-sonnet-4-6"),
    system="You give coding sessions short titles.",
)


def build(replies: list[ScriptedReply]) -> tuple[SessionEngine, RecordingLLMClient]:
    """An engine on an in-memory store whose provider is a script, every request recorded."""
    recorder = RecordingLLMClient(ScriptedLLMClient(script=replies))
    return SessionEngine(SessionStore(), recorder, [TITLER]), recorder


async def title(engine: SessionEngine, session_id: str) -> str | None:
    """The session's title from one transient call, None when there is no such session or
    the provider is overloaded."""
    try:
        result = await engine.generate(
            session_id, "Give this session a title.", tools_policy=ToolsPolicy.NO_TOOLS
        )
    except SessionNotFound:
        return None
    except ProviderError as error:
        status: int | None = error.provider_status
        if isinstance(error, ProviderOverloaded) or status == 529:
            return None
        raise
    return result.text


async def main() -> list[str]:
    """One durable turn, then generate over it: what a prototype's test would check."""
    overloaded = ProviderOverloaded("busy", provider_status=529, provider_request_id="req_1")
    engine, recorder = build(
        [
            ScriptedReply(text="Hello."),
            ScriptedReply(text="Greetings"),
            ScriptedReply(error=overloaded),
        ]
    )
    session = engine.create_session("titler")
    turn = await engine.run(session.id, "Say hello.")
    assert_type(turn, DrainResult)

    result = await engine.generate(session.id, "Give this session a title.")
    assert_type(result, GenerateResult)
    usage: Usage = result.usage
    lines = [
        f"{result.text} {result.finish_reason} {result.model} {len(result.tool_calls)} tools",
        f"same revision: {result.revision == turn.revision}; read {usage.cache_read_tokens}",
    ]

    record = engine.get_session(session.id)
    assert_type(record, SessionRecord)
    unchanged = record.session.revision == result.revision
    lines.append(f"{len(record.messages)} messages, the revision generate saw: {unchanged}")

    lines.append(f"overloaded: {await title(engine, session.id)}")
    lines.append(f"unknown session: {await title(engine, 'no-such-session')}")
    try:
        await engine.generate(session.id, "   ")
    except EmptyPrompt as error:
        assert_type(error, EmptyPrompt)
        lines.append(f"{type(error).__name__} {error.problem_status}")
    except SessiongenError:
        raise
    lines.append(f"{len(recorder.requests)} provider requests ({', '.join(recorder.calls)})")
    return lines
