"""Benchmark: the record on one SQLite session (issue 2).

Appends --entries entries (default 1,000,000) to ONE session of a SQLite file and prints:
  * bulk throughput of `SqlStore.append_many` (one transaction per --batch entries), used to fill the
    session quickly - reported separately, never mixed into the single-append number;
  * single-append throughput, measured on the last --sample entries (so on a nearly full session), each
    one its own transaction through `avibe.ingress.deliver` - the path every real input takes;
  * the latency of "user messages of session S between seq a and b" (`EntryQuery(kinds={"user"},
    seq_from=a, seq_to=b)`) over --queries random ranges of --span seqs, on the full session. Target < 50 ms.

    .venv/bin/python benchmarks/record_append.py --entries 100000
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

from avibe.ingress import deliver
from avibe.record.entries import EntryQuery, Kind, NewEntry, Source
from avibe.store import SqlStore, open_store

TARGET_MS = 50.0
# A realistic mix: a user message, the reply, and now and then a background input.
MIX: list[tuple[Kind, Source]] = [
    ("user", Source("user", "alice")),
    ("assistant", Source("assistant", "vibey")),
    ("watch", Source("watch", "ci-status", "w-3")),
    ("assistant", Source("assistant", "vibey")),
    ("timer", Source("timer", "standup", "t-1")),
    ("user", Source("user", "alice")),
    ("assistant", Source("assistant", "vibey")),
    ("callback", Source("callback", "build", "b-881")),
]
WORDS = ["the", "queue", "of", "PRs", "oldest", "first", "ask", "only", "when", "a", "decision", "is",
         "needed", "never", "merge", "without", "green", "CI"]  # fmt: skip


def _text(rng: random.Random) -> str:
    return " ".join(rng.choices(WORDS, k=rng.randint(8, 80)))


def _entries(session: str, start: int, count: int, rng: random.Random) -> Iterator[NewEntry]:
    base = datetime(2026, 11, 30, tzinfo=UTC)
    for i in range(start, start + count):
        _, source = MIX[i % len(MIX)]
        yield NewEntry(session, source, _text(rng), base + timedelta(seconds=i), turn_id=f"turn-{i // 8}")


def _single(store: SqlStore, session: str, start: int, count: int, rng: random.Random) -> float:
    began = time.perf_counter()
    for entry in _entries(session, start, count, rng):
        if entry.kind == "assistant":
            store.append(entry)
        else:
            deliver(store, session, entry.source, entry.text, at=entry.at, turn_id=entry.turn_id)
    return time.perf_counter() - began


def _bulk(store: SqlStore, session: str, start: int, count: int, batch: int, rng: random.Random) -> float:
    began, done = time.perf_counter(), 0
    while done < count:
        size = min(batch, count - done)
        store.append_many(list(_entries(session, start + done, size, rng)))
        done += size
    return time.perf_counter() - began


def _query_latencies(
    store: SqlStore, session: str, total: int, span: int, runs: int
) -> tuple[list[float], int]:
    rng, timings, found = random.Random(7), list[float](), 0
    user_only: frozenset[Kind] = frozenset({"user"})
    for _ in range(runs):
        first = rng.randint(1, max(1, total - span))
        began = time.perf_counter()
        hits = store.query(EntryQuery(session, kinds=user_only, seq_from=first, seq_to=first + span))
        timings.append((time.perf_counter() - began) * 1000)
        found += len(hits)
    return timings, found


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--entries", type=int, default=1_000_000, help="entries in the session (1,000,000)")
    parser.add_argument("--sample", type=int, default=20_000, help="single appends measured (20,000)")
    parser.add_argument("--batch", type=int, default=10_000, help="entries per bulk transaction (10,000)")
    parser.add_argument("--queries", type=int, default=200, help="range queries timed (200)")
    parser.add_argument("--span", type=int, default=1_000, help="seqs per range query (1,000)")
    parser.add_argument("--db", type=Path, default=None, help="SQLite file (default: a temp folder)")
    args = parser.parse_args()

    folder = tempfile.TemporaryDirectory(prefix="avibe-bench-")
    path = args.db or Path(folder.name) / "avibe.db"
    sample = min(args.sample, args.entries)
    rng = random.Random(1)
    with open_store(f"sqlite:///{path}") as store:
        session = store.create_session("benchmark").id
        # Bulk-fill first, so the single appends are measured on the (nearly) full session.
        bulk_s = _bulk(store, session, 0, args.entries - sample, args.batch, rng)
        single_s = _single(store, session, args.entries - sample, sample, rng)
        count = store.get_session(session).entry_count
        timings, found = _query_latencies(store, session, count, args.span, args.queries)
    size_mb = sum(p.stat().st_size for p in path.parent.glob(path.name + "*")) / 1e6
    median, p95 = statistics.median(timings), _pct(timings, 0.95)

    print(f"record benchmark: SQLite (WAL), one session, {count:,} entries, {size_mb:,.0f} MB on disk")
    print(f"  single append (own transaction, via ingress): {sample / single_s:,.0f} entries/s "
          f"({single_s / sample * 1e6:,.0f} us each; the last {sample:,} of {count:,})")  # fmt: skip
    if args.entries > sample:
        rest = args.entries - sample
        rate = rest / bulk_s
        print(f"  bulk append_many ({args.batch:,} per transaction): {rate:,.0f} entries/s ({rest:,})")
    verdict = "met" if p95 < TARGET_MS else "MISSED"
    print(f"  user messages of S between seq a and a+{args.span:,} ({args.queries} random ranges, "
          f"{found / args.queries:,.0f} hits each): median {median:.2f} ms, p95 {p95:.2f} ms, "
          f"max {max(timings):.2f} ms -> target p95 < {TARGET_MS:.0f} ms: {verdict}")  # fmt: skip
    folder.cleanup()


if __name__ == "__main__":
    main()
