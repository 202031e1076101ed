"""Failure behaviour of session.generate: typed, before the call where possible, and never
a change to the store."""

from __future__ import annotations

import pytest
from sessiongen import (
    ContextOverflow,
    EmptyPrompt,
    InstructionsInitializationBlocked,
    PromptTooLarge,
    ProviderStreamInterrupted,
    SessionNotFound,
)
from sessiongen.cache import override_model
from sessiongen.lab import EmulatorLab


@pytest.mark.clause("SG-FAIL-1")
async def test_unknown_session(emulated: EmulatorLab) -> None:
    """SG-FAIL-1: session not found, no provider call."""
    with pytest.raises(SessionNotFound):
        await emulated.engine.generate("ses_nope", "hi")
    assert emulated.requests() == []


@pytest.mark.parametrize(
    ("prompt", "error"),
    [("", EmptyPrompt), (" \n\t", EmptyPrompt), ("x" * 200_001, PromptTooLarge)],
)
@pytest.mark.clause("SG-FAIL-2")
async def test_bad_prompt(emulated: EmulatorLab, prompt: str, error: type[Exception]) -> None:
    """SG-FAIL-2: empty or oversized prompts are rejected before any read or call."""
    session = emulated.engine.create_session("forge", workspace=emulated.workspace)
    before = emulated.engine.store.dump()
    with pytest.raises(error):
        await emulated.engine.generate(session.id, prompt)
    assert emulated.requests() == [] and emulated.engine.store.dump() == before


@pytest.mark.clause("SG-FAIL-3")
async def test_context_overflow_detected_before_the_call(emulated: EmulatorLab) -> None:
    """SG-FAIL-3: a snapshot that cannot fit the window fails before the call; no compaction."""
    engine = emulated.engine
    session = engine.create_session("forge", workspace=emulated.workspace)
    before = engine.store.dump()
    # The window comes from the model catalog, which the engine and the emulator share.
    with (
        override_model("claude-sonnet-4-6", context_window=1000),
        pytest.raises(ContextOverflow) as raised,
    ):
        await engine.generate(session.id, "hi")
    assert (
        raised.value.limit == 1000
        and raised.value.tokens is not None
        and raised.value.tokens > 1000
    )
    assert emulated.requests() == [] and engine.store.dump() == before


@pytest.mark.clause("SG-FAIL-4")
async def test_context_overflow_mapped_from_the_provider(emulated: EmulatorLab) -> None:
    """SG-FAIL-4: the provider's "prompt is too long" is a ContextOverflow carrying the
    status and request id; no compaction, store unchanged."""
    engine = emulated.engine
    session = engine.create_session("forge", workspace=emulated.workspace)
    # The emulator counts and sizes the window exactly as the engine does, so it only
    # disagrees when told to, as a provider with a real tokenizer can: its own 400 answer.
    emulated.faults(status=400, message="prompt is too long: 200001 tokens > 200000 maximum")
    before = engine.store.dump()
    with pytest.raises(ContextOverflow) as raised:
        await engine.generate(session.id, "hi")
    logged = emulated.requests()
    assert len(logged) == 1 and logged[0]["status"] == 400
    assert (
        raised.value.provider_status == 400 and raised.value.provider_request_id == logged[0]["id"]
    )
    assert "prompt is too long" in str(raised.value)
    assert engine.store.dump() == before


@pytest.mark.clause("SG-FAIL-5")
async def test_instructions_blocked_before_any_call(emulated: EmulatorLab) -> None:
    """SG-FAIL-5: no committed baseline and an unreadable source: raised before the call."""
    (emulated.workspace / "AGENTS.md").write_bytes(b"\xff\xfe")
    session = emulated.engine.create_session("forge", workspace=emulated.workspace)
    before = emulated.engine.store.dump()
    with pytest.raises(InstructionsInitializationBlocked):
        await emulated.engine.generate(session.id, "hi")
    assert emulated.requests() == [] and emulated.engine.store.dump() == before


@pytest.mark.clause("SG-FAIL-6")
async def test_cut_stream_is_typed_and_changes_nothing(emulated: EmulatorLab) -> None:
    """SG-FAIL-6: a stream cut mid-way is ProviderStreamInterrupted; one request logged."""
    session = emulated.engine.create_session("forge", workspace=emulated.workspace)
    emulated.faults(status=200, count=1, cut_after_events=3)
    before = emulated.engine.store.dump()
    with pytest.raises(ProviderStreamInterrupted):
        await emulated.engine.generate(session.id, "hi")
    assert len(emulated.requests()) == 1
    assert emulated.engine.store.dump() == before
