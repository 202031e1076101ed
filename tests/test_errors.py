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
