"""The event-sourced store: contiguous revisions, atomic appends, consistent reads."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from sessiongen import SessionNotFound, SessionStore
from sessiongen.errors import SessionExists
from sessiongen.model import InputAdmitted, InputPromoted


@pytest.mark.parametrize("where", ["memory", "file"])
def test_revisions_are_contiguous_per_session(where: str, tmp_path: Path) -> None:
    store = SessionStore(":memory:" if where == "memory" else tmp_path / "s.db")
    store.create(agent="build", session_id="a")
    store.create(agent="build", session_id="b")
    store.append(
        "a", [InputAdmitted(input_id="i1", text="x"), InputAdmitted(input_id="i2", text="y")]
    )
    assert [rev for rev, _ in store.events("a")] == [1, 2, 3]
    assert [rev for rev, _ in store.events("b")] == [1]
    assert store.read("a").session.revision == 3
    assert [p.text for p in store.read("a").pending] == ["x", "y"]


def test_file_database_uses_wal_and_survives_reopen(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SessionStore(path)
    store.create(agent="build", session_id="a")
    store.append("a", [InputAdmitted(input_id="i1", text="hello")])
    assert store._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    store.close()
    again = SessionStore(path)
    assert again.read("a").pending[0].text == "hello"


def test_failed_append_changes_nothing() -> None:
    store = SessionStore()
    store.create(agent="build", session_id="a")
    store.append("a", [InputAdmitted(input_id="i1", text="x")])
    before = store.dump()
    # Promoting an input id twice violates the messages' unique id: the whole batch rolls back.
    with pytest.raises(Exception):  # noqa: B017
        store.append(
            "a",
            [
                InputAdmitted(input_id="i2", text="y"),
                InputPromoted(input_id="i1", message_id="m1"),
                InputPromoted(input_id="i2", message_id="m1"),
            ],
        )
    assert store.dump() == before


def test_unknown_session_is_typed() -> None:
    store = SessionStore()
    with pytest.raises(SessionNotFound):
        store.read("nope")
    with pytest.raises(SessionNotFound):
        store.append("nope", [InputAdmitted(input_id="i", text="x")])
    assert store.dump()["events"] == []


def test_promotion_projects_history_in_admission_order() -> None:
    store = SessionStore()
    store.create(agent="build", session_id="a")
    store.append(
        "a",
        [InputAdmitted(input_id="i1", text="first"), InputAdmitted(input_id="i2", text="second")],
    )
    store.append(
        "a",
        [
            InputPromoted(input_id="i1", message_id="m1"),
            InputPromoted(input_id="i2", message_id="m2"),
        ],
    )
    record = store.read("a")
    assert record.pending == ()
    assert [m.id for m in record.messages] == ["m1", "m2"]


def test_concurrent_creates_get_distinct_ids(tmp_path: Path) -> None:
    """Four writers on one file create sessions at once: the id is allocated inside the write
    transaction, so none collides (a count read before the transaction would)."""
    path = tmp_path / "s.db"
    SessionStore(path).close()
    barrier = threading.Barrier(4)

    def create_many() -> list[str]:
        store = SessionStore(path)
        barrier.wait()
        try:
            return [store.create(agent="build") for _ in range(25)]
        finally:
            store.close()

    with ThreadPoolExecutor(4) as pool:
        ids = [i for batch in pool.map(lambda _: create_many(), range(4)) for i in batch]
    assert len(ids) == len(set(ids)) == 100
    assert sorted(SessionStore(path).session_ids()) == sorted(ids)


def test_creating_an_existing_id_is_typed_and_changes_nothing() -> None:
    store = SessionStore()
    store.create(agent="build", session_id="a")
    before = store.dump()
    with pytest.raises(SessionExists):
        store.create(agent="build", session_id="a")
    assert store.dump() == before


def test_a_fork_of_a_fork_keeps_the_root() -> None:
    store = SessionStore()
    root = store.create(agent="build")
    child = store.create(agent="build", parent_id=root)
    grandchild = store.create(agent="build", parent_id=child)
    assert store.read(root).session.root_id == root
    assert store.read(child).session.root_id == root
    assert store.read(grandchild).session.root_id == root
    assert store.read(grandchild).session.parent_id == child
    with pytest.raises(SessionNotFound):
        store.create(agent="build", parent_id="missing")


@pytest.mark.parametrize("where", ["memory", "file"])
def test_many_threads_create_append_and_read_on_one_store_and_lose_nothing(
    where: str, tmp_path: Path
) -> None:
    """One store shared by threads (a server's executor, a keeper): every create, append and
    read runs whole, none interleaves another's transaction, and nothing is lost. Unguarded,
    four threads each creating 300 sessions lost most of them ("cannot start a transaction
    within a transaction")."""
    store = SessionStore(":memory:" if where == "memory" else tmp_path / "s.db")
    threads, sessions, inputs = 6, 60, 3
    start = threading.Barrier(threads)

    def work(t: int) -> None:
        start.wait()
        for k in range(sessions):
            sid = f"t{t}-s{k}"
            store.create(agent="build", session_id=sid)
            for j in range(inputs):
                store.append(sid, [InputAdmitted(input_id=f"{sid}-{j}", text=str(j))])
                assert store.read(sid).session.revision == j + 2
            assert store.exists(sid) and store.events(sid)[-1][0] == inputs + 1

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(work, range(threads)))  # re-raises the first thread's error
    ids = store.session_ids()
    assert sorted(ids) == sorted(f"t{t}-s{k}" for t in range(threads) for k in range(sessions))
    for sid in ids:
        assert [p.text for p in store.read(sid).pending] == [str(j) for j in range(inputs)]
