"""`SqlStore`: the record on SQLAlchemy 2 - a SQLite file by default, PostgreSQL by URL (SPEC C1, A3).

One class, assembled from one module per job over `SqlCore` (store/core.py: engine, transactions, retries):
    store/sessions.py   creating and reading sessions
    store/entries.py    appending entries (dense seqs, delivery keys, group commit) and reading them
    store/ingest.py     `append_each`: many independent appends, an outcome each (`vibe serve`)
    store/state.py      checkpoints and session state documents
    store/leases.py     one writer per session
    store/feeds.py      a session's watches, timers and callbacks
    store/checks.py     what the store refuses before it writes
"""

from __future__ import annotations

from avibe.store.checks import check_text
from avibe.store.core import first_error_line
from avibe.store.entries import NOTIFY_CHANNEL
from avibe.store.feeds import Feeds
from avibe.store.ingest import Appended, FeedChanged, Ingest
from avibe.store.leases import Leases, lease_owner, lease_stale_reason, pid_running, this_machine
from avibe.store.sessions import Sessions
from avibe.store.state import SessionState

# The names other packages import from here: the store's public face, wherever each is defined.
__all__ = [
    "NOTIFY_CHANNEL",
    "Appended",
    "FeedChanged",
    "SqlStore",
    "check_text",
    "first_error_line",
    "lease_owner",
    "lease_stale_reason",
    "pid_running",
    "this_machine",
]


class SqlStore(Sessions, Ingest, SessionState, Leases, Feeds):
    """The `RecordStore` on a SQL database. Open it with `avibe.store.open_store(url)`."""
