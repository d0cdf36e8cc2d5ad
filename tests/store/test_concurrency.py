"""Two real processes writing one record at once (SPEC C1, really two
processes, not threads): seq stays dense, unique and gap-free on SQLite and on PostgreSQL."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from avibe.record.entries import EntryQuery
from avibe.store import SqlStore, open_store

WORKER = Path(__file__).with_name("append_worker.py")
PER_PROCESS = 200


def _start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WORKER), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _run_together(workers: list[subprocess.Popen[str]]) -> list[list[int]]:
    """Release all workers at the same moment (each has opened its store and said "ready")."""
    for worker in workers:
        assert worker.stdout is not None
        line = worker.stdout.readline().strip()
        if line != "ready":
            _, err = worker.communicate(timeout=60)
            raise AssertionError(f"worker did not start: {line!r}\n{err}")
    for worker in workers:
        assert worker.stdin is not None
        worker.stdin.write("go\n")
        worker.stdin.flush()
    results = []
    for worker in workers:
        out, err = worker.communicate(timeout=300)
        assert worker.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


def test_C1_two_processes_appending_to_one_session_get_dense_unique_seqs(store: SqlStore) -> None:
    session = store.create_session("race").id
    got = _run_together([_start("append", store.url, session, str(PER_PROCESS)) for _ in range(2)])

    first, second = got
    assert len(first) == len(second) == PER_PROCESS
    assert first == sorted(first) and second == sorted(second), "each process sees its seqs increase"
    assert set(first).isdisjoint(second), "no seq given out twice"
    assert sorted(first + second) == list(range(1, 2 * PER_PROCESS + 1)), "no gaps"
    stored = store.query(EntryQuery(session))
    assert [entry.seq for entry in stored] == list(range(1, 2 * PER_PROCESS + 1))
    assert store.get_session(session).entry_count == 2 * PER_PROCESS


def test_C1_two_processes_opening_a_fresh_database_both_migrate_safely(store_url: str) -> None:
    """Neither process has created the schema yet; both open (and migrate) at the same moment."""
    got = _run_together([_start("open", store_url) for _ in range(2)])

    assert got == [[0], [0]]
    with open_store(store_url, create=False) as reopened:
        assert reopened.list_sessions() == []
