"""`vibe agents` (the backends found, with their versions), `vibe agents install` (from npm, pinned by
the shipped lockfile), and the edge that hosts Claude Code, Codex or OpenCode in a session as they are
(SPEC L5, T3): `BackendAgent` is the session host's Agent for an `avibe.backends` program."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final

import typer

from avibe.backends import (
    BACKENDS,
    Activity,
    Backend,
    BackendError,
    ToolDone,
    ToolUse,
    backend_named,
    run_program,
)
from avibe.backends.base import DEFAULT_TIMEOUT_S
from avibe.backends.install import agents_dir, find_program, install, survey
from avibe.cli.wiring import (
    EventPrinter,
    SystemClock,
    add_feeds,
    announce,
    die,
    hold_lease,
    open_record,
    settings_or_die,
)
from avibe.config import Settings
from avibe.host import Inbox, Input, SessionHost, TurnResult
from avibe.host.events import (
    Event,
    EventSink,
    Replied,
    Stopped,
    ToolCalled,
    ToolFinished,
    TurnEnded,
    TurnStarted,
    ignore_events,
)
from avibe.ingress import record_reply
from avibe.ports import Clock, Delivery, RecordStore
from avibe.record.entries import CallRecord, Entry, Source

if TYPE_CHECKING:
    from avibe.store.provenance import ToolWatch

log = logging.getLogger("avibe.backends")
STATE_PREFIX: Final = "backend."  # store state key per backend: its session id and how far it has read
AGENT_KEY: Final = "agent"  # store state key: which agent works in the session (absent: Vibey)


def _compact(arguments: Any) -> str:
    import json

    return json.dumps(arguments, ensure_ascii=False, separators=(",", ":"), default=str)


@dataclass
class BackendState:
    """What survives a restart of Avibe (store state `backend.<name>`): the backend's own session id,
    the newest seq it has taken in (`cursor`), and the newest seq it answered (`answered`): inputs after
    `answered` - those of a turn that crashed, and the crash notice - go with the next turn."""

    session: str = ""
    cursor: int = 0
    answered: int = 0

    @classmethod
    def load(cls, store: RecordStore, session_id: str, name: str) -> BackendState:
        data = store.load_state(session_id, STATE_PREFIX + name) or {}
        return cls(str(data.get("session", "")), int(data.get("cursor", 0)), int(data.get("answered", 0)))

    def save(self, store: RecordStore, session_id: str, name: str) -> None:
        value = {"session": self.session, "cursor": self.cursor, "answered": self.answered}
        store.save_state(session_id, STATE_PREFIX + name, value)


class BackendAgent:
    """An external program as the host's Agent. Each turn hands it every new input as the harness
    rendered it (`Input.text`: the source tag line first, T1-T3), records its reply as an assistant entry
    of this agent with its tool calls, and continues the same backend session. A failure (it crashed,
    reported an error, hung) is posted as a harness input with its exit code and last stderr lines; the
    agent does not wake for its own notice, and the next input's turn carries it. Never checkpoints (L5)."""

    def __init__(
        self,
        backend: Backend,
        executable: Path,
        *,
        store: RecordStore,
        session_id: str,
        workdir: Path,
        clock: Clock,
        post: Delivery,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        on_start: Callable[[int], None] = lambda _: None,
        watch: ToolWatch | None = None,
    ) -> None:
        self.backend, self.executable, self.store, self.session_id = backend, executable, store, session_id
        self.watch = watch  # issue 27 item 7: what the program leaves in AGENTS.md and skills is marked
        self.workdir, self.clock, self.post, self.timeout_s, self.on_start = (
            workdir,
            clock,
            post,
            timeout_s,
            on_start,
        )
        self.state = BackendState.load(store, session_id, backend.name)
        store.save_state(session_id, AGENT_KEY, {"name": backend.name})

    @property
    def name(self) -> str:
        return self.backend.name

    def cursor(self) -> int:
        return self.state.cursor

    def _save(self) -> None:
        self.state.save(self.store, self.session_id, self.name)

    def run_turn(self, inbox: Inbox, emit: EventSink) -> TurnResult:
        inputs = inbox.after(self.state.answered)
        fresh = [i for i in inputs if i.role == "user"]  # its own (and other agents') replies are not input
        if not fresh:
            return TurnResult("")
        emit(TurnStarted(self.session_id, self.name))
        self.state.cursor = max(self.state.cursor, inputs[-1].seq)
        self._save()
        if self.watch is not None:
            self.watch.settle()
        try:
            outcome = run_program(
                self.backend,
                self.executable,
                prompt_text(fresh),
                session=self.state.session,
                workdir=self.workdir,
                on_activity=lambda activity: emit(_event(activity)),
                timeout_s=self.timeout_s,
                on_start=self.on_start,
            )
        except BackendError as exc:
            if self.watch is not None:  # what it wrote before it failed, at the input it worked on
                self.watch.agent_changed(self.state.cursor)
            return self._failed(str(exc), emit)
        calls = tuple(CallRecord(c.name, _compact(dict(c.arguments))) for c in outcome.calls)
        entry = record_reply(
            self.store, self.session_id, outcome.reply, agent=self.name, clock=self.clock, calls=calls
        )
        if self.watch is not None:  # whatever the program changed this turn: its reply's step
            self.watch.agent_changed(entry.seq)
        self.state = BackendState(outcome.backend_session or self.state.session, entry.seq, entry.seq)
        self._save()
        emit(Replied(outcome.reply))
        emit(TurnEnded(outcome.reply, False, len(outcome.calls) + 1, 0))
        return TurnResult(outcome.reply, steps=len(outcome.calls) + 1)

    def _failed(self, message: str, emit: EventSink) -> TurnResult:
        log.warning("session %s: %s", self.session_id, message)
        notice = self.post(Source("harness", name=self.name), message)
        self.state.cursor = notice.seq  # its own notice does not wake it; the next input's turn carries it
        self._save()
        emit(Stopped(message.split("\n", 1)[0]))
        emit(TurnEnded("", True, 0, 0))
        return TurnResult("", stopped=True)


def prompt_text(inputs: list[Input]) -> str:
    """The text handed to the program: each input exactly as the harness rendered it (its tag line first
    for anything the person did not type; T2's name in front of a person's tag-like line), one after the
    other with a blank line between. Nothing in a person's text can pass for a tag line (T2), so nothing
    can pass for the start of another input."""
    return "\n\n".join(i.text for i in inputs)


def _event(activity: Activity) -> Event:
    if isinstance(activity, ToolUse):
        return ToolCalled(activity.call_id, activity.name, dict(activity.arguments))
    assert isinstance(activity, ToolDone)
    return ToolFinished(activity.call_id, activity.name, activity.is_error, activity.output_chars, 0.0)


class AgentPrinter(EventPrinter):
    """`vibe run --agent`: the same lines as for Vibey, the replies under the agent's name."""

    def __init__(self, agent: str, *, verbose: bool = False, json_lines: bool = False) -> None:
        super().__init__(verbose=verbose, json_lines=json_lines)
        self.agent = agent

    def _line(self, event: Event) -> str | None:
        if isinstance(event, Replied):
            return f"{self.agent}> {event.text}"
        return super()._line(event)


@dataclass
class BackendSession:
    """A live session with an external agent: the host, the agent, the record (like wiring.HostedSession)."""

    host: SessionHost
    agent: BackendAgent
    store: RecordStore
    user_name: str

    @property
    def session_id(self) -> str:
        return self.agent.session_id

    @property
    def vibey(self) -> None:
        """No Vibey here: the program keeps its own context (L5); the chat shows no meter marks."""
        return None

    def send(self, text: str) -> TurnResult:
        return self.host.send(text, self.user_name)


def session_agent(settings: Settings, session_id: str) -> str:
    """Who works in an existing session: the backend that last ran in it, else vibey (read only)."""
    from avibe.store import open_store

    with open_store(settings.database_url, read_only=True) as store:
        found = store.load_state(session_id, AGENT_KEY)
    return str(found.get("name", "vibey")) if found else "vibey"


def check_backend(name: str, settings: Settings) -> tuple[Backend, Path]:
    """The backend and its program, before anything is written: BackendError / ProgramMissing otherwise."""
    backend = backend_named(name)
    return backend, find_program(backend, settings.home)


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
) -> Iterator[BackendSession]:
    """A session host with Claude Code, Codex or OpenCode in it, over a new or existing session; this
    process holds the session's lease while it hosts it (issue 11 item 2)."""
    from avibe.config import user_config_file
    from avibe.store.provenance import ProvenanceLedger, ToolWatch
    from avibe.tools.sandbox import check_layout

    backend, executable = check_backend(agent, settings)
    # Its command watches run in the sandbox: refused where it cannot keep Avibe's files out (issue 27)
    config_dir, url = user_config_file().parent, settings.database_url
    check_layout(settings.sandbox, workdir, home=settings.home, config_dir=config_dir, database_url=url)
    store = open_record(settings)
    session = store.get_session(session_id) if session_id else store.create_session(title=str(workdir))
    keeper = hold_lease(store, session.id)
    announce(settings)  # the session starts: its loosened settings said (issue 27 item 1)
    try:
        clock = SystemClock()

        def post(source: Source, text: str) -> Entry:  # the delivery port: through the host, to ingress
            return host.post(source, text)

        runner = BackendAgent(
            backend,
            executable,
            store=store,
            session_id=session.id,
            workdir=workdir,
            clock=clock,
            post=post,
            timeout_s=timeout_s,
            on_start=on_start,
            watch=ToolWatch(ProvenanceLedger(settings.home), workdir, session.id),
        )
        host = SessionHost(store, session.id, runner, clock, events)
        add_feeds(host, store, settings, workdir)  # its watches and timers reach the program tagged (T3)
        try:
            yield BackendSession(host, runner, store, settings.user_name)
        finally:
            host.close()
    finally:
        keeper.close()


def run_backend(
    agent: str,
    text: str,
    *,
    settings: Settings,
    workdir: Path,
    session: str | None,
    verbose: bool,
    json_lines: bool,
    no_wait: bool,
    timeout_s: float,
) -> int:
    """`vibe run --agent NAME`: the same host and event lines as for Vibey, with the program in it;
    the exit code (0 replied, 1 it failed: the harness input says how). A missing program exits 2
    before anything is written."""
    from avibe.cli.options import log_to_file

    try:
        check_backend(agent, settings)
    except BackendError as exc:
        die(str(exc))
    log_path = log_to_file(settings)
    printer = AgentPrinter(agent, verbose=verbose, json_lines=json_lines)
    with open_backend_session(
        settings, agent=agent, workdir=workdir, session_id=session, events=printer, timeout_s=timeout_s
    ) as live:
        if not json_lines:
            typer.echo(f"[session] {live.session_id} ({agent}; log: {log_path})")
        results = [live.send(text), *live.host.run_until_idle(wait_for_jobs=not no_wait)]
    return 1 if results[-1].stopped else 0


# ---- vibe agents ---------------------------------------------------------------------------------------

agents_app = typer.Typer(
    help="The agent backends Avibe runs as they are: Claude Code, Codex, OpenCode.",
    invoke_without_command=True,
)


@agents_app.callback()
def agents(ctx: typer.Context) -> None:
    """List the backends found (installed by `vibe agents install`, or on PATH) and their versions."""
    if ctx.invoked_subcommand is not None:
        return
    settings = settings_or_die()
    for found in survey(BACKENDS, settings.home):
        if found.path is None:
            typer.echo(f"{found.backend.name:<12} not found (vibe agents install)")
        else:
            typer.echo(f"{found.backend.name:<12} {found.version:<28} {found.path} ({found.where})")


@agents_app.command("install")
def install_command(
    npm: Annotated[str, typer.Option("--npm", help="The npm to run.")] = "npm",
) -> None:
    """Install Claude Code, Codex and OpenCode from npm into Avibe's data dir, pinned by the lockfile
    that ships with Avibe (exact versions, integrity hashes: the same bytes every time)."""
    settings = settings_or_die()
    typer.echo(f"installing into {agents_dir(settings.home)} (npm install, pinned by the lockfile) ...")
    try:
        target = install(settings.home, npm=npm)
    except BackendError as exc:
        die(str(exc))
    typer.echo(f"installed into {target}")
    for found in survey(BACKENDS, settings.home):
        typer.echo(f"{found.backend.name:<12} {found.version or 'not found'}")


def register(app: typer.Typer) -> None:
    app.add_typer(agents_app, name="agents")
