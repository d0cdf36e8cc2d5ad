"""Benchmark: HTTP callbacks into the record through `vibe serve` (issue 12; tests never time anything).

Starts real `vibe serve` processes on loopback - one on a SQLite record, then one and three sharing one
PostgreSQL record - and posts --callbacks callbacks (spread over --feeds callback feeds, each of its own
session) with --concurrency requests in flight (httpx AsyncClient), round robin over the hosts. Every post
carries an `Idempotency-Key`; a post that fails (connection error, 5xx) is retried with the same key on
the next host. A 202 means the input is committed in the record, so the latency of a callback is from its
first POST to the 202. Afterwards the record is read back and every key is counted: lost (accepted, not
in the record) and duplicated (in the record more than once) must both be 0.

The feeds are added with `wake=False` ("queue"): no agent turn runs, this measures ingest only. The
hosts answer turns from a scripted OpenAI-compatible server (tests/openai_chat.py) should one run.

    .venv/bin/python benchmarks/ingest.py [--callbacks 3000] [--concurrency 32] [--feeds 4]
        [--only sqlite-1,postgresql-1,postgresql-3] [--url POSTGRESQL_URL] [--compare-with REV]

PostgreSQL: --url names a server (each run gets a new database on it), else a throwaway cluster is started
as the tests do (default durability settings). `--compare-with REV` also runs the hosts of a git
revision (a temporary worktree on their PYTHONPATH) on the same load, side by side.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx

from avibe.record.entries import EntryQuery
from avibe.record.feeds import Feed
from avibe.store import open_store

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from record_append import fresh_database, throwaway_postgres  # noqa: E402

from openai_chat import serve_chat  # noqa: E402 - the tests' scripted model server
from serve_support import free_port, hosting, start_serve, stop, vibe_env  # noqa: E402

SECRET = "benchmark-callback-secret"
ATTEMPTS = 6


async def _load(
    ports: list[int], feeds: list[str], count: int, concurrency: int
) -> tuple[dict[str, str], list[float], int, float]:
    """Post `count` callbacks; returns the accepted keys (key -> feed), latencies in ms, retries, seconds."""
    queue: asyncio.Queue[int] = asyncio.Queue()
    for n in range(count):
        queue.put_nowait(n)
    accepted: dict[str, str] = {}
    latencies: list[float] = []
    retries = 0
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)

    async def worker(client: httpx.AsyncClient) -> None:
        nonlocal retries
        while not queue.empty():
            n = queue.get_nowait()
            feed, key = feeds[n % len(feeds)], f"ingest-{n}"
            body = f"build {n} finished: green (key {key})"
            began = time.perf_counter()
            for attempt in range(ATTEMPTS):
                port = ports[(n + attempt) % len(ports)]
                try:
                    response = await client.post(
                        f"http://127.0.0.1:{port}/callbacks/{feed}", content=body,
                        headers={"Authorization": f"Bearer {SECRET}", "Idempotency-Key": key},
                    )  # fmt: skip
                except httpx.HTTPError:
                    response = None
                if response is not None and response.status_code == 202:
                    latencies.append((time.perf_counter() - began) * 1000)
                    accepted[key] = feed
                    break
                retries += 1
                await asyncio.sleep(0.05 * (attempt + 1))

    async with httpx.AsyncClient(timeout=30, limits=limits) as client:
        began = time.perf_counter()
        await asyncio.gather(*(worker(client) for _ in range(concurrency)))
        elapsed = time.perf_counter() - began
    return accepted, latencies, retries, elapsed


def _settle(ports: list[int], home: Path, sessions: int, timeout: float = 60) -> None:
    """Wait until the hosts together host every session and that has held for a second (asked with the
    serve token the hosts keep in `home`)."""
    deadline, steady_since = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        hosted: set[str] = set()
        for port in ports:
            hosted |= set(hosting(port, home))
        if len(hosted) >= sessions:
            steady_since = steady_since or time.monotonic()
            if time.monotonic() - steady_since >= 1.0:
                return
        else:
            steady_since = None
        time.sleep(0.2)
    print(f"  (the hosts did not take all {sessions} sessions within {timeout:.0f} s)", file=sys.stderr)


def _count(url: str, sessions: dict[str, str], accepted: dict[str, str]) -> tuple[int, int, int]:
    """Lost (accepted but not in the record), duplicated (in it more than once), and in the record."""
    seen: Counter[str] = Counter()
    with open_store(url) as store:
        for session in sessions.values():
            for entry in store.query(EntryQuery(session, kinds=frozenset({"callback"}))):
                seen[entry.text.rsplit("(key ", 1)[-1].rstrip(")")] += 1
    lost = sum(1 for key in accepted if seen[key] == 0)
    duplicated = sum(n - 1 for n in seen.values() if n > 1)
    return lost, duplicated, sum(seen.values())


def run_case(url: str, hosts: int, args: argparse.Namespace, code: Path | None) -> dict[str, float]:
    """One measurement: a fresh record at `url`, `hosts` `vibe serve` processes, the load, the count."""
    with open_store(url) as store:
        sessions: dict[str, str] = {}
        for n in range(args.feeds):
            session = store.create_session(f"ingest {n}").id
            spec = {"secret": SECRET, "max_bytes": 4096, "per_minute": 10_000_000}
            feed = store.add_feed(Feed(f"cb-{n}", session, "callback", f"ci-{n}", spec, wake=False))
            sessions[feed.id] = session
    work = Path(tempfile.mkdtemp(prefix="avibe-ingest-"))
    with ExitStack() as stack:
        chat = stack.enter_context(serve_chat())
        chat.default = "Noted."
        env = vibe_env(work / "home", chat, url)
        if code is not None:
            env["PYTHONPATH"] = str(code)
        ports = [free_port() for _ in range(hosts)]
        for n, port in enumerate(ports):
            process = start_serve(env, work, port, work / f"serve-{n}.log")
            stack.callback(stop, process)
        feeds = list(sessions)
        # Warm-up (its keys are posted again by the load: they must not double): the inputs make the
        # hosts take the sessions (each host loads its tokenizer once); the load starts once they have.
        asyncio.run(_load(ports, feeds, min(50, args.callbacks), 4))
        _settle(ports, work / "home", len(feeds))
        accepted, latencies, retries, elapsed = asyncio.run(
            _load(ports, feeds, args.callbacks, args.concurrency)
        )
    lost, duplicated, stored = _count(url, sessions, accepted)
    return {
        "accepted": float(len(accepted)),
        "rate": len(accepted) / elapsed,
        "p50_ms": statistics.median(latencies) if latencies else 0.0,
        "p99_ms": sorted(latencies)[int(0.99 * (len(latencies) - 1))] if latencies else 0.0,
        "retries": float(retries),
        "lost": float(lost + (args.callbacks - len(accepted))),
        "duplicated": float(duplicated),
        "stored": float(stored),
    }


@contextmanager
def _revision(revision: str | None) -> Iterator[Path | None]:
    """The `src` folder of a git worktree of `revision` (None: this tree)."""
    if revision is None:
        yield None
        return
    folder = Path(tempfile.mkdtemp(prefix="avibe-ingest-rev-")) / "tree"
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(folder), revision], check=True
    )
    try:
        yield folder / "src"
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(folder)], check=False)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--callbacks", type=int, default=3_000, help="callbacks posted per case (3,000)")
    parser.add_argument("--concurrency", type=int, default=32, help="requests in flight (32)")
    parser.add_argument("--feeds", type=int, default=4, help="callback feeds, each of its own session (4)")
    parser.add_argument(
        "--only", default="sqlite-1,postgresql-1,postgresql-3", help="cases: BACKEND-HOSTS,..."
    )
    parser.add_argument("--url", help="PostgreSQL server URL (default: a throwaway cluster)")
    parser.add_argument("--compare-with", metavar="REV", help="also run the hosts of this git revision")
    args = parser.parse_args()
    cases = [(c.split("-")[0], int(c.split("-")[1])) for c in args.only.split(",") if c]
    for backend, hosts in cases:
        if backend not in {"sqlite", "postgresql"} or (backend == "sqlite" and hosts != 1):
            raise SystemExit(f"unknown case {backend}-{hosts}: sqlite-1, postgresql-N")
    revisions: list[str | None] = [None] + ([args.compare_with] if args.compare_with else [])
    rows: list[tuple[str, dict[str, float]]] = []
    with ExitStack() as stack:
        server = None
        if any(b == "postgresql" for b, _ in cases):
            server = args.url or stack.enter_context(throwaway_postgres())
        folder = Path(tempfile.mkdtemp(prefix="avibe-ingest-db-"))
        for revision in revisions:
            code = stack.enter_context(_revision(revision))
            for n, (backend, hosts) in enumerate(cases):
                assert backend == "sqlite" or server is not None
                url = (
                    f"sqlite:///{folder}/r{len(rows)}-{n}.db"
                    if backend == "sqlite"
                    else fresh_database(server)
                )
                name = f"{backend}, {hosts} host{'s' if hosts > 1 else ''}" + (
                    f" @ {revision}" if revision else ""
                )
                print(f"  running {name} ...", file=sys.stderr, flush=True)
                rows.append((name, run_case(url, hosts, args, code)))
    print(f"ingest benchmark: {args.callbacks:,} HTTP callbacks per case, {args.concurrency} in flight, "
          f"{args.feeds} feeds/sessions, queued (wake=False: no agent turns, ingest only); "
          f"{os.cpu_count()} cores shared by client, hosts and database")  # fmt: skip
    head = f"{'accepted/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'retries':>8} {'lost':>5} {'duplicated':>10}"
    print(f"  {'':32} {head}")
    for name, r in rows:
        print(f"  {name:32} {r['rate']:10,.0f} {r['p50_ms']:8.1f} {r['p99_ms']:8.1f} {r['retries']:8,.0f} "
              f"{r['lost']:5,.0f} {r['duplicated']:10,.0f}")  # fmt: skip
    print("  latency: first POST to 202 (committed in the record); lost/duplicated counted in the record")


if __name__ == "__main__":
    main()
