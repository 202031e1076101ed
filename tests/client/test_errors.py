"""Errors through the client: each problem type the server answers raises its sessiongen
class, with the body kept; the mapping is errors.py's own, inverted; transport failures and
answers that are not problem+json stay httpx's."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from anyio.from_thread import BlockingPortal
from sessiongen import errors
from sessiongen.client import AsyncSessiongenClient, SessiongenClient
from sessiongen.errors import (
    AgentNotFound,
    EmptyPrompt,
    InvalidArgument,
    InvalidInput,
    NotFound,
    PromptTooLarge,
    ProviderError,
    ProviderOverloaded,
    ProviderRateLimited,
    RequestTooLarge,
    SessiongenError,
    SessionNotFound,
    Unauthorized,
    error_class_for,
)
from sessiongen.lab import EmulatorLab
from sessiongen.server import MAX_BODY_BYTES, create_app

from .conftest import BASE_URL, KINDS, Driver, driver_for


def _problem(raised: pytest.ExceptionInfo[SessiongenError], status: int) -> dict[str, Any]:
    """The raised error's problem body: the server's, whole, with the class's own type."""
    body = raised.value.problem_body
    assert body is not None
    assert body["type"] == type(raised.value).problem_type()
    assert body["status"] == status and body["title"] == type(raised.value).__name__
    assert body["detail"] == str(raised.value) and body["instance"].startswith("/api/")
    return body


@pytest.mark.clause("SG-HTTP-2")
def test_caller_mistakes(driver: Driver, lab: EmulatorLab) -> None:
    sid = driver.create_session().id
    with pytest.raises(EmptyPrompt) as empty:
        driver.generate(sid, " \n\t ")
    _problem(empty, 422)
    with pytest.raises(EmptyPrompt):
        driver.prompt(sid, "   ")
    with pytest.raises(PromptTooLarge) as large:
        driver.generate(sid, "x" * 200_001)
    _problem(large, 413)
    with pytest.raises(InvalidArgument) as policy:
        driver.generate(sid, "hi", tools_policy="all")
    body = _problem(policy, 422)
    assert body["errors"][0]["loc"] == "body.tools_policy"
    assert isinstance(policy.value, ValueError)  # as the Python API's InvalidArgument is
    with pytest.raises(RequestTooLarge) as too_big:
        driver.generate(sid, "x" * (MAX_BODY_BYTES + 1))
    _problem(too_big, 413)
    assert lab.requests() == []  # none reached the provider


def test_not_found(driver: Driver) -> None:
    with pytest.raises(SessionNotFound) as missing:
        driver.get_session("ses_404")
    _problem(missing, 404)
    assert missing.value.session_id == "ses_404"
    for call in (driver.messages, driver.warming, driver.start_warming, driver.delete_session):
        with pytest.raises(SessionNotFound):
            call("ses_404")
    with pytest.raises(SessionNotFound):
        driver.generate("ses_404", "hi")
    with pytest.raises(AgentNotFound) as agent:
        driver.create_session("nobody")
    _problem(agent, 404)
    assert agent.value.agent == "nobody"


def test_provider_failures_keep_the_providers_status(driver: Driver, lab: EmulatorLab) -> None:
    sid = driver.create_session().id
    lab.faults(status=529)
    with pytest.raises(ProviderOverloaded) as overloaded:
        driver.generate(sid, "hi")
    body = _problem(overloaded, 503)
    assert overloaded.value.provider_status == body["provider_status"] == 529
    assert overloaded.value.provider_request_id == body["provider_request_id"]
    lab.faults(status=429, headers={"retry-after": "0"})
    with pytest.raises(ProviderRateLimited) as limited:
        driver.prompt(sid, "hi")
    assert limited.value.provider_status == 429 and isinstance(limited.value, ProviderError)
    assert limited.value.retry_after == 0.0  # the provider's, through our problem body


@pytest.mark.parametrize("kind", KINDS)
def test_a_token_server_refuses_a_client_without_its_token(
    kind: str, lab: EmulatorLab, portal: BlockingPortal
) -> None:
    app = create_app(lab.engine, token="s3cret")
    for token in (None, "wrong"):
        with driver_for(kind, app, portal, [], token=token) as driver:
            assert driver.health().status == "ok"  # never needs the token
            with pytest.raises(Unauthorized) as refused:
                driver.create_session()
            _problem(refused, 401)


@pytest.mark.clause("SG-HTTP-2")
def test_every_error_class_round_trips_through_its_problem_type() -> None:
    classes = [
        c
        for c in vars(errors).values()
        if isinstance(c, type)
        and issubclass(c, SessiongenError)
        and c.__module__ == errors.__name__
    ]
    assert len(classes) > 25
    for cls in classes:
        body = {"type": cls.problem_type(), "title": cls.__name__, "status": 0, "detail": "x"}
        assert error_class_for(cls.problem_type()) is cls
        rebuilt = SessiongenError.from_problem(body)
        assert type(rebuilt) is cls and str(rebuilt) == "x" and rebuilt.problem_body == body
        # Every attribute the constructor sets is there, though no constructor ran.
        assert set(vars(_constructed(cls))) <= set(vars(rebuilt)), cls


def _constructed(cls: type[SessiongenError]) -> SessiongenError:
    """An instance made the ordinary way, to see which attributes the constructor sets."""
    for args in ((), ("x",)):
        try:
            return cls(*args)
        except TypeError:
            continue
    raise AssertionError(cls)


@pytest.mark.parametrize(
    ("problem_type", "status", "expected"),
    [
        ("about:blank", 405, errors.MethodNotAllowed),  # our own class for 405
        ("about:blank", 418, SessiongenError),  # a plain HTTP refusal no class names
        ("about:blank", 404, NotFound),
        ("https://sessiongen.dev/problems/newer-kind", 422, InvalidInput),
        ("https://sessiongen.dev/problems/newer-kind", 503, ProviderError),
        ("https://sessiongen.dev/problems/newer-kind", 401, Unauthorized),
        ("https://sessiongen.dev/problems/newer-kind", None, SessiongenError),
    ],
)
def test_an_unknown_type_falls_back_by_status(
    problem_type: str, status: int | None, expected: type[SessiongenError]
) -> None:
    assert error_class_for(problem_type, status) is expected


def _answering(status: int, content_type: str, content: bytes) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, headers={"content-type": content_type}, content=content)

    return httpx.MockTransport(handler)


def test_problem_answers_from_elsewhere_and_other_error_answers() -> None:
    blank = b'{"type":"about:blank","title":"I\'m a teapot","status":418,"detail":"no"}'
    with SessiongenClient(
        BASE_URL, transport=_answering(418, "application/problem+json", blank)
    ) as c:
        with pytest.raises(SessiongenError) as raised:
            c.health()
        assert type(raised.value) is SessiongenError and raised.value.problem_body
    page = b"<html>Bad Gateway</html>"
    with SessiongenClient(BASE_URL, transport=_answering(502, "text/html", page)) as c:
        with pytest.raises(httpx.HTTPStatusError):  # not our server speaking
            c.health()


async def test_transport_failures_are_httpx_errors_unchanged() -> None:
    from sessiongen.emulator import free_port

    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    with SessiongenClient(url) as c, pytest.raises(httpx.ConnectError):
        c.health()
    async with AsyncSessiongenClient(url) as ac:
        with pytest.raises(httpx.ConnectError):
            await ac.health()
