"""`vibe chat` (and `vibe` with no arguments on a terminal): the interactive chat (`avibe.tui`). This module
wires it: settings, the session opener (`open_session`, as `vibe run` uses it, with the chat as approver;
a session another live process hosts - `vibe serve` - is attached to, as `vibe run --session` does), and
the `vibe` commands the slash commands run in process (`/log` is `vibe log`, filters and all)."""

from __future__ import annotations

import io
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from importlib import resources
from pathlib import Path
from typing import Annotated

import typer

from avibe.cli.models import model_choices
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
    check_model,
    log_to_file,
    preflight_model,
)
from avibe.cli.run import chosen_agent, session_to_resume
from avibe.cli.terminal import announce, settings_or_die
from avibe.compose import check_backend, open_backend_session, open_session, session_agent
from avibe.compose.session_settings import session_model
from avibe.config import Settings
from avibe.errors import AvibeError
from avibe.host.events import EventSink
from avibe.record.agents import VIBEY, is_external
from avibe.tools.approval import Approver
from avibe.tui.driver import Attached, Opener
from avibe.tui.hosted import Live

_COMMAND_LOCK = threading.Lock()  # one in-process `vibe` command at a time (they redirect stdout)


class VibeCommands:
    """The CLI's side of the chat's slash commands (`avibe.tui.commands.Cli`)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def run(self, args: list[str]) -> str:
        """`vibe ARGS` in this process, through the CLI's one error boundary; what it printed."""
        from avibe.cli import app

        command = typer.main.get_command(app)
        out = io.StringIO()
        with _COMMAND_LOCK, redirect_stdout(out), redirect_stderr(out):
            command.main(args, prog_name="vibe", standalone_mode=False)
        return out.getvalue()

    def check_model(self, name: str) -> str | None:
        try:
            preflight_model(check_model(name) or name, self.settings)
        except (AvibeError, typer.BadParameter) as exc:
            return str(exc)
        return None

    def check_agent(self, name: str) -> str | None:
        if not is_external(name):
            return None
        try:
            check_backend(name, self.settings)
        except AvibeError as exc:
            return str(exc)
        return None

    def model_names(self) -> tuple[str, ...]:
        return model_choices(self.settings)


def chat_opener(settings: Settings, workdir: Path, window: int | None, max_steps: int) -> Opener:
    """The chat's `Opener`: a hosted session exactly as `vibe run` builds it - Vibey, or Claude Code,
    Codex or OpenCode as they are (L5) - with the chat's event sink and approver (ask mode asks on the
    screen; the external agents keep their own permissions)."""

    @contextmanager
    def opener(
        session_id: str | None, model: str, events: EventSink, approver: Approver, *, agent: str | None
    ) -> Iterator[Live | Attached]:
        if session_id is not None:
            with attached_session(settings, session_id) as attached:
                if attached is not None:
                    yield attached
                    return
        chosen = agent or (session_agent(settings, session_id) if session_id else VIBEY)
        if is_external(chosen):
            with open_backend_session(
                settings, agent=chosen, workdir=workdir, session_id=session_id, events=events
            ) as backend:
                yield backend
            return
        preflight_model(model, settings)
        with open_session(
            settings,
            model_name=model,
            workdir=workdir,
            session_id=session_id,
            window=window,
            max_steps=max_steps,
            events=events,
            approver=approver,
        ) as live:
            yield live

    return opener


@contextmanager
def attached_session(settings: Settings, session_id: str) -> Iterator[Attached | None]:
    """The session as the chat follows it when another live process hosts it (`vibe
    serve`, another chat, a `vibe run`), else None: then the chat hosts it."""
    from avibe.cli.attach import ask_host_to_stop, host_in_turn, live_lease
    from avibe.compose import SystemClock
    from avibe.ingress import deliver
    from avibe.record.entries import Source
    from avibe.store import open_store

    with open_store(settings.database_url) as store:
        lease = live_lease(store, session_id)
        if lease is None:
            yield None
            return
        clock, user = SystemClock(), Source("user", name=settings.user_name)
        yield Attached(
            store,
            session_id,
            settings.user_name,
            session_agent(settings, session_id),
            f"pid {lease.owner.pid} on {lease.owner.host}",
            post=lambda text: deliver(store, session_id, user, text, clock=clock),
            hosted=lambda: live_lease(store, session_id) is not None,
            in_turn=lambda: host_in_turn(store, session_id),
            stop=lambda: ask_host_to_stop(store, session_id, clock),
        )


def _demo_workspace() -> Path:
    """A copy of the bundled example project (`vibe demo`'s ticket queue) in a new temp folder."""
    import shutil

    target = Path(tempfile.mkdtemp(prefix="vibey-chat-demo-"))
    source = resources.files("avibe.examples").joinpath("release_queue/workspace")
    with resources.as_file(source) as folder:
        shutil.copytree(folder, target, dirs_exist_ok=True)
    return target


def chat(
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
    demo: Annotated[
        bool, typer.Option("--demo", help="Chat in a fresh copy of the bundled example project.")
    ] = False,
    agent: AgentOpt = None,
) -> None:
    """Chat with Vibey in the terminal: streamed replies, tool calls, inputs from other sources as they
    arrive, a context meter, and slash commands (/help). Ctrl-C cancels the running step; twice, when
    idle, quits."""
    settings = settings_or_die()
    model_name = model or settings.model
    folder = workdir.resolve()
    if demo and (session is not None or resume_latest):
        raise BadArgument("--demo starts a new session in a fresh copy of the example; drop it to resume")
    resume = session_to_resume(settings, session, resume_latest, folder)
    agent = chosen_agent(settings, agent, resume, model=model, window=window)  # who last worked in it
    if model is None and resume is not None:  # the session's recorded model (compose.session_settings)
        model_name = session_model(settings, resume) or model_name
    if is_external(agent):
        problem = VibeCommands(settings).check_agent(agent)  # before the screen: one line
        if problem is not None:
            raise AvibeError(problem)
    else:
        # before the screen: a model that cannot run is one line; one not fetched yet is fetched now
        preflight_model(model_name, settings, fetch=sys.stdin.isatty() and sys.stderr.isatty())
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise BadArgument("vibe chat needs a terminal; use vibe run for scripts")
    if demo:
        folder = _demo_workspace()
    log_to_file(settings)
    announce(settings)  # before the screen takes the terminal
    from avibe.tui.app import ChatApp

    app = ChatApp(
        chat_opener(settings, folder, window, max_steps),
        VibeCommands(settings),
        model=model_name,
        session_id=resume,
        workdir=folder,
        agent=agent,
    )
    app.run()
    if app.session_id is not None and not app.hung_up:  # no terminal left to say it on
        typer.echo(f"vibe: session {app.session_id} (resume: vibe chat --session {app.session_id})")


def register(app: typer.Typer) -> None:
    app.command("chat")(chat)
