"""`vibe config show-tightening`, `vibe config forget-tightening`: what Avibe remembers of a project's
tightening (avibe.tightening), and the person's one way to drop it.

A project's `.avibe/config.toml` can be written by the agent, so what it tightened (a stricter sandbox,
approval = "ask", deny rules, narrower allow lists, a smaller window) is remembered in Avibe's home and
stays in force when the file goes, breaks or loosens. Dropping that record is an explicit command of the
person's; nothing else drops it. The agent cannot run it to effect from a sandboxed shell: Avibe's home is
not there (an empty folder covers it), so its `vibe` would find and drop nothing. In full-access the agent
runs as the person, and nothing is protected from it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from avibe.config import PROJECT_CONFIG, own_home
from avibe.tightening import Remembered, forget, recall, record_file

ProjectOpt = Annotated[
    Path | None,
    typer.Option(
        "--project", help="The project folder (default: the current directory).", exists=True, file_okay=False
    ),
]

config_app = typer.Typer(
    help="What Avibe remembers of a project's own config (.avibe/config.toml).", no_args_is_help=True
)


def _folder(project: Path | None) -> Path:
    folder = Path.cwd() if project is None else project.expanduser()
    try:
        return folder.resolve()
    except (OSError, RuntimeError):  # a link loop: as written
        return folder.absolute()


def _what(record: Remembered) -> str:
    shown = ", ".join(record.tightening.shown()) or "nothing readable (a damaged record)"
    since = f" (remembered since {record.since})" if record.since else ""
    return f"{shown}{since}"


@config_app.command("show-tightening")
def show_tightening(project: ProjectOpt = None) -> None:
    """Print what is remembered of this project's config: it stays in force whatever the file says."""
    folder = _folder(project)
    record = recall(own_home(), folder)
    if record is None:
        typer.echo(f"nothing is remembered for {folder}")
        return
    typer.echo(f"{folder}: {_what(record)}")
    typer.echo(f"  kept in {record_file(own_home(), folder)}; `vibe config forget-tightening` drops it")


@config_app.command("forget-tightening")
def forget_tightening(project: ProjectOpt = None) -> None:
    """Drop what is remembered of this project's config; from the next start its file applies as written."""
    folder = _folder(project)
    record = forget(own_home(), folder)
    if record is None:
        typer.echo(f"nothing is remembered for {folder}")
        return
    typer.echo(
        f"forgot {_what(record)} for {folder}; from the next start {folder / PROJECT_CONFIG} applies as "
        "it is written (and what it tightens then is remembered again)"
    )


def register(app: typer.Typer) -> None:
    app.add_typer(config_app, name="config")
