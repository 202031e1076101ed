"""Admission: prompts become pending inputs; promotion turns them into Session History."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import EmptyPrompt, InvalidArgument, PromptTooLarge
from ..model import Event, InputAdmitted, InputPromoted, PendingInput, input_id, message_id

MAX_PROMPT_CHARS = 200_000


def validate_prompt(text: object) -> str:
    """The one prompt check shared by admission and generate."""
    if not isinstance(text, str):
        raise InvalidArgument(f"the prompt must be a string, not {type(text).__name__}")
    if not text.strip():
        raise EmptyPrompt("the prompt is empty")
    if len(text) > MAX_PROMPT_CHARS:
        raise PromptTooLarge(f"the prompt has {len(text)} characters; at most {MAX_PROMPT_CHARS}")
    return text


def admission_events(text: str, revision: int) -> list[Event]:
    return [InputAdmitted(input_id=input_id(revision + 1), text=validate_prompt(text))]


def promotion_events(pending: Sequence[PendingInput], revision: int) -> list[Event]:
    """Promote in admission order; message ids come from the revision each event gets."""
    return [
        InputPromoted(input_id=item.id, message_id=message_id(revision + offset))
        for offset, item in enumerate(pending, start=1)
    ]
