"""Fixtures for the tool tests: a real working directory in tmp_path and the real record store (a
SQLite file through `avibe.store.open_store`); background completions go through the real ingress."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from avibe.ports import RecordStore
from avibe.store import open_store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[RecordStore]:
    with open_store(f"sqlite:///{tmp_path / 'record.db'}") as real:
        yield real


@pytest.fixture
def session_id(store: RecordStore) -> str:
    return store.create_session("tools test").id


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    return work
