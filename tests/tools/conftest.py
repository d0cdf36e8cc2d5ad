"""Fixtures for the tool tests: a real working directory in tmp_path and the real record store (a
SQLite file through `avibe.store.open_store`); background completions go through the real ingress.

Shell tests run in every sandbox mode that matters (`policy`): the sandboxed ones need a working
bubblewrap; without it they skip on a developer's machine and fail under CI (`.ci/run` installs it)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from avibe.ingress import deliver
from avibe.ports import Delivery, RecordStore
from avibe.record.entries import Entry, Source
from avibe.store import open_store
from avibe.tools.sandbox import SandboxPolicy
from sandbox_support import require_sandbox


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


@pytest.fixture
def delivery(store: RecordStore, session_id: str) -> Delivery:
    """What the orchestration passes to BackgroundJobs: the real ingress into the real record."""

    def into_record(source: Source, text: str) -> Entry:
        return deliver(store, session_id, source, text)

    return into_record


@pytest.fixture
def sandboxed() -> None:
    """For tests of the sandbox itself."""
    require_sandbox()


@pytest.fixture(params=["workspace-write", "full-access"])
def policy(request: pytest.FixtureRequest, workdir: Path) -> SandboxPolicy:
    """The default sandbox and no sandbox: what a command does must not depend on it."""
    if request.param != "full-access":
        require_sandbox()
    return SandboxPolicy(request.param, workdir)
