"""PostgreSQL: what the store reports stored is on disk, whatever the server's `synchronous_commit` says.

A server (or role, or database) set to `synchronous_commit = off` lets a commit return before its WAL is
flushed: a crash of the server then loses commits already answered (a callback's 202). Every connection
a writing store opens raises the setting to `local` (the commit waits for this server's WAL flush) where
it is `off`, and leaves any stronger level (`on`, `remote_write`, `remote_apply`: each also flushes
locally) as the server has it. The ingest path still turns it off for its own transactions on purpose
(`SET LOCAL`) and then waits for one flush before answering; that flush statement raises the setting in
its own transaction too, so it waits even on a connection that did not come through here (a pooler).
SQLite needs nothing: WAL with `synchronous = NORMAL` makes a commit survive a crash of the process."""

from __future__ import annotations

import logging
from typing import Any, Final

from sqlalchemy.pool import ConnectionPoolEntry

log = logging.getLogger(__name__)

# One round trip per new connection: what the server says, and (where it is off) the session's own level.
_RAISE: Final = (
    "SELECT current_setting('synchronous_commit'), "
    "CASE WHEN current_setting('synchronous_commit') = 'off' "
    "THEN set_config('synchronous_commit', 'local', false) END"
)
# The same for one transaction only, as a select-list item of the flush statement (no extra round trip).
RAISE_IN_TRANSACTION: Final = (
    "CASE WHEN current_setting('synchronous_commit') = 'off' "
    "THEN set_config('synchronous_commit', 'local', true) END"
)
_announced: set[str] = set()


def force_synchronous_commit(dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
    """A `connect` listener for a writing PostgreSQL engine (psycopg 3 connection)."""
    autocommit = dbapi_connection.autocommit
    dbapi_connection.autocommit = True  # a session-level setting, outside any transaction
    try:
        server_level = dbapi_connection.execute(_RAISE).fetchone()[0]
    finally:
        dbapi_connection.autocommit = autocommit
    server = f"{dbapi_connection.info.host}:{dbapi_connection.info.port}/{dbapi_connection.info.dbname}"
    if server_level == "off" and server not in _announced:
        _announced.add(server)
        log.info(
            "the PostgreSQL server %s has synchronous_commit = off; Avibe's connections commit with "
            "synchronous_commit = local, so a write it reports stored is on disk",
            server,
        )
