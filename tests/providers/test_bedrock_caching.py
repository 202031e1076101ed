"""Bedrock Converse prompt caching on the emulator, rule by rule through boto3.

Each test quotes the documentation it checks. Source: AWS's Bedrock user guide, "Prompt
caching for faster model inference",
https://docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html, section "Supported
models, Regions, and limits" (the table "Minimum number of tokens per cache checkpoint" /
"Supported TTL" and the paragraph after it).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError  # type: ignore[import-untyped]
from sessiongen.cache import get_model
from sessiongen.emulator import BackgroundServer, EmulatorState
from sessiongen.llm.types import CacheMark, LLMMessage, LLMRequest, SystemPart, TextContent
from sessiongen.providers.bedrock.wire import lower_request

from tests._filler import filler
from tests.providers._sdk import bedrock_client

# AWS's table, as (model id, minimum tokens per checkpoint, 1h TTL supported).
AWS_TABLE = [
    ("anthropic.claude-opus-4-5-20251101-v1:0", 4096, True),
    ("anthropic.claude-opus-4-6-v1", 4096, False),
    ("anthropic.claude-sonnet-4-5-20250929-v1:0", 4096, True),
    ("anthropic.claude-sonnet-4-6", 1024, False),
    ("anthropic.claude-haiku-4-5-20251001-v1:0", 4096, True),
]


@pytest.fixture(scope="module")
def server() -> Iterator[BackgroundServer]:
    # The bare byte-based count: these tests size prompts by it, to the token.
    with BackgroundServer(EmulatorState(framing=False)) as background:
        yield background


@pytest.fixture
def state(server: BackgroundServer) -> EmulatorState:
    server.state.reset()
    return server.state


@pytest.fixture
def sdk(server: BackgroundServer) -> Any:
    return bedrock_client(server.url)


def converse(sdk: Any, model: str, system_tokens: int, ttl: str | None = None) -> Any:
    point: dict[str, str] = {"type": "default"}
    if ttl is not None:
        point["ttl"] = ttl
    return sdk.converse(
        modelId=f"us.{model}",
        system=[{"text": filler(system_tokens, "system")}, {"cachePoint": point}],
        messages=[{"role": "user", "content": [{"text": "Hello."}]}],
        inferenceConfig={"maxTokens": 64},
    )


@pytest.mark.parametrize(("model", "minimum", "one_hour"), AWS_TABLE)
def test_the_catalog_has_aws_minimums_and_ttls(model: str, minimum: int, one_hour: bool) -> None:
    """ "The following table lists the supported models along with their token minimums,
    maximum number of cache checkpoints, and fields that allow cache checkpoints." The
    catalog (`models_bedrock.json`) holds the table's "Minimum number of tokens per cache
    checkpoint" and whether "Supported TTL" includes "1 hour".

    Source: https://docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html
    """
    info = get_model(model)
    assert (info.min_cacheable_tokens, info.one_hour_ttl) == (minimum, one_hour)


@pytest.mark.clause("SG-REPLAY-3")
@pytest.mark.parametrize(("model", "minimum", "one_hour"), AWS_TABLE)
def test_a_checkpoint_below_the_model_minimum_is_not_cached(
    state: EmulatorState, sdk: Any, model: str, minimum: int, one_hour: bool
) -> None:
    """The table's "Minimum number of tokens per cache checkpoint", and "As long as the number
    of tokens preceding the `cachePoint` in the `content` object meets the minimum token count
    for the model, a cache checkpoint is created." Just below it nothing is written (and the
    request succeeds); at the minimum the prefix is written.

    Source: https://docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html
    """
    below = converse(sdk, model, minimum - 1)["usage"]
    assert (below["cacheWriteInputTokens"], below["cacheReadInputTokens"]) == (0, 0)
    at = converse(sdk, model, minimum)["usage"]
    assert at["cacheWriteInputTokens"] == minimum


@pytest.mark.clause("SG-REPLAY-3")
@pytest.mark.parametrize(("model", "minimum", "one_hour"), AWS_TABLE)
def test_the_1h_ttl_only_on_the_models_aws_lists(
    state: EmulatorState, sdk: Any, model: str, minimum: int, one_hour: bool
) -> None:
    """ "To use the 1-hour TTL option with supported models (Claude Opus 4.5, Claude Haiku 4.5,
    and Claude Sonnet 4.5), specify the `ttl` field in your cache checkpoint. In the Converse
    API, add `"ttl": "1h"` to your `cachePoint` object." On those the write is billed as a 1h
    write (`cacheDetails`) and read after 50 minutes; on the others (Opus 4.6, Sonnet 4.6:
    "5 minutes") Bedrock rejects the request, a 400 ValidationException with the model's
    validation error ("Extra inputs are not permitted", earendil-works/pi#1570; the wording
    is UNCONFIRMED), and nothing is cached.

    Source: https://docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html
    """
    if one_hour:
        first = converse(sdk, model, minimum + 100, "1h")["usage"]
        assert first["cacheDetails"] == [{"ttl": "1h", "inputTokens": minimum + 100}]
        state.clock.advance(50 * 60)
        assert converse(sdk, model, minimum + 100, "1h")["usage"]["cacheReadInputTokens"] > 0
        return
    with pytest.raises(ClientError) as caught:
        converse(sdk, model, minimum + 100, "1h")
    error = caught.value.response["Error"]
    assert error["Code"] == "ValidationException"
    assert error["Message"] == (
        "The model returned the following errors: system.0.cache_control.ttl: "
        "Extra inputs are not permitted"
    )
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert state.cache.entries() == []
    assert converse(sdk, model, minimum + 100, "5m")["usage"]["cacheWriteInputTokens"] > 0


def test_models_aws_does_not_list_get_no_1h_ttl(state: EmulatorState, sdk: Any) -> None:
    """The table lists no Fable 5, Sonnet 5, Opus 4.8 or Opus 4.7: the catalog gives them no
    1h TTL (UNCONFIRMED, in each entry's `unconfirmed` list), so the emulator refuses it.

    Source: https://docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html
    """
    for model in (
        "anthropic.claude-fable-5",
        "anthropic.claude-sonnet-5",
        "anthropic.claude-opus-4-8",
        "anthropic.claude-opus-4-7",
    ):
        info = get_model(model)
        assert not info.one_hour_ttl and "one_hour_ttl" in info.unconfirmed
    with pytest.raises(ClientError, match="Extra inputs are not permitted"):
        converse(sdk, "anthropic.claude-opus-4-8", 1100, "1h")


def test_the_adapter_sends_1h_marks_as_5m_where_the_model_lacks_the_1h_ttl() -> None:
    """The adapter lowers a 1h mark to the documented default ("If no `ttl` value is
    provided, the default 5-minute caching behavior applies.") on models without the 1h TTL,
    rather than send a request Bedrock rejects; on the listed models it sends `"ttl": "1h"`.

    Source: https://docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html
    """

    def lowered(model: str) -> dict[str, Any]:
        request = LLMRequest(
            model=model,
            system=(SystemPart(text="System.", cache=CacheMark(ttl="1h")),),
            messages=(
                LLMMessage(
                    role="user", content=(TextContent(text="Hi.", cache=CacheMark(ttl="1h")),)
                ),
            ),
        )
        kwargs = lower_request(request)
        return {"system": kwargs["system"][1], "message": kwargs["messages"][0]["content"][1]}

    hour = {"cachePoint": {"type": "default", "ttl": "1h"}}
    five = {"cachePoint": {"type": "default"}}
    assert lowered("us.anthropic.claude-sonnet-4-5-20250929-v1:0") == {
        "system": hour,
        "message": hour,
    }
    assert lowered("us.anthropic.claude-sonnet-4-6") == {"system": five, "message": five}
