"""problem+json responses: the one place the server turns a failure into an HTTP answer.

A `SessiongenError` answers with its own status and `type` (`errors.py` owns that mapping;
nothing here re-maps it). HTTP-level refusals that no sessiongen error describes (a missing
token, a body over the size limit) answer with RFC 9457's `about:blank`
type, whose meaning is the status itself. Every body passes through `Redactor`, so a
credential the server holds never reaches a client, even inside an error message.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from http import HTTPStatus
from typing import Any

from starlette.responses import JSONResponse

from ..errors import ProviderError, SessiongenError

PROBLEM_MEDIA_TYPE = "application/problem+json"
ABOUT_BLANK = "about:blank"
REDACTED = "[redacted]"
# RFC 9110's phrases where Python's differ by version (3.11 says "Request Entity Too Large").
_TITLES = {413: "Content Too Large", 422: "Unprocessable Content"}


MIN_SECRET_CHARS = 8
"""Shorter secrets are not masked. Masking one would mangle ordinary text (an API key of
"x" turned "unexpected" into "une[redacted]pected") and would disclose the secret instead of
hiding it: the characters that vanish from common words spell it. A secret that short is
guessable anyway; real credentials are far longer (Anthropic and OpenAI keys 40 to 100+
characters, `secrets.token_urlsafe()` 43)."""

ANYWHERE_CHARS = 24
"""A secret at least this long is masked wherever it occurs, inside a longer run of letters
and digits too (after `%20`, twice in a row, in a URL or JSON): a string this long and
random does not occur by chance. A shorter one (from `MIN_SECRET_CHARS`) is masked only as a
whole token, not preceded or followed by an ASCII letter or digit, so a word that merely
contains it stays as written."""

_ALNUM = "A-Za-z0-9"


class Redactor:
    """Replaces each secret (an API key, the server's token) wherever it appears in text:
    one of at least `ANYWHERE_CHARS` characters anywhere, a shorter one as a whole token;
    one under `MIN_SECRET_CHARS` is not masked (see there)."""

    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        # Longest first, so a secret that contains another is replaced whole.
        self.secrets = sorted(
            {s for s in secrets if s and len(s) >= MIN_SECRET_CHARS}, key=len, reverse=True
        )
        patterns = [
            re.escape(s)
            if len(s) >= ANYWHERE_CHARS
            else rf"(?<![{_ALNUM}]){re.escape(s)}(?![{_ALNUM}])"
            for s in self.secrets
        ]
        # One pass: what was replaced is never matched again.
        self._pattern = re.compile("|".join(patterns)) if patterns else None

    def text(self, value: str) -> str:
        if self._pattern is None:
            return value
        return self._pattern.sub(REDACTED, value)

    def value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {k: self.value(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.value(v) for v in value]
        return value


def problem_response(
    body: dict[str, Any],
    *,
    instance: str,
    redactor: Redactor,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """`body` (type, title, status, detail, extras) as an application/problem+json answer."""
    scrubbed: dict[str, Any] = redactor.value({**body, "instance": instance})
    return JSONResponse(
        scrubbed,
        status_code=int(body["status"]),
        media_type=PROBLEM_MEDIA_TYPE,
        headers=dict(headers or {}),
    )


def error_response(
    error: SessiongenError,
    *,
    instance: str,
    redactor: Redactor,
    extra: Mapping[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """A sessiongen error with the status and problem type `errors.py` gives it, plus any
    `extra` members (validation errors) and `headers` (a 405's `Allow`). A 503 for a
    provider that said when to retry (rate-limited, overloaded) passes that on as our own
    `Retry-After` (whole seconds)."""
    body = {**error.problem_details(), **(extra or {})}
    return problem_response(
        body,
        instance=instance,
        redactor=redactor,
        headers={**(headers or {}), **retry_after_header(error)},
    )


def retry_after_header(error: SessiongenError) -> dict[str, str]:
    """`Retry-After` for our 503 answer to a provider error that carried a retry-after, else
    nothing."""
    if not isinstance(error, ProviderError) or error.problem_status != 503:
        return {}
    if error.retry_after is None or error.retry_after < 0:
        return {}
    return {"Retry-After": str(math.ceil(error.retry_after))}


def http_problem(
    status: int,
    detail: str,
    *,
    instance: str,
    redactor: Redactor,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """An HTTP-level refusal no sessiongen error names: RFC 9457's `about:blank`, titled with
    the status phrase."""
    body = {
        "type": ABOUT_BLANK,
        "title": _TITLES.get(status) or HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
    }
    return problem_response(body, instance=instance, redactor=redactor, headers=headers)
