"""RecordStore adapters (DESIGN: adapters layer): the record on SQL - SQLite by default, PostgreSQL by URL.

from avibe.store import open_store
store = open_store("sqlite:///path/avibe.db")   # or postgresql+psycopg://user:pw@host/db
"""

from __future__ import annotations

from avibe.store.open import open_store
from avibe.store.sql import SqlStore

__all__ = ["SqlStore", "open_store"]
