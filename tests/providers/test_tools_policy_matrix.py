"""SG-TOOLS-3: every tools policy on every provider, at the wire, through each official SDK.

The matrix (`sessiongen_tooling.evidence.measure_tools_policy_matrix`) runs once for the module: per
provider, a durable Step in a fresh lab and each policy's generate, keep-alive ping and next
turn in its own lab, compared by the parity diff on the bodies the emulator logged."""

from __future__ import annotations

import asyncio
import dataclasses
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from sessiongen.lab import PROVIDERS
from sessiongen_tooling.evidence import (
    ProviderPolicyRow,
    decide_tools_policy,
    measure_tools_policy_matrix,
)

TOOL_CHOICE_PATH = {
    "anthropic": "tool_choice",
    "openai": "tool_choice",
    "gemini": "toolConfig",
    "bedrock": "toolConfig.toolChoice",
}


@pytest.fixture(scope="module")
def matrix() -> Iterator[dict[tuple[str, str], ProviderPolicyRow]]:
    with tempfile.TemporaryDirectory() as scratch:
        rows = asyncio.run(measure_tools_policy_matrix(Path(scratch)))
    yield {(r.provider, r.policy): r for r in rows}


@pytest.mark.clause("SG-TOOLS-3")
@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_default_keeps_the_steps_whole_prefix(
    matrix: dict[tuple[str, str], ProviderPolicyRow], provider: str
) -> None:
    """A sends the Step's request but for the prompt: no parity violation, every prefix token
    the Step reads is read, and a call the model makes comes back unexecuted."""
    a = matrix[provider, "A"]
    assert a.accepted and a.violations == ()
    assert a.read == a.step_read > 0
    assert (a.tool_calls_returned, a.text_empty, a.tools_executed) == (1, True, 0)


@pytest.mark.clause("SG-TOOLS-3")
@pytest.mark.parametrize("provider", PROVIDERS)
def test_tool_choice_none_never_removes_tools_or_history(
    matrix: dict[tuple[str, str], ProviderPolicyRow], provider: str
) -> None:
    """C keeps every tool definition and the whole history on every provider: the only
    parity violation allowed is the tool choice itself. Where the wire has no `none`
    (Bedrock Converse), C sends A's request, so a tool call can still come back."""
    a, c = matrix[provider, "A"], matrix[provider, "C"]
    assert c.accepted and c.tools_on_wire == a.tools_on_wire == 3
    if provider == "bedrock":
        assert c.tool_choice == a.tool_choice == "auto (omitted)"
        assert c.violations == () and c.tool_calls_returned == 1
    else:
        assert c.tool_choice.lower() == "none"
        assert c.violations == (TOOL_CHOICE_PATH[provider],)
        assert c.tool_calls_returned == 0 and not c.text_empty


@pytest.mark.clause("SG-TOOLS-3")
def test_choice_none_costs_the_messages_level_on_anthropic_only(
    matrix: dict[tuple[str, str], ProviderPolicyRow],
) -> None:
    """A tool-choice change invalidates Anthropic's messages level; OpenAI's and Gemini's
    automatic caching hash no tool choice into the prefix (OpenAI: documented; Gemini:
    UNCONFIRMED, docs/emulator.md)."""
    c = {p: matrix[p, "C"] for p in PROVIDERS}
    assert 0 < c["anthropic"].read < c["anthropic"].step_read
    assert c["openai"].prefix_hit == c["gemini"].prefix_hit == 1.0


@pytest.mark.clause("SG-TOOLS-3")
@pytest.mark.parametrize("provider", PROVIDERS)
def test_removing_the_tools_loses_the_prefix_or_is_rejected(
    matrix: dict[tuple[str, str], ProviderPolicyRow], provider: str
) -> None:
    """B removes the tool definitions: tools lead every provider's prefix, so nothing is
    read; Bedrock rejects tool history without a toolConfig."""
    b = matrix[provider, "B"]
    assert b.tools_on_wire == 0 and b.read == 0
    assert any("tools" in path for path in b.violations)
    if provider == "bedrock":
        assert not b.accepted and b.rejection == "ProviderInvalidRequest"
        assert b.ping_cost_usd is None
    else:
        assert b.accepted


@pytest.mark.clause("SG-TOOLS-3")
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_keep_alive_with_the_default_keeps_the_next_turn_warm(
    matrix: dict[tuple[str, str], ProviderPolicyRow], provider: str
) -> None:
    """A ping with A at 4 minutes: the next turn at 7 minutes reads at least what it reads
    with no ping, and at least as much as after a ping with any other policy. On the
    5-minute caches (Anthropic, Bedrock, Gemini's implicit cache) the unpinged turn reads 0."""
    rows = {p: matrix[provider, p] for p in "ABCD"}
    a = rows["A"]
    assert a.next_read > 0 and a.next_read >= a.next_read_without_ping
    assert all(a.next_read >= r.next_read for r in rows.values())
    if provider != "openai":  # gpt-4.1 defaults to extended retention (~30 min): no gap to bridge
        assert a.next_read_without_ping == 0


@pytest.mark.clause("SG-TOOLS-3")
def test_the_decision_is_a_everywhere_and_the_text_only_choice_per_provider(
    matrix: dict[tuple[str, str], ProviderPolicyRow],
) -> None:
    decisions = {d.provider: d for d in decide_tools_policy(list(matrix.values()))}
    assert {p: d.default for p, d in decisions.items()} == dict.fromkeys(PROVIDERS, "A")
    assert {p: d.text_only for p, d in decisions.items()} == {
        "anthropic": "C",
        "bedrock": "none",
        "openai": "C",
        "gemini": "C",
    }


@pytest.mark.clause("SG-TOOLS-3")
def test_execute_once_sends_the_default_request_and_runs_the_call(
    matrix: dict[tuple[str, str], ProviderPolicyRow],
) -> None:
    for provider in PROVIDERS:
        a, d = matrix[provider, "A"], matrix[provider, "D"]
        assert (d.violations, d.read, d.tools_executed) == (a.violations, a.read, 1)


@pytest.mark.clause("SG-TOOLS-3")
def test_the_default_never_violates_parity_nor_executes_tools(
    matrix: dict[tuple[str, str], ProviderPolicyRow],
) -> None:
    """The rule, not the data: were A to break parity, no policy would qualify on Anthropic
    (C changes the tool choice, D executes the call although it reads the whole prefix),
    and the decision says so instead of picking one."""
    rows = [r for (p, _), r in matrix.items() if p == "anthropic"]
    broken = [dataclasses.replace(r, violations=("tools",)) if r.policy == "A" else r for r in rows]
    with pytest.raises(ValueError, match="anthropic: no accepted policy keeps parity"):
        decide_tools_policy(broken)
