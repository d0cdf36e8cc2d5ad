"""The host owns sessions: it holds a session's lease, keeps where the session works and who works in
it, and assembles a live session - SessionHost, its agent (Vibey or an external program), its sources -
from parts the edge built (concrete adapters are passed in: `avibe.compose` builds them from settings)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, Protocol, TypeVar

from avibe.errors import AvibeError
from avibe.host.agent import Agent, ContextControls, TurnResult
from avibe.host.events import EventSink
from avibe.host.lease import hold_lease
from avibe.host.session import InputSource, SessionHost
from avibe.ingress import deliver
from avibe.ports import Clock, LeaseOwner, RecordStore
from avibe.record.agents import VIBEY
from avibe.record.entries import Entry, Source
from avibe.record.state import AgentState, WorkdirState

V = TypeVar("V")


@dataclass
class HostedSession(Generic[V]):
    """A live session: the host, the agent's own object (`vibey`: Vibey, or None for an external agent,
    which keeps its own context, L5 - the chat then shows no meter marks), the record, the person, and
    its stop switch: set, the process the agent waits on now (a shell command, an external agent) is
    killed at once (the chat's Ctrl-C); whoever sets it clears it before the next turn.
    The edges (the chat, `vibe serve`) use `context` and `outstanding`, never the agent's attributes."""

    host: SessionHost
    vibey: V
    store: RecordStore
    user_name: str
    stop: threading.Event = field(default_factory=threading.Event)
    # the meter, /compaction and the tool hook of an agent whose context Avibe manages; None: external (L5)
    context: ContextControls | None = None
    # work still out that posts into the session on its own: a background job, a delegated run, a
    # standing watch or timer (`vibe serve` keeps such a session hosted)
    outstanding: Callable[[], bool] = lambda: False

    @property
    def session_id(self) -> str:
        return self.host.session_id

    @property
    def agent(self) -> Agent:
        return self.host.agent

    def send(self, text: str) -> TurnResult:
        return self.host.send(text, self.user_name)


@dataclass(frozen=True)
class SessionParts(Generic[V]):
    """What the edge built for one session once its host's delivery ports exist: the agent, the sources
    that post into the session (polled in this order), the event sink, which inputs wait for a turn
    (a feed in queue mode), and what to settle after the host stopped."""

    agent: Agent
    vibey: V
    sources: Sequence[InputSource]
    events: EventSink
    queued: Callable[[Entry], bool] = lambda entry: False
    after_close: Callable[[], None] = lambda: None
    context: ContextControls | None = None  # Vibey's meter, compaction and tool hook (None: external)
    outstanding: Callable[[], bool] = lambda: False  # see `HostedSession.outstanding`


class HostPorts:
    """The session's delivery ports for the adapters built before its host exists (background jobs,
    feeds, delegations): each call goes through the host, to ingress (T1)."""

    def __init__(self, session_id: str, clock: Clock) -> None:
        self.session_id, self.clock = session_id, clock
        self.host: SessionHost | None = None
        self.stop = threading.Event()  # the session's stop switch (`HostedSession.stop`) for its tools

    def post(self, source: Source, text: str) -> Entry:
        return self._host().post(source, text)

    def post_keyed(self, source: Source, text: str, key: str) -> Entry:  # feeds: exactly once
        return self._host().post(source, text, key)

    def _host(self) -> SessionHost:
        if self.host is None:
            raise AvibeError(f"session {self.session_id}: an input arrived before its host started")
        return self.host


@contextmanager
def host_session(
    store: RecordStore,
    session_id: str,
    *,
    owner: LeaseOwner,
    clock: Clock,
    user_name: str,
    build: Callable[[HostPorts], SessionParts[V]],
    workdir: Path | None = None,
    on_hosted: Callable[[], None] = lambda: None,
) -> Iterator[HostedSession[V]]:
    """Host `session_id`: hold its lease (before anything is read or written, C1; a
    SessionHosted error otherwise), say so (`on_hosted`), keep `workdir` as where any host runs it, build
    the parts, run the host; on the way out stop its sources, settle, release the lease."""
    keeper = hold_lease(store, session_id, owner)
    on_hosted()
    try:
        if workdir is not None:
            save_workdir(store, session_id, workdir)
        ports = HostPorts(session_id, clock)
        parts = build(ports)
        host = SessionHost(store, session_id, parts.agent, clock, parts.events, queued=parts.queued)
        ports.host = host
        for source in parts.sources:
            host.add_source(source)
        try:
            yield HostedSession(
                host, parts.vibey, store, user_name, ports.stop, parts.context, parts.outstanding
            )
        finally:
            host.close()
            parts.after_close()
    finally:
        keeper.close()


# ---- where a session works, who works in it ----------------------------------------------------------


def save_workdir(store: RecordStore, session_id: str, workdir: Path) -> None:
    store.save_state(session_id, WorkdirState.KEY, WorkdirState(str(workdir)).to_dict())


def session_workdir(store: RecordStore, session_id: str, default: Path) -> Path:
    """Where a session works: as saved by its last host, else its title when that is a folder (sessions
    of `vibe run` are titled so), else `default`."""
    saved = WorkdirState.from_stored(store.load_state(session_id, WorkdirState.KEY))
    for candidate in (saved.path, store.get_session(session_id).title):
        if candidate and Path(candidate).is_dir():
            return Path(candidate)
    return default


def agent_of(store: RecordStore, session_id: str) -> str:
    """Who works in a session: the agent it was last hosted with, else Vibey."""
    return AgentState.from_stored(store.load_state(session_id, AgentState.KEY)).name


def assign_agent(store: RecordStore) -> Callable[[str, str], None]:
    """A delegated session's agent, in its state: whichever host runs it runs that agent."""

    def assign(child: str, agent: str) -> None:
        store.save_state(child, AgentState.KEY, AgentState(agent).to_dict())

    return assign


def vibey_works_in(store: RecordStore, session_id: str) -> None:
    """A session another agent worked in goes on with Vibey (`vibe chat`'s /agent vibey): say so in the
    record, so that `--continue` and `vibe serve` host it with Vibey from now on."""
    if agent_of(store, session_id) != VIBEY:
        store.save_state(session_id, AgentState.KEY, AgentState(VIBEY).to_dict())


def find_session(store: RecordStore, session_id: str | None, continue_in: Path | None) -> str | None:
    """The session to resume: the one named, or (`--continue`) the latest of the working directory."""
    if session_id is not None or continue_in is None:
        return session_id
    mine = [s for s in store.list_sessions() if s.title == str(continue_in)]
    if not mine:
        raise AvibeError(f"no session has run in {continue_in} yet; start one without --continue")
    return max(mine, key=lambda s: s.created_at).id


# ---- delegation: inputs into other sessions, and starting them -----------------------------------------


def post_to(store: RecordStore, clock: Clock) -> Callable[[str, Source, str], Entry]:
    """Ingress into another session (send_to_session, delegate): tagged by the source given (T1)."""

    def post(session_id: str, source: Source, text: str) -> Entry:
        return deliver(store, session_id, source, text, clock=clock)

    return post


def start_delegate(store: RecordStore, workdir: Path, start: Callable[[str], None]) -> Callable[[str], None]:
    """Starts a delegated session: it works where its parent does, run by `start` (a process of its own,
    or whichever host's fleet picks it up)."""

    def begin(child: str) -> None:
        save_workdir(store, child, workdir)
        start(child)

    return begin


# ---- background jobs as a source ------------------------------------------------------------------------


class _Job(Protocol):
    @property
    def id(self) -> str: ...


class Jobs(Protocol):
    """The background jobs of a session (`avibe.sources.background.BackgroundJobs`)."""

    def collect_finished(self) -> object: ...
    def running(self) -> Sequence[_Job]: ...
    def kill_all(self) -> object: ...


class JobsSource:
    """Background jobs as one of the host's input sources: a finished job posts a callback input."""

    def __init__(self, jobs: Jobs) -> None:
        self.jobs = jobs

    def poll(self) -> None:
        self.jobs.collect_finished()

    def waiting_for(self) -> tuple[str, ...]:
        return tuple(job.id for job in self.jobs.running())

    def close(self) -> None:
        self.jobs.kill_all()
