"""A separate process for the concurrency tests (run as a script, not collected by pytest).

    python append_worker.py append URL SESSION COUNT   -> opens, says "ready", waits for "go", appends
    python append_worker.py open URL                   -> says "ready", waits for "go", opens (migrates)

Prints one JSON line at the end: the seqs it was given (append) or the schema check (open).
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime

from avibe.record.entries import NewEntry, Source
from avibe.store import open_store


def _wait_for_go() -> None:
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        raise SystemExit("expected 'go' on stdin")


def _append(url: str, session: str, count: int) -> list[int]:
    with open_store(url) as store:
        _wait_for_go()
        source = Source("watch", name="worker", ref=str(sys.argv[0]))
        return [
            store.append(NewEntry(session, source, f"entry {i}", datetime.now(UTC))).seq for i in range(count)
        ]


def _open(url: str) -> list[int]:
    _wait_for_go()
    with open_store(url) as store:
        return [len(store.list_sessions())]


def main(argv: list[str]) -> None:
    mode, url = argv[1], argv[2]
    seqs = _append(url, argv[3], int(argv[4])) if mode == "append" else _open(url)
    print(json.dumps(seqs), flush=True)


if __name__ == "__main__":
    main(sys.argv)
