"""Every failure a caller can see, in one hierarchy.

Each class carries `problem_status`, the HTTP status of the problem+json answer the server
gives (ours, never the provider's: a provider error keeps the provider's own status in
`provider_status`), and the problem `type`, so the mapping from exception to wire lives here
and nowhere else::

    SessiongenError
    ├── InvalidInput                      400  caller mistakes, rejected before any write
    │   ├── EmptyPrompt                   422
    │   ├── PromptTooLarge                413
    │   ├── MalformedRequest              400
    │   ├── InvalidArgument               422  also a ValueError
    │   │   └── ToolNotRegistered         422  an agent names a tool the registry lacks
    │   ├── SessionExists                 409
    │   ├── RequestTooLarge               413  a request body over the server's limit
    │   └── MethodNotAllowed              405  a method the route does not take
    ├── Unauthorized                      401  no or a wrong bearer token
    ├── NotFound                          404
    │   ├── SessionNotFound
    │   └── AgentNotFound
    ├── InstructionsInitializationBlocked 409  no baseline and a source cannot be read
    ├── SessionBusy                       409  another process is draining the session
    ├── ContextOverflow                   413  the snapshot cannot fit the context window
    ├── InsufficientStorage               507  the store's disk is full (or the store read-only)
    ├── MissingExtra                      500  an optional dependency is not installed
    ├── ToolError                         (recorded in the transcript as a tool error)
    │   ├── UnknownTool
    │   ├── InvalidToolArguments
    │   ├── PathOutsideWorkspace
    │   ├── NotARegularFile
    │   ├── ToolTimedOut
    │   └── ToolExecutionFailed
    └── ProviderError                     502  the provider call failed; carries its status,
        ├── ProviderInvalidRequest        502  request id, retry-after, headers and body
        ├── ProviderAuthenticationError   502
        ├── ProviderNotFound              502
        ├── ProviderRateLimited           503
        ├── ProviderOverloaded            503
        ├── ProviderServerError           502
        ├── ProviderTimeout               504
        ├── ProviderConnectionError       502
        └── ProviderStreamInterrupted     502  a stream that ended before message_stop

Rejected calls leave the store unchanged: validation happens before the first write, and
every durable change is one transaction.

The way back, from a problem+json answer to the class, is here too: `error_class_for(type)`
and `SessiongenError.from_problem(body)`, which `sessiongen.client` raises. Errors are data:
each pickles and round-trips through its problem body, its structured fields (a session id,
an agent name, the provider's status and request id) travelling as body members, never
parsed back out of the message.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

PROBLEM_BASE = "https://sessiongen.dev/problems/"


class SessiongenError(Exception):
    """Base of every sessiongen error."""

    problem_status: ClassVar[int] = 500
    """The HTTP status of our problem+json answer for this error (not a provider's status)."""
    problem: ClassVar[str] = "internal-error"
    problem_body: dict[str, Any] | None = None
    """The problem+json body a server answered, when the error was rebuilt from one
    (`from_problem`); None for an error raised here."""

    @classmethod
    def problem_type(cls) -> str:
        return PROBLEM_BASE + cls.problem

    @staticmethod
    def from_problem(body: Mapping[str, Any]) -> SessiongenError:
        """The error a problem+json body describes, for a client to raise: the class its
        `type` names (`error_class_for`), its `detail` as the message, the body kept whole
        as `problem_body`, and the attributes the class's constructor would set restored
        from the body. The constructor itself is not called: some take arguments only the
        raising side had (a session id, the known agents)."""
        status = body.get("status")
        status = status if isinstance(status, int) else None
        cls = error_class_for(str(body.get("type", "")), status)
        error = cls.__new__(cls)
        Exception.__init__(error, str(body.get("detail", "")))
        error.problem_body = dict(body)
        error._restore(body)
        return error

    def _restore(self, body: Mapping[str, Any]) -> None:
        """Set the attributes `__init__` would have set, from a problem body (`from_problem`);
        a class whose constructor sets attributes overrides it."""

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled as its message and attributes, rebuilt without calling `__init__` again: a
        # constructor that formats its message from an argument (a session id) would format
        # the message a second time.
        return (_rebuild, (type(self), self.args, dict(self.__dict__)))

    def problem_details(self) -> dict[str, Any]:
        """The RFC 9457 problem+json body for this error."""
        return {
            "type": self.problem_type(),
            "title": type(self).__name__,
            "status": self.problem_status,
            "detail": str(self),
        }


def _rebuild(
    cls: type[SessiongenError], args: tuple[Any, ...], state: dict[str, Any]
) -> SessiongenError:
    """The error `SessiongenError.__reduce__` pickled."""
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    error.__dict__.update(state)
    return error


class InvalidInput(SessiongenError):
    """The caller's input is invalid; it is rejected before anything is written."""

    problem_status = 400
    problem = "invalid-input"


class EmptyPrompt(InvalidInput):
    """The prompt is empty."""

    problem_status = 422
    problem = "empty-prompt"


class PromptTooLarge(InvalidInput):
    """The prompt is longer than admission accepts."""

    problem_status = 413
    problem = "prompt-too-large"


class MalformedRequest(InvalidInput):
    """A request that does not parse or does not validate."""

    problem_status = 400
    problem = "malformed-request"


class InvalidArgument(InvalidInput, ValueError):
    """A value of the wrong type or outside its choices (a tools policy, a prompt that is not
    a string, a workspace that is not a directory). Also a ValueError, as Python callers
    expect of a bad argument."""

    problem_status = 422
    problem = "invalid-argument"


class ToolNotRegistered(InvalidArgument):
    """An agent names a tool its engine's `ToolRegistry` does not have (misspelt, or never
    registered): refused when the engine is built, so no request goes out without it."""

    problem = "tool-not-registered"

    def __init__(
        self, tools: Iterable[str], registered: Iterable[str] = (), agent: str | None = None
    ) -> None:
        self.tools = list(tools)
        self.agent = agent
        names = ", ".join(repr(t) for t in self.tools)
        one = len(self.tools) == 1
        subject = f"tool {names}" if one else f"tools {names}"
        verb = "is" if one else "are"
        said = (
            f"{subject} {verb}"
            if agent is None
            else f"agent {agent!r} permits {subject}, which {verb}"
        )
        known = ", ".join(sorted(registered)) or "none"
        super().__init__(f"{said} not registered; registered tools: {known}")

    def problem_details(self) -> dict[str, Any]:
        return {**super().problem_details(), "tools": self.tools, "agent": self.agent}

    def _restore(self, body: Mapping[str, Any]) -> None:
        tools = body.get("tools")
        self.tools = [t for t in tools if isinstance(t, str)] if isinstance(tools, list) else []
        agent = body.get("agent")
        self.agent = agent if isinstance(agent, str) else None


class RequestTooLarge(InvalidInput):
    """A request body over the server's limit, refused before it is parsed."""

    problem_status = 413
    problem = "request-too-large"


class MethodNotAllowed(InvalidInput):
    """An HTTP method the route does not take; the answer's `Allow` header lists those it
    does."""

    problem_status = 405
    problem = "method-not-allowed"


class Unauthorized(SessiongenError):
    """The server has a bearer token and the request did not carry it."""

    problem_status = 401
    problem = "unauthorized"


class SessionExists(InvalidInput):
    """A session with this id already exists."""

    problem_status = 409
    problem = "session-exists"

    def __init__(self, session_id: str) -> None:
        super().__init__(f"session {session_id!r} already exists")
        self.session_id = session_id

    def problem_details(self) -> dict[str, Any]:
        return {**super().problem_details(), "session_id": self.session_id}

    def _restore(self, body: Mapping[str, Any]) -> None:
        self.session_id = _str_member(body, "session_id")


class NotFound(SessiongenError):
    """A named resource does not exist."""

    problem_status = 404
    problem = "not-found"


class SessionNotFound(NotFound):
    """No session has this id."""

    problem = "session-not-found"

    def __init__(self, session_id: str) -> None:
        super().__init__(f"session {session_id!r} does not exist")
        self.session_id = session_id

    def problem_details(self) -> dict[str, Any]:
        return {**super().problem_details(), "session_id": self.session_id}

    def _restore(self, body: Mapping[str, Any]) -> None:
        self.session_id = _str_member(body, "session_id")


class AgentNotFound(NotFound):
    """No agent of this name is configured."""

    problem = "agent-not-found"

    def __init__(self, agent: str, known: Iterable[str] = ()) -> None:
        names = ", ".join(sorted(known)) or "none"
        super().__init__(f"agent {agent!r} is not configured; known agents: {names}")
        self.agent = agent

    def problem_details(self) -> dict[str, Any]:
        return {**super().problem_details(), "agent": self.agent}

    def _restore(self, body: Mapping[str, Any]) -> None:
        self.agent = _str_member(body, "agent")


class InstructionsInitializationBlocked(SessiongenError):
    """The session has no instructions baseline yet and an instruction source cannot be read."""

    problem_status = 409
    problem = "instructions-initialization-blocked"


class SessionBusy(SessiongenError):
    """Another live process holds the session's drain lease (it is running a Drain of the
    session on the same store file). Raised before anything is written: a turn refused with
    it admitted nothing. Retry once that process's turn settles."""

    problem_status = 409
    problem = "session-busy"

    def __init__(self, session_id: str, holder: str = "another process") -> None:
        super().__init__(
            f"session {session_id!r} is being drained by {holder}; nothing was admitted, "
            "retry once that turn settles"
        )
        self.session_id = session_id

    def problem_details(self) -> dict[str, Any]:
        return {**super().problem_details(), "session_id": self.session_id}

    def _restore(self, body: Mapping[str, Any]) -> None:
        self.session_id = _str_member(body, "session_id")


class ContextOverflow(SessiongenError):
    """The context does not fit the model's window. Raised before the call when the snapshot
    is measured too large, or mapped from the provider's "prompt is too long"."""

    problem_status = 413
    problem = "context-overflow"

    def __init__(
        self,
        message: str,
        *,
        tokens: int | None = None,
        limit: int | None = None,
        provider_status: int | None = None,
        provider_request_id: str | None = None,
        provider_error_type: str | None = None,
    ) -> None:
        super().__init__(message)
        self.tokens = tokens
        self.limit = limit
        self.provider_status = provider_status
        self.provider_request_id = provider_request_id
        self.provider_error_type = provider_error_type

    def problem_details(self) -> dict[str, Any]:
        body = super().problem_details()
        body.update(
            tokens=self.tokens,
            limit=self.limit,
            provider_status=self.provider_status,
            provider_request_id=self.provider_request_id,
            provider_error_type=self.provider_error_type,
        )
        return body

    def _restore(self, body: Mapping[str, Any]) -> None:
        self.tokens = body.get("tokens")
        self.limit = body.get("limit")
        self.provider_status = body.get("provider_status")
        self.provider_request_id = body.get("provider_request_id")
        self.provider_error_type = body.get("provider_error_type")


class InsufficientStorage(SessiongenError):
    """The store could not write: its disk is full, or it was opened read-only because it
    could not write when it opened. Nothing of the refused call was written (every durable
    change is one transaction); reads keep working."""

    problem_status = 507
    problem = "insufficient-storage"


class MissingExtra(SessiongenError, ImportError):
    """An optional dependency is not installed: the message names the package, what needs it
    and the extra that installs it (`pip install "sessiongen[providers]"`). Also an
    `ImportError`, so code that guards an optional import catches it as before."""

    problem_status = 500
    problem = "missing-extra"


class ToolError(SessiongenError):
    """A tool could not run; settlement records it as the tool call's error result."""

    problem = "tool-error"


class UnknownTool(ToolError):
    """The model called a tool the agent does not have."""

    problem = "unknown-tool"


class InvalidToolArguments(ToolError):
    """A tool call's input does not fit the tool."""

    problem = "invalid-tool-arguments"


class PathOutsideWorkspace(ToolError):
    """A tool was asked for a path outside the session's workspace."""

    problem = "path-outside-workspace"


class NotARegularFile(ToolError):
    """A tool was asked to read something that is not a regular file (a directory, a named
    pipe, a device, a socket): refused before it is opened for reading."""

    problem = "not-a-regular-file"


class ToolTimedOut(ToolError):
    """A tool call ran past its time limit; the call's result is this error and the rest of
    the server kept answering."""

    problem = "tool-timed-out"


class ToolExecutionFailed(ToolError):
    """A tool ran and failed."""

    problem = "tool-execution-failed"


class ProviderError(SessiongenError):
    """The provider call failed. Everything the provider said about it is kept, when it said
    it: `provider_status` (its HTTP status), `provider_request_id`, `provider_error_type` (its
    error code), `retry_after` (seconds, from its `retry-after-ms` / `retry-after` header),
    `headers` (its response headers, names lower-cased) and `body` (its response body: the
    parsed JSON when it is JSON, else the text). `problem_status` is our answer's status.

    The problem body carries the status, request id, error type and retry-after; the headers
    and body stay on the Python object (they can hold anything the provider sent)."""

    problem_status = 502
    problem = "provider-error"

    def __init__(
        self,
        message: str,
        *,
        provider_status: int | None = None,
        provider_request_id: str | None = None,
        provider_error_type: str | None = None,
        retry_after: float | None = None,
        headers: Mapping[str, str] | None = None,
        body: Any = None,
    ) -> None:
        super().__init__(message)
        self.provider_status = provider_status
        self.provider_request_id = provider_request_id
        self.provider_error_type = provider_error_type
        self.retry_after = retry_after
        self.headers: dict[str, str] = {k.lower(): v for k, v in (headers or {}).items()}
        self.body = body

    def problem_details(self) -> dict[str, Any]:
        body = super().problem_details()
        body.update(
            provider_status=self.provider_status,
            provider_request_id=self.provider_request_id,
            provider_error_type=self.provider_error_type,
            retry_after=self.retry_after,
        )
        return body

    def _restore(self, body: Mapping[str, Any]) -> None:
        self.provider_status = body.get("provider_status")
        self.provider_request_id = body.get("provider_request_id")
        self.provider_error_type = body.get("provider_error_type")
        retry_after = body.get("retry_after")
        self.retry_after = float(retry_after) if isinstance(retry_after, int | float) else None
        self.headers = {}
        self.body = None


class ProviderInvalidRequest(ProviderError):
    """The provider rejected the request as invalid (400, 413, 422)."""

    problem = "provider-invalid-request"


class ProviderAuthenticationError(ProviderError):
    """The provider refused the credentials (401, 402, 403), or there are none to send."""

    problem = "provider-authentication-error"


class ProviderNotFound(ProviderError):
    """The provider does not know the model or the endpoint (404)."""

    problem = "provider-not-found"


class ProviderRateLimited(ProviderError):
    """The provider rate-limited the call (429)."""

    problem_status = 503
    problem = "provider-rate-limited"


class ProviderOverloaded(ProviderError):
    """The provider is overloaded (529)."""

    problem_status = 503
    problem = "provider-overloaded"


class ProviderServerError(ProviderError):
    """The provider failed on its side (500 and any status without its own class)."""

    problem = "provider-server-error"


class ProviderTimeout(ProviderError):
    """The provider call timed out: the client's own timeout, or 408 / 504."""

    problem_status = 504
    problem = "provider-timeout"


class ProviderConnectionError(ProviderError):
    """The provider could not be reached."""

    problem = "provider-connection-error"


class ProviderStreamInterrupted(ProviderError):
    """The provider stream broke, or ended before it finished."""

    problem = "provider-stream-interrupted"


def provider_error_for_status(
    status: int,
    message: str,
    *,
    request_id: str | None = None,
    error_type: str | None = None,
    retry_after: float | None = None,
    headers: Mapping[str, str] | None = None,
    body: Any = None,
    context_overflow: bool = False,
) -> ProviderError | ContextOverflow:
    """The one mapping from a provider HTTP status (and message) to a typed error, carrying
    what the provider sent with it. A 400 is a `ContextOverflow` when its message says
    "prompt is too long" (Anthropic's words) or the caller knows it is one
    (`context_overflow`: an error code, another provider's wording)."""
    if status == 400 and (context_overflow or "prompt is too long" in message):
        return ContextOverflow(
            message,
            provider_status=status,
            provider_request_id=request_id,
            provider_error_type=error_type,
        )
    cls: type[ProviderError]
    if status == 400 or status == 422 or status == 413:
        cls = ProviderInvalidRequest
    elif status in (401, 402, 403):
        cls = ProviderAuthenticationError
    elif status == 404:
        cls = ProviderNotFound
    elif status == 429:
        cls = ProviderRateLimited
    elif status == 529:
        cls = ProviderOverloaded
    elif status in (408, 504):
        cls = ProviderTimeout
    else:
        cls = ProviderServerError
    return cls(
        message,
        provider_status=status,
        provider_request_id=request_id,
        provider_error_type=error_type,
        retry_after=retry_after,
        headers=headers,
        body=body,
    )


def _error_classes() -> list[type[SessiongenError]]:
    """SessiongenError and every subclass defined so far, each parent before its children."""
    found: list[type[SessiongenError]] = [SessiongenError]
    for cls in found:  # grows while it is walked: breadth first
        found.extend(sub for sub in cls.__subclasses__() if sub not in found)
    return found


def error_class_for(problem_type: str, status: int | None = None) -> type[SessiongenError]:
    """The class whose `problem_type()` is `problem_type`: the inverse of the mapping above,
    for a client reading problem+json. An unknown type (`about:blank`, a newer server's)
    falls back to the most specific class that every class of HTTP `status` derives from
    (404 is `NotFound`, 503 `ProviderError`, 422 `InvalidInput`), else `SessiongenError`."""
    classes = _error_classes()
    for cls in classes:  # parents first: a subclass that keeps its parent's slug is not it
        if cls.problem_type() == problem_type:
            return cls
    same = [cls for cls in classes if status is not None and cls.problem_status == status]
    for base in same[0].__mro__ if same else ():
        if issubclass(base, SessiongenError) and all(issubclass(c, base) for c in same):
            return base
    return SessiongenError


def _str_member(body: Mapping[str, Any], name: str) -> str:
    """The string member `name` of a problem body, or "" when it is missing (an older server's
    body) or not a string."""
    value = body.get(name)
    return value if isinstance(value, str) else ""
