"""The sessions one `vibe serve` process hosts.

Any number of `vibe serve` processes, on any hosts, may share one record. Each session is run by exactly
one of them at a time: the one holding its lease (`host_session` takes it; a live holder elsewhere makes
it raise SessionHosted and this host leaves the session alone). The fleet looks for sessions that need a
host - one with input its agent has not taken in, one with watches or timers, one waiting for a
delegated run - and starts a worker thread for each it can lease. A worker runs turns while input waits,
polls the session's sources (timers fire, watches look, jobs finish) and lets the session go when it has
nothing to run, wait for or watch. When a host dies, its leases go stale (at once on the same machine,
after the lease's time to live elsewhere) and another host's fleet takes the sessions over: nothing is
lost, because every input is in the record before anyone is told it was accepted.

On PostgreSQL a listener thread (LISTEN/NOTIFY, sent by every append) wakes the fleet the moment a session
gets input, wherever it was posted; on SQLite the fleet polls the session list.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Final

from avibe.errors import AvibeError, SessionHosted, StateError
from avibe.host.events import Event
from avibe.host.session import STOPPED_BY_PERSON
from avibe.host.turn_watch import TurnWatch
from avibe.ports import FeedStore, RecordStore
from avibe.record.entries import EntryQuery
from avibe.record.state import DelegationsState
from avibe.sources.feeds import feed_done

log = logging.getLogger("avibe.serve")

TICK_S: Final = 0.5  # how often the fleet looks for work when nothing wakes it
WORKER_POLL_S: Final = 0.2  # how often a worker polls its session's sources
LINGER_S: Final = 5.0  # how long an idle session with nothing to wait for stays hosted
RESCAN_S: Final = 30.0  # a full look at every session (delegations out, missed notifications)
RETRY_AFTER_S: Final = 15.0  # a session whose host failed to start is tried again after this
ELSEWHERE_RETRY_S: Final = 2.0  # a session another host holds is looked at again after this (takeover)
STOP_WAIT_S: Final = 1.2  # how long stopping waits for the workers in all (`vibe serve` exits in 2 s)
HOST_EXIT: Final = "the process hosting this session (vibe serve) stopped"


OpenHost = Callable[[str], AbstractContextManager["SessionHandle"]]


@dataclass
class SessionHandle:
    """A session this process hosts: run its waiting input; say whether it must stay hosted."""

    run_ready: Callable[[], None]  # run turns while input waits (polls the sources first)
    busy: Callable[[], bool]  # jobs or delegated runs out, or feeds that post on their own
    watch: TurnWatch | None = None  # its turns' watch: says whether one runs, stops it


@dataclass(frozen=True, slots=True)
class Left:
    """A session this host still hosted when it stopped, and whether a turn of it was running then."""

    session: str
    mid_turn: bool

    def line(self) -> str:
        """What the person is told (docs/serve.md)."""
        if self.mid_turn:
            return f"left session {self.session} mid-turn; `vibe --session {self.session}` resumes it"
        return f"left session {self.session} idle"


@dataclass
class _Worker:
    session: str
    thread: threading.Thread
    wake: threading.Event = field(default_factory=threading.Event)
    stop: threading.Event = field(default_factory=threading.Event)
    handle: SessionHandle | None = None  # once its session is hosted


class Fleet:
    """The session hosts of one `vibe serve` process. `open_host(session_id)` hosts a session (it holds
    the lease for as long as it is open; SessionHosted when another host has it)."""

    def __init__(
        self,
        store: RecordStore,
        open_host: OpenHost,
        *,
        only: str | None = None,
        exit_when_idle: bool = False,
        on_event: Callable[[str, Event], None] | None = None,
    ) -> None:
        self.store, self._open_host = store, open_host
        self._only, self._exit_when_idle = only, exit_when_idle
        self._on_event = on_event
        self._workers: dict[str, _Worker] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._seen: dict[str, int] = {}  # session -> entry count at the last look
        self._last_scan = -RESCAN_S
        self.failures: dict[str, str] = {}  # session -> why its host last failed (for /health)
        self._retry_at: dict[str, float] = {}  # session -> not tried again before (monotonic)
        self._done_once = False  # the first look at the sessions is over
        self._queued_feeds: set[str] = set()  # ids of feeds in queue mode

    # ---- outside ---------------------------------------------------------------------------------------

    def hosted(self) -> list[str]:
        with self._lock:
            return sorted(self._workers)

    def notify(self, session_id: str) -> None:
        """A session got input (NOTIFY, or a post to this host): look now, and wake its worker."""
        with self._lock:
            worker = self._workers.get(session_id)
            self._seen.pop(session_id, None)
        if worker is not None:
            worker.wake.set()
        self._wake.set()

    def stop(self, wait_s: float = STOP_WAIT_S) -> list[Left]:
        """Stop hosting: each running turn is stopped (its command killed, its step ended at the next
        clean point) and the workers given `wait_s` in all to let their sessions go; a worker still in
        a model call then dies with the process (its lease is stale at once on this machine). Returns
        the sessions left, and which were mid-turn."""
        self._stopping.set()
        self._wake.set()
        with self._lock:
            workers = list(self._workers.values())
        left = []
        for worker in workers:
            watch = worker.handle.watch if worker.handle is not None else None
            left.append(Left(worker.session, watch is not None and watch.in_turn))
            worker.stop.set()
            worker.wake.set()
            if watch is not None:
                watch.ask(HOST_EXIT, for_good=True)
        deadline = time.monotonic() + wait_s
        for worker in workers:
            worker.thread.join(timeout=max(0.0, deadline - time.monotonic()))
        return left

    def run(self) -> None:
        """Look for sessions to host until stopped (or, with exit_when_idle, until none is left)."""
        while not self._stopping.is_set():
            try:
                for session_id in self._wanted():
                    self._start(session_id)
            except AvibeError as exc:  # the database is away: log, and look again at the next tick
                log.warning("serve: could not look for sessions to host: %s", exc)
            if self._exit_when_idle and not self.hosted() and self._done_once:
                return
            self._wake.wait(TICK_S)
            self._wake.clear()

    # ---- which sessions need a host ----------------------------------------------------------------------

    def _wanted(self) -> Iterator[str]:
        hosted = set(self.hosted())
        rescan = time.monotonic() - self._last_scan >= RESCAN_S
        if rescan:
            self._last_scan = time.monotonic()
        fed = self._sessions_with_feeds()
        for info in self.store.list_sessions():
            if self._only is not None and info.id != self._only:
                continue
            if info.id in hosted or time.monotonic() < self._retry_at.get(info.id, 0.0):
                continue
            changed = self._seen.get(info.id) != info.entry_count
            self._seen[info.id] = info.entry_count
            if (
                info.id in fed
                or (changed and self._input_waiting(info.id, info.entry_count))
                or (rescan and self._delegations_out(info.id))
            ):
                yield info.id
        self._done_once = True

    def _sessions_with_feeds(self) -> set[str]:
        """Sessions with watches or timers (they need a host all the time); also notes which feeds
        queue their inputs (those never wake a session by themselves)."""
        if not isinstance(self.store, FeedStore):
            return set()
        feeds = self.store.list_feeds()
        self._queued_feeds = {feed.id for feed in feeds if not feed.wake}
        return {feed.session for feed in feeds if feed.kind != "callback" and not feed_done(feed)}

    def _input_waiting(self, session_id: str, count: int) -> bool:
        """The newest entry is an input (not the agent's reply) that wakes the agent: a turn is due.
        An input of a feed in queue mode waits for the next turn without a host."""
        if count == 0:
            return False
        newest = self.store.query(EntryQuery(session_id, seq_from=count))
        if not newest or newest[-1].kind == "assistant" or newest[-1].source == STOPPED_BY_PERSON:
            return False  # a reply, or the person stopped the turn (avibe.host.session): nothing is due
        return not (newest[-1].kind != "user" and newest[-1].source.ref in self._queued_feeds)

    def _delegations_out(self, session_id: str) -> bool:
        try:
            saved = DelegationsState.from_stored(self.store.load_state(session_id, DelegationsState.KEY))
        except StateError as exc:  # its host says so when it opens the session; the scan goes on
            log.warning("session %s: %s", session_id, exc)
            return False
        return bool(saved.out)

    # ---- workers ---------------------------------------------------------------------------------------

    def _start(self, session_id: str) -> None:
        worker = _Worker(session_id, threading.Thread())
        worker.thread = threading.Thread(
            target=self._work, args=(worker,), name=f"host-{session_id}", daemon=True
        )
        with self._lock:
            if session_id in self._workers:
                return
            self._workers[session_id] = worker
        worker.thread.start()

    def _work(self, worker: _Worker) -> None:
        session_id = worker.session
        try:
            with self._open_host(session_id) as handle:
                worker.handle = handle
                log.info("serve: hosting session %s", session_id)
                self.failures.pop(session_id, None)
                self._retry_at.pop(session_id, None)
                self._serve(worker, handle)
        except SessionHosted as exc:
            log.debug("serve: session %s is hosted elsewhere: %s", session_id, exc)
            self._look_again(session_id, after_s=ELSEWHERE_RETRY_S)
        except Exception as exc:  # one session failing must not take the host down; log it, retry later
            self.failures[session_id] = f"{type(exc).__name__}: {exc}"
            self._look_again(session_id, after_s=RETRY_AFTER_S)
            log.exception(
                "serve: hosting session %s failed; trying again in %.0f s", session_id, RETRY_AFTER_S
            )
        finally:
            # After a hosting that ran, the entry count seen when it started still stands: any entry
            # appended since (a reply, a new input) makes the next look check the session again, and an
            # input the agent left unanswered (a stopped turn) does not re-host it every tick.
            with self._lock:
                self._workers.pop(session_id, None)
            log.info("serve: no longer hosting session %s", session_id)
            self._wake.set()

    def _look_again(self, session_id: str, *, after_s: float) -> None:
        """A session this host could not host: its input still waits, so look at it afresh after a pause."""
        self._retry_at[session_id] = time.monotonic() + after_s
        with self._lock:
            self._seen.pop(session_id, None)

    def _serve(self, worker: _Worker, handle: SessionHandle) -> None:
        idle_since = time.monotonic()
        while not worker.stop.is_set():
            handle.run_ready()
            if handle.busy():
                idle_since = time.monotonic()
            elif time.monotonic() - idle_since >= (0.0 if self._exit_when_idle else LINGER_S):
                return
            worker.wake.wait(WORKER_POLL_S)
            worker.wake.clear()


def listen_for_inputs(database_url: str, fleet: Fleet, stopping: threading.Event) -> threading.Thread | None:
    """PostgreSQL only: a thread that LISTENs for appends and wakes the fleet for the session named
    (reconnecting when the connection drops). None on SQLite, where the fleet polls."""
    if not database_url.startswith("postgresql"):
        return None
    from avibe.store.sql import NOTIFY_CHANNEL

    def listen() -> None:
        import psycopg

        url = database_url.replace("postgresql+psycopg://", "postgresql://", 1)
        while not stopping.is_set():
            try:
                with psycopg.connect(url, autocommit=True) as conn:
                    conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
                    while not stopping.is_set():
                        for note in conn.notifies(timeout=1.0):
                            fleet.notify(note.payload)
            except psycopg.Error as exc:
                log.warning("serve: the input listener lost PostgreSQL (%s); reconnecting", exc)
                stopping.wait(1.0)

    thread = threading.Thread(target=listen, name="serve-listen", daemon=True)
    thread.start()
    return thread
