"""Every sessiongen error is data: it pickles and comes back equal (a worker process, a
task queue, a multiprocessing pool all pickle exceptions), message and fields alike."""

from __future__ import annotations

import pickle

import pytest
from sessiongen import errors

# Errors whose constructor takes more than a message, with an instance of each.
WITH_FIELDS: list[errors.SessiongenError] = [
    errors.SessionNotFound("s1"),
    errors.SessionExists("s1"),
    errors.AgentNotFound("a", ["build", "forge"]),
    errors.SessionBusy("s1", "process 7 on h"),
    errors.ContextOverflow(
        "too long", tokens=9, limit=3, provider_status=400, provider_request_id="req_1"
    ),
    errors.ProviderRateLimited(
        "slow down", provider_status=429, provider_request_id="req_2", provider_error_type="rate"
    ),
    errors.ProviderStreamInterrupted("cut", provider_status=200, provider_request_id="req_3"),
]


def _every_error_class() -> list[type[errors.SessiongenError]]:
    found: list[type[errors.SessiongenError]] = []
    todo = [errors.SessiongenError]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return sorted(set(found), key=lambda c: c.__name__)


def _instance(cls: type[errors.SessiongenError]) -> errors.SessiongenError:
    for error in WITH_FIELDS:
        if type(error) is cls:
            return error
    return cls("what went wrong")


@pytest.mark.parametrize("cls", _every_error_class(), ids=lambda c: c.__name__)
def test_every_error_pickles_and_round_trips(cls: type[errors.SessiongenError]) -> None:
    error = _instance(cls)
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is cls
    assert str(copy) == str(error) and copy.args == error.args
    assert vars(copy) == vars(error)
    assert copy.problem_details() == error.problem_details()


def test_a_session_error_keeps_its_id_and_message_once() -> None:
    """Unpickled, the message is not formatted a second time around itself."""
    copy = pickle.loads(pickle.dumps(errors.SessionNotFound("s1")))
    assert str(copy) == "session 's1' does not exist" and copy.session_id == "s1"


@pytest.mark.parametrize(
    ("cls", "member", "name"),
    [
        (errors.SessionNotFound, "session_id", "s'1"),
        (errors.SessionExists, "session_id", 's"2'),
        (errors.SessionBusy, "session_id", "s3"),
        (errors.AgentNotFound, "agent", "build"),
    ],
)
def test_a_rebuilt_error_reads_its_name_from_the_body_not_the_message(
    cls: type[errors.SessiongenError], member: str, name: str
) -> None:
    """The name travels as a body member: a detail quoting something else (or nothing) does
    not change it, and a body without the member gives ""."""
    error = cls(name)
    body = error.problem_details()
    assert body[member] == name
    rebuilt = errors.SessiongenError.from_problem(body | {"detail": "about 'other' and more"})
    assert type(rebuilt) is cls and getattr(rebuilt, member) == name
    bare = {k: v for k, v in body.items() if k != member}
    assert getattr(errors.SessiongenError.from_problem(bare), member) == ""


def test_a_provider_error_keeps_what_the_provider_sent_through_pickle_and_problem() -> None:
    error = errors.ProviderRateLimited(
        "slow down",
        provider_status=429,
        provider_request_id="req_9",
        provider_error_type="rate_limit_error",
        retry_after=2.5,
        headers={"Retry-After": "2.5", "X-Trace": "t"},
        body={"error": {"message": "slow down"}},
    )
    assert error.headers == {"retry-after": "2.5", "x-trace": "t"}
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.retry_after, copy.headers, copy.body) == (2.5, error.headers, error.body)
    rebuilt = errors.SessiongenError.from_problem(error.problem_details())
    assert isinstance(rebuilt, errors.ProviderRateLimited)
    assert (rebuilt.provider_status, rebuilt.provider_request_id) == (429, "req_9")
    assert (rebuilt.provider_error_type, rebuilt.retry_after) == ("rate_limit_error", 2.5)
    assert errors.ProviderRateLimited.problem_status == 503  # ours, beside the provider's 429


def test_the_status_of_our_answer_is_problem_status() -> None:
    """`problem_status` is ours; the provider's is `provider_status`: the two never share a
    name (no `http_status`, no bare `status`)."""
    error = errors.ProviderOverloaded("busy", provider_status=529)
    assert error.problem_status == 503 and error.provider_status == 529
    assert not hasattr(error, "http_status") and not hasattr(error, "status")
