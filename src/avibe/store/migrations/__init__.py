"""Alembic migrations of the record, applied programmatically by `avibe.store.migrate` (no alembic.ini)."""
