"""The conformance kit's adapters: how `sessiongen agents conform` drives a server's sessions.

An adapter is a handful of calls over the server's own HTTP API (`Adapter`): check that it
answers, create a session, run a durable turn, call generate, and read the session back as
a comparable snapshot (`SessionState`). The laws never look at an adapter's answers alone:
every claim about the provider request is checked in the emulator's request log.

`SessiongenAdapter` speaks our API (docs/http.md); `OpencodeAdapter` speaks opencode's
(`opencode serve`: `POST /session`, `POST /session/{id}/message`, `GET /session/{id}/message`,
and the generate route of anomalyco/opencode#37433). A team adds its own server by writing
one more class with these methods (docs/conformance.md).
"""

from __future__ import annotations

import base64
import os
from typing import Any, ClassVar, Protocol, TypeVar

import httpx
from pydantic import BaseModel, ConfigDict, ValidationError

__all__ = [
    "Adapter",
    "AdapterError",
    "GenerateOutcome",
    "OpencodeAdapter",
    "SessionState",
    "SessiongenAdapter",
    "Unreachable",
]

DEFAULT_TIMEOUT = 60.0
_M = TypeVar("_M", bound=BaseModel)


class Unreachable(Exception):
    """The server (or the emulator) cannot be checked at all: not reachable, a token
    missing, no generate route. The kit stops with this one line, exit 2."""


class AdapterError(Exception):
    """The server answered something the adapter cannot use (a turn refused, a body it
    cannot read, no answer in time): the law being checked fails with this one line."""


class SessionState(BaseModel):
    """A session as the server shows it, in a form the laws compare: equal snapshots mean
    the session did not change."""

    model_config = ConfigDict(frozen=True)

    messages: list[Any]
    """The history, each message as the server serializes it."""
    revision: int | None
    """The server's revision (None: it exposes none)."""
    other: dict[str, Any]
    """Every other field the server shows about the session (pending inputs, usage
    totals, ...), compared whole."""


class GenerateOutcome(BaseModel):
    """What one generate call answered. Fields the server does not report are None."""

    model_config = ConfigDict(frozen=True)

    ok: bool
    status: int
    text: str | None = None
    tool_calls: list[str] | None = None
    """The names of the returned tool calls."""
    finish_reason: str | None = None
    revision: int | None = None
    error: str | None = None
    """A failed call's typed error: the problem `type`, or the error's name."""
    detail: str = ""

    @property
    def error_name(self) -> str:
        """The error's short name: a problem type URI's last segment."""
        return (self.error or "untyped error").rstrip("/").rsplit("/", 1)[-1]

    def describe(self) -> str:
        """`200 ok`, or the status and the error's short name with its detail."""
        if self.ok:
            return f"{self.status} ok"
        return f"{self.status} {self.error_name}" + (f" ({self.detail})" if self.detail else "")


class Adapter(Protocol):
    """What the kit needs from a server: our HTTP API and opencode's each have one."""

    name: str
    tools_policies: tuple[str, ...]
    """The `tools_policy` values its generate takes (contract section 3); empty when it
    takes none and always applies its default."""

    def check(self) -> None:
        """Raise `Unreachable` when the server does not answer."""
        ...

    def create_session(self) -> str: ...

    def turn(self, session_id: str, prompt: str) -> None:
        """One durable turn, returned when it settled; `AdapterError` when refused."""
        ...

    def generate(
        self, session_id: str, prompt: str, *, tools_policy: str | None = None
    ) -> GenerateOutcome:
        """One generate call; a refusal is an outcome (`ok=False`), not an exception."""
        ...

    def state(self, session_id: str) -> SessionState: ...

    def close(self) -> None: ...


# --- shared HTTP plumbing ------------------------------------------------------------------


class _Http:
    """An httpx client whose failures are the kit's: a refused connection is `Unreachable`,
    a timeout or an unreadable answer an `AdapterError`."""

    def __init__(
        self,
        what: str,
        base_url: str,
        *,
        headers: dict[str, str],
        timeout: float,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.what = what
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.client = httpx.Client(
            base_url=self.base_url, headers=headers, timeout=timeout, transport=transport
        )

    def request(self, method: str, path: str, json: Any = None) -> httpx.Response:
        try:
            return self.client.request(method, path, json=json)
        except httpx.TimeoutException:
            raise AdapterError(f"{method} {path}: no answer within {self.timeout:g} s") from None
        except httpx.TransportError as exc:
            raise Unreachable(
                f"cannot reach the {self.what} at {self.base_url}: {_one_line(exc)}"
            ) from None

    def json(self, method: str, path: str, json: Any = None, *, ok: int = 200) -> Any:
        """The JSON body of a `ok` answer; anything else is an `AdapterError`."""
        response = self.request(method, path, json)
        if response.status_code != ok:
            raise AdapterError(f"{method} {path} answered {_status_line(response)}")
        try:
            return response.json()
        except ValueError:
            raise AdapterError(f"{method} {path} answered a body that is not JSON") from None

    def close(self) -> None:
        self.client.close()


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 160 else text[:159] + "…"


def _status_line(response: httpx.Response) -> str:
    problem = _problem(response)
    return f"{response.status_code} {problem[0] or ''}".rstrip() + (
        f": {problem[1]}" if problem[1] else ""
    )


def _problem(response: httpx.Response) -> tuple[str | None, str]:
    """A refusal's typed error and detail, whatever the server's error shape: RFC 9457
    problem details (`type`, `detail`), opencode's named errors (`name`, `data.message`),
    or an `error` member."""
    try:
        body = response.json()
    except ValueError:
        return None, _one_line(Exception(response.text))[:120]
    if not isinstance(body, dict):
        return None, ""
    kind = body.get("type") or body.get("name") or body.get("_tag")
    data = body.get("data")
    error = body.get("error")
    if kind is None and isinstance(error, dict):
        kind = error.get("type") or error.get("name")
    detail = body.get("detail") or (data.get("message") if isinstance(data, dict) else None)
    if detail is None and isinstance(error, dict):
        detail = error.get("message")
    return (None if kind is None else str(kind)), _one_line(Exception(detail or ""))


def _parse(model: type[_M], value: Any, what: str) -> _M:
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise AdapterError(f"{what}: unexpected answer ({where}: {first['msg']})") from None


class _Wire(BaseModel):
    """A server's JSON answer: fields the kit does not use are kept, never refused."""

    model_config = ConfigDict(extra="allow")


# --- sessiongen -----------------------------------------------------------------------------


class _SgCreated(_Wire):
    id: str


class _SgSession(_Wire):
    revision: int


class _SgMessages(_Wire):
    messages: list[Any]


class _SgToolCall(_Wire):
    name: str


class _SgGenerate(_Wire):
    text: str
    tool_calls: list[_SgToolCall]
    finish_reason: str | None
    revision: int


class _HttpAdapter:
    """What every HTTP adapter is built from: the server's base URL, a token for its
    `Authorization` header (in the adapter's own scheme), the agent to create sessions
    with, and the time and transport of its requests."""

    label: ClassVar[str]

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        agent: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        headers = {"Authorization": self.authorization(token)} if token else {}
        self.http = _Http(
            self.label, base_url, headers=headers, timeout=timeout, transport=transport
        )
        self.agent = agent

    @staticmethod
    def authorization(token: str) -> str:
        raise NotImplementedError

    def _post_generate(self, path: str, body: dict[str, Any]) -> tuple[GenerateOutcome | None, Any]:
        """POST a generate: a refusal as its outcome (with the problem's type and detail),
        else None and the 200 answer's JSON."""
        response = self.http.request("POST", path, body)
        if response.status_code != 200:
            error, detail = _problem(response)
            refused = GenerateOutcome(
                ok=False, status=response.status_code, error=error, detail=detail
            )
            return refused, None
        try:
            return None, response.json()
        except ValueError:
            raise AdapterError(f"POST {path} answered 200 with a body that is not JSON") from None


class SessiongenAdapter(_HttpAdapter):
    """Our HTTP API (`sessiongen serve`, docs/http.md): sessions, durable turns and
    generate under `/api/session`, errors as application/problem+json."""

    name = "sessiongen"
    tools_policies: tuple[str, ...] = ("definitions", "choice_none", "no_tools")

    label = "sessiongen server"

    @staticmethod
    def authorization(token: str) -> str:
        return f"Bearer {token}"

    def check(self) -> None:
        response = self.http.request("GET", "/api/health")
        if response.status_code != 200:
            raise Unreachable(
                f"{self.http.base_url}/api/health answered {response.status_code}: "
                "is this a sessiongen server?"
            )
        probe = self.http.request("GET", "/api/session/conform-probe")
        if probe.status_code == 401:
            raise Unreachable(f"{self.http.base_url} wants a bearer token: pass --token")

    def create_session(self) -> str:
        body = {"agent": self.agent} if self.agent else None
        created = self.http.json("POST", "/api/session", body, ok=201)
        return _parse(_SgCreated, created, "POST /api/session").id

    def turn(self, session_id: str, prompt: str) -> None:
        self.http.json("POST", f"/api/session/{session_id}/prompt", {"prompt": prompt})

    def generate(
        self, session_id: str, prompt: str, *, tools_policy: str | None = None
    ) -> GenerateOutcome:
        path = f"/api/session/{session_id}/generate"
        body: dict[str, Any] = {"prompt": prompt}
        if tools_policy is not None:
            body["tools_policy"] = tools_policy
        refused, raw = self._post_generate(path, body)
        if refused is not None:
            return refused
        result = _parse(_SgGenerate, raw, f"POST {path}")
        return GenerateOutcome(
            ok=True,
            status=200,
            text=result.text,
            tool_calls=[call.name for call in result.tool_calls],
            finish_reason=result.finish_reason,
            revision=result.revision,
        )

    def state(self, session_id: str) -> SessionState:
        raw = self.http.json("GET", f"/api/session/{session_id}")
        session = _parse(_SgSession, raw, f"GET /api/session/{session_id}")
        listed = self.http.json("GET", f"/api/session/{session_id}/messages")
        messages = _parse(_SgMessages, listed, f"GET /api/session/{session_id}/messages")
        return SessionState(
            messages=messages.messages,
            revision=session.revision,
            other=dict(session.model_extra or {}),
        )

    def close(self) -> None:
        self.http.close()


# --- opencode -------------------------------------------------------------------------------


class _OcSession(_Wire):
    id: str


class _OcGenerated(_Wire):
    text: str


class _OcGenerate(_Wire):
    data: _OcGenerated


class OpencodeAdapter(_HttpAdapter):
    """opencode's HTTP API (`opencode serve`, default port 4096): `GET /global/health`,
    `POST /session`, `POST /session/{id}/message` (a turn, answered when it is done),
    `GET /session/{id}` and `GET /session/{id}/message`, and generate at
    `POST /api/session/{id}/generate` with `{"prompt"}`, answered `{"data": {"text"}}`
    (anomalyco/opencode#37433). Its generate takes no tools policy and reports only text,
    so the laws check the rest at the wire. opencode has no revision: the session's
    `time.updated` stands for it. With `OPENCODE_SERVER_PASSWORD` set on the server, pass
    it as the token (HTTP basic auth, user `OPENCODE_SERVER_USERNAME` or `opencode`)."""

    name = "opencode"
    tools_policies: tuple[str, ...] = ()
    health_path: ClassVar[str] = "/global/health"
    openapi_path: ClassVar[str] = "/doc"
    session_path: ClassVar[str] = "/session"
    generate_path: ClassVar[str] = "/api/session/{sessionID}/generate"

    label = "opencode server"

    @staticmethod
    def authorization(token: str) -> str:
        """Basic auth, as `opencode serve` asks with OPENCODE_SERVER_PASSWORD set."""
        user = os.environ.get("OPENCODE_SERVER_USERNAME") or "opencode"
        pair = base64.b64encode(f"{user}:{token}".encode()).decode("ascii")
        return f"Basic {pair}"

    def check(self) -> None:
        response = self.http.request("GET", self.health_path)
        if response.status_code == 401:
            raise Unreachable(
                f"{self.http.base_url} wants its OPENCODE_SERVER_PASSWORD: pass --token"
            )
        if response.status_code != 200:
            raise Unreachable(
                f"{self.http.base_url}{self.health_path} answered {response.status_code}: "
                "is this opencode serve?"
            )
        # Its OpenAPI document lists its routes: a release without generate answers the
        # route with its web app's HTML page (200), so ask before calling it.
        doc = self.http.request("GET", self.openapi_path)
        try:
            paths = doc.json().get("paths") if doc.status_code == 200 else None
        except (ValueError, AttributeError):
            paths = None
        if isinstance(paths, dict) and self.generate_path not in paths:
            try:
                version = str(response.json().get("version"))
            except (ValueError, AttributeError):
                version = "?"
            raise Unreachable(
                f"opencode {version} at {self.http.base_url} serves no POST "
                f"{self.generate_path} (anomalyco/opencode#37433): its generate cannot be "
                "checked"
            )

    def create_session(self) -> str:
        body: dict[str, Any] = {"agent": self.agent} if self.agent else {}
        created = self.http.json("POST", self.session_path, body)
        return _parse(_OcSession, created, f"POST {self.session_path}").id

    def turn(self, session_id: str, prompt: str) -> None:
        body: dict[str, Any] = {"parts": [{"type": "text", "text": prompt}]}
        if self.agent:
            body["agent"] = self.agent
        self.http.json("POST", f"{self.session_path}/{session_id}/message", body)

    def generate(
        self, session_id: str, prompt: str, *, tools_policy: str | None = None
    ) -> GenerateOutcome:
        if tools_policy is not None:
            raise AdapterError("opencode's generate takes no tools policy")
        path = self.generate_path.format(sessionID=session_id)
        refused, raw = self._post_generate(path, {"prompt": prompt})
        if refused is not None:
            return refused
        return GenerateOutcome(ok=True, status=200, text=_parse(_OcGenerate, raw, path).data.text)

    def state(self, session_id: str) -> SessionState:
        path = f"{self.session_path}/{session_id}"
        row = self.http.json("GET", path)
        listed = self.http.json("GET", f"{path}/message")
        if not isinstance(row, dict) or not isinstance(listed, list):
            raise AdapterError(f"GET {path}: unexpected answer (no session object, no list)")
        when = row.get("time")
        updated = when.get("updated") if isinstance(when, dict) else None
        return SessionState(
            messages=listed,
            revision=updated if isinstance(updated, int) else None,
            other={k: v for k, v in row.items() if k != "time"},
        )

    def close(self) -> None:
        self.http.close()
