"""A client's model id the catalog does not know: a 404 in the provider's own words that also
names the nearest known ids, and an alias that serves it as a known model (issue 29)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import httpx
import pytest
from sessiongen.cache import alias_model, get_model
from sessiongen.catalog import nearest_models
from sessiongen.emulator import EmulatorState, create_app

BODY: dict[str, Any] = {
    "max_tokens": 16,
    "messages": [{"role": "user", "content": "Hello."}],
}


async def _post(model: str) -> httpx.Response:
    transport = httpx.ASGITransport(app=create_app(EmulatorState()))
    async with httpx.AsyncClient(transport=transport, base_url="http://emulator") as client:
        return await client.post(
            "/v1/messages",
            json={**BODY, "model": model},
            headers={"x-api-key": "k", "anthropic-version": "2023-06-01"},
        )


async def test_an_unknown_model_is_a_404_naming_the_nearest_known_ids() -> None:
    answer = await _post("claude-opus-5-9")
    assert answer.status_code == 404
    message = answer.json()["error"]["message"]
    assert message.startswith("model: claude-opus-5-9 [emulator: nearest known: claude-opus-5")
    assert "sessiongen emulator --alias claude-opus-5-9=<id>" in message
    assert answer.json()["error"]["type"] == "not_found_error"


async def test_an_alias_serves_the_model_with_the_known_models_facts() -> None:
    with alias_model("claude-opus-5-9", "claude-opus-5") as info:
        assert info is get_model("claude-opus-5")
        answer = await _post("claude-opus-5-9")
        assert answer.status_code == 200, answer.text
        assert answer.json()["model"] == "claude-opus-5-9"  # echoed as asked
    assert (await _post("claude-opus-5-9")).status_code == 404  # gone with the block
    with pytest.raises(ValueError, match="catalogued model"):
        with alias_model("claude-opus-5", "claude-sonnet-4-6"):
            pass


def test_nearest_models_keep_to_the_provider_and_skip_retired_ones() -> None:
    assert all(get_model(m).provider == "openai" for m in nearest_models("gpt-9", "openai"))
    assert "claude-opus-4-0" not in nearest_models("claude-opus-4-0x", "anthropic")


@pytest.mark.parametrize(
    ("alias", "says"),
    [
        ("nothing", "must be NAME=ID"),
        ("claude-opus-5=claude-sonnet-4-6", "is a catalogued model already"),
        ("new-model=no-such-model", "is not a catalogued model"),
    ],
)
def test_a_bad_alias_is_a_one_line_usage_error(alias: str, says: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "sessiongen.cli", "emulator", "--alias", alias],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "argument --alias" in result.stderr and says in result.stderr
