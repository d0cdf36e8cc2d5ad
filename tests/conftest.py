"""Shared fixtures: real record stores on a SQLite file and on a throwaway PostgreSQL 15 cluster.

The PostgreSQL cluster is started once per test run on loopback (a free port, its socket in a temp
folder) and removed at the end. `AVIBE_TEST_DATABASE_URL` points the tests at an existing server instead.
Without PostgreSQL binaries the postgres tests are skipped - except under CI (env `CI` set), where they
fail: CI must prove both backends.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from hypothesis import settings
from sqlalchemy.engine import make_url

from avibe.store import SqlStore, open_store

# Tests never assert wall-clock times: hypothesis's per-example deadline is one, and it failed a property
# on a busy machine (276 ms against 200). Each test's own @settings still sets what it needs.
settings.register_profile("avibe", deadline=None)
settings.load_profile("avibe")

PG_BIN_DIRS = ("/usr/lib/postgresql/15/bin",)


def _pg_bin() -> Path | None:
    for folder in PG_BIN_DIRS:
        if (Path(folder) / "pg_ctl").exists():
            return Path(folder)
    found = shutil.which("pg_ctl")
    return Path(found).parent if found else None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class _Cluster:
    """A PostgreSQL cluster in a temp folder. Root cannot run postgres, so it runs as user `postgres`."""

    def __init__(self, bin_dir: Path) -> None:
        self.bin_dir = bin_dir
        self.root = Path(tempfile.mkdtemp(prefix="avibe-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self._as_postgres = os.geteuid() == 0
        if self._as_postgres:
            shutil.chown(self.root, user="postgres", group="postgres")

    def _run(self, *args: str) -> None:
        prefix = ["runuser", "-u", "postgres", "--"] if self._as_postgres else []
        done = subprocess.run([*prefix, *args], capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed ({done.returncode}): {done.stderr or done.stdout}")

    def start(self) -> None:
        initdb, pg_ctl = str(self.bin_dir / "initdb"), str(self.bin_dir / "pg_ctl")
        self._run(initdb, "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-locale")
        options = (
            f"-c listen_addresses=127.0.0.1 -p {self.port} -c unix_socket_directories={self.root} "
            "-c fsync=off -c full_page_writes=off -c max_connections=100"
        )
        log = str(self.root / "server.log")
        self._run(pg_ctl, "-D", str(self.data), "-o", options, "-l", log, "-w", "-t", "60", "start")

    def stop(self) -> None:
        try:
            self._run(str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"


@pytest.fixture(autouse=True)
def _environment_restored() -> Iterator[None]:
    """Each test leaves os.environ as it found it: code under test may set variables on purpose (the
    `--approval` flag becomes AVIBE_APPROVAL for the process), and one left behind changes every later
    test in the run (a chat that asks before each command waits forever)."""
    before = dict(os.environ)
    yield
    if dict(os.environ) != before:
        os.environ.clear()
        os.environ.update(before)


@pytest.fixture(scope="session")
def pg_server_url() -> Iterator[str]:
    """URL of a PostgreSQL server's maintenance database, where tests may CREATE DATABASE (so a given
    AVIBE_TEST_DATABASE_URL needs a role with CREATEDB)."""
    given = os.environ.get("AVIBE_TEST_DATABASE_URL")
    if given:
        yield given
        return
    bin_dir = _pg_bin()
    if bin_dir is None:
        reason = (
            "PostgreSQL 15 binaries not found (apt-get install postgresql-15, or set AVIBE_TEST_DATABASE_URL)"
        )
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the PostgreSQL tests: {reason}")
        pytest.skip(reason)
    cluster = _Cluster(bin_dir)
    try:
        cluster.start()
        yield cluster.url
    finally:
        cluster.stop()


def _admin_dsn(server_url: str) -> str:
    url = make_url(server_url).set(drivername="postgresql")
    return url.render_as_string(hide_password=False)


@pytest.fixture
def pg_url(pg_server_url: str) -> Iterator[str]:
    """A fresh, empty PostgreSQL database for one test; dropped afterwards."""
    name = f"avibe_t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(_admin_dsn(pg_server_url), autocommit=True) as admin:
        # A UTF-8 locale, whatever the server's default: text search folds case beyond ASCII (A4).
        admin.execute(f"CREATE DATABASE \"{name}\" TEMPLATE template0 ENCODING 'UTF8' LOCALE 'C.UTF-8'")
    yield make_url(pg_server_url).set(database=name).render_as_string(hide_password=False)
    with psycopg.connect(_admin_dsn(pg_server_url), autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A SQLite file that does not exist yet (in a folder that does not exist yet either)."""
    return f"sqlite:///{tmp_path / 'record' / 'avibe.db'}"


@pytest.fixture
def sqlite_store(sqlite_url: str) -> Iterator[SqlStore]:
    store = open_store(sqlite_url)
    yield store
    store.close()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest) -> str:
    """A fresh database URL on each backend."""
    fixture = "sqlite_url" if request.param == "sqlite" else "pg_url"
    url: str = request.getfixturevalue(fixture)
    return url


@pytest.fixture
def store(store_url: str) -> Iterator[SqlStore]:
    """A fresh, migrated record store, once on SQLite and once on PostgreSQL."""
    opened = open_store(store_url)
    yield opened
    opened.close()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Any test that uses the PostgreSQL server carries the `postgres` marker (select with -m)."""
    for item in items:
        if "pg_server_url" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.postgres)
