"""A session with Claude Code, Codex or OpenCode in it, as they are (SPEC L5, T3): the program found
from Settings, wrapped as the host's `AgentProgram`; `avibe.host.sessions` hosts it."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from avibe.backends import Activity, Backend, ToolDone, ToolUse, backend_named, run_program
from avibe.backends.base import DEFAULT_TIMEOUT_S
from avibe.backends.install import find_program
from avibe.compose.common import SystemClock, check_sandbox, feeds_for, open_record
from avibe.config import Settings
from avibe.host.activity_log import ActivityLog
from avibe.host.backend_agent import AgentProgram, BackendAgent, ProgramReply
from avibe.host.events import Event, EventSink, ToolCalled, ToolFinished, ignore_events
from avibe.host.sessions import HostedSession, HostPorts, SessionParts, agent_of, host_session
from avibe.record.entries import CallRecord

# No Vibey here: the program keeps its own context (L5); the chat shows no meter marks.
BackendSession = HostedSession[None]


def check_backend(name: str, settings: Settings) -> tuple[Backend, Path]:
    """The backend and its program, before anything is written: BackendError / ProgramMissing otherwise."""
    backend = backend_named(name)
    return backend, find_program(backend, settings.home)


def session_agent(settings: Settings, session_id: str) -> str:
    """Who works in an existing session: the backend that last ran in it, else vibey (read only)."""
    from avibe.store import open_store

    with open_store(settings.database_url, read_only=True) as store:
        return agent_of(store, session_id)


def backend_program(
    backend: Backend,
    executable: Path,
    workdir: Path,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    on_start: Callable[[int], None] = lambda _: None,
    stop: threading.Event | None = None,
    limit_s: float | None = None,
) -> AgentProgram:
    """The program as the host's AgentProgram: one `run_program` per turn, in `workdir`; `stop` set (the
    session's stop switch, the chat's Ctrl-C) stops it at once; `limit_s` bounds each turn."""

    def turn(prompt: str, *, session: str, emit: EventSink) -> ProgramReply:
        outcome = run_program(
            backend,
            executable,
            prompt,
            session=session,
            workdir=workdir,
            on_activity=lambda activity: emit(_event(activity)),
            timeout_s=timeout_s,
            on_start=on_start,
            stop=stop,
            limit_s=limit_s,
        )
        calls = tuple(CallRecord(c.name, _compact(dict(c.arguments))) for c in outcome.calls)
        return ProgramReply(outcome.reply, outcome.backend_session, calls)

    return turn


def _compact(arguments: Any) -> str:
    return json.dumps(arguments, ensure_ascii=False, separators=(",", ":"), default=str)


def _event(activity: Activity) -> Event:
    if isinstance(activity, ToolUse):
        return ToolCalled(activity.call_id, activity.name, dict(activity.arguments))
    assert isinstance(activity, ToolDone)
    return ToolFinished(
        activity.call_id, activity.name, activity.is_error, activity.output_chars, 0.0, error=activity.reason
    )


@contextmanager
def open_backend_session(
    settings: Settings,
    *,
    agent: str,
    workdir: Path,
    session_id: str | None,
    events: EventSink = ignore_events,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    on_start: Callable[[int], None] = lambda _: None,
    on_hosted: Callable[[], None] = lambda: None,
    limit_s: float | None = None,
) -> Iterator[BackendSession]:
    """A session host with Claude Code, Codex or OpenCode in it, over a new or existing session; this
    process holds the session's lease while it hosts it."""
    from avibe.store.provenance import ProvenanceLedger, ToolWatch
    from avibe.store.sql import lease_owner

    backend, executable = check_backend(agent, settings)
    check_sandbox(settings, workdir)  # its command watches run in the sandbox
    store = open_record(settings)
    session = store.get_session(session_id) if session_id else store.create_session(title=str(workdir))
    clock = SystemClock()

    def build(ports: HostPorts) -> SessionParts[None]:
        program = backend_program(
            backend,
            executable,
            workdir,
            timeout_s=timeout_s,
            on_start=on_start,
            stop=ports.stop,
            limit_s=limit_s,
        )
        runner = BackendAgent(
            backend.name,
            program,
            store=store,
            session_id=session.id,
            clock=clock,
            post=ports.post,
            watch=ToolWatch(ProvenanceLedger(settings.home), workdir, session.id),
        )
        feeds = feeds_for(store, ports, clock, settings, workdir)  # they reach the program tagged (T3)
        kept = ActivityLog(store, session.id, events)  # its tools and errors, for the person
        standing = lambda: bool(feeds.scene_lines())  # noqa: E731 - its watches and timers post on their own
        return SessionParts(runner, None, (feeds,), kept, queued=feeds.queued, outstanding=standing)

    with host_session(
        store,
        session.id,
        owner=lease_owner(),
        clock=clock,
        user_name=settings.user_name,
        build=build,
        on_hosted=on_hosted,
    ) as live:
        yield live
