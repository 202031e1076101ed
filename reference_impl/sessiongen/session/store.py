"""The event-sourced SQLite store: one transaction appends events and updates projections.

Every durable change is `append(session_id, events)`: one write transaction that gives the
events the next contiguous per-session revisions and folds each into the projections
(sessions, messages, pending inputs, instruction state, usage totals). `read(session_id)` is
one read transaction, so a reader never sees half of a change. WAL mode lets readers run
while a writer holds the lock.

`read` keeps each session's last record (`_Snapshot`) and brings it forward by what changed
since its revision: rows of messages created after it, and rows of messages named by a later
event (settlement, tool results, interruptions are the only changes to an existing message).
The revision is checked in the read transaction, so a record is never newer or older than
the committed state that transaction sees, whichever connection or process wrote it.

Drain leases (`acquire_drain_lease`): one row per session being drained, naming the store
(`owner`), process and host that drain it, so processes sharing the file never drain one
session at once and crash recovery never interrupts a Step a live process is running. The
table is not an event projection: it is not in `dump()`, and `CREATE TABLE IF NOT EXISTS`
adds it to a file an older version wrote when it is opened.

A store that cannot write (issue 28, a full disk): every write transaction goes through
`_transaction`, the one place a storage failure of SQLite (SQLITE_FULL "database or disk is
full", an SQLITE_IOERR while writing, SQLITE_READONLY "attempt to write a readonly
database") becomes `InsufficientStorage` (507), after the transaction is rolled back: a
refused write leaves the file as it was, and the connection usable once the disk has room.
A store that cannot open its file for writing opens it read-only (`read_only`, with
`read_only_reason`): reads work, every write raises `InsufficientStorage` before it begins
(see `SessionStore.__init__` for how it opens).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sqlite3
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from urllib.parse import quote

from pydantic import TypeAdapter

from ..errors import InsufficientStorage, SessionBusy, SessionExists, SessionNotFound
from ..model import (
    AssistantMessage,
    CompactionCompleted,
    CompactionMessage,
    Event,
    InputAdmitted,
    InputPromoted,
    InstructionMessage,
    InstructionsCommitted,
    Message,
    PendingInput,
    Session,
    SessionCreated,
    StepInterrupted,
    StepSettled,
    StepStarted,
    TextPart,
    ToolCallPart,
    ToolExecuted,
    Usage,
    UserMessage,
)

EventBuilder = Callable[[int], Sequence[Event]]

logger = logging.getLogger("sessiongen.store")


@cache
def _event_adapter() -> TypeAdapter[Event]:
    # Built on first use, not at import: building a union's validator takes a while.
    return TypeAdapter[Event](Event)


@cache
def _message_adapter() -> TypeAdapter[Message]:
    return TypeAdapter[Message](Message)


SNAPSHOT_CACHE_SIZE = 128
"""How many sessions' last records a store keeps (least recently read dropped first)."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    session_id TEXT NOT NULL,
    revision INTEGER NOT NULL,
    type TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (session_id, revision)
);
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    agent TEXT NOT NULL,
    workspace TEXT,
    parent_id TEXT,
    root_id TEXT NOT NULL,
    revision INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS messages (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    id TEXT NOT NULL,
    kind TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (session_id, seq),
    UNIQUE (session_id, id)
);
CREATE TABLE IF NOT EXISTS pending_inputs (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    id TEXT NOT NULL,
    text TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
);
CREATE TABLE IF NOT EXISTS instruction_state (
    session_id TEXT PRIMARY KEY,
    initial TEXT NOT NULL,
    current TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS usage_totals (
    session_id TEXT PRIMARY KEY,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    cache_read_tokens INTEGER NOT NULL DEFAULT 0,
    cache_write_5m_tokens INTEGER NOT NULL DEFAULT 0,
    cache_write_1h_tokens INTEGER NOT NULL DEFAULT 0,
    calls INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS compactions (
    session_id TEXT NOT NULL,
    message_id TEXT NOT NULL,
    message_seq INTEGER NOT NULL,
    PRIMARY KEY (session_id, message_id)
);
CREATE TABLE IF NOT EXISTS deleted_sessions (
    id TEXT PRIMARY KEY,
    revision INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS drain_leases (
    session_id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    pid INTEGER NOT NULL,
    host TEXT NOT NULL,
    acquired_at REAL NOT NULL
);
"""

TABLES = (
    "events",
    "sessions",
    "messages",
    "pending_inputs",
    "instruction_state",
    "usage_totals",
    "compactions",
    "deleted_sessions",
)


@dataclass(frozen=True)
class DrainLease:
    """Who is draining a session: the store (`owner`, one per `SessionStore`), its process
    and host, and when it took the lease (seconds since the epoch; informative only)."""

    session_id: str
    owner: str
    pid: int
    host: str
    acquired_at: float


_HOST = socket.gethostname()
_held: dict[tuple[str, str], int] = {}
"""The leases this process's stores hold: (owner, session id) -> how many holds (the lease is
re-entrant per store, so a turn can hold it around admission and its Drain). The process
owns it, not a store: a lease row names a process (pid, host), so every store of this
process on the same file must see the others' holds, which no one store object could."""
_held_lock = threading.Lock()


def _pid_alive(pid: int) -> bool:
    """Whether process `pid` of this host is running (a zombie, dead but not yet reaped by
    its parent, is not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except (OSError, IndexError):  # no procfs (not Linux): kill(pid, 0) is the answer
        return True


def _lease_is_live(lease: DrainLease) -> bool:
    """Whether another holder may still be draining under `lease`: a store of this process
    that holds it, a running process of this host, or any process of another host (which
    cannot be checked from here). A lease whose process is dead, or one of this process
    that no store of it holds (left by a failed release, or by a dead process whose pid this
    one reuses), is free."""
    if lease.host != _HOST:
        return True
    if lease.pid == os.getpid():
        with _held_lock:
            return (lease.owner, lease.session_id) in _held
    return _pid_alive(lease.pid)


@dataclass(frozen=True)
class InstructionState:
    """Committed instruction values: `initial` is the baseline rendered into the system
    prompt (fixed at the first commit, so the cached prefix stays stable); `current` is
    the latest committed value of every source."""

    initial: dict[str, str]
    current: dict[str, str]


@dataclass(frozen=True)
class SessionRecord:
    """Everything durable about one session, read in one transaction."""

    session: Session
    messages: tuple[Message, ...]
    pending: tuple[PendingInput, ...]
    instructions: InstructionState | None
    usage: Usage
    calls: int


def load_message(data: str) -> Message:
    """One `messages` row's JSON as a Message (validated: the file may come from elsewhere)."""
    return _message_adapter().validate_json(data)


class SessionStore:
    """SQLite, WAL, event-sourced. Pass a file path or ":memory:".

    It opens the file for writing. When that fails for want of storage (a full disk: SQLite
    cannot size the WAL's shared-memory file; a read-only file, directory or mount) and the
    file is a store, it opens it read-only instead: `read_only` is then True and
    `read_only_reason` says why; reads work and every write raises `InsufficientStorage`
    before it begins, until the store is opened again with room on its disk. Read-only is
    `mode=ro` when SQLite can use the WAL's shared memory, else `immutable=1`, and that only
    while the WAL is empty (the file then holds every committed change): it reads the file
    without the WAL and without locks, so it reopens itself whenever the file or its WAL
    changes (another process wrote, once the disk had room). Anything else that cannot be
    opened raises SQLite's error (`sqlite3.Error`), as a new file on a full disk does.
    """

    def __init__(self, path: str | Path = ":memory:") -> None:
        self.path = str(path)
        self._snapshots: OrderedDict[str, SessionRecord] = OrderedDict()
        self._snapshots_lock = threading.Lock()
        self.owner = uuid.uuid4().hex
        """This store's name in the drain leases it takes."""
        self.read_only = False
        """Whether the store was opened read-only (it could not open its file for writing):
        every write raises `InsufficientStorage`."""
        self.read_only_reason: str | None = None
        """Why the store is read-only (None when it is not)."""
        self._immutable: _FileState | None = None
        """When opened with `immutable=1`: the file and WAL state it was opened at."""
        self._has_leases = True
        # One connection shared by every thread that uses this store, each use under one lock:
        # sqlite3 connections are not safe to share unguarded (two threads would interleave
        # their BEGINs), and a connection per thread would give ":memory:" a database each.
        self._lock = threading.RLock()
        self._db = self._open()

    def _open(self) -> sqlite3.Connection:
        """The connection: for writing, else (for want of storage) read-only, else SQLite's
        error of the attempt to open it for writing."""
        try:
            return self._open_writable()
        except sqlite3.Error as error:
            if self.path == ":memory:" or not _open_failure(error):
                raise
            if not os.path.isfile(self.path):  # nothing to read: a new store cannot be made
                raise
            db = self._open_read_only()
            if db is None:
                raise
            self.read_only = True
            self.read_only_reason = f"it cannot open its file for writing: {_described(error)}"
            return db

    def _open_writable(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("PRAGMA foreign_keys=ON")
            db.executescript(SCHEMA)
            # SQLite opens a file it may not write (a read-only mount) read-only, and reads
            # it through an existing WAL: only taking the write lock tells.
            try:
                db.execute("BEGIN IMMEDIATE")
                db.execute("ROLLBACK")
            except sqlite3.OperationalError as error:
                if _code(error) == sqlite3.SQLITE_READONLY:
                    self.read_only = True
                    self.read_only_reason = f"its file is read-only: {_described(error)}"
                elif _code(error) != sqlite3.SQLITE_BUSY:  # busy: another writer; writable
                    raise
        except BaseException:
            db.close()
            raise
        return db

    def _open_read_only(self) -> sqlite3.Connection | None:
        """A read-only connection to the store's file, or None: `mode=ro` (SQLite reads the
        WAL through its shared memory, which must exist or be creatable), else, only while
        the WAL is empty, `immutable=1` (the file alone, no shared memory, no locks)."""
        base = "file:" + quote(os.path.abspath(self.path))
        for immutable in (False, True):
            state = _file_state(self.path)
            if immutable and state[1] is not None and state[1][0] > 0:
                return None  # committed changes in the WAL: the file alone would lose them
            uri = f"{base}?immutable=1" if immutable else f"{base}?mode=ro"
            try:
                db = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
            except sqlite3.Error:
                continue
            try:
                tables = {str(r[0]) for r in db.execute("SELECT name FROM sqlite_master")}
            except sqlite3.Error:
                db.close()
                continue
            if not set(TABLES) <= tables:  # not a store (an empty file): nothing to serve
                db.close()
                return None
            self._has_leases = "drain_leases" in tables
            self._immutable = state if immutable else None
            return db
        return None

    def _connection(self) -> sqlite3.Connection:
        """The connection, for a caller holding the lock; an `immutable=1` one is reopened
        first when the file or its WAL changed since it was opened (it would not see it)."""
        if self._immutable is not None and _file_state(self.path) != self._immutable:
            db = self._open_read_only()
            if db is None:
                raise InsufficientStorage(
                    "the session store changed on disk while it was open read-only and cannot "
                    "be read again until it is opened with room on its disk"
                )
            self._db.close()
            self._db = db
        return self._db

    def close(self) -> None:
        with self._lock:
            self._db.close()

    @contextmanager
    def _transaction(self, mode: str) -> Iterator[sqlite3.Connection]:
        """One transaction, rolled back if anything fails, its COMMIT included. For a write
        (`IMMEDIATE`), the one place a storage failure becomes `InsufficientStorage`: a
        read-only store refuses before it begins, and SQLite's failure to write (a full
        disk, an I/O error, a read-only file) is raised as it, the file unchanged."""
        writing = mode != "DEFERRED"
        with self._lock:
            if writing and self.read_only:
                raise InsufficientStorage(
                    f"the session store is read-only ({self.read_only_reason}); nothing was written"
                )
            db = self._connection()
            try:
                db.execute(f"BEGIN {mode}")
                try:
                    yield db
                    db.execute("COMMIT")
                except BaseException:
                    # SQLite may have rolled back already (a full disk at COMMIT does).
                    if db.in_transaction:
                        with suppress(sqlite3.Error):
                            db.execute("ROLLBACK")
                    raise
            except sqlite3.Error as error:
                if writing and _storage_failure(error):
                    raise InsufficientStorage(
                        f"the session store cannot write: {_described(error)}; nothing was written"
                    ) from error
                raise

    # --- writes ----------------------------------------------------------------------------

    def append(self, session_id: str, events: Sequence[Event] | EventBuilder) -> int:
        """Append events atomically; returns the session's new revision.

        `events` may be a builder called with the current revision inside the write
        transaction, so ids derived from it are unique without a read-then-write race.
        """
        with self._transaction("IMMEDIATE") as db:
            row = db.execute("SELECT revision FROM sessions WHERE id = ?", (session_id,)).fetchone()
            if row is None:
                raise SessionNotFound(session_id)
            revision = int(row[0])
            if callable(events):
                events = events(revision)
            return _write(db, session_id, revision, events)

    def create(
        self,
        *,
        agent: str,
        workspace: str | None = None,
        parent_id: str | None = None,
        session_id: str | None = None,
    ) -> str:
        """Create a session in one write transaction and return its id.

        Without `session_id` the next free `ses_NNNNNN` id is allocated inside the transaction,
        so concurrent creates never collide. A fork's root is its parent's root, so a fork of
        a fork shares the cache identity of the tree's root.
        """
        with self._transaction("IMMEDIATE") as db:
            root_id = None
            if parent_id is not None:
                parent = db.execute(
                    "SELECT root_id FROM sessions WHERE id = ?", (parent_id,)
                ).fetchone()
                if parent is None:
                    raise SessionNotFound(parent_id)
                root_id = str(parent[0])
            if session_id is None:
                count = int(db.execute("SELECT COUNT(*) FROM sessions").fetchone()[0])
                session_id = f"ses_{count + 1:06d}"
                while _exists(db, session_id) or _deleted(db, session_id):
                    count += 1
                    session_id = f"ses_{count + 1:06d}"
            elif _exists(db, session_id):
                raise SessionExists(session_id)
            created = SessionCreated(
                session_id=session_id,
                agent=agent,
                workspace=workspace,
                parent_id=parent_id,
                root_id=root_id,
            )
            _write(db, session_id, 0, [created])
            return session_id

    def delete(self, session_id: str) -> None:
        """Remove a session and everything recorded for it, in one write transaction.

        The id is kept as a tombstone (with the revision it had), so an allocated id is never
        handed out again: a client holding it gets `SessionNotFound`, never another session,
        and a fork of the deleted session keeps a cache identity of its own. A fork's rows
        stay; its `parent_id` then names a deleted session.
        """
        with self._transaction("IMMEDIATE") as db:
            row = db.execute("SELECT revision FROM sessions WHERE id = ?", (session_id,)).fetchone()
            if row is None:
                raise SessionNotFound(session_id)
            for table in TABLES:
                if table != "deleted_sessions":
                    key = "id" if table == "sessions" else "session_id"
                    db.execute(f"DELETE FROM {table} WHERE {key} = ?", (session_id,))
            db.execute(
                "INSERT OR REPLACE INTO deleted_sessions (id, revision) VALUES (?, ?)",
                (session_id, int(row[0])),
            )
        self._forget(session_id)

    # --- drain leases ----------------------------------------------------------------------

    def acquire_drain_lease(self, session_id: str) -> DrainLease:
        """Take the session's drain lease for this store, in one write transaction; returns
        it. Re-entrant: a store that holds the lease takes it again (each take needs its own
        `release_drain_lease`). A lease left by a dead process of this host, or by this
        process without a store of it holding it, is free and taken over. Raises
        `SessionBusy` when a live holder has it (another process, or another store of this
        process; a lease of another host counts as live), `SessionNotFound` for an unknown
        session."""
        key = (self.owner, session_id)
        taken = False
        try:
            with self._transaction("IMMEDIATE") as db:
                if not _exists(db, session_id):
                    raise SessionNotFound(session_id)
                row = db.execute(
                    "SELECT owner, pid, host, acquired_at FROM drain_leases WHERE session_id = ?",
                    (session_id,),
                ).fetchone()
                lease = None if row is None else DrainLease(session_id, *row)
                with _held_lock:
                    mine = key in _held
                if lease is not None and lease.owner == self.owner and mine:
                    with _held_lock:
                        _held[key] += 1
                    return lease
                if lease is not None and lease.owner != self.owner and _lease_is_live(lease):
                    raise SessionBusy(session_id, f"process {lease.pid} on {lease.host}")
                lease = DrainLease(session_id, self.owner, os.getpid(), _HOST, time.time())
                db.execute(
                    "INSERT OR REPLACE INTO drain_leases"
                    " (session_id, owner, pid, host, acquired_at) VALUES (?, ?, ?, ?, ?)",
                    (session_id, lease.owner, lease.pid, lease.host, lease.acquired_at),
                )
                with _held_lock:  # before COMMIT: another store of this process sees it held
                    _held[key] = _held.get(key, 0) + 1
                taken = True
        except BaseException:
            if taken:  # the COMMIT failed: the lease was not taken
                with _held_lock:
                    _held.pop(key, None)
            raise
        return lease

    def release_drain_lease(self, session_id: str) -> None:
        """Give back one take of the session's drain lease; the last one deletes the row
        (only if it is still this store's)."""
        key = (self.owner, session_id)
        with _held_lock:
            holds = _held.get(key, 0) - 1
            if holds > 0:
                _held[key] = holds
                return
            _held.pop(key, None)  # first: a row this store cannot delete is stale, not held
        try:
            with self._transaction("IMMEDIATE") as db:
                db.execute(
                    "DELETE FROM drain_leases WHERE session_id = ? AND owner = ?",
                    (session_id, self.owner),
                )
        except InsufficientStorage as error:
            # The row stays, stale (no store holds it): this store takes it over at its next
            # drain, and another process once this one ends. Never fail the drain it ends.
            logger.warning("the drain lease of %s stays in the store: %s", session_id, error)

    def drain_lease(self, session_id: str) -> DrainLease | None:
        """The session's drain lease row as stored, live or stale, or None."""
        if not self._has_leases:  # a file of an older version, opened read-only
            return None
        with self._lock:
            row = (
                self._connection()
                .execute(
                    "SELECT owner, pid, host, acquired_at FROM drain_leases WHERE session_id = ?",
                    (session_id,),
                )
                .fetchone()
            )
        return None if row is None else DrainLease(session_id, *row)

    # --- reads -----------------------------------------------------------------------------

    def exists(self, session_id: str) -> bool:
        with self._lock:
            return _exists(self._connection(), session_id)

    def session_ids(self) -> list[str]:
        with self._lock:
            rows = self._connection().execute("SELECT id FROM sessions ORDER BY rowid")
            return [r[0] for r in rows]

    def read(self, session_id: str) -> SessionRecord:
        """A consistent view of one session: one read transaction.

        Only what changed since the session's last read record is loaded; the record at an
        unchanged revision is returned as is (records are immutable).
        """
        with self._transaction("DEFERRED") as db:
            row = db.execute(
                "SELECT agent, workspace, parent_id, root_id, revision,"
                " EXISTS (SELECT 1 FROM deleted_sessions WHERE id = sessions.id)"
                " FROM sessions WHERE id = ?",
                (session_id,),
            ).fetchone()
            if row is None:
                self._forget(session_id)
                raise SessionNotFound(session_id)
            revision = int(row[4])
            # A tombstoned id was deleted once and created again (by any connection): its
            # revisions restarted, so a record kept for it cannot be trusted or extended.
            reusable = not row[5]
            cached = self._snapshots.get(session_id) if reusable else None
            if cached is not None and cached.session.revision == revision:
                self._remember(session_id, cached)
                return cached
            if cached is not None and cached.session.revision < revision:
                messages = _changed_messages(db, session_id, cached)
            else:
                messages = _all_messages(db, session_id)
            record = _record(db, session_id, row, messages)
        if reusable and messages is not None:
            self._remember(session_id, record)
        else:
            self._forget(session_id)
        return record

    def _remember(self, session_id: str, record: SessionRecord) -> None:
        with self._snapshots_lock:
            self._snapshots[session_id] = record
            self._snapshots.move_to_end(session_id)
            while len(self._snapshots) > SNAPSHOT_CACHE_SIZE:
                self._snapshots.popitem(last=False)

    def _forget(self, session_id: str) -> None:
        with self._snapshots_lock:
            self._snapshots.pop(session_id, None)

    def events(self, session_id: str) -> list[tuple[int, Event]]:
        with self._lock:
            rows = (
                self._connection()
                .execute(
                    "SELECT revision, data FROM events WHERE session_id = ? ORDER BY revision",
                    (session_id,),
                )
                .fetchall()
            )
        return [(int(r[0]), _event_adapter().validate_json(r[1])) for r in rows]

    def dump(self) -> dict[str, list[tuple[object, ...]]]:
        """Every row of every table, in a stable order: "unchanged" means an equal dump."""
        with self._transaction("DEFERRED") as db:
            return {
                table: [tuple(r) for r in db.execute(f"SELECT * FROM {table} ORDER BY 1, 2")]
                for table in TABLES
            }


# --- storage failures ------------------------------------------------------------------------

_FileState = tuple[tuple[int, int] | None, tuple[int, int] | None]

_STORAGE_CODES = frozenset({sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_READONLY})
"""SQLite's primary result codes for a write its storage refused."""
_STORAGE_MESSAGES = (
    "database or disk is full",
    "disk i/o error",
    "attempt to write a readonly database",
)
_OPEN_CODES = _STORAGE_CODES | {sqlite3.SQLITE_CANTOPEN}
"""... and for a file it cannot open for writing (no WAL or shared-memory file can be made
in a read-only directory)."""


def _code(error: sqlite3.Error) -> int | None:
    """SQLite's primary result code of `error` (None for an error sqlite3 did not raise)."""
    code = getattr(error, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None


def _storage_failure(error: sqlite3.Error) -> bool:
    """Whether `error` is SQLite's storage refusing a write: the disk full (SQLITE_FULL,
    also past `max_page_count`), an I/O error (SQLITE_IOERR_*), a read-only file
    (SQLITE_READONLY_*). Known by its result code, else (an error built by hand) its
    message."""
    code = _code(error)
    if code is not None:
        return code in _STORAGE_CODES
    return any(m in str(error).lower() for m in _STORAGE_MESSAGES)


def _open_failure(error: sqlite3.Error) -> bool:
    code = _code(error)
    return _storage_failure(error) or code in _OPEN_CODES


def _described(error: sqlite3.Error) -> str:
    """`error`'s message with SQLite's name for it ("database or disk is full
    (SQLITE_FULL)")."""
    name = getattr(error, "sqlite_errorname", None)
    return f"{error} ({name})" if isinstance(name, str) else str(error)


def _file_state(path: str) -> _FileState:
    """(size, mtime) of the store's file and of its WAL (None when there is none)."""

    def state(name: str) -> tuple[int, int] | None:
        try:
            status = os.stat(name)
        except FileNotFoundError:
            return None
        return status.st_size, status.st_mtime_ns

    return state(path), state(path + "-wal")


# --- reading ---------------------------------------------------------------------------------

_Messages = tuple[Message, ...]


def _all_messages(db: sqlite3.Connection, session_id: str) -> _Messages | None:
    """Every message of the session in order, or None if their seqs are not 1..n (then a
    record of them cannot be extended by seq, and is not kept)."""
    rows = db.execute(
        "SELECT seq, data FROM messages WHERE session_id = ? ORDER BY seq", (session_id,)
    ).fetchall()
    messages = tuple(load_message(r[1]) for r in rows)
    contiguous = all(int(r[0]) == i for i, r in enumerate(rows, start=1))
    return messages if contiguous else None


def _changed_messages(
    db: sqlite3.Connection, session_id: str, cached: SessionRecord
) -> _Messages | None:
    """`cached.messages` brought forward to the current revision: messages created since
    (seq beyond the cached ones) and messages named by an event after the cached revision
    (the projector changes an existing message only for such an event)."""
    # Two index searches (new seqs; ids the later events name), not a scan of the session.
    rows = db.execute(
        "SELECT seq, data FROM messages WHERE session_id = ? AND seq > ?"
        " UNION SELECT m.seq, m.data FROM events AS e CROSS JOIN messages AS m"
        " ON m.session_id = e.session_id AND m.id = json_extract(e.data, '$.message_id')"
        " WHERE e.session_id = ? AND e.revision > ? ORDER BY 1",
        (session_id, len(cached.messages), session_id, cached.session.revision),
    ).fetchall()
    messages = list(cached.messages)
    for seq, data in rows:
        index = int(seq) - 1
        if index < len(messages):
            messages[index] = load_message(data)
        elif index == len(messages):
            messages.append(load_message(data))
        else:  # a gap: not a history this store wrote; read it whole
            return _all_messages(db, session_id)
    return tuple(messages)


def _record(
    db: sqlite3.Connection,
    session_id: str,
    row: tuple[object, ...],
    messages: _Messages | None,
) -> SessionRecord:
    """The record of the session row `row`, read in the caller's transaction."""
    session = Session(
        id=session_id,
        agent=row[0],
        workspace=row[1],
        parent_id=row[2],
        root_id=row[3],
        revision=row[4],
    )
    if messages is None:
        rows = db.execute(
            "SELECT data FROM messages WHERE session_id = ? ORDER BY seq", (session_id,)
        ).fetchall()
        messages = tuple(load_message(r[0]) for r in rows)
    pending = tuple(
        PendingInput(id=r[0], text=r[1])
        for r in db.execute(
            "SELECT id, text FROM pending_inputs WHERE session_id = ? ORDER BY seq",
            (session_id,),
        )
    )
    state_row = db.execute(
        "SELECT initial, current FROM instruction_state WHERE session_id = ?",
        (session_id,),
    ).fetchone()
    usage_row = db.execute(
        "SELECT input_tokens, output_tokens, cache_read_tokens, cache_write_5m_tokens,"
        " cache_write_1h_tokens, calls FROM usage_totals WHERE session_id = ?",
        (session_id,),
    ).fetchone()
    instructions = (
        InstructionState(initial=json.loads(state_row[0]), current=json.loads(state_row[1]))
        if state_row
        else None
    )
    usage = (
        Usage(
            input_tokens=usage_row[0],
            output_tokens=usage_row[1],
            cache_read_tokens=usage_row[2],
            cache_write_5m_tokens=usage_row[3],
            cache_write_1h_tokens=usage_row[4],
        )
        if usage_row
        else Usage()
    )
    return SessionRecord(
        session=session,
        messages=messages,
        pending=pending,
        instructions=instructions,
        usage=usage,
        calls=usage_row[5] if usage_row else 0,
    )


# --- the projector: the one place events become projections ----------------------------------


def _exists(db: sqlite3.Connection, session_id: str) -> bool:
    return db.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is not None


def _deleted(db: sqlite3.Connection, session_id: str) -> bool:
    query = "SELECT 1 FROM deleted_sessions WHERE id = ?"
    return db.execute(query, (session_id,)).fetchone() is not None


def _write(db: sqlite3.Connection, session_id: str, revision: int, events: Sequence[Event]) -> int:
    """Insert `events` after `revision` and project each; returns the new revision."""
    for event in events:
        revision += 1
        db.execute(
            "INSERT INTO events (session_id, revision, type, data) VALUES (?, ?, ?, ?)",
            (session_id, revision, event.type, event.model_dump_json()),
        )
        _project(db, session_id, event)
    db.execute("UPDATE sessions SET revision = ? WHERE id = ?", (revision, session_id))
    return revision


def _next_seq(db: sqlite3.Connection, table: str, session_id: str) -> int:
    row = db.execute(
        f"SELECT COALESCE(MAX(seq), 0) + 1 FROM {table} WHERE session_id = ?", (session_id,)
    ).fetchone()
    return int(row[0])


def _insert_message(db: sqlite3.Connection, session_id: str, message: Message) -> int:
    seq = _next_seq(db, "messages", session_id)
    db.execute(
        "INSERT INTO messages (session_id, seq, id, kind, data) VALUES (?, ?, ?, ?, ?)",
        (session_id, seq, message.id, message.kind, message.model_dump_json()),
    )
    return seq


def _load_assistant(db: sqlite3.Connection, session_id: str, message_id: str) -> AssistantMessage:
    row = db.execute(
        "SELECT data FROM messages WHERE session_id = ? AND id = ?", (session_id, message_id)
    ).fetchone()
    message = load_message(row[0])
    assert isinstance(message, AssistantMessage)
    return message


def _save_message(db: sqlite3.Connection, session_id: str, message: Message) -> None:
    db.execute(
        "UPDATE messages SET data = ? WHERE session_id = ? AND id = ?",
        (message.model_dump_json(), session_id, message.id),
    )


def _add_usage(db: sqlite3.Connection, session_id: str, usage: Usage) -> None:
    db.execute(
        "UPDATE usage_totals SET input_tokens = input_tokens + ?,"
        " output_tokens = output_tokens + ?, cache_read_tokens = cache_read_tokens + ?,"
        " cache_write_5m_tokens = cache_write_5m_tokens + ?,"
        " cache_write_1h_tokens = cache_write_1h_tokens + ?, calls = calls + 1"
        " WHERE session_id = ?",
        (
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_read_tokens,
            usage.cache_write_5m_tokens,
            usage.cache_write_1h_tokens,
            session_id,
        ),
    )


def _project(db: sqlite3.Connection, session_id: str, event: Event) -> None:
    if isinstance(event, SessionCreated):
        db.execute(
            "INSERT INTO sessions (id, agent, workspace, parent_id, root_id, revision)"
            " VALUES (?,?,?,?,?,0)",
            (
                session_id,
                event.agent,
                event.workspace,
                event.parent_id,
                event.root_id or session_id,
            ),
        )
        db.execute("INSERT INTO usage_totals (session_id) VALUES (?)", (session_id,))
    elif isinstance(event, InputAdmitted):
        seq = _next_seq(db, "pending_inputs", session_id)
        db.execute(
            "INSERT INTO pending_inputs (session_id, seq, id, text) VALUES (?, ?, ?, ?)",
            (session_id, seq, event.input_id, event.text),
        )
    elif isinstance(event, InputPromoted):
        row = db.execute(
            "SELECT text FROM pending_inputs WHERE session_id = ? AND id = ?",
            (session_id, event.input_id),
        ).fetchone()
        db.execute(
            "DELETE FROM pending_inputs WHERE session_id = ? AND id = ?",
            (session_id, event.input_id),
        )
        _insert_message(
            db, session_id, UserMessage(id=event.message_id, parts=(TextPart(text=row[0]),))
        )
    elif isinstance(event, InstructionsCommitted):
        values = json.dumps(event.values)
        db.execute(
            "INSERT INTO instruction_state (session_id, initial, current) VALUES (?, ?, ?)"
            " ON CONFLICT(session_id) DO UPDATE SET current = excluded.current",
            (session_id, values, values),
        )
        if event.update is not None and event.message_id is not None:
            _insert_message(
                db, session_id, InstructionMessage(id=event.message_id, text=event.update)
            )
    elif isinstance(event, StepStarted):
        _insert_message(
            db,
            session_id,
            AssistantMessage(id=event.message_id, step=event.step, model=event.model),
        )
    elif isinstance(event, StepSettled):
        message = _load_assistant(db, session_id, event.message_id)
        _save_message(
            db,
            session_id,
            message.model_copy(
                update={
                    "parts": event.parts,
                    "completed": True,
                    "finish_reason": event.finish_reason,
                    "usage": event.usage,
                }
            ),
        )
        _add_usage(db, session_id, event.usage)
    elif isinstance(event, ToolExecuted):
        message = _load_assistant(db, session_id, event.message_id)
        parts = tuple(
            p.model_copy(
                update={"state": "error" if event.is_error else "completed", "result": event.result}
            )
            if isinstance(p, ToolCallPart) and p.id == event.call_id
            else p
            for p in message.parts
        )
        _save_message(db, session_id, message.model_copy(update={"parts": parts}))
    elif isinstance(event, StepInterrupted):
        message = _load_assistant(db, session_id, event.message_id)
        parts = event.parts or message.parts
        parts = tuple(
            p.model_copy(update={"state": "error", "result": f"interrupted: {event.reason}"})
            if isinstance(p, ToolCallPart) and p.state == "pending"
            else p
            for p in parts
        )
        _save_message(
            db, session_id, message.model_copy(update={"parts": parts, "interrupted": True})
        )
    elif isinstance(event, CompactionCompleted):
        seq = _insert_message(
            db, session_id, CompactionMessage(id=event.message_id, summary=event.summary)
        )
        db.execute(
            "INSERT INTO compactions (session_id, message_id, message_seq) VALUES (?, ?, ?)",
            (session_id, event.message_id, seq),
        )
        _add_usage(db, session_id, event.usage)
