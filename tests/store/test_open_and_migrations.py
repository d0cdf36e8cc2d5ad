"""Opening the record: migrations from an empty database, read-only opens that write nothing, and the
one-line errors for a database that cannot be reached."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, inspect

from avibe.errors import StoreError, StoreUnavailable
from avibe.store import open_store
from avibe.store.migrate import head_revision
from avibe.store.schema import metadata


def test_migrations_build_the_whole_schema_from_an_empty_database(store_url: str) -> None:
    open_store(store_url).close()
    engine = create_engine(store_url)
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(conn)
            assert context.get_current_revision() == head_revision()
            assert compare_metadata(context, metadata) == [], "migrations and schema.py agree"
            tables = set(inspect(conn).get_table_names())
            indexes = {ix["name"]: ix["column_names"] for ix in inspect(conn).get_indexes("entries")}
    finally:
        engine.dispose()
    assert {"sessions", "entries", "checkpoints", "session_state"} <= tables
    assert indexes["ix_entries_session_kind_seq"] == ["session", "kind", "seq"]


def test_opening_twice_does_not_migrate_again(store_url: str) -> None:
    with open_store(store_url) as first:
        session = first.create_session().id
    with open_store(store_url) as second:
        assert [info.id for info in second.list_sessions()] == [session]


def test_sqlite_file_and_its_folder_are_created_and_use_wal(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "avibe.db"
    with open_store(f"sqlite:///{path}") as store:
        store.create_session()
    assert path.exists()
    engine = create_engine(f"sqlite:///{path}")
    try:
        with engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
    finally:
        engine.dispose()


def test_read_only_open_of_a_missing_sqlite_file_creates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "none" / "avibe.db"
    with pytest.raises(StoreUnavailable, match="no record yet"):
        open_store(f"sqlite:///{path}", create=False)
    assert not path.parent.exists()


def test_read_only_open_of_an_empty_postgres_database_creates_nothing(pg_url: str) -> None:
    with pytest.raises(StoreUnavailable, match="no record yet"):
        open_store(pg_url, create=False)
    engine = create_engine(pg_url)
    try:
        with engine.connect() as conn:
            assert inspect(conn).get_table_names() == []
    finally:
        engine.dispose()


def test_an_unreachable_server_is_one_line_with_the_password_masked() -> None:
    with pytest.raises(StoreUnavailable) as caught:
        open_store("postgresql+psycopg://avibe:s3cret@127.0.0.1:1/avibe")
    message = str(caught.value)
    assert "s3cret" not in message and "avibe:***@127.0.0.1:1/avibe" in message
    assert "\n" not in message and "refused" in message.lower()


@pytest.mark.parametrize(
    ("url", "message"),
    [("not a url", "not a database URL"), ("mysql://u:pw@host/db", "only SQLite and PostgreSQL")],
)
def test_an_unsupported_url_is_refused_clearly(url: str, message: str) -> None:
    with pytest.raises(StoreUnavailable, match=message) as caught:
        open_store(url)
    assert "pw" not in str(caught.value)


def test_a_sqlite_path_that_cannot_be_created_is_unavailable(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(StoreUnavailable, match="cannot create the folder"):
        open_store(f"sqlite:///{blocker / 'sub' / 'avibe.db'}")


def test_a_file_that_is_not_a_database_is_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "avibe.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreUnavailable, match="not a database"):
        open_store(f"sqlite:///{path}")


def test_a_plain_postgresql_url_uses_the_shipped_driver(pg_url: str) -> None:
    plain = pg_url.replace("postgresql+psycopg://", "postgresql://")
    with open_store(plain) as store:
        assert store.url.startswith("postgresql+psycopg://")
        assert store.create_session().entry_count == 0


@pytest.mark.parametrize(
    "url", ["sqlite://", "sqlite:///:memory:", "sqlite:///file:rec?mode=memory&uri=true"]
)
def test_an_in_memory_record_is_refused_unless_asked_for(url: str) -> None:
    """A record that vanishes when the process ends is no record; scratch stores say so."""
    with pytest.raises(StoreUnavailable, match="in-memory database"):
        open_store(url)
    with open_store("sqlite://", in_memory=True) as scratch:
        assert scratch.create_session("scratch").title == "scratch"


def test_an_unparsable_url_is_refused_with_its_password_masked() -> None:
    with pytest.raises(StoreUnavailable, match="not a database URL") as caught:
        open_store("postgresql://avibe:s3cret@[::1/avibe")
    assert "s3cret" not in str(caught.value) and "avibe:***@" in str(caught.value)


@pytest.mark.parametrize("journal", ["wal", "delete"])
def test_a_read_only_open_changes_no_byte_and_creates_no_file(tmp_path: Path, journal: str) -> None:
    path = tmp_path / "avibe.db"
    with open_store(f"sqlite:///{path}") as store:
        session = store.create_session("kept").id
    if journal == "delete":
        engine = create_engine(f"sqlite:///{path}")
        with engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA journal_mode=DELETE")
        engine.dispose()
    before = path.read_bytes()
    with open_store(f"sqlite:///{path}", read_only=True) as reader:
        assert [info.id for info in reader.list_sessions()] == [session]
        with pytest.raises(StoreError, match="readonly"):
            reader.create_session("refused")
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["avibe.db"]


def test_a_read_only_open_reads_what_a_live_writer_committed(tmp_path: Path) -> None:
    """With a writer at work (its -wal file exists) the reader goes through the WAL and sees its commits."""
    path = tmp_path / "avibe.db"
    with open_store(f"sqlite:///{path}") as writer:
        first = writer.create_session("one").id
        second = writer.create_session("two").id
        assert (tmp_path / "avibe.db-wal").exists()
        with open_store(f"sqlite:///{path}", read_only=True) as reader:
            assert [info.id for info in reader.list_sessions()] == [first, second]


def test_a_read_only_open_of_a_missing_file_or_a_folder_creates_nothing(tmp_path: Path) -> None:
    with pytest.raises(StoreUnavailable, match="no record yet"):
        open_store(f"sqlite:///{tmp_path / 'none' / 'avibe.db'}", read_only=True)
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "folder.db").mkdir()
    with pytest.raises(StoreUnavailable, match="not a file"):
        open_store(f"sqlite:///{tmp_path / 'folder.db'}", read_only=True)


def test_a_read_only_postgres_open_refuses_writes(pg_url: str) -> None:
    with open_store(pg_url) as store:
        store.create_session("kept")
    with open_store(pg_url, read_only=True) as reader:
        assert [info.title for info in reader.list_sessions()] == ["kept"]
        with pytest.raises(StoreError, match="read-only"):
            reader.create_session("refused")
