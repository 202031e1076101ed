"""The emulator at scale, by counting work and bytes, never by timing: the cache store's
`apply` does the same work with 1 or 100,000 live entries, expiry pops only what dies, and
the request log is bounded (oldest dropped and counted), paged by `since` / `limit`, and
costs little more than each request's raw body."""

from __future__ import annotations

import gc
import json
import sys
import tracemalloc
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

import httpx2
import pytest
from sessiongen.cache import CacheStore
from sessiongen.cache import store as store_module
from sessiongen.cache.prefix import TTL
from sessiongen.emulator import EmulatorState, create_app
from sessiongen.emulator.app import LOG_DROPPED_HEADER

MODEL = "claude-sonnet-4-6"
MIN = 1024
STORE_FILE = store_module.__file__


# --- counting the store's work ----------------------------------------------------------------


@contextmanager
def store_work() -> Iterator[Counter[str]]:
    """Count what code in `cache/store.py` executes: Python calls and lines (a loop over
    entries shows up as one line event per pass, a comprehension as calls and lines) and the
    C functions it calls (dict methods, `heappush`, `heappop`, ...), by name."""
    work: Counter[str] = Counter()

    def lines(frame: FrameType, event: str, arg: Any) -> Callable[..., Any] | None:
        if event == "line":
            work["lines"] += 1
        return lines

    def calls(frame: FrameType, event: str, arg: Any) -> Callable[..., Any] | None:
        if event == "call" and frame.f_code.co_filename == STORE_FILE:
            work["calls"] += 1
            return lines
        return None

    def c_calls(frame: FrameType, event: str, arg: Any) -> None:
        if event == "c_call" and frame.f_code.co_filename == STORE_FILE:
            work[f"c:{getattr(arg, '__name__', '?')}"] += 1

    old_trace, old_profile = sys.gettrace(), sys.getprofile()
    sys.settrace(calls)
    sys.setprofile(c_calls)
    try:
        yield work
    finally:
        sys.setprofile(old_profile)
        sys.settrace(old_trace)


def prompt(tag: str, n: int = 50, ttl: TTL = "5m") -> list[tuple[str, int, TTL | None]]:
    blocks: list[tuple[str, int, TTL | None]] = [(f"{tag}/{k}", 60, None) for k in range(n - 1)]
    return [*blocks, (f"{tag}/{n - 1}", 60, ttl)]


def filled(live: int) -> CacheStore:
    """A store with `live` 1h entries written at 0 (alive until 3600): prompts of up to four
    1h breakpoints, each of which writes one."""
    store = CacheStore()
    for start in range(0, live, 4):
        blocks: list[tuple[str, int, TTL | None]] = [
            (f"live{k}", 2000, "1h") for k in range(start, min(start + 4, live))
        ]
        store.apply(blocks, model=MODEL, now=0.0, min_tokens=MIN)
    assert len(store._entries) == live
    return store


def workload(store: CacheStore) -> Counter[str]:
    """The work of a mix of applies: new prompts (misses, writes), repeats (hits, refreshes),
    a prompt written while its writer's response has not begun (in flight), and the test's
    own 5m entries expiring (at 1000 the ones written at 10..29 are dead)."""
    with store_work() as work:
        for k in range(20):
            store.apply(prompt(f"p{k}"), model=MODEL, now=10.0 + k, min_tokens=MIN)
            store.apply(prompt(f"p{k}"), model=MODEL, now=10.5 + k, min_tokens=MIN)
        store.apply(prompt("inflight"), model=MODEL, now=50.0, min_tokens=MIN, ttft=5.0)
        store.apply(prompt("inflight", ttl="1h"), model=MODEL, now=51.0, min_tokens=MIN)
        store.apply(prompt("late"), model=MODEL, now=1000.0, min_tokens=MIN)
    return work


def test_apply_does_the_same_work_with_1_or_100000_live_entries() -> None:
    one, many = filled(1), filled(100_000)
    work_one, work_many = workload(one), workload(many)
    assert work_one == work_many
    # Work in proportion to the requests: 43 applies of 50 blocks, a few heap operations each.
    assert work_one["lines"] < 43 * 200
    assert work_one["c:heappop"] == 21  # the 21 dead 5m entries (20 + the in-flight one's)
    # Nothing of the store was swept: the live entries are all still there.
    assert len(many._entries) == 100_000 + 2  # "inflight" (1h now) and "late"


def test_expiry_pops_only_the_entries_that_die() -> None:
    """10 of 100,010 entries die: the apply after their TTL pops 10 records."""
    store = filled(100_000)
    for k in range(10):
        store.apply(prompt(f"short{k}"), model=MODEL, now=1.0, min_tokens=MIN)
    with store_work() as work:
        result = store.apply(prompt("short0"), model=MODEL, now=400.0, min_tokens=MIN)
    assert work["c:heappop"] == 10 and work["c:heappush"] == 1  # and the rewrite
    assert result.usage.cache_read_input_tokens == 0 and result.breakpoints[0].written
    assert len(store._entries) == 100_001


def test_the_store_holds_only_live_entries() -> None:
    """A steady stream of 5m writes: the store never holds a dead entry after an apply."""
    store = CacheStore()
    for k in range(3000):
        store.apply([(f"e{k}", 2000, "5m")], model=MODEL, now=float(k), min_tokens=MIN)
        assert len(store._entries) == min(k + 1, 301)
        assert len(store._expiry) == len(store._entries)  # one record per entry


def test_a_read_after_the_clock_moved_back_shortens_the_life() -> None:
    """A read at an earlier time refreshes the entry to an earlier expiry; the entry must
    die at that expiry, not at the later one it had (the eager rule of the docstring)."""
    store = CacheStore()
    p = prompt("p")
    store.apply(p, model=MODEL, now=0.0, min_tokens=MIN)
    assert store.apply(p, model=MODEL, now=250.0, min_tokens=MIN).read_tokens  # until 550
    # Past its first expiry (300): its record is popped and pushed again for 550.
    store.apply(prompt("other"), model=MODEL, now=301.0, min_tokens=MIN)
    assert store.apply(p, model=MODEL, now=100.0, min_tokens=MIN).read_tokens  # until 400
    assert store.entries()[0].expires_at == 400.0
    late = store.apply(p, model=MODEL, now=450.0, min_tokens=MIN)
    assert late.read_tokens == 0 and late.breakpoints[0].written  # dead, so written anew
    entry = store.entries()[-1]
    assert (entry.written_at, entry.expires_at, entry.hits) == (450.0, 750.0, 0)
    assert store.apply(p, model=MODEL, now=460.0, min_tokens=MIN).read_tokens


def test_linger_and_clear_keep_their_behaviour() -> None:
    store = CacheStore(linger=100.0)
    p = prompt("p")
    store.apply(p, model=MODEL, now=0.0, min_tokens=MIN)
    assert store.apply(p, model=MODEL, now=399.0, min_tokens=MIN).read_tokens  # 300 + 100
    store.apply(prompt("q"), model=MODEL, now=900.0, min_tokens=MIN)
    assert [e.prefix_hash for e in store.entries()] == ["q/49"]  # p died at 799
    store.clear()
    assert store.entries() == [] and store._expiry == []


# --- the request log --------------------------------------------------------------------------


HEADERS = {
    "content-type": "application/json",
    "x-api-key": "sk-ant-secret-key",
    "anthropic-version": "2023-06-01",
}


def body(tag: str, turns: int = 50) -> bytes:
    """A Messages request of `turns` messages, about 14 KB."""
    messages = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"{tag} {i}: " + "lorem " * 41}
        for i in range(turns - 1)
    ]
    messages.append({"role": "user", "content": "And now?"})
    return json.dumps({"model": MODEL, "max_tokens": 8, "messages": messages}).encode()


@contextmanager
def client(state: EmulatorState) -> Iterator[httpx2.Client]:
    from sessiongen.emulator import SyncASGITransport

    transport = SyncASGITransport(create_app(state))
    with httpx2.Client(transport=transport, base_url="http://emulator") as http:
        yield http


def send(http: httpx2.Client, count: int, tag: str = "q") -> None:
    for k in range(count):
        response = http.post("/v1/messages", content=body(f"{tag}{k}", 3), headers=HEADERS)
        assert response.status_code == 200


def ids(entries: list[dict[str, Any]]) -> list[str]:
    return [entry["id"] for entry in entries]


def test_capacity_drops_the_oldest_and_counts_them() -> None:
    state = EmulatorState(log_capacity=3)
    with client(state) as http:
        send(http, 5)
        response = http.get("/_emulator/requests")
        assert response.headers[LOG_DROPPED_HEADER] == "2"
        served = response.json()
        assert ids(served["requests"]) == ["req_000003", "req_000004", "req_000005"]
        assert (served["dropped"], served["capacity"]) == (2, 3)
        assert state.log_status() == {"logged": 3, "dropped": 2, "capacity": 3}
        assert http.post("/_emulator/reset").status_code == 200
        assert http.get("/_emulator/requests").headers[LOG_DROPPED_HEADER] == "0"
        assert state.log_status() == {"logged": 0, "dropped": 0, "capacity": 3}


def test_unbounded_and_invalid_capacity() -> None:
    state = EmulatorState(log_capacity=None)
    with client(state) as http:
        send(http, 4)
        served = http.get("/_emulator/requests").json()
    assert (len(served["requests"]), served["dropped"], served["capacity"]) == (4, 0, None)
    assert len(EmulatorState().requests()) == 0
    with pytest.raises(ValueError, match="log_capacity"):
        EmulatorState(log_capacity=-1)


def test_since_and_limit_page_through_the_log() -> None:
    state = EmulatorState()
    with client(state) as http:
        send(http, 6)

        def page(**params: int) -> list[str]:
            response = http.get("/_emulator/requests", params=params)
            assert response.status_code == 200, response.text
            return ids(response.json()["requests"])

        assert page(since=2, limit=2) == ["req_000003", "req_000004"]
        assert page(since=4) == ["req_000005", "req_000006"]
        assert page(since=6) == [] and page(limit=0) == []
        assert page(limit=1) == ["req_000001"]
        assert page() == [f"req_{k:06d}" for k in range(1, 7)]
        for bad in ({"since": -1}, {"limit": -1}, {"since": "req_000002"}):
            response = http.get("/_emulator/requests", params=bad)
            assert response.status_code == 400, bad
            assert response.json()["error"]["type"] == "invalid_request_error"
    assert ids(state.requests(since=5, limit=9)) == ["req_000006"]


def test_each_read_is_a_fresh_copy() -> None:
    state = EmulatorState()
    with client(state) as http:
        send(http, 1)
    first = state.requests()[0]
    first["body"]["model"] = "changed"
    first["headers"]["x-api-key"] = "leaked"
    again = state.requests()[0]
    assert again["body"]["model"] == MODEL and again["headers"]["x-api-key"] == "[redacted]"


def test_a_logged_request_retains_little_more_than_its_raw_body() -> None:
    """Bytes retained by the whole emulator per logged request, through the app, at most
    1.2 times the raw body (a 50-message prompt): the log keeps the bytes received, not a
    parsed copy nor a base64 one."""
    state = EmulatorState()
    requests = 30
    with client(state) as http:
        send(http, 3, "warm")  # imports and first-use caches
        sent = [body(f"m{k}") for k in range(requests)]
        size = sum(map(len, sent)) / requests
        assert size > 14_000
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.take_snapshot()
            for raw in sent:
                response = http.post("/v1/messages", content=raw, headers=HEADERS)
                assert response.status_code == 200
            del raw, response
            gc.collect()
            after = tracemalloc.take_snapshot()
        finally:
            tracemalloc.stop()
    sent.clear()  # the test's own copies were allocated before the first snapshot
    retained = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    assert retained / requests <= 1.2 * size, retained / requests / size
    assert len(state.requests()) == requests + 3


def test_a_late_entry_takes_its_arrival_place_and_the_bound_drops_the_oldest() -> None:
    """A held request is logged after later arrivals, at its place by arrival; the bound
    then drops the oldest by arrival, which may be the late entry itself."""

    def log(state: EmulatorState, number: int) -> None:
        state.record(
            request_id=f"req_{number:06d}",
            path="/v1/messages",
            started_at=0.0,
            status=200,
            usage=None,
            stream=False,
            headers={"Authorization": "Bearer secret"},
            raw_body=b"{}",
        )

    state = EmulatorState(log_capacity=2)
    for number in (1, 3, 2):
        log(state, number)
    assert ids(state.requests()) == ["req_000002", "req_000003"]
    log(state, 1)  # older than everything kept: dropped at once
    assert ids(state.requests()) == ["req_000002", "req_000003"]
    assert state.log_status()["dropped"] == 2
    assert state.requests()[0]["headers"] == {"authorization": "[redacted]"}
