"""Amazon Bedrock's Converse API (boto3 `bedrock-runtime`): Claude caches there as on
Anthropic, at `cachePoint` blocks, and is billed as the Messages API bills it."""

from __future__ import annotations

from ..anthropic import WRITES_NOTE
from ..base import Provider
from . import wire
from .counting import count_request

PROVIDER = Provider(
    name="bedrock",
    package=__name__,
    sdk="boto3",
    sdk_label="boto3 bedrock-runtime (Converse)",
    key_env=("AWS_BEARER_TOKEN_BEDROCK", "AWS_ACCESS_KEY_ID"),
    lab_model="us.anthropic.claude-sonnet-4-6",
    cache_note=WRITES_NOTE + "\nClaude on Bedrock caches as on Anthropic: at cachePoint blocks.",
    lower=wire.lower_request,
    count=count_request,
    usage=wire.usage_from_bedrock,
    view=wire.wire_view,
    messages_wire=True,
)
