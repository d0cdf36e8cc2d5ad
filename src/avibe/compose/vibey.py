"""A session with Vibey in it: the model, counter, tools, background jobs, delegations, skills and
AGENTS.md built from Settings; `avibe.host.sessions` hosts them."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from avibe.agent.driver import mode_for
from avibe.agent.loop import RunConfig, Vibey
from avibe.compose.common import (
    SystemClock,
    check_sandbox,
    feeds_for,
    open_record,
    sandbox_for,
    spawn_delegate,
    stated_rules,
)
from avibe.compose.instructions import InstructionFiles, skill_files
from avibe.compose.session_settings import record as record_settings
from avibe.config import Settings
from avibe.context.assemble import as_rendering
from avibe.host.activity_log import ActivityLog
from avibe.host.context_log import ContextLog, Limits
from avibe.host.events import EventSink, Notice, ignore_events
from avibe.host.sessions import (
    HostedSession,
    HostPorts,
    JobsSource,
    SessionParts,
    assign_agent,
    host_session,
    post_to,
    start_delegate,
    vibey_works_in,
)
from avibe.ports import ModelClient, RecordStore, TokenCounter
from avibe.prompts import fill
from avibe.record.entries import Source
from avibe.record.state import SessionSettings

if TYPE_CHECKING:
    from avibe.mcp.servers import McpServers
    from avibe.sources.background import BackgroundJobs
    from avibe.sources.delegations import Delegations
    from avibe.sources.feeds import FeedRunner
    from avibe.store.provenance import ProvenanceLedger, ToolWatch
    from avibe.tools import ToolBox
    from avibe.tools.approval import Approver
    from avibe.tools.sandbox import SandboxPolicy
    from avibe.tools.skills import SkillInfo

VibeySession = HostedSession[Vibey]
Waiting = Callable[[], Sequence[tuple[str, ...]]]  # S3: what the scene's Waiting for names
Identities = Callable[[], Collection[tuple[int, int]]]  # Avibe's own files, (st_dev, st_ino)

log = logging.getLogger(__name__)


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
    on_hosted: Callable[[], None] = lambda: None,
    compaction: str | None = None,
    chosen: frozenset[str] | None = None,
) -> Iterator[VibeySession]:
    """A session host with Vibey over a new or existing session; its sources stop on the way out.
    This process holds the session's lease while it hosts it. `approver` answers
    ask-mode approvals (None: nobody, they are refused). `on_hosted` runs once the
    lease is held, before anything is written (the CLI says the loosened settings in force then).
    `compaction`: how Vibey makes room (`vibe run --compaction`; None: the session's, else the config's).
    A resumed session runs with its recorded settings but those the person `chosen` (None: the flags
    of this process) - compose.session_settings."""
    from avibe.compose import session_settings as kept
    from avibe.providers import open_model
    from avibe.store.sql import lease_owner

    store = open_record(settings) if session_id else None  # a session resumed: its record exists
    if store is not None and session_id:  # what the session recorded, before anything is checked
        recorded = kept.recorded_settings(store, session_id)
        settings = kept.in_force(settings, recorded, kept.person_chose() if chosen is None else chosen)
        compaction = compaction or kept.recorded_compaction(recorded, settings.compaction)
    check_sandbox(settings, workdir)  # before anything is written
    store = store or open_record(settings)
    if model is None:  # `vibe serve` shares one model between the sessions it hosts
        model = open_model(model_name, settings)  # before a session exists: a bad model creates nothing
    session = store.get_session(session_id) if session_id else store.create_session(title=str(workdir))
    start = start_delegate or spawn_delegate
    build = _VibeyBuilder(
        settings, store, model, model_name, workdir, window, max_steps, events, approver, start
    )
    build.compaction = compaction or settings.compaction
    with host_session(
        store,
        session.id,
        owner=lease_owner(),
        clock=build.clock,
        user_name=settings.user_name,
        build=build,
        workdir=workdir,
        on_hosted=on_hosted,
    ) as live:
        yield live


class _VibeyBuilder:
    """Builds Vibey's parts once the host's delivery ports exist (background jobs and feeds post through
    the host; the tools start jobs and delegations; Vibey's scene names what they run)."""

    def __init__(
        self, settings: Settings, store: RecordStore, model: ModelClient, model_name: str, workdir: Path,
        window: int | None, max_steps: int, events: EventSink, approver: Approver | None,
        start: Callable[[str], None],
    ) -> None:  # fmt: skip
        self.settings, self.store, self.model, self.model_name = settings, store, model, model_name
        self.workdir, self.window, self.max_steps = workdir, window, max_steps
        self.events, self.approver, self.start = events, approver, start
        self.clock = SystemClock()
        self.compaction = settings.compaction

    def __call__(self, ports: HostPorts) -> SessionParts[Vibey]:
        from avibe.mcp.servers import start_servers
        from avibe.providers import open_counter
        from avibe.store.provenance import ProvenanceLedger, ToolWatch

        settings, store, workdir, session_id = self.settings, self.store, self.workdir, ports.session_id
        vibey_works_in(store, session_id)
        record_settings(store, session_id, SessionSettings(
            self.model_name, settings.approval, settings.sandbox, self.compaction
        ))  # fmt: skip
        counter = open_counter(self.model_name, settings, self.model)
        skill_dirs = [workdir / ".avibe" / "skills", settings.home / "skills"]
        sandbox = sandbox_for(settings, workdir, store, session_id)
        jobs, delegations, feeds = self._sources(ports, sandbox)
        ledger = ProvenanceLedger(settings.home)  # what the agent leaves, marked
        # MCP servers (docs/mcp.md): started now, their tools offered for the session, stopped after it
        notice = lambda line: self.events(Notice(line))  # noqa: E731
        mcp = start_servers(settings.mcp_servers, sandbox, notice, session_id, counter.count)
        toolbox = self._toolbox(jobs, delegations, skill_dirs, sandbox, ports, ledger, mcp)
        # F4: AGENTS.md and the skill catalogue are read again at each turn where one of them changed
        instructions = _instruction_files(workdir, skill_dirs, ledger, sandbox.own.identities, notice)
        watch = ToolWatch(ledger, workdir, session_id, busy=lambda: bool(jobs.running()))
        # S3: the scene names every job still running, every delegated run and every standing feed
        waiting = lambda: (*jobs.waiting(), *delegations.scene_lines(), *feeds.scene_lines())  # noqa: E731
        skill = _skill_reader(skill_dirs, ledger)
        vibey = self._vibey(session_id, counter, toolbox, instructions, skill, watch, waiting)
        sources = (JobsSource(jobs), feeds, delegations)

        # what a background job of the agent's left before it was stopped: settled after the host stops
        def after_close() -> None:
            watch.settle()
            mcp.close()

        return SessionParts(
            vibey, vibey, sources, vibey.events, queued=feeds.queued, after_close=after_close,
            context=vibey, outstanding=lambda: bool(vibey.waiting_for()),
        )  # fmt: skip

    def _sources(
        self, ports: HostPorts, sandbox: SandboxPolicy
    ) -> tuple[BackgroundJobs, Delegations, FeedRunner]:
        """What posts into the session on its own: background jobs, delegated runs, watches and timers."""
        from avibe.sources.background import BackgroundJobs
        from avibe.sources.delegations import Delegations

        store, session_id = self.store, ports.session_id
        jobs = BackgroundJobs(ports.post, store, session_id, sandbox)
        delegations = Delegations(
            store,
            session_id,
            ports.post_keyed,
            post_to=post_to(store, self.clock),
            start=start_delegate(store, self.workdir, self.start),
            assign=assign_agent(store),
        )
        feeds = feeds_for(store, ports, self.clock, self.settings, self.workdir)  # T1: timers, watches
        return jobs, delegations, feeds

    def _vibey(
        self, session_id: str, counter: TokenCounter, toolbox: ToolBox, instructions: InstructionFiles,
        skill: Callable[[str], str | None], watch: ToolWatch, waiting: Waiting,
    ) -> Vibey:  # fmt: skip
        """Vibey on the session's record, tools and instructions; its events logged per request."""

        def limits() -> Limits:  # the inspector's plot: the window and trigger line the run used
            return Limits(
                self.model_name, vibey.limits.window, vibey.limits.threshold, vibey.limits.hard_limit
            )

        vibey = Vibey(
            store=self.store,
            model=self.model,
            counter=counter,
            clock=self.clock,
            session_id=session_id,
            session_dir=self.settings.sessions_dir / session_id,
            tool_specs=toolbox.specs,
            run_tool=toolbox.dispatch,
            config=self._config(session_id, instructions),
            # one point per model request; each tool's output and error, for the person (A3: not the record)
            events=ContextLog(
                self.store, session_id, limits, ActivityLog(self.store, session_id, self.events)
            ),
            skill_text=skill,
            undo=lambda: _undo(self.settings.sessions_dir / session_id),
            watch_tool=watch,
            instructions=instructions,
            waiting_for=waiting,
        )
        return vibey

    def _config(self, session_id: str, instructions: InstructionFiles) -> RunConfig:
        from avibe.providers import is_local

        agents_md, agents_md_heading, catalogue = instructions()
        return RunConfig(
            window=self.window,
            max_steps=self.max_steps,
            checkpoint_mode=mode_for(self.model_name, is_local(self.model_name)),
            agents_md=agents_md,
            agents_md_heading=agents_md_heading,
            skill_catalogue=catalogue,
            user_name=self.settings.user_name,
            record_where=f"Avibe's record, session {session_id} (the record_query tool reads it)",
            recollection=as_rendering(self.settings.recollection),
            compaction=self.compaction,
        )

    def _toolbox(
        self, jobs: BackgroundJobs, delegations: Delegations, skill_dirs: list[Path], sandbox: SandboxPolicy,
        ports: HostPorts, ledger: ProvenanceLedger, mcp: McpServers,
    ) -> ToolBox:  # fmt: skip
        """Vibey's tools: the files, the shell (background jobs too), skills, the record, and the other
        sessions (send, delegate), each asking the approver where the settings say so."""
        from avibe.tools import ToolBox, default_tools
        from avibe.tools.approval import ApprovalPolicy, Rules
        from avibe.tools.sessions import session_tools
        from avibe.tools.undo import UNDO_DIR

        settings, store, session_id = self.settings, self.store, ports.session_id
        rules = Rules(settings.deny, settings.allow_commands, settings.allow_writes)
        # the person's stated bans hold for write_file and edit_file as their deny rules do
        # a no with a reason: the person's words go in as their message (T1: source user, by ingress)
        tell = lambda reason: ports.post(Source("user", name=settings.user_name), reason).seq  # noqa: E731
        approval = ApprovalPolicy(
            settings.approval, rules, self.approver, stated_rules(store, session_id), tell=tell
        )
        send_to = post_to(store, self.clock)
        return ToolBox(
            default_tools(
                self.workdir,
                store=store,
                session_id=session_id,
                skill_dirs=skill_dirs,
                jobs=jobs,
                sandbox=sandbox,
                approval=approval,
                stop=ports.stop,  # the chat's Ctrl-C stops a running command
                skill_mark=_companion_mark(ledger),
                undo_dir=settings.sessions_dir / session_id / UNDO_DIR,  # /undo's snapshots: Avibe's home
            )
            + session_tools(
                send=lambda to, text: send_to(to, Source("agent", "vibey", session_id), text),
                delegate=delegations.start,
                workers=delegate_workers(settings, self.model_name),
            )
            + mcp.tools(approval, ports.stop)  # `NAME.tool`: asks in ask mode; Ctrl-C cancels a call
        )


def _skill_reader(skill_dirs: list[Path], ledger: ProvenanceLedger) -> Callable[[str], str | None]:
    """A skill's current text (A1), its companion files marked as the ledger knows them."""
    from avibe.tools import find_skill, skill_text

    def current_skill(name: str) -> str | None:
        found = find_skill(skill_dirs, name)
        return skill_text(found, _companion_mark(ledger)) if found else None

    return current_skill


def _instruction_files(
    workdir: Path,
    skill_dirs: list[Path],
    ledger: ProvenanceLedger,
    own: Identities = frozenset,
    unread: Callable[[str], None] = lambda line: None,
) -> InstructionFiles:
    """AGENTS.md, its heading and the skill catalogue, cached under the files' modification times (F4).
    `own`: the identities of Avibe's own files, never read as instructions (a hard link to the token);
    `unread` tells the person, once per change, that AGENTS.md was not read and why."""
    from avibe.sources.agent_files import alias_below
    from avibe.store.provenance import AGENTS_MD
    from avibe.tools import catalogue_text, discover_skills

    def read() -> tuple[str, str, str]:
        agents_md, heading = _agents_md(workdir, ledger, own, unread)
        return agents_md, heading, catalogue_text(discover_skills(skill_dirs), _skill_mark(ledger))

    def files() -> list[Path]:
        alias = alias_below(workdir, AGENTS_MD)  # an edit to CLAUDE.md behind AGENTS.md is seen too
        aliased = [] if alias is None else [workdir / alias]
        return [workdir / AGENTS_MD, *aliased, *skill_files(skill_dirs)]

    return InstructionFiles(read, files)


def _agents_md(
    workdir: Path,
    ledger: ProvenanceLedger,
    own: Identities = frozenset,
    unread: Callable[[str], None] = lambda line: None,
) -> tuple[str, str]:
    """The workdir's AGENTS.md and its heading in the system prompt: "" (the user's) unless its content
    is what an agent left there, read once so the text and its mark agree. Read the one
    way the harness reads the workdir (no link followed, a regular UTF-8 file of bounded size, never
    Avibe's own; `AGENTS.md -> CLAUDE.md` beside it is read as that file): one that cannot be read is
    one line in the log and, for the model, a note that it was not read - never its target's text,
    never a failed turn."""
    from avibe.sources.agent_files import read_agent_file_or_alias
    from avibe.store.provenance import AGENTS_MD

    found = read_agent_file_or_alias(workdir, AGENTS_MD, own=own())
    if found.status == "missing":
        return "", ""
    if not found.ok:
        log.warning("%s", found.line())
        unread(found.line())
        return found.note(), fill("agents_md_unread")
    write = ledger.agent_write(workdir / AGENTS_MD, found.digest)
    heading = "" if write is None else fill("agents_md_agent", session=write.session, seq=write.seq or "?")
    return found.text, heading


def _skill_mark(ledger: ProvenanceLedger) -> Callable[[SkillInfo], str]:
    """A skill's mark in the catalogue: the agent's, when its SKILL.md is as an agent left it
    (docs/security.md; `version` is the sha256 of the bytes the catalogue line was read from)."""

    def mark(skill: SkillInfo) -> str:
        write = ledger.agent_write(skill.path, skill.version)
        return "" if write is None else fill("skill_agent", session=write.session, seq=write.seq or "?")

    return mark


def _companion_mark(ledger: ProvenanceLedger) -> Callable[[Path, str], str]:
    """A file beside a SKILL.md, as a loaded skill lists it: the agent's when its content is one an
    agent left (the person's skill never vouches for the agent's `steps.md`)."""

    def mark(path: Path, digest: str) -> str:
        write = ledger.agent_write(path, digest)
        return "" if write is None else fill("skill_agent", session=write.session, seq=write.seq or "?")

    return mark


def delegate_workers(settings: Settings, model_name: str) -> tuple[str, ...]:
    """Who a delegated task may go to: each external agent whose program is found here, and Vibey - but
    not on a local model: a delegated Vibey runs in a process of its own with a model of its own on the
    same cores, and the demo on 2 cores slowed thirtyfold (a model step from 5 s to 230 s) while a 1.5B
    Vibey delegated its own tickets to itself, again and again."""
    from avibe.backends import BACKENDS
    from avibe.backends.install import locate
    from avibe.providers import is_local

    vibey = () if is_local(model_name) else ("vibey",)
    return (*vibey, *(b.name for b in BACKENDS if locate(b, settings.home) is not None))


def _undo(session_dir: Path) -> tuple[bool, str]:
    """/undo on the session's snapshots (Avibe's home, never the workdir): reverted anything?, its line."""
    from avibe.tools.undo import UNDO_DIR, undo_last_turn

    undone = undo_last_turn(session_dir / UNDO_DIR)
    return undone.found, undone.line()
