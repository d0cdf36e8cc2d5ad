"""Wiring at the edge: settings -> store, model, counter, tools, background jobs -> a Vibey session."""

from __future__ import annotations

import hashlib
import json
import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Final, NoReturn, cast

import typer

from avibe.agent.driver import mode_for
from avibe.agent.loop import RunConfig, Vibey
from avibe.config import Settings, load_settings
from avibe.errors import AvibeError
from avibe.host import SessionHost, TurnResult
from avibe.host.context_log import ContextLog, Limits
from avibe.host.events import (
    CHECKPOINT_KINDS,
    CheckpointAccepted,
    CheckpointFailed,
    CheckpointFallback,
    CheckpointStarted,
    Event,
    EventSink,
    Idle,
    InputArrived,
    ModelCalled,
    ModelStarted,
    Replied,
    ReplyDelta,
    Stopped,
    ToolCalled,
    ToolFinished,
    TurnStarted,
    event_to_dict,
    ignore_events,
)
from avibe.ports import Lease, ModelClient, RecordStore
from avibe.prompts import fill
from avibe.record.entries import Entry, Source
from avibe.record.sources import frame_lines

if TYPE_CHECKING:
    from avibe.ports import FeedStore
    from avibe.sources.background import BackgroundJobs
    from avibe.sources.feeds import FeedRunner
    from avibe.store.provenance import ProvenanceLedger
    from avibe.tools.approval import ApprovalRequest, Approver, Decision
    from avibe.tools.sandbox import SandboxPolicy
    from avibe.tools.skills import SkillInfo

# One writer per session (issue 11 item 2): the lease lives LEASE_TTL_S past its last heartbeat, and
# the heartbeat renews it every LEASE_BEAT_S. On this machine a dead holder's lease is taken over at
# once; from another machine (a shared PostgreSQL) after LEASE_TTL_S.
LEASE_TTL_S: Final = 60.0
WORKDIR_KEY: Final = "workdir"  # session state: the folder the session works in (any host runs it there)
LEASE_BEAT_S: Final = 10.0
log = logging.getLogger("avibe.cli")


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


def die(message: str, code: int = 2) -> NoReturn:
    """One clear line on stderr and a non-zero exit: the CLI's only way to fail."""
    typer.echo(f"vibe: {message}", err=True)
    raise typer.Exit(code)


def settings_or_die() -> Settings:
    """The settings, or one clear line and exit 2."""
    try:
        return load_settings()
    except AvibeError as exc:
        die(str(exc))


_announced: set[str] = set()  # the notices this process has printed


def announce(settings: Settings) -> None:
    """Settings.notices on stderr - what a project config tried to loosen, the loosened settings in force
    (issue 27 item 1) - one `vibe: ` line each, once per process. Called where a session starts: here in
    open_session and open_backend_session, in `vibe chat` before its screen, in `vibe serve` before it
    listens; after the pre-flight checks, so a command that fails still says one line (exit 2)."""
    from avibe.cli.options import one_line

    for line in settings.notices:
        if line not in _announced:
            _announced.add(line)
            typer.echo(f"vibe: {one_line(line)}", err=True)


def open_record(settings: Settings) -> RecordStore:
    from avibe.store import open_store

    settings.home.mkdir(parents=True, exist_ok=True)
    return open_store(settings.database_url)


def open_existing_record(settings: Settings) -> RecordStore:
    """For read-only commands: never create a database (or its schema) just to find it empty."""
    from avibe.errors import NoRecord
    from avibe.store import open_store

    try:
        return open_store(settings.database_url, create=False)
    except NoRecord as exc:
        die(f"there is no record yet ({exc}); nothing has run with AVIBE_HOME={settings.home}")


class EventPrinter:
    """Progress lines of a headless run. What the user sees follows the seed: replies, tool calls, inputs
    from other sources and stops; context work (checkpoints) only with `verbose` (U1, U2) - the user
    hears about context only at the U3 stop. `json_lines` prints every event as one JSON line instead.
    A reply streams: its pieces are printed on one `vibey> ` line as they come, which the next event ends;
    the `Replied` of a streamed reply prints nothing more."""

    def __init__(self, *, verbose: bool = False, json_lines: bool = False) -> None:
        self.verbose, self.json_lines = verbose, json_lines
        self._ticker: _Ticker | None = None
        self._line_open = False  # a streamed reply's line is being written
        self._streamed = False  # the current model call streamed text

    def __call__(self, event: Event) -> None:
        if self.json_lines:
            if not (isinstance(event, ReplyDelta) and not event.text):  # a heartbeat shows nothing
                typer.echo(json.dumps(event_to_dict(event), ensure_ascii=False, default=str))
            return
        self._tick(event)
        if isinstance(event, ReplyDelta):
            self._stream(event.text)
            return
        if self._line_open:
            typer.echo("")
            self._line_open = False
        if isinstance(event, ModelStarted):
            self._streamed = False
        if isinstance(event, Replied) and self._streamed:
            return  # it was shown as it came
        line = self._line(event)
        if line is not None:
            typer.echo(line)

    def _stream(self, text: str) -> None:
        if not text:
            return
        if not self._line_open:
            typer.echo("vibey> ", nl=False)
            self._line_open = self._streamed = True
        typer.echo(text, nl=False)

    def _tick(self, event: Event) -> None:
        """Elapsed time while the model works (a silent first call on the embedded model takes minutes)."""
        if isinstance(event, ModelStarted):
            self._ticker = _Ticker.start()
        elif self._ticker is not None:
            self._ticker.stop()
            self._ticker = None

    def _line(self, event: Event) -> str | None:
        if isinstance(event, Replied):
            return f"vibey> {event.text}"
        if isinstance(event, Stopped):
            return f"[stop] {event.message}"
        if isinstance(event, ToolCalled):
            arguments = json.dumps(event.arguments, ensure_ascii=False)
            return f"[tool] {event.name} {arguments[:120]}"
        if isinstance(event, ToolFinished) and event.is_error:
            return f"[tool] {event.name} failed"
        if isinstance(event, InputArrived) and event.source not in ("user",):
            from avibe.cli.options import terminal_safe

            # the tag, then the body framed and with no escape sequence obeyed: no line of it passes for
            # a tag, a reply or a header
            return terminal_safe("\n".join([event.tag, *frame_lines(event.text[:200])]))
        if isinstance(event, TurnStarted | ModelCalled | Idle) and self.verbose:
            return _verbose_line(event)
        if event.kind in CHECKPOINT_KINDS and self.verbose:
            return _verbose_line(event)
        return None


def _verbose_line(event: Event) -> str:
    if isinstance(event, ModelCalled):
        return (
            f"[model] step {event.step}: {event.view_tokens} tokens in view, {event.prompt_tokens} prompt "
            f"({event.cached_tokens} cached), {event.output_tokens} out, {event.seconds:.1f}s"
        )
    if isinstance(event, CheckpointAccepted):
        how = f" ({event.fallback})" if event.fallback else ""
        return (
            f"[checkpoint] {event.number}{how}: {event.before} -> {event.after} tokens, {event.seconds:.0f}s"
        )
    if isinstance(event, CheckpointFallback):
        return f"[checkpoint] {event.number} (model-free): {event.before} -> {event.after} tokens"
    if isinstance(event, CheckpointFailed):
        return f"[checkpoint] failed: {event.reason}"
    if isinstance(event, CheckpointStarted):
        return f"[checkpoint] started at {event.tokens} tokens ({event.reason})"
    if isinstance(event, Idle):
        return "[idle]" + (f" waiting for {', '.join(event.waiting_for)}" if event.waiting_for else "")
    data = event_to_dict(event)
    return f"[{data.pop('kind')}] " + " ".join(f"{k}={v}" for k, v in data.items())


class _Ticker:
    """Prints the seconds a model call has taken so far on stderr, in place, when stderr is a terminal."""

    def __init__(self) -> None:
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._started = time.monotonic()

    @classmethod
    def start(cls) -> _Ticker:
        ticker = cls()
        if sys.stderr.isatty():
            ticker._thread.start()
        return ticker

    def _run(self) -> None:
        while not self._done.wait(1.0):
            sys.stderr.write(f"\r[model] working {time.monotonic() - self._started:.0f}s ")
            sys.stderr.flush()

    def stop(self) -> None:
        self._done.set()
        if self._thread.is_alive():
            self._thread.join()
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def _skill_dirs(settings: Settings, workdir: Path) -> list[Path]:
    return [workdir / ".avibe" / "skills", settings.home / "skills"]


def _agents_md(workdir: Path, ledger: ProvenanceLedger) -> tuple[str, str]:
    """The workdir's AGENTS.md and its heading in the system prompt: "" (the user's) unless its content
    is what an agent left there (issue 27 item 7), read once so the text and its mark agree."""
    from avibe.store.provenance import AGENTS_MD

    path = workdir / AGENTS_MD
    if not path.is_file():
        return "", ""
    data = path.read_bytes()
    write = ledger.agent_write(path, hashlib.sha256(data).hexdigest())
    heading = "" if write is None else fill("agents_md_agent", session=write.session, seq=write.seq or "?")
    return data.decode("utf-8"), heading


def _skill_mark(ledger: ProvenanceLedger) -> Callable[[SkillInfo], str]:
    """A skill's mark in the catalogue: the agent's, when its SKILL.md is as an agent left it (issue 27
    item 7; `version` is the sha256 of the bytes the catalogue line was read from)."""

    def mark(skill: SkillInfo) -> str:
        write = ledger.agent_write(skill.path, skill.version)
        return "" if write is None else fill("skill_agent", session=write.session, seq=write.seq or "?")

    return mark


class JobsSource:
    """Background jobs as one of the host's input sources: a finished job posts a callback input."""

    def __init__(self, jobs: BackgroundJobs) -> None:
        self.jobs = jobs

    def poll(self) -> None:
        self.jobs.collect_finished()

    def waiting_for(self) -> tuple[str, ...]:
        return tuple(job.id for job in self.jobs.running())

    def close(self) -> None:
        self.jobs.kill_all()


class LeaseKeeper:
    """Holds a session's lease while this process hosts it: a daemon thread renews it every `beat_s`
    seconds (model calls may take minutes; the heartbeat must not wait for them), `close` releases it.
    A lease found taken over (this process was stalled past its expiry) is logged; `lost` says so."""

    def __init__(self, store: RecordStore, lease: Lease, *, ttl_s: float, beat_s: float) -> None:
        self.store, self.lease, self.ttl_s, self.beat_s = store, lease, ttl_s, beat_s
        self.lost = False
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"lease-{lease.session}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.wait(self.beat_s):
            try:
                renewed = self.store.renew_lease(self.lease, ttl_s=self.ttl_s)
            except AvibeError as exc:  # the database is busy or away: try again at the next beat
                log.warning("session %s: could not renew its lease: %s", self.lease.session, exc)
                continue
            if renewed is None:
                self.lost = True
                log.error(
                    "session %s: its lease was taken over by another process while this one (pid %d) "
                    "hosted it; this process stalled past the lease's expiry",
                    self.lease.session,
                    self.lease.owner.pid,
                )
                return
            self.lease = renewed

    def close(self) -> None:
        self._done.set()
        self._thread.join()
        if self.lost:
            return
        try:
            self.store.release_lease(self.lease)
        except AvibeError as exc:  # it expires on its own; the next run takes it over then
            log.warning("session %s: could not release its lease: %s", self.lease.session, exc)


def hold_lease(store: RecordStore, session_id: str) -> LeaseKeeper:
    """This process becomes the session's one writer, or SessionHosted says who is (nothing written).
    A stale lease (its process gone, or its heartbeat expired) is taken over, with a log line."""
    from avibe.store.sql import lease_owner

    grant = store.acquire_lease(session_id, lease_owner(), ttl_s=LEASE_TTL_S)
    if grant.replaced is not None:
        old = grant.replaced.owner
        log.warning(
            "session %s: took over the lease of pid %d on %s (held since %s): %s",
            session_id,
            old.pid,
            old.host,
            grant.replaced.acquired_at.isoformat(),
            grant.reason,
        )
    return LeaseKeeper(store, grant.lease, ttl_s=LEASE_TTL_S, beat_s=LEASE_BEAT_S)


class TerminalApprover:
    """Asks the person on the terminal (issue 11 item 9): the request on stderr, the answer from stdin
    - y(es), n(o) or a(lways); end of input is no. What the model wrote is shown terminal-safe: an
    escape sequence in a command cannot hide part of it from the person."""

    ANSWERS: Final = {"y": "yes", "yes": "yes", "n": "no", "no": "no", "a": "always", "always": "always"}

    def __call__(self, request: ApprovalRequest) -> Decision:
        from avibe.cli.options import terminal_safe

        verb = "run" if request.action == "command" else "change"
        detail = f" ({request.detail})" if request.detail else ""
        sys.stderr.write(
            f"\n[approve] {request.tool} wants to {verb}{detail}:\n  {terminal_safe(request.subject)}\n"
        )
        while True:
            sys.stderr.write("  allow? [y]es / [n]o / [a]lways (this session): ")
            sys.stderr.flush()
            line = sys.stdin.readline()
            if not line:
                return "no"
            answer = self.ANSWERS.get(line.strip().lower())
            if answer == "yes":
                return "yes"
            if answer == "no":
                return "no"
            if answer == "always":
                return "always"


def terminal_approver() -> Approver | None:
    """The terminal when standard input is one; else nobody (ask-mode actions are then refused)."""
    return TerminalApprover() if sys.stdin.isatty() else None


def sandbox_for(settings: Settings, workdir: Path) -> SandboxPolicy:
    """The sandbox a session's tools work in (the shell tool's, the file tools', a command watch's):
    Avibe's home, the user's config folder and the database out of the agent's reach (issue 27)."""
    from avibe.config import user_config_file
    from avibe.tools.sandbox import SandboxPolicy

    return SandboxPolicy.for_record(
        settings.sandbox,
        workdir,
        home=settings.home,
        database_url=settings.database_url,
        protected=settings.deny,
        config_dir=user_config_file().parent,
    )


def add_feeds(host: SessionHost, store: RecordStore, settings: Settings, workdir: Path) -> FeedRunner:
    """The session's watches and timers, run by its host whatever agent works in it (issue 12): what they
    post goes through the host's delivery port with its key; a queued feed's input waits for a turn."""
    from avibe.sources.feeds import FeedRunner

    def post_keyed(source: Source, text: str, key: str) -> Entry:
        return host.post(source, text, key)

    feeds = FeedRunner(
        cast("FeedStore", store),
        host.session_id,
        post_keyed,
        host.clock,
        policy=sandbox_for(settings, workdir),
    )
    host.queued = feeds.queued
    host.add_source(feeds)
    return feeds


def post_to(store: RecordStore, clock: SystemClock) -> Callable[[str, Source, str], Entry]:
    """Ingress into another session (send_to_session, delegate): tagged by the source given (T1)."""
    from avibe.ingress import deliver

    def post(session_id: str, source: Source, text: str) -> Entry:
        return deliver(store, session_id, source, text, clock=clock)

    return post


def spawn_delegate(session_id: str) -> None:
    """Run a delegated session in a process of its own (`vibe serve --session S --exit-when-idle`), with
    this process's settings (environment) and its output in Avibe's log dir."""
    import subprocess

    settings = load_settings()
    settings.log_dir.mkdir(parents=True, exist_ok=True)
    log_path = settings.log_dir / f"delegate-{session_id}.log"
    argv = [sys.executable, "-m", "avibe", "serve", "--session", session_id, "--exit-when-idle"]
    with log_path.open("ab") as output:
        subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT, start_new_session=True
        )
    log.info("delegated session %s runs in its own process (log: %s)", session_id, log_path)


def _start_delegate(
    store: RecordStore, child: str, workdir: Path, start: Callable[[str], None] | None
) -> None:
    store.save_state(child, WORKDIR_KEY, {"path": str(workdir)})  # it works where its parent does
    (start or spawn_delegate)(child)


def session_workdir(store: RecordStore, session_id: str, default: Path) -> Path:
    """Where a session works: as saved by its last host, else its title when that is a folder (sessions
    of `vibe run` are titled so), else `default`."""
    saved = store.load_state(session_id, WORKDIR_KEY) or {}
    for candidate in (saved.get("path"), store.get_session(session_id).title):
        if isinstance(candidate, str) and candidate and Path(candidate).is_dir():
            return Path(candidate)
    return default


@dataclass
class HostedSession:
    """A live session of `vibe run` / `vibe demo`: the host, Vibey in it, the record."""

    host: SessionHost
    vibey: Vibey
    store: RecordStore

    @property
    def session_id(self) -> str:
        return self.vibey.session_id

    @property
    def user_name(self) -> str:
        return self.vibey.config.user_name

    def send(self, text: str) -> TurnResult:
        return self.host.send(text, self.user_name)


def find_session(store: RecordStore, session_id: str | None, continue_in: Path | None) -> str | None:
    """The session to resume: the one named, or (`--continue`) the latest of the working directory."""
    if session_id is not None or continue_in is None:
        return session_id
    mine = [s for s in store.list_sessions() if s.title == str(continue_in)]
    if not mine:
        raise AvibeError(f"no session has run in {continue_in} yet; start one without --continue")
    return max(mine, key=lambda s: s.created_at).id


def _delegate_workers(settings: Settings, model_name: str) -> tuple[str, ...]:
    """Who a delegated task may go to: each external agent whose program is found here, and Vibey - but
    not on a local model: a delegated Vibey runs in a process of its own with a model of its own on the
    same cores, and the demo on 2 cores slowed thirtyfold (a model step from 5 s to 230 s) while a 1.5B
    Vibey delegated its own tickets to itself, again and again."""
    from avibe.backends import BACKENDS
    from avibe.backends.install import locate
    from avibe.providers import is_local

    vibey = () if is_local(model_name) else ("vibey",)
    return (*vibey, *(b.name for b in BACKENDS if locate(b, settings.home) is not None))


def _assign_agent(store: RecordStore) -> Callable[[str, str], None]:
    """A delegated session's agent, in its state: whichever host runs it runs that agent (issue 12)."""
    from avibe.cli.agents import AGENT_KEY

    def assign(child: str, agent: str) -> None:
        store.save_state(child, AGENT_KEY, {"name": agent})

    return assign


def _vibey_works_in(store: RecordStore, session_id: str) -> None:
    """A session another agent worked in goes on with Vibey (`vibe chat`'s /agent vibey): say so in the
    record, so that `--continue` and `vibe serve` host it with Vibey from now on."""
    from avibe.cli.agents import AGENT_KEY

    if (store.load_state(session_id, AGENT_KEY) or {}).get("name", "vibey") != "vibey":
        store.save_state(session_id, AGENT_KEY, {"name": "vibey"})


@contextmanager
def open_session(
    settings: Settings,
    *,
    model_name: str,
    workdir: Path,
    session_id: str | None,
    window: int | None,
    max_steps: int,
    events: EventSink = ignore_events,
    approver: Approver | None = None,
    start_delegate: Callable[[str], None] | None = None,
    model: ModelClient | None = None,
) -> Iterator[HostedSession]:
    """A session host with Vibey over a new or existing session; its sources stop on the way out.
    This process holds the session's lease while it hosts it (issue 11 item 2). `approver` answers
    ask-mode approvals (issue 11 item 9); by default the terminal when stdin is one, else nobody."""
    from avibe.config import user_config_file
    from avibe.providers import is_local, open_counter, open_model
    from avibe.sources.background import BackgroundJobs
    from avibe.sources.delegations import Delegations
    from avibe.store.provenance import ProvenanceLedger, ToolWatch
    from avibe.tools import ToolBox, catalogue_text, default_tools, discover_skills, find_skill, skill_text
    from avibe.tools.approval import ApprovalPolicy, Rules
    from avibe.tools.sandbox import check_layout
    from avibe.tools.sessions import session_tools

    # Before anything is written: refused where the sandbox cannot keep Avibe's files out (issue 27)
    config_dir, url = user_config_file().parent, settings.database_url
    check_layout(settings.sandbox, workdir, home=settings.home, config_dir=config_dir, database_url=url)
    store = open_record(settings)
    if model is None:  # `vibe serve` shares one model between the sessions it hosts
        model = open_model(model_name, settings)  # before a session exists: a bad model creates nothing
    session = store.get_session(session_id) if session_id else store.create_session(title=str(workdir))
    keeper = hold_lease(store, session.id)  # before anything is read or written (issue 11 item 2)
    announce(settings)  # the session starts: its loosened settings said (issue 27 item 1)
    try:
        store.save_state(session.id, WORKDIR_KEY, {"path": str(workdir)})  # where any host runs it
        _vibey_works_in(store, session.id)
        counter = open_counter(model_name, settings, model)
        skill_dirs = _skill_dirs(settings, workdir)
        session_dir = settings.sessions_dir / session.id
        clock = SystemClock()
        sandbox = sandbox_for(settings, workdir)

        def post(source: Source, text: str) -> Entry:  # the delivery port: through the host, to ingress
            return host.post(source, text)

        def post_keyed(source: Source, text: str, key: str) -> Entry:  # feeds: exactly once (issue 12)
            return host.post(source, text, key)

        jobs = BackgroundJobs(post, store, session.id, sandbox)
        delegations = Delegations(
            store,
            session.id,
            post_keyed,
            post_to=post_to(store, clock),
            start=lambda child: _start_delegate(store, child, workdir, start_delegate),
            assign=_assign_agent(store),
        )
        rules = Rules(settings.deny, settings.allow_commands, settings.allow_writes)
        approval = ApprovalPolicy(settings.approval, rules, approver or terminal_approver())
        toolbox = ToolBox(
            default_tools(
                workdir,
                store=store,
                session_id=session.id,
                skill_dirs=skill_dirs,
                jobs=jobs,
                sandbox=sandbox,
                approval=approval,
            )
            + session_tools(
                send=lambda to, text: post_to(store, clock)(to, Source("agent", "vibey", session.id), text),
                delegate=delegations.start,
                workers=_delegate_workers(settings, model_name),
            )
        )

        ledger = ProvenanceLedger(settings.home)  # issue 27 item 7: what the agent leaves, marked
        agents_md, agents_md_heading = _agents_md(workdir, ledger)
        watch = ToolWatch(ledger, workdir, session.id, busy=lambda: bool(jobs.running()))

        def current_skill(name: str) -> str | None:
            found = find_skill(skill_dirs, name)
            return skill_text(found) if found else None

        config = RunConfig(
            window=window,
            max_steps=max_steps,
            checkpoint_mode=mode_for(is_local(model_name)),
            agents_md=agents_md,
            agents_md_heading=agents_md_heading,
            skill_catalogue=catalogue_text(discover_skills(skill_dirs), _skill_mark(ledger)),
            user_name=settings.user_name,
            record_where=f"Avibe's record, session {session.id} (the record_query tool reads it)",
        )

        def limits() -> Limits:  # the inspector's plot: the window and trigger line the run used
            return Limits(model_name, vibey.limits.window, vibey.limits.threshold, vibey.limits.hard_limit)

        events = ContextLog(store, session.id, limits, events)  # one point per model request (issue 15)
        vibey = Vibey(
            store=store,
            model=model,
            counter=counter,
            clock=clock,
            session_id=session.id,
            session_dir=session_dir,
            tool_specs=toolbox.specs,
            run_tool=toolbox.dispatch,
            config=config,
            events=events,
            skill_text=current_skill,
            watch_tool=watch,
            # S3: the scene names every job still running, every delegated run and every standing feed
            waiting_for=lambda: (*jobs.waiting(), *delegations.scene_lines(), *feeds.scene_lines()),
        )
        host = SessionHost(store, session.id, vibey, clock, events)
        host.add_source(JobsSource(jobs))
        feeds = add_feeds(host, store, settings, workdir)  # issue 12
        host.add_source(delegations)
        try:
            yield HostedSession(host, vibey, store)
        finally:
            host.close()
            watch.settle()  # what a background job of the agent's left before it was stopped
    finally:
        keeper.close()
