"""SessionStore.delete, which DELETE /api/session/{id} uses: one transaction removes every
row of the session, and its id is never allocated again."""

from __future__ import annotations

import pytest
from sessiongen import SessionNotFound, SessionStore
from sessiongen.model import InputAdmitted


def test_delete_removes_every_row_and_keeps_a_tombstone() -> None:
    store = SessionStore()
    first = store.create(agent="build")
    second = store.create(agent="build")
    fork = store.create(agent="build", parent_id=second)
    store.append(second, [InputAdmitted(input_id="i1", text="hello")])
    kept = {t: [r for r in rows if r[0] != second] for t, rows in store.dump().items()}
    store.delete(second)
    dump = store.dump()
    assert dump["deleted_sessions"] == [(second, 2)]
    assert {t: rows for t, rows in dump.items() if t != "deleted_sessions"} == {
        t: rows for t, rows in kept.items() if t != "deleted_sessions"
    }
    assert store.read(fork).session.root_id == second  # the fork keeps its cache identity
    assert store.read(first).session.id == first
    with pytest.raises(SessionNotFound):
        store.read(second)
    with pytest.raises(SessionNotFound):
        store.delete(second)


def test_a_deleted_id_is_never_allocated_again() -> None:
    store = SessionStore()
    ids = [store.create(agent="build") for _ in range(3)]
    store.delete(ids[-1])  # the newest: a count-based id would come back
    store.delete(ids[0])
    fresh = {store.create(agent="build") for _ in range(3)}
    assert fresh.isdisjoint(ids)
    assert len(fresh) == 3


def test_a_failed_delete_changes_nothing() -> None:
    store = SessionStore()
    store.create(agent="build", session_id="a")
    before = store.dump()
    with pytest.raises(SessionNotFound):
        store.delete("b")
    assert store.dump() == before
