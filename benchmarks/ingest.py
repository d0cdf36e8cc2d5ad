"""Benchmark: HTTP callbacks into the record through `vibe serve` (tests never time anything).

Starts real `vibe serve` processes on loopback - one on a SQLite record, then one and three sharing one
PostgreSQL record - and posts --callbacks callbacks (spread over --feeds callback feeds, each of its own
session) with --concurrency requests in flight (a lean keep-alive HTTP/1.1 client: it shares the cores),
round robin over the hosts. Every post carries an `Idempotency-Key`; a post that fails (connection
error, anything but 202) is retried with the same key on the next host. A 202 means the input is
committed in the record, so the latency of a callback is from its first POST to the 202. Afterwards the
record is read back and every key is counted: lost (accepted, not in the record) and duplicated (in the
record more than once) must both be 0.

The feeds are added with `wake=False` ("queue"): no agent turn runs, this measures ingest only. The
hosts answer turns from a scripted OpenAI-compatible server (tests/openai_chat.py) should one run.

    .venv/bin/python benchmarks/ingest.py [--callbacks 3000] [--concurrency 32] [--feeds 4]
        [--only sqlite-1,postgresql-1,postgresql-3] [--url POSTGRESQL_URL] [--compare-with REV]
        [--signed] [--kind github] [--profile DIR]

PostgreSQL: --url names a server (each run gets a new database on it), else a throwaway cluster is started
as the tests do (default durability settings). `--compare-with REV` also runs the hosts of a git
revision (a temporary worktree on their PYTHONPATH) on the same load, side by side, and prints the
ratios; the client speaks each tree's protocol (`--signed`: this tree's HMAC over timestamp, key and
body; the old tree's over the body). Each case also reports the CPU time per accepted callback of the
hosts and of the client, and the load average: on a shared machine the rate moves with the load.
`--kind github` runs every case twice, side by side: the callbacks of an `avibe` feed (the bearer secret,
or --signed), then of a `github` feed, each signed as GitHub signs (X-Hub-Signature-256 over the body,
X-GitHub-Delivery as the key): the verification cost per callback of a service's scheme.
`--profile DIR` records the first host of each case with py-spy during the load (`AVIBE_SPY_GIL=1`: only
samples holding the GIL). The method and the latest runs: docs/bench-ingest.md.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from avibe.record.entries import EntryQuery
from avibe.record.feeds import Feed
from avibe.store import open_store

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from record_append import fresh_database, throwaway_postgres  # noqa: E402

from openai_chat import serve_chat  # noqa: E402 - the tests' scripted model server
from serve_support import free_port, start_serve, stop, vibe_env  # noqa: E402

SECRET = "benchmark-callback-secret"
ATTEMPTS = 6


class _Connection:
    """One keep-alive HTTP/1.1 connection of the load's client: a few lines over asyncio streams, so that
    the client, which shares the cores with the hosts, spends little of them (httpx costs about as much
    CPU per request as the host it measures)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def post(self, path: str, body: bytes, headers: dict[str, str]) -> int:
        """The response's status (its body read and dropped); OSError/EOF when the connection failed."""
        if self.streams is None:
            self.streams = await asyncio.open_connection("127.0.0.1", self.port)
        reader, writer = self.streams
        lines = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\nContent-Length: {len(body)}\r\n"
        writer.write(f"{head}{lines}\r\n".encode() + body)
        try:
            answer = await reader.readuntil(b"\r\n\r\n")
            status = int(answer[9:12])
            fields = answer.lower()
            at = fields.find(b"content-length:")
            length = int(fields[at + 15 : fields.index(b"\r\n", at)]) if at >= 0 else 0
            if length:
                await reader.readexactly(length)
            if b"connection: close" in fields:
                self.close()
            return status
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self.streams is not None:
            self.streams[1].close()
            self.streams = None


def _auth(body: bytes, key: str, signed: bool, old: bool, kind: str = "avibe") -> dict[str, str]:
    """The callback's credentials in the protocol of the tree measured: the secret as a bearer token
    (both trees), or a signature - this tree's over timestamp, key and body; the old tree's over the body;
    or, for a `github` feed, GitHub's own headers."""
    if kind == "github":
        digest = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
        return {"X-Hub-Signature-256": f"sha256={digest}", "X-GitHub-Event": "push", "X-GitHub-Delivery": key}
    if not signed:
        return {"Authorization": f"Bearer {SECRET}"}
    if old:
        digest = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
        return {"X-Avibe-Signature": f"sha256={digest}"}
    stamp = str(int(time.time()))
    digest = hmac.new(SECRET.encode(), f"{stamp}.{key}.".encode() + body, hashlib.sha256).hexdigest()
    return {"X-Avibe-Timestamp": stamp, "X-Avibe-Signature": f"sha256={digest}"}


async def _load(
    ports: list[int],
    feeds: list[str],
    count: int,
    concurrency: int,
    *,
    signed: bool = False,
    old: bool = False,
    kind: str = "avibe",
) -> tuple[dict[str, str], list[float], int, float]:
    """Post `count` callbacks; returns the accepted keys (key -> feed), latencies in ms, retries, seconds."""
    queue: asyncio.Queue[int] = asyncio.Queue()
    for n in range(count):
        queue.put_nowait(n)
    accepted: dict[str, str] = {}
    latencies: list[float] = []
    retries = 0

    async def worker() -> None:
        nonlocal retries
        connections = {port: _Connection(port) for port in ports}
        try:
            while not queue.empty():
                n = queue.get_nowait()
                feed, key = feeds[n % len(feeds)], f"ingest-{n}"
                body = f"build {n} finished: green (key {key})".encode()
                began = time.perf_counter()
                for attempt in range(ATTEMPTS):
                    port = ports[(n + attempt) % len(ports)]
                    headers = {**_auth(body, key, signed, old, kind), "Idempotency-Key": key}
                    try:
                        status = await asyncio.wait_for(
                            connections[port].post(f"/callbacks/{feed}", body, headers), 30
                        )
                    except (OSError, asyncio.IncompleteReadError, TimeoutError, ValueError):
                        status = 0
                    if status == 202:
                        latencies.append((time.perf_counter() - began) * 1000)
                        accepted[key] = feed
                        break
                    retries += 1
                    await asyncio.sleep(0.05 * (attempt + 1))
        finally:
            for connection in connections.values():
                connection.close()

    began = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - began
    return accepted, latencies, retries, elapsed


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) the process `pid` has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


GIL = ["--gil"] if os.environ.get("AVIBE_SPY_GIL") else []  # py-spy: only the samples holding the GIL


def _spy(pid: int, folder: str | None, name: str) -> subprocess.Popen[bytes] | None:
    """py-spy recording the host `pid` (its Python threads, GIL holders and idle alike) into
    `folder`/`name`.txt (collapsed stacks) until SIGINT; None without --profile."""
    if not folder:
        return None
    Path(folder).mkdir(parents=True, exist_ok=True)
    out = Path(folder) / f"{name}.txt"
    spy = subprocess.Popen(
        ["py-spy", "record", "--pid", str(pid), "--format", "raw", "--rate", "250", *GIL, "-o", str(out)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    time.sleep(1.0)  # attached before the load begins
    return spy


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


def run_case(
    url: str, hosts: int, args: argparse.Namespace, code: Path | None, kind: str = "avibe"
) -> dict[str, float]:
    """One measurement: a fresh record at `url`, `hosts` `vibe serve` processes, the load, the count."""
    with open_store(url) as store:
        sessions: dict[str, str] = {}
        for n in range(args.feeds):
            session = store.create_session(f"ingest {n}").id
            spec = {"kind": kind, "secret": SECRET, "max_bytes": 4096, "per_minute": 10_000_000}
            if kind == "avibe":
                del spec["kind"]  # as an older tree (--compare-with) stores it
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
        processes = []
        for n, port in enumerate(ports):
            process = start_serve(env, work, port, work / f"serve-{n}.log")
            stack.callback(stop, process)
            processes.append(process)
        feeds = list(sessions)
        # Warm-up (its keys are posted again by the load: they must not double): the inputs make the
        # hosts take the sessions (each host loads its tokenizer once); the load starts once they have.
        old = code is not None
        asyncio.run(_load(ports, feeds, min(50, args.callbacks), 4, signed=args.signed, old=old, kind=kind))
        spy = _spy(processes[0].pid, args.profile, f"{url.split(':')[0]}-{hosts}{'-old' if code else ''}")
        host_cpu = sum(_cpu_s(p.pid) for p in processes)
        client_cpu = time.process_time()
        load = os.getloadavg()[0]
        accepted, latencies, retries, elapsed = asyncio.run(
            _load(ports, feeds, args.callbacks, args.concurrency, signed=args.signed, old=old, kind=kind)
        )
        client_cpu = time.process_time() - client_cpu
        host_cpu = sum(_cpu_s(p.pid) for p in processes) - host_cpu
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait(timeout=60)
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
        "host_cpu_ms": 1000 * host_cpu / max(1, len(accepted)),
        "client_cpu_ms": 1000 * client_cpu / max(1, len(accepted)),
        "load": load,
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
    parser.add_argument(
        "--signed",
        action="store_true",
        help="sign each callback (each tree's HMAC) instead of the bearer secret",
    )
    parser.add_argument(
        "--kind",
        choices=["avibe", "github"],
        default="avibe",
        help="github: also run each case with a github feed, side by side with the avibe kind",
    )
    parser.add_argument("--profile", metavar="DIR", help="py-spy the first host of each case into DIR")
    parser.add_argument("--compare-with", metavar="REV", help="also run the hosts of this git revision")
    args = parser.parse_args()
    cases = [(c.split("-")[0], int(c.split("-")[1])) for c in args.only.split(",") if c]
    for backend, hosts in cases:
        if backend not in {"sqlite", "postgresql"} or (backend == "sqlite" and hosts != 1):
            raise SystemExit(f"unknown case {backend}-{hosts}: sqlite-1, postgresql-N")
    revisions: list[str | None] = [None] + ([args.compare_with] if args.compare_with else [])
    if args.compare_with and args.kind != "avibe":
        raise SystemExit("--compare-with measures the avibe kind only (an older tree has no github feeds)")
    kinds = ["avibe"] + (["github"] if args.kind == "github" else [])
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
                for kind in kinds:
                    if kind != kinds[0]:  # each kind on a fresh record
                        url = (
                            url.replace(".db", f"-{kind}.db")
                            if backend == "sqlite"
                            else fresh_database(server)
                        )
                    name = (
                        f"{backend}, {hosts} host{'s' if hosts > 1 else ''}"
                        + (f" @ {revision}" if revision else "")
                        + ("" if len(kinds) == 1 else f", {kind}")
                    )
                    print(f"  running {name} ...", file=sys.stderr, flush=True)
                    rows.append((name, run_case(url, hosts, args, code, kind)))
    print(f"ingest benchmark: {args.callbacks:,} HTTP callbacks per case, {args.concurrency} in flight, "
          f"{args.feeds} feeds/sessions, {'signed' if args.signed else 'bearer secret'}, queued "
          f"(wake=False: no agent turns, ingest only); {os.cpu_count()} cores shared by client, hosts "
          "and database")  # fmt: skip
    head = (f"{'accepted/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'retries':>8} {'lost':>5} {'duplicated':>10} "
            f"{'host CPU ms':>11} {'client CPU ms':>13} {'load':>5}")  # fmt: skip
    print(f"  {'':34} {head}")
    for name, r in rows:
        print(f"  {name:34} {r['rate']:10,.0f} {r['p50_ms']:8.1f} {r['p99_ms']:8.1f} {r['retries']:8,.0f} "
              f"{r['lost']:5,.0f} {r['duplicated']:10,.0f} {r['host_cpu_ms']:11.2f} "
              f"{r['client_cpu_ms']:13.2f} {r['load']:5.1f}")  # fmt: skip
    if args.compare_with:
        print(f"  this tree / {args.compare_with}, measured in this run:")
        half = len(rows) // 2
        for (name, new), (_, old) in zip(rows[:half], rows[half:], strict=True):
            print(f"  {name:34} {new['rate'] / max(old['rate'], 1e-9):9.1f}x accepted/s, p99 "
                  f"{new['p99_ms'] / max(old['p99_ms'], 1e-9):5.2f}x, host CPU per callback "
                  f"{new['host_cpu_ms'] / max(old['host_cpu_ms'], 1e-9):5.2f}x")  # fmt: skip
    print("  latency: first POST to 202 (committed in the record); lost/duplicated counted in the record;")
    print("  host/client CPU: CPU time per accepted callback (all hosts together / the load's client);")
    print("  load: the 1-minute load average as the case began")


if __name__ == "__main__":
    main()
