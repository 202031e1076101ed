"""Admission: prompts become pending inputs; promotion turns them into Session History."""

from __future__ import annotations

from collections.abc import Sequence

from .errors import EmptyPrompt, PromptTooLarge
from .model import Event, InputAdmitted, InputPromoted, PendingInput

MAX_PROMPT_CHARS = 200_000


def validate_prompt(text: str) -> str:
    """The one prompt check shared by admission and generate."""
    if not text.strip():
        raise EmptyPrompt("the prompt is empty")
    if len(text) > MAX_PROMPT_CHARS:
        raise PromptTooLarge(f"the prompt has {len(text)} characters; at most {MAX_PROMPT_CHARS}")
    return text


def admission_events(text: str, revision: int) -> list[Event]:
    return [InputAdmitted(input_id=f"in_{revision + 1:06d}", text=validate_prompt(text))]


def promotion_events(pending: Sequence[PendingInput], revision: int) -> list[Event]:
    """Promote in admission order; message ids come from the revision each event gets."""
    return [
        InputPromoted(input_id=item.id, message_id=f"msg_{revision + offset:06d}")
        for offset, item in enumerate(pending, start=1)
    ]
