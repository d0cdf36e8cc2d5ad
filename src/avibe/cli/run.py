"""`vibe run` (headless Vibey); `vibe demo` lives in cli/demo.py and is registered here, beside it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from avibe.agent.compaction import DEFAULT_COMPACTION, compaction_names
from avibe.cli.options import (
    AgentOpt,
    ApprovalOpt,
    BadArgument,
    ModelOpt,
    NetworkOpt,
    SandboxOpt,
    SessionOpt,
    StepsOpt,
    WindowOpt,
    WorkdirOpt,
    check_task,
    log_to_file,
    preflight_model,
    require_session,
    shown,
)
from avibe.cli.terminal import EventPrinter, announce, settings_or_die, terminal_approver
from avibe.compose import SystemClock, open_record, open_session, session_agent
from avibe.compose.session_settings import session_model
from avibe.config import Settings
from avibe.host.sessions import find_session
from avibe.record.agents import VIBEY, is_external, listed

TaskOpt = Annotated[
    str | None,
    typer.Argument(help="What Vibey should do (the user's message); - reads it from standard input."),
]
FileOpt = Annotated[
    Path | None,
    typer.Option("--file", "-f", help="Read the task from this file (for long tasks).", dir_okay=False),
]


def _task_text(task: str | None, file: Path | None) -> str:
    """The user's message: the argument, standard input (`-`) or a file - one of them."""
    if (task is None) == (file is None):
        raise BadArgument("give the task as an argument, as - (standard input), or with --file; one of them")
    if file is not None:
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise BadArgument(f"--file {shown(str(file))}: cannot read it as UTF-8 text ({exc})") from None
    elif task == "-":
        text = sys.stdin.read()
    else:
        text = task or ""
    try:
        return check_task(text)
    except typer.BadParameter as exc:
        raise BadArgument(str(exc)) from None


def session_to_resume(
    settings: Settings, session: str | None, resume_latest: bool, workdir: Path
) -> str | None:
    """Checked read-only before anything is written: a session named must exist, and `--continue` needs
    a session of this folder (neither creates a record)."""
    if session is not None and resume_latest:
        raise BadArgument("--session and --continue both choose a session; give one")
    if session is not None:
        require_session(settings, session)
        return session
    if not resume_latest:
        return None
    from avibe.errors import NoRecord
    from avibe.store import open_store

    try:
        with open_store(settings.database_url, read_only=True) as store:
            return find_session(store, None, workdir)
    except NoRecord:
        raise BadArgument(f"no session has run in {workdir} yet; start one without --continue") from None


def chosen_agent(settings: Settings, agent: str | None, resume: str | None, **vibeys: object) -> str:
    """Who works in the session (`--agent`): the one named, else the one that last worked in the session
    resumed, else Vibey. Options only Vibey takes (`vibeys`, given when not None) are refused for an
    external agent, which keeps its own model and context (L5) - before anything is written."""
    if agent is None:
        agent = session_agent(settings, resume) if resume is not None else VIBEY
    given = tuple(f"--{name}" for name, value in vibeys.items() if value is not None)
    if is_external(agent) and given:
        verb = "is" if len(given) == 1 else "are"
        raise BadArgument(f"{listed(given, 'and')} {verb} Vibey's; {agent} uses the model configured for it")
    return agent


def run(
    task: TaskOpt = None,
    file: FileOpt = None,
    model: ModelOpt = None,
    window: WindowOpt = None,
    session: SessionOpt = None,
    workdir: WorkdirOpt = Path("."),
    max_steps: StepsOpt = 30,
    network: NetworkOpt = None,
    approval: ApprovalOpt = None,
    sandbox: SandboxOpt = None,
    resume_latest: Annotated[
        bool, typer.Option("--continue", "-c", help="Resume the latest session of the working directory.")
    ] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Also show model calls and checkpoints.")
    ] = False,
    json_lines: Annotated[bool, typer.Option("--json", help="Print every event as one JSON line.")] = False,
    no_wait: Annotated[
        bool,
        typer.Option("--no-wait", help="Stop when the turn ends, without waiting for background jobs."),
    ] = False,
    agent: AgentOpt = None,
    compaction: Annotated[
        str | None,
        typer.Option(
            "--compaction",
            help=f"How Vibey makes room when its context fills: {listed(compaction_names())} (see `vibe "
            f"eval`; default: the config's `compaction`, else {DEFAULT_COMPACTION}).",
        ),
    ] = None,
    agent_timeout: Annotated[
        float | None,
        typer.Option(
            "--agent-timeout",
            min=1.0,
            help="With --agent: the longest one turn of the program may take, in seconds; it is stopped "
            "then, whatever it says meanwhile (default: no limit, but a program that says nothing for "
            "900 seconds is stopped).",
        ),
    ] = None,
) -> None:
    """Run Vibey headless on TASK: host the session until Vibey is idle and no background job it waits
    for is still running (a finished job wakes it again)."""
    settings = settings_or_die()
    model_name = model or settings.model
    text = _task_text(task, file)
    workdir = workdir.resolve()
    resume = session_to_resume(settings, session, resume_latest, workdir)
    agent = chosen_agent(settings, agent, resume, model=model, window=window, compaction=compaction)
    if model is None and resume is not None:  # the session's recorded model (compose.session_settings)
        model_name = session_model(settings, resume) or model_name
    if is_external(agent):
        from avibe.cli.agents import run_backend

        raise typer.Exit(
            run_backend(
                agent,
                text,
                settings=settings,
                workdir=workdir,
                session=resume,
                verbose=verbose,
                json_lines=json_lines,
                no_wait=no_wait,
                timeout_s=agent_timeout,
            )
        )
    _check_compaction(compaction)
    # before a session or a database file exists; at a terminal a model not fetched yet is fetched now
    preflight_model(model_name, settings, fetch=sys.stderr.isatty())
    log_path = log_to_file(settings)
    printer = EventPrinter(verbose=verbose, json_lines=json_lines)
    sent = False
    if resume is not None:  # hosted elsewhere (`vibe serve`): post there and follow
        answered, sent = _attach(settings, resume, text, printer, json_lines)
        if answered:
            raise typer.Exit(0)
    with open_session(
        settings,
        model_name=model_name,
        workdir=workdir,
        session_id=resume,
        window=window,
        max_steps=max_steps,
        events=printer,
        approver=terminal_approver(),
        on_hosted=lambda: announce(settings),  # the session starts: its loosened settings said
        compaction=compaction,
    ) as live:
        if not json_lines:
            typer.echo(f"[session] {live.session_id} (log: {log_path})")
        results = [] if sent else [live.send(text)]  # a message posted while attached is waiting already
        results += live.host.run_until_idle(wait_for_jobs=not no_wait)
    raise typer.Exit(1 if results and results[-1].stopped else 0)


def _check_compaction(name: str | None) -> None:
    """A name the compaction registry has, checked before anything is written."""
    if name is None:
        return
    if name not in compaction_names():
        raise BadArgument(f"unknown --compaction {shown(name)}; choose from {', '.join(compaction_names())}")


def _attach(
    settings: Settings, session: str, text: str, printer: EventPrinter, json_lines: bool
) -> tuple[bool, bool]:
    """(answered, sent): when another live process hosts the session, post the message there and follow
    the record to the answer; if that host goes away first, the caller hosts the session here. Ctrl-C
    stops the host's step too, as an attached chat's does: the stop note goes into the record, which the
    host reads while its turn runs (avibe.host.turn_watch); no host runs that turn again."""
    from avibe.cli.attach import ask_host_to_stop, live_lease, send_attached

    store = open_record(settings)
    lease = live_lease(store, session)
    if lease is None:
        return False, False
    host = f"pid {lease.owner.pid} on {lease.owner.host}"
    if not json_lines:
        typer.echo(f"[session] {session} (hosted by {host}: attached)")
    try:
        followed = send_attached(store, session, settings.user_name, text, printer, SystemClock())
    except KeyboardInterrupt:
        ask_host_to_stop(store, session, SystemClock())
        typer.echo(f"vibe: stopped; the host ({host}) stops its step too", err=True)
        raise
    return followed.reply is not None, True


def register(app: typer.Typer) -> None:
    app.command("run")(run)
    from avibe.cli.demo import demo  # its own module: the demo's script, report and judging

    app.command("demo")(demo)
