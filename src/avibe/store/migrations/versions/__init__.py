"""Alembic revisions of the record schema (a package so wheels ship them)."""
