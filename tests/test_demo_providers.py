"""`sessiongen demo --provider NAME`: the same script through each provider's official SDK
against the embedded emulator, one table row per logged request, read in that provider's
usage shape."""

from __future__ import annotations

import re
from typing import Any

import pytest
from sessiongen.cli import main
from sessiongen.lab import PROVIDER_MODELS, SDKS, Provider, emulator_lab, logged_usage
from sessiongen.llm.types import Usage

OPERATIONS = ["turn 1 step 1", "turn 1 step 2", "turn 2 step 1", "turn 3 step 1", "generate"]
ROW = re.compile(r"^\s*(\d+)  (.{16})\s*(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)$")


def _rows(out: str) -> list[tuple[str, Usage]]:
    rows = []
    for line in out.splitlines():
        if match := ROW.match(line):
            numbers = [int(n) for n in match.groups()[2:]]
            uncached, write_5m, write_1h, read, output = numbers[1:]
            usage = Usage(
                input_tokens=uncached,
                cache_write_5m_tokens=write_5m,
                cache_write_1h_tokens=write_1h,
                cache_read_tokens=read,
                output_tokens=output,
            )
            rows.append((match.group(2).strip(), usage))
    return rows


@pytest.mark.parametrize("provider", ["anthropic", "bedrock", "openai", "gemini"])
def test_demo_runs_through_each_provider(
    provider: Provider, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--provider", provider]) == 0
    out = capsys.readouterr().out
    header = out.splitlines()[0]
    assert provider in header and SDKS[provider] in header and PROVIDER_MODELS[provider] in header
    rows = _rows(out)
    assert [op for op, _ in rows] == OPERATIONS  # one row per request, the tool step included
    first, generate = rows[0][1], rows[-1][1]
    assert first.cache_read_tokens == 0 and all(u.output_tokens > 0 for _, u in rows)
    # The sample prompt (~1,400-1,550 tokens) passes each chosen model's minimum (1,024), so
    # every request after the first reads the cache, the generate included.
    assert all(u.cache_read_tokens > 0 for _, u in rows[1:]) and generate.cache_read_tokens > 0
    if provider in ("anthropic", "bedrock"):  # explicit breakpoints: writes, then reads back
        assert first.cache_write_5m_tokens > 1024 and first.input_tokens == 0
        assert generate.cache_read_tokens == sum(u.cache_write_5m_tokens for _, u in rows[:-1])
    else:  # automatic / implicit caching: no cache-write counts at all
        assert all(u.cache_write_5m_tokens == u.cache_write_1h_tokens == 0 for _, u in rows)
        assert first.input_tokens > 1024
    if provider == "openai":  # the cached prefix is rounded down to a multiple of 128
        assert all(u.cache_read_tokens % 128 == 0 for _, u in rows)
    if provider == "gemini":  # implicit caching reads the whole prompt the last request sent
        assert (
            generate.cache_read_tokens == rows[-2][1].cache_read_tokens + rows[-2][1].input_tokens
        )


def test_demo_refuses_an_unknown_provider_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit:
        main(["demo", "--provider", "mistral"])
    assert exit.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "invalid choice: 'mistral'" in err and "--provider" in err


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        (
            {"usage": {"input_tokens": 3, "output_tokens": 5, "cache_read_input_tokens": 7}},
            Usage(
                input_tokens=3,
                cache_write_5m_tokens=0,
                cache_write_1h_tokens=0,
                cache_read_tokens=7,
                output_tokens=5,
            ),
        ),
        (
            {
                "provider": "bedrock",
                "usage": {
                    "inputTokens": 3,
                    "outputTokens": 5,
                    "totalTokens": 30,
                    "cacheReadInputTokens": 7,
                    "cacheWriteInputTokens": 15,
                    "cacheDetails": [
                        {"ttl": "1h", "inputTokens": 10},
                        {"ttl": "5m", "inputTokens": 5},
                    ],
                },
            },
            Usage(
                input_tokens=3,
                cache_write_5m_tokens=5,
                cache_write_1h_tokens=10,
                cache_read_tokens=7,
                output_tokens=5,
            ),
        ),
        (
            {
                "provider": "openai",
                "usage": {
                    "prompt_tokens": 1300,
                    "completion_tokens": 5,
                    "prompt_tokens_details": {"cached_tokens": 1280},
                },
            },
            Usage(
                input_tokens=20,
                cache_write_5m_tokens=0,
                cache_write_1h_tokens=0,
                cache_read_tokens=1280,
                output_tokens=5,
            ),
        ),
        (
            {
                "provider": "openai",
                "usage": {
                    "input_tokens": 1300,
                    "output_tokens": 5,
                    "input_tokens_details": {"cached_tokens": 1152},
                },
            },
            Usage(
                input_tokens=148,
                cache_write_5m_tokens=0,
                cache_write_1h_tokens=0,
                cache_read_tokens=1152,
                output_tokens=5,
            ),
        ),
        (
            {
                "provider": "gemini",
                "usage": {
                    "promptTokenCount": 1300,
                    "cachedContentTokenCount": 1100,
                    "candidatesTokenCount": 5,
                    "thoughtsTokenCount": 2,
                },
            },
            Usage(
                input_tokens=200,
                cache_write_5m_tokens=0,
                cache_write_1h_tokens=0,
                cache_read_tokens=1100,
                output_tokens=7,
            ),
        ),
        *(
            ({"provider": p, "status": 529, "usage": None}, Usage())
            for p in ("anthropic", "bedrock", "openai", "gemini")
        ),
    ],
)
def test_logged_usage_reads_each_providers_shape(entry: dict[str, Any], expected: Usage) -> None:
    assert logged_usage(entry) == expected


@pytest.mark.parametrize("provider", ["bedrock", "openai", "gemini"])
async def test_a_provider_lab_keeps_the_helpers(provider: Provider) -> None:
    async with emulator_lab(provider=provider) as lab:
        assert lab.engine.agents["forge"].model.id == PROVIDER_MODELS[provider]
        session = lab.engine.create_session("forge", workspace=lab.workspace)
        lab.script({"text": "Scripted."})
        assert (await lab.engine.generate(session.id, "Title?")).text == "Scripted."
        assert lab.advance_by(3700) == 3700.0  # past every provider's cache lifetime (1h at most)
        await lab.engine.generate(session.id, "Title?")
        assert [r["provider"] for r in lab.requests()] == [provider, provider]
        assert lab.requests()[-1]["started_at"] == 3700.0
        assert (
            lab.last_usage().cache_read_tokens == 0 and lab.last_usage().output_tokens > 0
        )  # a miss
        assert (await lab.admin.get("/_emulator/clock")).json() == {"now": 3700.0}


async def test_an_unknown_lab_provider_is_refused() -> None:
    with pytest.raises(ValueError, match="provider must be one of"):
        async with emulator_lab(provider="mistral"):
            pass
