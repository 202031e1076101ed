"""Anthropic-shaped error responses: one error `type` and default message per HTTP status."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# The status -> error type table (AD:api/errors) is the adapter's too, so it lives in the LLM
# layer. 503 is not in Anthropic's table; error_type_for answers it as a generic api_error.
from fastapi.responses import JSONResponse

from ..providers.anthropic.wire import ERROR_TYPES as ERROR_TYPES

DEFAULT_MESSAGES: Mapping[int, str] = {
    400: "Invalid request",
    401: "invalid x-api-key",
    402: "Your credit balance is too low to access the Anthropic API.",
    403: "Your API key does not have permission to use the specified resource.",
    404: "The requested resource could not be found.",
    409: "Conflict",
    413: "Request exceeds the maximum allowed number of bytes.",
    429: "Number of request tokens has exceeded your per-minute rate limit",
    500: "Internal server error",
    504: "Request timeout",
    529: "Overloaded",
}

# Headers the real API sends with some statuses. retry-after is in real seconds (the SDK
# sleeps on it when retries are on), kept short so retrying clients stay fast.
DEFAULT_HEADERS: Mapping[int, Mapping[str, str]] = {429: {"retry-after": "1"}}


def error_type_for(status: int) -> str:
    if status in ERROR_TYPES:
        return ERROR_TYPES[status]
    return "api_error" if status >= 500 else "invalid_request_error"


def default_message_for(status: int) -> str:
    return DEFAULT_MESSAGES.get(status, "Internal server error" if status >= 500 else "Error")


def error_body(
    status: int, message: str | None, request_id: str, error_type: str | None = None
) -> dict[str, Any]:
    """`{"type": "error", "error": {"type", "message"}, "request_id"}` as the API sends it."""
    return {
        "type": "error",
        "error": {
            "type": error_type or error_type_for(status),
            "message": message or default_message_for(status),
        },
        "request_id": request_id,
    }


class APIError(Exception):
    """A request the emulator answers with an error status (validation, unknown model)."""

    def __init__(self, status: int, message: str, error_type: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.error_type = error_type or error_type_for(status)


def invalid_request(message: str) -> APIError:
    return APIError(400, message, "invalid_request_error")


def error_response(
    status: int,
    request_id: str,
    message: str | None = None,
    error_type: str | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    all_headers = {**DEFAULT_HEADERS.get(status, {}), **(headers or {}), "request-id": request_id}
    return JSONResponse(
        error_body(status, message, request_id, error_type), status_code=status, headers=all_headers
    )
