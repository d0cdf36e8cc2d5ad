"""Benchmark: the record on one session, SQLite or PostgreSQL (tests never time anything).

Appends --entries entries (default 1,000,000) to ONE session and prints:
  * bulk throughput of `SqlStore.append_many` (one transaction per --batch entries), used to fill the
    session quickly - reported separately, never mixed into the single-append number;
  * single-append throughput, measured on the last --sample entries (so on a nearly full session), each
    one its own transaction through `avibe.ingress.deliver` - the path every real input takes;
  * concurrent deliveries: --threads threads each delivering keyed inputs (an idempotency key each, as
    a callback's) through `deliver` at once - what `vibe serve` does under load (group commit); the
    entries/s, the p50/p99 latency of one delivery, and a check that each landed exactly once;
  * the latency of "user messages of session S between seq a and b" (`EntryQuery(kinds={"user"},
    seq_from=a, seq_to=b)`) over --queries random ranges of --span seqs, on the full session. Target < 50 ms.

    .venv/bin/python benchmarks/record_append.py --entries 200000 [--backend postgresql [--url URL]]
        [--compare-with REV]

--backend postgresql without --url starts a throwaway cluster (PostgreSQL 15 binaries, as the tests do;
default settings: fsync and synchronous_commit on). `--compare-with REV` measures a git revision too (a
temporary worktree whose `src` this same script imports, in a subprocess) and prints both side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import avibe
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
PG_BIN_DIRS = ("/usr/lib/postgresql/15/bin",)


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


def _concurrent(store: SqlStore, session: str, threads: int, count: int) -> dict[str, float]:
    """`threads` threads deliver `count` keyed callback inputs at once; each delivery is timed."""
    before = store.get_session(session).entry_count
    latencies: list[float] = []
    seqs: list[int] = []
    lock = threading.Lock()
    source = Source("callback", "build", "b-881")

    def worker(index: int) -> None:
        mine, made = [], []
        for n in range(index, count, threads):
            began = time.perf_counter()
            entry = deliver(store, session, source, f"build {n} finished: green", key=f"bench:{n}")
            mine.append((time.perf_counter() - began) * 1000)
            made.append(entry.seq)
        with lock:
            latencies.extend(mine)
            seqs.extend(made)

    began = time.perf_counter()
    workers = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join()
    elapsed = time.perf_counter() - began
    # Exactly once: each key made one entry; a repeat of every key records nothing new.
    added = store.get_session(session).entry_count - before
    for n in range(0, count, max(1, count // 100)):
        deliver(store, session, source, "repeat", key=f"bench:{n}")
    repeats = store.get_session(session).entry_count - before - added
    return {
        "concurrent_rate": count / elapsed,
        "concurrent_p50_ms": statistics.median(latencies),
        "concurrent_p99_ms": _pct(latencies, 0.99),
        "concurrent_off": float(abs(added - count) + repeats + (len(set(seqs)) != count)),
    }


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


def measure(url: str, args: argparse.Namespace) -> dict[str, float | str]:
    sample = min(args.sample, args.entries)
    rng = random.Random(1)
    with open_store(url) as store:
        session = store.create_session("benchmark").id
        # Bulk-fill first, so the single appends are measured on the (nearly) full session.
        bulk_s = _bulk(store, session, 0, args.entries - sample, args.batch, rng)
        single_s = _single(store, session, args.entries - sample, sample, rng)
        concurrent = _concurrent(store, session, args.threads, args.concurrent) if args.concurrent else {}
        count = store.get_session(session).entry_count
        store.query(EntryQuery(session, seq_from=1, seq_to=1))  # one warm-up (connection, statement)
        timings, found = _query_latencies(store, session, count, args.span, args.queries)
    rest = args.entries - sample
    return {
        "code": str(Path(avibe.__file__).parent),
        "entries": float(count),
        "single_rate": sample / single_s,
        "single_us": single_s / sample * 1e6,
        "bulk_rate": rest / bulk_s if rest else 0.0,
        **concurrent,
        "hits": found / args.queries,
        "query_p50_ms": statistics.median(timings),
        "query_p95_ms": _pct(timings, 0.95),
        "query_max_ms": max(timings),
    }


# -- databases -------------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def throwaway_postgres(settings: str = "") -> Iterator[str]:
    """A PostgreSQL 15 cluster in a temp folder for the length of the block (as tests/conftest.py starts
    one; root runs it as user `postgres`); yields its URL. Default durability unless `settings` says."""
    bin_dir = next((Path(d) for d in PG_BIN_DIRS if (Path(d) / "pg_ctl").exists()), None)
    if bin_dir is None and shutil.which("pg_ctl"):
        bin_dir = Path(str(shutil.which("pg_ctl"))).parent
    if bin_dir is None:
        raise SystemExit("PostgreSQL binaries not found (apt-get install postgresql-15), or pass --url")
    root = Path(tempfile.mkdtemp(prefix="avibe-bench-pg-"))
    prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    if prefix:
        shutil.chown(root, user="postgres", group="postgres")
    port, data = _free_port(), root / "data"

    def run(*argv: str) -> None:
        subprocess.run([*prefix, *argv], check=True, capture_output=True, timeout=120)

    run(
        str(bin_dir / "initdb"),
        "-D",
        str(data),
        "-U",
        "postgres",
        "--auth=trust",
        "-E",
        "UTF8",
        "--no-locale",
    )
    options = (f"-c listen_addresses=127.0.0.1 -p {port} -c unix_socket_directories={root} "
               f"-c max_connections=200 {settings}")  # fmt: skip
    run(str(bin_dir / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(root / "log"), "-w", "start")
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([*prefix, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
                       check=False, capture_output=True)  # fmt: skip
        shutil.rmtree(root, ignore_errors=True)


def fresh_database(server_url: str) -> str:
    """A new empty database on the PostgreSQL server (each measurement starts from nothing)."""
    import psycopg
    from sqlalchemy.engine import make_url

    name = f"bench_{uuid.uuid4().hex[:10]}"
    admin = make_url(server_url).set(drivername="postgresql")
    with psycopg.connect(admin.render_as_string(hide_password=False), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return make_url(server_url).set(database=name).render_as_string(hide_password=False)


@contextmanager
def database(backend: str, url: str | None) -> Iterator[Iterator[str]]:
    """Yields a source of fresh, empty record URLs of the backend."""
    if backend == "sqlite":
        folder = Path(tempfile.mkdtemp(prefix="avibe-bench-"))

        def sqlite_urls() -> Iterator[str]:
            n = 0
            while True:
                n += 1
                yield f"sqlite:///{folder}/avibe-{n}.db"

        try:
            yield sqlite_urls()
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        return
    with throwaway_postgres() if url is None else _given(url) as server:

        def pg_urls() -> Iterator[str]:
            while True:
                yield fresh_database(server)

        yield pg_urls()


@contextmanager
def _given(url: str) -> Iterator[str]:
    yield url


def _run_at(revision: str, url: str, argv: list[str]) -> dict[str, float | str]:
    """This script's measurement with another revision's `avibe` (a git worktree), in a subprocess."""
    root = Path(__file__).resolve().parents[1]
    folder = Path(tempfile.mkdtemp(prefix="avibe-bench-rev-")) / "tree"
    subprocess.run(
        ["git", "-C", str(root), "worktree", "add", "-q", "--detach", str(folder), revision], check=True
    )
    try:
        env = {**os.environ, "PYTHONPATH": str(folder / "src")}
        out = subprocess.run([sys.executable, __file__, *argv, "--json-url", url], env=env, check=True,
                             capture_output=True, text=True).stdout  # fmt: skip
        return dict(json.loads(out.splitlines()[-1]))
    finally:
        subprocess.run(["git", "-C", str(root), "worktree", "remove", "--force", str(folder)], check=False)


def _report(args: argparse.Namespace, rows: list[tuple[str, dict[str, float | str]]]) -> None:
    first = rows[0][1]
    print(
        f"record benchmark: {args.backend}, one session of {first['entries']:,.0f} entries "
        f"(single appends: the last {min(args.sample, args.entries):,}; bulk: {args.batch:,} per "
        f"transaction; {args.threads} threads x {args.concurrent:,} keyed deliveries; "
          f"{args.queries} ranges of {args.span:,} seqs, ~{first['hits']:,.0f} user messages each)"
    )  # fmt: skip
    print(f"  {'':22} {'single/s':>9} {'us each':>8} {'bulk/s':>8} {'concur/s':>9} {'c p50 ms':>9} "
          f"{'c p99 ms':>9} {'off':>4} {'query p50':>10} {'p95 ms':>7} {'max ms':>7}")  # fmt: skip
    for name, r in rows:
        if "concurrent_rate" in r:
            c_rate, c_p50, c_p99 = r["concurrent_rate"], r["concurrent_p50_ms"], r["concurrent_p99_ms"]
            concurrent = f"{c_rate:9,.0f} {c_p50:9.2f} {c_p99:9.2f} {r['concurrent_off']:4.0f}"
        else:
            concurrent = f"{'-':>9} {'-':>9} {'-':>9} {'-':>4}"
        rates = f"{r['single_rate']:9,.0f} {r['single_us']:8,.0f} {r['bulk_rate']:8,.0f}"
        query = f"{r['query_p50_ms']:10.2f} {r['query_p95_ms']:7.2f} {r['query_max_ms']:7.2f}"
        print(f"  {name:22} {rates} {concurrent} {query}")
    verdict = "met" if float(first["query_p95_ms"]) < TARGET_MS else "MISSED"
    print(f"  query target p95 < {TARGET_MS:.0f} ms (this tree): {verdict}; 'off' = deliveries lost, doubled "
          "or recorded again on a repeated key (must be 0)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--entries", type=int, default=1_000_000, help="entries in the session (1,000,000)")
    parser.add_argument("--sample", type=int, default=20_000, help="single appends measured (20,000)")
    parser.add_argument("--batch", type=int, default=10_000, help="entries per bulk transaction (10,000)")
    parser.add_argument("--threads", type=int, default=8, help="threads delivering at once (8)")
    parser.add_argument(
        "--concurrent", type=int, default=4_000, help="keyed deliveries by the threads (4,000)"
    )
    parser.add_argument("--queries", type=int, default=200, help="range queries timed (200)")
    parser.add_argument("--span", type=int, default=1_000, help="seqs per range query (1,000)")
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--url", help="PostgreSQL server URL (default: a throwaway cluster)")
    parser.add_argument("--compare-with", metavar="REV", help="also measure this git revision, side by side")
    parser.add_argument("--json-url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.json_url:
        print(json.dumps(measure(args.json_url, args)))
        return
    sizes = ["--entries", str(args.entries), "--sample", str(args.sample), "--batch", str(args.batch),
             "--threads", str(args.threads), "--concurrent", str(args.concurrent), "--queries",
             str(args.queries), "--span", str(args.span)]  # fmt: skip
    with database(args.backend, args.url) as urls:
        rows = [("this tree", measure(next(urls), args))]
        if args.compare_with:
            rows.append((f"at {args.compare_with}", _run_at(args.compare_with, next(urls), sizes)))
    _report(args, rows)


if __name__ == "__main__":
    main()
