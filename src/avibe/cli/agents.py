"""`vibe agents` (the backends found, with their versions), `vibe agents install` (from npm, pinned by
the shipped lockfile), and `vibe run --agent`: Claude Code, Codex or OpenCode hosted in a session as they
are (SPEC L5, T3; the host's `BackendAgent`, built by `avibe.compose`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from avibe.backends import BACKENDS, BackendError
from avibe.backends.install import agents_dir, install, survey
from avibe.cli.terminal import EventPrinter, announce, die, settings_or_die
from avibe.compose import check_backend, open_backend_session
from avibe.config import Settings
from avibe.host.events import Event, Replied
from avibe.record.agents import external_titles


class AgentPrinter(EventPrinter):
    """`vibe run --agent`: the same lines as for Vibey, the replies under the agent's name."""

    def __init__(self, agent: str, *, verbose: bool = False, json_lines: bool = False) -> None:
        super().__init__(verbose=verbose, json_lines=json_lines)
        self.agent = agent

    def _line(self, event: Event) -> str | None:
        if isinstance(event, Replied):
            return f"{self.agent}> {event.text}"
        return super()._line(event)


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
    timeout_s: float | None,
) -> int:
    """`vibe run --agent NAME`: the same host and event lines as for Vibey, with the program in it;
    the exit code (0 replied, 1 it failed: the harness input says how). A missing program exits 2
    before anything is written. `timeout_s`: the longest one turn of the program may take."""
    from avibe.cli.options import log_to_file

    try:
        check_backend(agent, settings)
    except BackendError as exc:
        die(str(exc))
    log_path = log_to_file(settings)
    printer = AgentPrinter(agent, verbose=verbose, json_lines=json_lines)
    with open_backend_session(
        settings,
        agent=agent,
        workdir=workdir,
        session_id=session,
        events=printer,
        limit_s=timeout_s,
        on_hosted=lambda: announce(settings),  # the session starts: its loosened settings said
    ) as live:
        if not json_lines:
            typer.echo(f"[session] {live.session_id} ({agent}; log: {log_path})")
        results = [live.send(text), *live.host.run_until_idle(wait_for_jobs=not no_wait)]
    return 1 if results[-1].stopped else 0


# ---- vibe agents ---------------------------------------------------------------------------------------

agents_app = typer.Typer(
    help=f"The agent backends Avibe runs as they are: {external_titles('and')}.",
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


INSTALL_HELP = (
    f"Install {external_titles('and')} from npm into Avibe's data dir, pinned by the lockfile that ships "
    "with Avibe (exact versions, integrity hashes: the same bytes every time)."
)


@agents_app.command("install", help=INSTALL_HELP)
def install_command(
    npm: Annotated[str, typer.Option("--npm", help="The npm to run.")] = "npm",
) -> None:
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
