"""A stored input is on disk whatever the PostgreSQL server says (C1: the record keeps every input a
sender was told is stored, a callback's 202 included): a server run with `synchronous_commit = off`
(fsync on) is crashed - every one of its processes SIGKILLed at once - while 24 threads append 1,000
keyed callbacks through `append_each` (what answers a callback's 202), and after the restart every append
that was answered stored is in the record. Without the store forcing synchronous commit, the last
answered callbacks (those on the WAL page not yet written) are lost.

The test runs its own cluster (it crashes it), not the shared one; `wal_writer_delay` is at its longest so
the window an asynchronous commit waits in memory is wide and the loss, without the fix, is not luck."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import create_engine

from avibe.errors import StoreError
from avibe.record.entries import EntryQuery, NewEntry, Source
from avibe.store import SqlStore, durable, open_store

CALLBACKS = 1000
IN_FLIGHT = 24
CRASH_AFTER = 400  # answered appends before the crash
AT = datetime(2026, 12, 6, 9, 0, tzinfo=UTC)
PG_BIN = Path("/usr/lib/postgresql/15/bin")


class _CrashableCluster:
    """A throwaway PostgreSQL 15 cluster with the server's own durability turned down (run as user
    `postgres` when root: root cannot run postgres)."""

    def __init__(self, bin_dir: Path) -> None:
        self.bin_dir = bin_dir
        self.root = Path(tempfile.mkdtemp(prefix="avibe-pgcrash-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self._prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if self._prefix:
            shutil.chown(self.root, user="postgres", group="postgres")

    def _run(self, *args: str) -> None:
        run = [*self._prefix, *args]
        done = subprocess.run(run, capture_output=True, text=True, timeout=120, check=False)
        log = self.root / "server.log"
        tail = log.read_text()[-2000:] if log.exists() else ""
        assert done.returncode == 0, f"{' '.join(args)} failed: {done.stderr or done.stdout}\n{tail}"

    def init(self) -> None:
        self._run(str(self.bin_dir / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust",
                  "-E", "UTF8", "--no-locale")  # fmt: skip

    def start(self) -> None:
        options = (
            f"-c listen_addresses=127.0.0.1 -p {self.port} -c unix_socket_directories={self.root} "
            "-c fsync=on -c synchronous_commit=off -c wal_writer_delay=10s -c max_connections=60"
        )
        log = str(self.root / "server.log")
        self._run(str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-o", options, "-l", log, "-w", "start")

    def crash(self) -> None:
        """Stop the postmaster and all its children at once (none runs on), then SIGKILL them."""
        postmaster = int((self.data / "postmaster.pid").read_text().split()[0])
        family = [postmaster, *_children(postmaster)]
        for pid in family:
            _signal(pid, signal.SIGSTOP)
        for pid in _children(postmaster):  # one forked between the listing and the stop
            if pid not in family:
                _signal(pid, signal.SIGSTOP)
                family.append(pid)
        for pid in family:
            _signal(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while any(_alive(pid) for pid in family) and time.monotonic() < deadline:
            time.sleep(0.02)
        # The dead postmaster may linger as a zombie nobody reaps here, which the next start would take
        # for a running server: its lock files go, as after a machine's crash.
        for lock in (self.data / "postmaster.pid", self.root / f".s.PGSQL.{self.port}.lock"):
            lock.unlink(missing_ok=True)

    def remove(self) -> None:
        subprocess.run([*self._prefix, str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-m", "immediate",
                        "-w", "stop"], capture_output=True, timeout=60, check=False)  # fmt: skip
        shutil.rmtree(self.root, ignore_errors=True)

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _children(parent: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == parent:
            found.append(int(stat.parent.name))
    return found


def _signal(pid: int, signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):  # a child that exited on its own meanwhile
        os.kill(pid, signum)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.fixture(scope="module")
def crashable() -> Iterator[_CrashableCluster]:
    if not (PG_BIN / "pg_ctl").exists():
        reason = "PostgreSQL 15 binaries not found (apt-get install postgresql-15)"
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the PostgreSQL tests: {reason}")
        pytest.skip(reason)
    made = _CrashableCluster(PG_BIN)
    try:
        made.init()
        yield made
    finally:
        made.remove()


@pytest.fixture
def cluster(crashable: _CrashableCluster) -> _CrashableCluster:
    """The module's cluster, running (a test that failed between its crash and the restart left it down)."""
    if not (crashable.data / "postmaster.pid").exists():
        crashable.start()
    return crashable


def _stored_by_append_each(store: SqlStore, entry: NewEntry) -> bool:
    return store.append_each([entry])[0].entry is not None  # what a callback's 202 waits for


def _stored_by_append(store: SqlStore, entry: NewEntry) -> bool:
    return store.append(entry).seq > 0  # a run's own entries (group commit)


def _load_until_crash(store: SqlStore, session: str, cluster: _CrashableCluster, how: str) -> list[str]:
    """24 threads append keyed callbacks one request each; the cluster is crashed once CRASH_AFTER of
    them were answered stored. Returns the keys answered stored."""
    stored = _stored_by_append if how == "append" else _stored_by_append_each
    source = Source("callback", "ci", "f-1")
    answered: list[str] = []
    lock = threading.Lock()
    crashed = threading.Event()
    next_n = iter(range(CALLBACKS))

    def post() -> None:
        while not crashed.is_set():
            with lock:
                n = next(next_n, None)
            if n is None:
                return
            key = f"cb-{n:04d}"
            try:
                if not stored(store, NewEntry(session, source, key, AT, delivery_key=key)):
                    return  # refused (the server is away): not answered stored
            except StoreError:
                return
            with lock:
                answered.append(key)
                if len(answered) == CRASH_AFTER and not crashed.is_set():
                    cluster.crash()  # under the lock: no answer is counted while the server dies
                    crashed.set()

    threads = [threading.Thread(target=post) for _ in range(IN_FLIGHT)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert crashed.is_set(), f"the load ended before the crash ({len(answered)} answered)"
    return answered


@pytest.mark.postgres
@pytest.mark.slow
@pytest.mark.parametrize("how", ["append_each", "append", "append_each on a bare engine"])
def test_every_answered_append_survives_a_crash_of_a_server_with_synchronous_commit_off(
    cluster: _CrashableCluster, how: str
) -> None:
    """ "append_each on a bare engine": a store on an engine that did not come through `open_store` (no
    connection set up by it, as behind a pooler) - the ingest's flush still waits for the disk."""
    with open_store(cluster.url):
        pass  # the schema
    bare = how.endswith("bare engine")
    with SqlStore(create_engine(cluster.url)) if bare else open_store(cluster.url) as store:
        session = store.create_session().id
        answered = _load_until_crash(store, session, cluster, how)
    cluster.start()  # crash recovery replays the WAL that reached the disk
    with open_store(cluster.url) as store:
        recorded = {entry.text for entry in store.query(EntryQuery(session))}
    lost = sorted(set(answered) - recorded)
    assert not lost, f"{len(lost)} of {len(answered)} appends answered stored are not in the record: {lost}"


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("asked", "kept"), [("", "local"), ("off", "local"), ("on", "on"), ("remote_write", "remote_write")]
)
def test_a_connection_commits_at_least_locally_and_never_weaker_than_asked(
    cluster: _CrashableCluster, asked: str, kept: str
) -> None:
    """The server says off; a URL (like a role's or database's setting) may ask for a level: off is raised
    to local, a stronger level (which flushes locally too) is kept as it is."""
    url = cluster.url + (f"?options=-csynchronous_commit%3D{asked}" if asked else "")
    with open_store(url) as store, store._engine.connect() as conn:
        assert conn.exec_driver_sql("SHOW synchronous_commit").scalar_one() == kept


@pytest.mark.postgres
def test_a_server_with_synchronous_commit_off_is_announced_once(
    cluster: _CrashableCluster, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(durable, "_announced", set())
    with caplog.at_level(logging.INFO, logger="avibe.store.durable"):
        for _ in range(2):
            with open_store(cluster.url) as store:
                store.create_session()
    said = [r.getMessage() for r in caplog.records if "synchronous_commit = off" in r.getMessage()]
    assert len(said) == 1 and "commit with synchronous_commit = local" in said[0], said
