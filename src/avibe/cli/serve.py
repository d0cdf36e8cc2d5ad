"""`vibe serve`: host live sessions - their turns, background jobs, watches, timers, delegated runs - and
accept inputs over HTTP. Many `vibe serve` processes may share one PostgreSQL record; each
session is run by one of them at a time (its lease), and any of them accepts its inputs. The person's
routes are served on a local socket in Avibe's home, TCP keeps callbacks, /health and the read-only
inspector (avibe.web.local says why); one process serves both."""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Final
from urllib.parse import quote, urlsplit

import typer

from avibe.agent.interrupted import NOTE_SOURCE
from avibe.cli.options import (
    BadArgument,
    ModelOpt,
    SessionOpt,
    StepsOpt,
    WindowOpt,
    WorkdirOpt,
    log_to_file,
    one_line,
    preflight_model,
    require_session,
)
from avibe.cli.terminal import announce, settings_or_die, terminal_approver
from avibe.compose import SystemClock, open_backend_session, open_record, open_session
from avibe.config import Settings
from avibe.errors import AvibeError
from avibe.host.events import Event, Idle, InputArrived, ReplyDelta, TurnEnded, TurnStarted, event_to_dict
from avibe.host.sessions import HostedSession, agent_of, session_workdir
from avibe.host.turn_watch import TurnWatch
from avibe.ports import CompletionRequest, ModelClient, RecordStore
from avibe.record.agents import is_external
from avibe.record.entries import EntryQuery
from avibe.record.messages import ModelFacts, ModelReply
from avibe.record.sources import FRAME
from avibe.web.fleet import Fleet, Left, SessionHandle, listen_for_inputs
from avibe.web.guard import Hosts, listen_socket
from avibe.web.local import LocalSocket, listen_local, run_servers

log = logging.getLogger("avibe.serve")


class SharedModel:
    """One model for every session this host runs: calls take turns (llama.cpp runs one at a time)."""

    def __init__(self, open_model: Callable[[], ModelClient]) -> None:
        self._open, self._lock = open_model, threading.Lock()
        self._model: ModelClient | None = None

    def _get(self) -> ModelClient:
        if self._model is None:
            self._model = self._open()
        return self._model

    @property
    def facts(self) -> ModelFacts:
        with self._lock:
            return self._get().facts

    def complete(self, request: CompletionRequest) -> ModelReply:
        with self._lock:
            return self._get().complete(request)


class SharedModels:
    """The models of the sessions this host runs, each opened once (checked before its first session
    runs on it: one that cannot run here fails that session's hosting, with the reason in /health)."""

    def __init__(self, settings: Settings) -> None:
        self._settings, self._models, self._lock = settings, dict[str, SharedModel](), threading.Lock()

    def get(self, name: str) -> SharedModel:
        from avibe.providers import open_model

        with self._lock:
            if name not in self._models:
                preflight_model(name, self._settings)
                self._models[name] = SharedModel(lambda: open_model(name, self._settings))
            return self._models[name]


# The note for the model when this process stopped during a turn (Ctrl-C): recorded, never on the screen.
EXIT_NOTE: Final = (
    "The process hosting this session (vibe serve) stopped during your turn. A tool call that was "
    "running then was killed with everything it started and may have run in part: check before running "
    "it again. Go on with the task."
)
PREVIEW_CHARS: Final = 60  # of an input's or a reply's text on the terminal line that says it came
_printing = threading.Lock()  # sessions run in threads of their own: one line at a time


class SessionLines:
    """One hosted session's events: every event to the log - an `idle` only when it differs from the last
    event logged (a host with a watch goes idle five times a second) - and, unless `quiet`, one terminal
    line per input the host takes in (from the record: inputs come over HTTP, from other hosts, from its
    feeds) and one per turn; a text only as a short one-line preview behind the frame mark."""

    def __init__(self, session_id: str, store: RecordStore, *, quiet: bool) -> None:
        self.session_id, self._store, self._quiet = session_id, store, quiet
        self._shown_upto: int | None = None  # inputs up to here are history (or were printed)
        self._last_logged: Event | None = None
        self._agent = ""

    def start(self, cursor: int) -> None:
        """Print the inputs after the agent's `cursor` (what it has yet to take in) as they are taken."""
        self._shown_upto = cursor

    def __call__(self, event: Event) -> None:
        if isinstance(event, ReplyDelta):
            return
        if not (isinstance(event, Idle) and event == self._last_logged):
            log.info("session %s: %s", self.session_id, event_to_dict(event))
        self._last_logged = event
        if self._quiet:
            return
        if isinstance(event, TurnStarted):
            self._agent = event.agent
        if isinstance(event, InputArrived | TurnStarted | TurnEnded):
            self._print_inputs()
        if isinstance(event, TurnEnded):
            steps = f"{event.steps} step" + ("" if event.steps == 1 else "s")
            how = "stopped" if event.stopped else f"replied ({steps})"
            self._print(f"turn by {self._agent or 'the agent'}: {how}", event.reply)

    def _print_inputs(self) -> None:
        if self._shown_upto is None:
            return
        for entry in self._store.query(EntryQuery(self.session_id, seq_from=self._shown_upto + 1)):
            self._shown_upto = entry.seq
            if entry.kind != "assistant":
                who = (
                    f"message from {entry.source.name}"
                    if entry.is_user
                    else f"{entry.kind} {entry.source.name}"
                )
                self._print(f"input #{entry.seq}: {who}", entry.text)

    def _print(self, what: str, text: str) -> None:
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        first = lines[0] if lines else ""
        cut = first if len(first) <= PREVIEW_CHARS else first[: PREVIEW_CHARS - 1] + "…"
        preview = f" {FRAME} {one_line(cut)}" if cut else ""
        with _printing:
            typer.echo(f"[serve] session {self.session_id} {one_line(what)}{preview}")


def _host_opener(
    settings: Settings, model_name: str, workdir: Path, window: int | None, max_steps: int, *, quiet: bool
) -> Callable[[str], Any]:
    from avibe.compose.session_settings import recorded_settings

    models = SharedModels(settings)
    store = open_record(settings)

    @contextmanager
    def open_host(session_id: str) -> Iterator[SessionHandle]:
        agent = agent_of(store, session_id)
        lines = TurnWatch(store, session_id, SessionLines(session_id, store, quiet=quiet))
        if is_external(agent):  # Claude Code, Codex or OpenCode works in it (L5): host that program
            with _backend_host(settings, store, session_id, agent, workdir, lines) as handle:
                yield handle
            return
        # The session runs on the model it recorded (docs/serve.md), this host's only for one without.
        session_model = recorded_settings(store, session_id).model or model_name
        opened = open_session(
            settings,
            model_name=session_model,
            workdir=session_workdir(store, session_id, workdir),
            session_id=session_id,
            window=window,
            max_steps=max_steps,
            events=lines,
            start_delegate=lambda child: None,  # this host's fleet (or another's) picks it up
            model=models.get(session_model),
            approver=terminal_approver(),
            chosen=frozenset(),  # serve's own settings change no session's; stricter ones still hold
        )
        with opened as live, watched(lines, live) as run_ready:
            yield SessionHandle(run_ready, live.outstanding, lines)

    return open_host


@contextmanager
def _backend_host(
    settings: Settings, store: RecordStore, session_id: str, agent: str, workdir: Path, lines: TurnWatch
) -> Iterator[SessionHandle]:
    with (
        open_backend_session(
            settings,
            agent=agent,
            workdir=session_workdir(store, session_id, workdir),
            session_id=session_id,
            events=lines,
        ) as live,
        watched(lines, live) as run_ready,
    ):
        yield SessionHandle(run_ready, live.outstanding, lines)


@contextmanager
def watched(watch: TurnWatch, live: HostedSession[Any]) -> Iterator[Callable[[], None]]:
    """The session's turns under its watch (avibe.host.turn_watch): the stop switch bound, the record
    polled for a stop while a turn runs; yields what runs its waiting input."""
    watch.switch = live.stop
    lines = watch.sink
    if isinstance(lines, SessionLines):
        lines.start(live.host.agent.cursor())

    def run_ready() -> None:
        try:
            live.host.run_until_idle(wait_for_jobs=False)
        finally:
            watch.turn_over()  # a turn that raised is over too
        if watch.stopped and watch.for_good:  # the model is told; the note wakes the session's next host
            live.host.post(NOTE_SOURCE, EXIT_NOTE)

    watch.start_polling()
    try:
        yield run_ready
    finally:
        watch.close()


def _address(settings: Settings, host: str | None, port: int | None) -> tuple[str, int]:
    parts = urlsplit(settings.serve_url)
    return host or parts.hostname or "127.0.0.1", port if port is not None else parts.port or 8765


def serve(
    host: Annotated[
        str | None, typer.Option("--host", help="Address to bind (default: AVIBE_SERVE_URL's).")
    ] = None,
    port: Annotated[
        int | None, typer.Option("--port", help="Port (default: AVIBE_SERVE_URL's, 8765).")
    ] = None,
    model: ModelOpt = None,
    window: WindowOpt = None,
    workdir: WorkdirOpt = Path("."),
    max_steps: StepsOpt = 30,
    session: SessionOpt = None,
    exit_when_idle: Annotated[
        bool, typer.Option("--exit-when-idle", help="Host --session until it is idle, then exit (no HTTP).")
    ] = False,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="No line per input and turn (the log still has them).")
    ] = False,
) -> None:
    """Host live sessions and accept inputs over HTTP (callbacks, messages); Ctrl-C stops."""
    settings = settings_or_die()
    model_name = model or settings.model
    if port is not None and not 0 < port < 65_536:
        raise BadArgument(f"--port {port} is not a port (1-65535)")
    if exit_when_idle and session is None:
        raise BadArgument("--exit-when-idle hosts one session: give it with --session")
    if session is not None:
        require_session(settings, session)
    _preflight(settings, model_name, named=model is not None)
    # The port before anything is written: one in use is one line, no serve-token made, no lease taken.
    address = _address(settings, host, port)
    listening = None if exit_when_idle else listen_socket(*address)
    local: LocalSocket | None = None
    try:
        local = None if listening is None else listen_local(settings.home, address[1])
        sockets = None if listening is None or local is None else (listening, local)
        _serve(settings, model_name, window, workdir, max_steps, session, address[0], sockets, quiet)
    finally:
        if local is not None:
            local.close()
        if listening is not None:
            listening.close()


def _preflight(settings: Settings, model_name: str, *, named: bool) -> None:
    try:
        preflight_model(model_name, settings)
    except AvibeError as exc:
        if named:  # asked for by name: a model that cannot run here is an error
            raise
        # The configured default: a host of Claude Code / Codex / OpenCode sessions needs no model of its
        # own, so serve them; Vibey's sessions fail (and /health says why) until the model can run.
        typer.echo(f"[serve] warning: Vibey's model cannot run here ({exc}); only other agents' sessions run")


def _serve(
    settings: Settings, model_name: str, window: int | None, workdir: Path, max_steps: int,
    session: str | None, bind: str, sockets: tuple[socket.socket, LocalSocket] | None, quiet: bool,
) -> None:  # fmt: skip
    log_path = log_to_file(settings)
    announce(settings)  # before it hosts a session
    workdir = workdir.resolve()
    store = open_record(settings)
    fleet = Fleet(
        store,
        _host_opener(settings, model_name, workdir, window, max_steps, quiet=quiet),
        only=session,
        exit_when_idle=sockets is None,
    )
    stopping = threading.Event()
    listen_for_inputs(settings.database_url, fleet, stopping)
    if sockets is None:
        try:
            fleet.run()
        finally:
            stopping.set()
            _say_left(fleet.stop())
        return
    _serve_http(settings, fleet, store, bind, sockets, log_path, stopping)


def _serve_http(
    settings: Settings, fleet: Fleet, store: Any, bind: str, sockets: tuple[socket.socket, LocalSocket],
    log_path: Path, stopping: threading.Event,
) -> None:  # fmt: skip
    from avibe.web.local import inspector_key_path
    from avibe.web.server import Api, build_local_app, build_tcp_app
    from avibe.web.tokens import TOKEN_FILE, mint_inspector_key, serve_token_file

    listening, local = sockets
    port_number = listening.getsockname()[1]
    # The token is asked on the local socket too (a second lock behind the socket's own mode); the
    # inspector's key is its own, read-only, new at every start: TCP never takes the token.
    token = os.environ.get("AVIBE_SERVE_TOKEN") or serve_token_file(settings.home)
    key = mint_inspector_key(inspector_key_path(settings.home, port_number), token)
    api = Api(store, fleet, SystemClock(), settings.user_name, token=token)
    hosts = Hosts.of(bind, settings.serve_url)
    tcp_app = build_tcp_app(api, local.path, inspector=_inspector(store, key), hosts=hosts)
    fleet_thread = threading.Thread(target=fleet.run, name="serve-fleet", daemon=True)
    fleet_thread.start()
    shown = f"http://{_host_in_url(bind)}:{port_number}"
    typer.echo(f"[serve] {shown} pid {os.getpid()} record {store.display_url} (log: {log_path})")
    where = "AVIBE_SERVE_TOKEN" if os.environ.get("AVIBE_SERVE_TOKEN") else settings.home / TOKEN_FILE
    typer.echo(f"[serve] your routes (messages, sessions): {local.path}, with the token in {where}")
    typer.echo(f"[serve] inspector (read-only): {shown}/inspect/?key={quote(key)}")
    try:
        run_servers(tcp_app, listening, build_local_app(api), local)
    finally:
        stopping.set()
        _say_left(fleet.stop())


def _say_left(left: Sequence[Left]) -> None:
    """One line per session this process still hosted as it stopped."""
    for session in left:
        typer.echo(f"[serve] {session.line()}")


def _host_in_url(bind: str) -> str:
    if bind in ("0.0.0.0", "::"):
        return "127.0.0.1" if bind == "0.0.0.0" else "[::1]"
    return f"[{bind}]" if ":" in bind else bind


def _inspector(store: RecordStore, key: str) -> list[Any]:
    """The inspector's app at /inspect, behind its own read-only key (never the token)."""
    from starlette.routing import Mount

    from avibe.web.inspector import inspector_app

    return [Mount("/inspect", app=inspector_app(store, key=key))]


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)
