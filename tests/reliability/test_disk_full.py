"""A full disk (issue 28): refused writes are typed, change nothing, and reads go on.

The real thing: `sessiongen serve` runs on a small tmpfs mounted in a mount namespace of its
own (`unshare --mount`, held by a sleeping process; the server joins it with `nsenter`, and
this process reaches its files through `/proc/PID/root`), so nothing leaks onto the machine.
A filler file takes the last byte (a real ENOSPC), then:

- a prompt is answered 507 problem+json `insufficient-storage`, so are a create and a
  delete, and the store's SQL dump is byte-identical before and after; reads are served;
- the filler removed, the same prompt is sent again and succeeds: the session holds it once,
  and the turn's reply answers exactly that one prompt;
- the server stopped and the disk filled again, `sessiongen serve` starts on it: the store
  opens read-only (SQLite cannot size the WAL's shared-memory file), the server says so
  once, serves GET /api/session/{id} and its messages, and answers 507 to every write.

In-process, a real SQLITE_FULL (the connection's `max_page_count` reached) at a chosen write
of a turn shows the prompt is stored with its Step or not at all: refused when the Step
opens, nothing of the turn is in the file; refused after it opened, the error says the prompt
was stored (not to send it again), and the next turn carries it once.

Without mount namespaces (no `unshare`, not permitted here) the process test is skipped with
the reason; the in-process ones always run.
"""

from __future__ import annotations

import errno
import inspect
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from sessiongen import InsufficientStorage
from sessiongen.lab import EmulatorLab, emulator_lab
from sessiongen.model import AssistantMessage, Event, StepSettled, StepStarted, UserMessage
from sessiongen.session import store as store_module

from ._figures import record
from ._servers import ROOT, Worker

PROBLEM = "https://sessiongen.dev/problems/insufficient-storage"
TMPFS_SIZE = "4m"
ALL_PAGES = 1073741823  # SQLite's largest max_page_count: no limit


# --- in-process: a real SQLITE_FULL at a chosen write of a turn ------------------------------


def sql_dump(path: Path) -> bytes:
    """Every table, row and schema object of the SQLite file, as SQL text, over a connection
    of its own (read-only; the file alone, when SQLite cannot use the WAL's shared memory
    and the WAL is empty)."""
    base = "file:" + quote(str(path))
    wal = Path(f"{path}-wal")
    for uri in (f"{base}?mode=ro", f"{base}?immutable=1"):
        if "immutable" in uri and wal.exists() and wal.stat().st_size:
            break
        try:
            with closing(sqlite3.connect(uri, uri=True)) as db:
                return "\n".join(db.iterdump()).encode()
        except sqlite3.OperationalError:
            continue
    raise AssertionError(f"{path} cannot be read")


@pytest.fixture
def disk_fills_at(monkeypatch: pytest.MonkeyPatch) -> Callable[[type[Event]], list[int]]:
    """`disk_fills_at(EventType)`: the next write that projects an event of that type meets a
    full disk. Real SQLite: the connection's page limit is set to the file's size and a page
    is asked for, so SQLITE_FULL comes from inside the write transaction; the limit is lifted
    again after. Returns a list that counts the refusals."""
    project = store_module._project
    armed: list[type[Event]] = []
    refused: list[int] = []

    def full_disk(db: sqlite3.Connection, session_id: str, event: Event) -> None:
        if armed and isinstance(event, armed[0]):
            armed.clear()
            pages = db.execute("PRAGMA page_count").fetchone()[0]
            db.execute(f"PRAGMA max_page_count = {pages}")
            try:
                db.execute("CREATE TABLE disk_filler (data BLOB)")
                db.execute("INSERT INTO disk_filler VALUES (zeroblob(1000000))")
            except sqlite3.OperationalError:
                refused.append(1)
                raise
            finally:
                db.execute(f"PRAGMA max_page_count = {ALL_PAGES}")
            raise AssertionError("the page limit did not refuse the write")
        project(db, session_id, event)

    monkeypatch.setattr(store_module, "_project", full_disk)

    def arm(kind: type[Event]) -> list[int]:
        armed[:] = [kind]
        return refused

    return arm


@pytest.fixture
async def file_lab(tmp_path: Path) -> AsyncIterator[EmulatorLab]:
    async with emulator_lab(tmp_path / "workspace", database=tmp_path / "s.db") as lab:
        yield lab


def user_texts(lab: EmulatorLab, session_id: str) -> list[str]:
    return [
        part.text
        for m in lab.engine.get_session(session_id).messages
        if isinstance(m, UserMessage)
        for part in m.parts
    ]


def request_user_texts(body: dict[str, Any]) -> list[str]:
    """Every user text block of a logged Messages request, in order."""
    texts: list[str] = []
    for message in body["messages"]:
        if message["role"] != "user":
            continue
        content = message["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        texts += [b["text"] for b in blocks if b.get("type") == "text"]
    return texts


async def test_a_turn_refused_when_its_step_opens_stores_nothing_and_its_retry_counts_once(
    file_lab: EmulatorLab,
    tmp_path: Path,
    disk_fills_at: Callable[[type[Event]], list[int]],
) -> None:
    lab = file_lab
    session = lab.engine.create_session("forge", workspace=lab.workspace).id
    await lab.engine.run(session, "First question.")
    before = sql_dump(tmp_path / "s.db")
    requests = len(lab.requests())
    refused = disk_fills_at(StepStarted)
    with pytest.raises(InsufficientStorage, match="nothing was written") as error:
        await lab.engine.run(session, "Refused question.")
    assert refused == [1]
    assert error.value.problem_status == 507
    assert sql_dump(tmp_path / "s.db") == before  # not the prompt, not its promotion
    assert len(lab.requests()) == requests  # no provider call for a Step never opened
    await lab.engine.run(session, "Refused question.")  # the retry, the disk has room
    assert user_texts(lab, session) == ["First question.", "Refused question."]
    last = lab.requests()[-1]["body"]
    assert request_user_texts(last).count("Refused question.") == 1
    assert request_user_texts(last)[-1] == "Refused question."
    await lab.engine.run(session, "Next question.")  # the next turn answers one prompt
    assert request_user_texts(lab.requests()[-1]["body"]).count("Refused question.") == 1


async def test_a_turn_refused_after_its_step_opened_says_the_prompt_was_stored(
    file_lab: EmulatorLab,
    disk_fills_at: Callable[[type[Event]], list[int]],
) -> None:
    """The disk fills while the Step runs: its settlement is refused. The prompt was stored
    with its Step (one transaction), so the error says not to send it again; the next turn
    marks the Step interrupted and carries the prompt once."""
    lab = file_lab
    session = lab.engine.create_session("forge", workspace=lab.workspace).id
    disk_fills_at(StepSettled)
    with pytest.raises(InsufficientStorage, match="do not send the prompt again"):
        await lab.engine.run(session, "Stored question.")
    await lab.engine.run(session, "Next question.")
    record_ = lab.engine.get_session(session)
    assert user_texts(lab, session) == ["Stored question.", "Next question."]
    steps = [m for m in record_.messages if isinstance(m, AssistantMessage)]
    assert [s.interrupted for s in steps] == [True, False]
    assert request_user_texts(lab.requests()[-1]["body"]).count("Stored question.") == 1


# --- a real full disk: `sessiongen serve` on a tmpfs in a mount namespace -------------------


class Unavailable(Exception):
    """No mount namespace with a tmpfs can be made here."""


class Tmpfs:
    """A tmpfs of `size` mounted at `mountpoint` in a mount namespace of its own, held by a
    sleeping process: commands join it (`enter`), this process reaches it at `outside`."""

    def __init__(self, mountpoint: Path, size: str) -> None:
        for tool in ("unshare", "nsenter"):
            if shutil.which(tool) is None:
                raise Unavailable(f"no {tool} command")
        mountpoint.mkdir()
        self.inside = mountpoint
        root = os.geteuid() == 0
        command = [
            "unshare", "--mount", "--propagation", "private",
            *([] if root else ["--map-root-user"]),
            "sh", "-c", 'mount -t tmpfs -o size="$1" tmpfs "$0" && echo ready && exec sleep 3600',
            str(mountpoint), size,
        ]  # fmt: skip
        self.proc = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        assert self.proc.stdout is not None and self.proc.stderr is not None
        if self.proc.stdout.readline().strip() != "ready":
            self.proc.wait(timeout=30)
            said = self.proc.stderr.read().strip()
            self.proc.stdout.close()
            self.proc.stderr.close()
            raise Unavailable(said or "unshare failed")
        pid = self.proc.pid
        self.outside = Path(f"/proc/{pid}/root") / mountpoint.relative_to("/")
        self.enter = ["nsenter", f"--mount=/proc/{pid}/ns/mnt", f"--wd={ROOT}"]
        if not root:
            self.enter[1:1] = [f"--user=/proc/{pid}/ns/user", "--preserve-credentials"]
        self.enter.append("--")
        self.filler = self.outside / "filler"

    def fill(self) -> int:
        """Write the filler until the disk refuses a single byte (ENOSPC); its size."""
        fd = os.open(self.filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        try:
            for chunk in (1 << 20, 4096, 1):
                block = b"\0" * chunk
                while True:
                    try:
                        os.write(fd, block)
                    except OSError as error:
                        assert error.errno == errno.ENOSPC, error
                        break
        finally:
            os.close(fd)
        return self.filler.stat().st_size

    def free(self) -> None:
        self.filler.unlink()

    def sql_dump(self, name: str) -> bytes:
        """`sql_dump` of the file `name` on this disk, run inside the namespace: SQLite
        resolves symbolic links, `/proc/PID/root` among them, so it cannot open the file
        through `outside`."""
        script = "\n".join(
            [
                "import sqlite3, sys",
                "from contextlib import closing",
                "from pathlib import Path",
                "from urllib.parse import quote",
                inspect.getsource(sql_dump),
                "sys.stdout.buffer.write(sql_dump(Path(sys.argv[1])))",
            ]
        )
        command = [*self.enter, sys.executable, "-c", script, str(self.inside / name)]
        done = subprocess.run(command, capture_output=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr.decode()
        return done.stdout

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=30)
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Tmpfs]:
    if not sys.platform.startswith("linux"):
        pytest.skip("needs Linux mount namespaces and tmpfs")
    try:
        disk = Tmpfs(tmp_path / "disk", TMPFS_SIZE)
    except Unavailable as reason:
        pytest.skip(f"cannot mount a tmpfs in a mount namespace here: {reason}")
    try:
        yield disk
    finally:
        disk.close()


def start_server(disk: Tmpfs, log: Path) -> Worker:
    command = [
        *disk.enter, sys.executable, "-m", "sessiongen.cli", "serve", "--port", "{port}",
        "--db", str(disk.inside / "s.db"),
    ]  # fmt: skip
    return Worker(command, {**os.environ, "SESSIONGEN_TOKEN": ""}, log).wait_ready()


def assert_507(response: httpx.Response) -> None:
    assert response.status_code == 507, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body = response.json()
    assert body["type"] == PROBLEM and body["status"] == 507, body
    assert body["title"] == "InsufficientStorage"


def conversation(http: httpx.Client, session: str) -> list[tuple[str, str]]:
    """The session's messages as (kind, text)."""
    answer = http.get(f"/api/session/{session}/messages")
    assert answer.status_code == 200, answer.text
    return [
        (m["kind"], "".join(p.get("text", "") for p in m.get("parts", ())))
        for m in answer.json()["messages"]
    ]


@pytest.mark.clause("SG-INV-1")
def test_serve_on_a_full_disk_refuses_writes_with_507_and_changes_nothing(
    tmpfs: Tmpfs, tmp_path: Path
) -> None:
    log = tmp_path / "serve.log"
    refused_prompts = refused_writes = reads_full = reads_restarted = generates_full = 0
    server = start_server(tmpfs, log)
    try:
        with httpx.Client(base_url=server.url, timeout=60) as http:
            created = http.post("/api/session")
            assert created.status_code == 201, created.text
            session = created.json()["id"]
            assert http.post(f"/api/session/{session}/prompt", json={"prompt": "First."}).is_success
            tmpfs.fill()
            before = tmpfs.sql_dump("s.db")
            for _ in range(3):
                refused = http.post(f"/api/session/{session}/prompt", json={"prompt": "Again."})
                assert_507(refused)
                assert "nothing was written" in refused.json()["detail"]
                refused_prompts += 1
            assert_507(http.post("/api/session"))
            assert_507(http.delete(f"/api/session/{session}"))
            refused_writes = refused_prompts + 2
            for path in ("", "/messages"):
                assert http.get(f"/api/session/{session}{path}").status_code == 200
                reads_full += 1
            # session.generate writes nothing (SG-INV-1): it answers on a full disk.
            generated = http.post(f"/api/session/{session}/generate", json={"prompt": "Recap?"})
            assert generated.status_code == 200, generated.text
            generates_full = 1
            assert tmpfs.sql_dump("s.db") == before  # byte-identical: nothing of any refused write
            revision = http.get(f"/api/session/{session}").json()["revision"]
            tmpfs.free()
            retried = http.post(f"/api/session/{session}/prompt", json={"prompt": "Again."})
            assert retried.status_code == 200, retried.text
            talk = conversation(http, session)
            assert [kind for kind, _ in talk] == ["user", "assistant", "user", "assistant"]
            assert [text for kind, text in talk if kind == "user"] == ["First.", "Again."]
            assert http.get(f"/api/session/{session}").json()["revision"] > revision
            after_retry = tmpfs.sql_dump("s.db")
    finally:
        assert server.stop() == 0, log.read_text()
    # A restart on the full disk: the store opens read-only.
    tmpfs.fill()
    start = len(log.read_text())
    server = start_server(tmpfs, log)
    try:
        with httpx.Client(base_url=server.url, timeout=60) as http:
            view = http.get(f"/api/session/{session}")
            assert view.status_code == 200, view.text
            assert conversation(http, session) == talk
            reads_restarted = 2
            for response in (
                http.post(f"/api/session/{session}/prompt", json={"prompt": "Third."}),
                http.post("/api/session"),
                http.delete(f"/api/session/{session}"),
            ):
                assert_507(response)
                assert "read-only" in response.json()["detail"]
                refused_writes += 1
            refused_prompts += 1
            assert http.get(f"/api/session/{session}").json() == view.json()
            reads_restarted += 1
            generated = http.post(f"/api/session/{session}/generate", json={"prompt": "Recap?"})
            assert generated.status_code == 200, generated.text
            assert generated.json()["revision"] == view.json()["revision"]
            generates_full += 1
    finally:
        assert server.stop() == 0, log.read_text()
    said = log.read_text()[start:]
    assert said.count("is read-only") == 1, said
    assert tmpfs.sql_dump("s.db") == after_retry
    record(
        "hostile",
        {
            "disk-full": {
                "tmpfs size": TMPFS_SIZE,
                "prompts refused 507": refused_prompts,
                "writes refused 507": refused_writes,
                "records changed": 0,
                "reads served on the full disk": reads_full,
                "reads served after restart (read-only)": reads_restarted,
                "copies of the retried prompt": 1,
                "generates answered on the full disk": generates_full,
            }
        },
    )
