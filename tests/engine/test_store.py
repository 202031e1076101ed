"""The event-sourced store: contiguous revisions, atomic appends, consistent reads."""

from __future__ import annotations

import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from sessiongen import InsufficientStorage, SessionNotFound, SessionStore
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


# --- a store that cannot write (issue 28: a full disk) -----------------------------------------


def _sql(path: Path) -> bytes:
    """The file's every table, row and schema object, over a connection of its own."""
    with sqlite3.connect(path) as db:
        return "\n".join(db.iterdump()).encode()


def test_a_full_disk_refuses_a_write_as_insufficient_storage_and_changes_nothing(
    tmp_path: Path,
) -> None:
    """A real SQLITE_FULL (the connection's `max_page_count` at the file's size, as a full
    disk refuses new pages): `InsufficientStorage` with SQLite's error as its cause, the
    file as it was, and the store writes again once there is room (no transaction left
    open)."""
    path = tmp_path / "s.db"
    store = SessionStore(path)
    store.create(agent="build", session_id="a")
    store.append("a", [InputAdmitted(input_id="i1", text="kept")])
    before, before_sql = store.dump(), _sql(path)
    pages = store._db.execute("PRAGMA page_count").fetchone()[0]
    store._db.execute(f"PRAGMA max_page_count = {pages}")
    big = InputAdmitted(input_id="i2", text="x" * 200_000)  # needs pages the file lacks
    with pytest.raises(InsufficientStorage) as refused:
        store.append("a", [big])
    cause = refused.value.__cause__
    assert isinstance(cause, sqlite3.OperationalError)
    assert cause.sqlite_errorname == "SQLITE_FULL"
    assert refused.value.problem_status == 507
    assert "database or disk is full" in str(refused.value)
    with pytest.raises(InsufficientStorage):
        store.create(agent="build", session_id="b" * 100_000)
    assert store.dump() == before
    assert _sql(path) == before_sql
    store._db.execute("PRAGMA max_page_count = 1073741823")  # room again
    assert store.append("a", [big]) == 3
    assert [p.text[:4] for p in store.read("a").pending] == ["kept", "xxxx"]


def _fail_writable_open(monkeypatch: pytest.MonkeyPatch, message: str) -> None:
    """Opening for writing fails as SQLite fails on a full disk (no room for the WAL's
    shared-memory file) or a read-only directory."""

    def refuse(self: SessionStore) -> sqlite3.Connection:
        raise sqlite3.OperationalError(message)

    monkeypatch.setattr(SessionStore, "_open_writable", refuse)


def test_a_store_that_cannot_open_for_writing_opens_read_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.db"
    writer = SessionStore(path)
    writer.create(agent="build", session_id="a")
    writer.append("a", [InputAdmitted(input_id="i1", text="hello")])
    writer.close()
    before = _sql(path)
    _fail_writable_open(monkeypatch, "disk I/O error")
    store = SessionStore(path)
    assert store.read_only
    assert store.read_only_reason is not None and "disk I/O error" in store.read_only_reason
    assert store.read("a").pending[0].text == "hello"
    assert store.session_ids() == ["a"] and store.exists("a")
    assert len(store.events("a")) == 2 and store.drain_lease("a") is None
    dump = store.dump()
    writes: list[Any] = [
        lambda: store.append("a", [InputAdmitted(input_id="i2", text="x")]),
        lambda: store.create(agent="build"),
        lambda: store.delete("a"),
        lambda: store.acquire_drain_lease("a"),
    ]
    for write in writes:
        with pytest.raises(InsufficientStorage, match="read-only"):
            write()
    assert store.dump() == dump
    store.close()
    assert _sql(path) == before


def test_a_new_store_that_cannot_be_written_raises_sqlites_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing to read: no read-only store of a file that is not one."""
    _fail_writable_open(monkeypatch, "database or disk is full")
    with pytest.raises(sqlite3.OperationalError):
        SessionStore(tmp_path / "new.db")
    (tmp_path / "empty.db").touch()
    with pytest.raises(sqlite3.OperationalError):
        SessionStore(tmp_path / "empty.db")


def test_an_immutable_read_only_store_reopens_when_the_file_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where SQLite cannot even make the WAL's shared memory (a full disk, `mode=ro` refused
    too), the store reads the file alone (`immutable=1`), which holds every committed change
    while the WAL is empty; when another process writes once the disk has room, the file
    changes and the store reads it again instead of serving what it had."""
    path = tmp_path / "s.db"
    writer = SessionStore(path)
    writer.create(agent="build", session_id="a")
    writer.close()
    real_connect = sqlite3.connect

    def connect(database: Any, *args: Any, **kwargs: Any) -> sqlite3.Connection:
        if "mode=ro" in str(database):
            raise sqlite3.OperationalError("disk I/O error")
        connection: sqlite3.Connection = real_connect(database, *args, **kwargs)
        return connection

    _fail_writable_open(monkeypatch, "disk I/O error")
    monkeypatch.setattr(sqlite3, "connect", connect)  # the store's too
    store = SessionStore(path)
    assert store.read_only and store._immutable is not None
    assert store.read("a").session.revision == 1
    monkeypatch.undo()  # the disk has room again: another process writes
    other = SessionStore(path)
    other.append("a", [InputAdmitted(input_id="i1", text="later")])
    assert store.read("a").session.revision == 2  # seen while the WAL holds it: mode=ro
    other.append("a", [InputAdmitted(input_id="i2", text="again")])
    other.close()  # checkpointed into the file, the WAL gone
    assert [p.text for p in store.read("a").pending] == ["later", "again"]
    store.close()
