"""Benchmark: the inspector's server time on a long session (tests never time anything).

Fills ONE session with --entries entries (default 100,000; the realistic mix of record_append.py), a
checkpoint every --every entries (mind, memo of user messages, scene, provenance), and a context log with
one point per assistant reply. Then asks the inspector app - in process, over ASGI, no network - for:

  * the first page of the session's timeline (`/s/<id>/timeline`), unfiltered and filtered (kind user +
    text), and the last page (what the live view opens on);
  * a checkpoint page (`/s/<id>/checkpoints/<n>`: mind, memo, scene, the mind's diff, mission counts);
  * the context page (every point of the plot, embedded);

--requests times each (after one warm-up) and prints p50/p95 of the server's own time (the app's
`Server-Timing` header: from routing to the rendered page) and of the whole request as the client sees it.

    .venv/bin/python benchmarks/inspector.py [--entries 100000] [--backend sqlite|postgresql [--url URL]]

--backend postgresql without --url starts a throwaway cluster (PostgreSQL 15 binaries), as
benchmarks/record_append.py does.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from starlette.testclient import TestClient

sys.path.insert(0, str(Path(__file__).parent))
from record_append import _entries, database

from avibe.host.context_log import ContextLog, Limits
from avibe.host.events import CheckpointAccepted, ModelCalled
from avibe.ports import StoredCheckpoint
from avibe.record.checkpoint import MemoItem, Provenance
from avibe.record.entries import EntryQuery
from avibe.store import SqlStore, open_store
from avibe.web.inspector import inspector_app

MIND = """## I am here
- Working for the release team; report in one line per PR; ask before merging anything red.

## Goals
### Mission
{missions}

### Workstreams
- [W1] (active) the PR queue, oldest first; queue position {n} of 400; next: PR #{next}

## Key decisions
- Squash merges only (the history must stay linear).

## Lessons
- Read CI logs before re-running a job.
"""


def _mind(n: int) -> str:
    missions = "\n".join(f"- [M{i}] (active) keep the queue moving, item {i}" for i in range(1, 2 + n % 5))
    return MIND.format(missions=missions, n=n, next=1000 + n)


def fill(store: SqlStore, entries: int, every: int, batch: int = 5_000) -> tuple[str, int]:
    """The session, and how many checkpoints it has."""
    rng = random.Random(15)
    session = store.create_session("inspector benchmark").id
    log = ContextLog(store, session, lambda: Limits("bench", 32_768, 29_491, 30_720), lambda e: None)
    base = datetime(2026, 11, 30, tzinfo=UTC)
    done, number, step = 0, 0, 0
    while done < entries:
        size = min(batch, entries - done)
        stored = store.append_many(list(_entries(session, done, size, rng)))
        for entry in stored:
            if entry.kind == "assistant" and entry.seq % 40 == 0:  # a sample of the model requests
                step += 1
                log(ModelCalled(step, 20_000 + entry.seq % 9_000, 19_000, 15_000, 200, 1.0, 1))
            if entry.seq % every == 0:
                number += 1
                users = store.query(
                    EntryQuery(session, frozenset({"user"}), entry.seq - 200, entry.seq, limit=8)
                )
                memo = tuple(MemoItem(u.seq, u.text) for u in users)
                at = base + timedelta(seconds=entry.seq - 1, milliseconds=500)
                provenance = Provenance(
                    trigger="90% of the window",
                    tokens_before=29_600,
                    tokens_after=12_000,
                    calls=5,
                    seconds=4.2,
                )
                scene = "<checkpoint>scene</checkpoint>"
                made = StoredCheckpoint(session, 0, at, _mind(number), memo, scene, entry.seq - 100)
                store.save_checkpoint(replace(made, provenance=provenance))
                log(CheckpointAccepted(number, 29_600, 12_000, 5, 4.2, None))
        done += size
    return session, number


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def measure(client: TestClient, path: str, requests: int) -> dict[str, float]:
    client.get(path)  # warm-up: templates compiled, caches filled
    server, whole = [], []
    for _ in range(requests):
        began = time.perf_counter()
        response = client.get(path)
        whole.append((time.perf_counter() - began) * 1000)
        assert response.status_code == 200, (path, response.status_code, response.text[:200])
        server.append(float(response.headers["server-timing"].split("dur=")[1]))
    return {
        "server_p50": _pct(server, 0.5),
        "server_p95": _pct(server, 0.95),
        "whole_p50": _pct(whole, 0.5),
        "whole_p95": _pct(whole, 0.95),
    }


def run(url: str, args: argparse.Namespace) -> None:
    with open_store(url) as writer:
        began = time.perf_counter()
        session, checkpoints = fill(writer, args.entries, args.every)
        filled = time.perf_counter() - began
    with open_store(url, read_only=args.backend == "sqlite") as store:
        count = store.get_session(session).entry_count
        print(f"{args.backend}: {count:,} entries, {checkpoints} checkpoints (filled in {filled:.0f} s)")
        client = TestClient(inspector_app(store))
        paths = {
            "timeline, first page": f"/s/{session}/timeline",
            "timeline, first page, kind=user&grep=queue": f"/s/{session}/timeline?kind=user&grep=queue",
            "timeline, last page": f"/s/{session}/timeline?after={max(0, count - 200)}",
            f"checkpoint #{checkpoints // 2}": f"/s/{session}/checkpoints/{checkpoints // 2}",
            "context plot": f"/s/{session}/context",
        }
        head = f"{'page':45} {'server p50':>10} {'p95':>8} {'whole p50':>10} {'p95':>8}"
        print(f"{head}  (ms, {args.requests} requests)")
        for name, path in paths.items():
            m = measure(client, path, args.requests)
            server = f"{m['server_p50']:10.1f} {m['server_p95']:8.1f}"
            print(f"{name:45} {server} {m['whole_p50']:10.1f} {m['whole_p95']:8.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--every", type=int, default=2_000, help="a checkpoint every N entries")
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument("--backend", choices=["sqlite", "postgresql"], default="sqlite")
    parser.add_argument("--url", help="an existing PostgreSQL server (default: a throwaway cluster)")
    args = parser.parse_args()
    with database(args.backend, args.url) as urls:
        run(next(urls), args)


if __name__ == "__main__":
    main()
