"""`vibe import`: a Claude Code session, a Codex rollout or an OpenCode session becomes an Avibe session,
replayable by `vibe eval --session ID` through every strategy.

All or nothing: the file is read and parsed before the record is opened (a file that
cannot be imported creates no database), and the import is rehearsed on an in-memory store first, with
the same checks the record makes (a NUL byte half way, a time out of range ...), so a refused import
writes nothing. Whatever the parser raises on a malformed file is one line, exit 2; its traceback goes
to the log.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated

import typer

from avibe.cli.options import BadArgument, log_to_file, shown
from avibe.config import Settings, load_settings
from avibe.errors import AvibeError
from avibe.evals.importers import (
    FORMATS,
    Format,
    Imported,
    SessionImportError,
    parse_session_file,
    record_import,
)
from avibe.evals.scenario import AssistantTurn, UserMessage, save_scenario
from avibe.record.agents import import_files, listed

log = logging.getLogger("avibe.cli.import")
MAX_TITLE = 500


def _check_source(path: Path) -> Path:
    text = str(path)
    if "\x00" in text:
        raise BadArgument(f"{shown(text)} contains a NUL byte; no file name does")
    if not path.exists():
        raise BadArgument(f"{shown(text)} does not exist")
    if not path.is_file():
        raise BadArgument(f"{shown(text)} is not a file; give the session file itself")
    return path.absolute()  # OpenCode's storage layout is found from the file's parent folders


def _check_text(option: str, value: str | None, limit: int) -> None:
    if value is None:
        return
    if len(value) > limit or not value.isprintable():
        raise BadArgument(f"{option} {shown(value)} must be printable text of at most {limit} characters")


def _check_out(path: Path | None) -> None:
    if path is None:
        return
    if path.exists() and not path.is_file():
        raise BadArgument(f"--scenario-out {shown(str(path))} is not a file")
    if not path.absolute().parent.is_dir():
        raise BadArgument(f"--scenario-out {shown(str(path))}: its folder does not exist")


def _parse(path: Path, user: str, chosen: Format | None, settings: Settings) -> Imported:
    try:
        return parse_session_file(path, user, chosen)
    except SessionImportError as err:
        raise BadArgument(str(err)) from None
    except RecursionError:
        raise BadArgument(f"{path}: nested too deeply to be a session file") from None
    except Exception as err:  # a malformed file the parser did not foresee: its fault, not a crash
        where = log_to_file(settings)
        log.warning("importing %s failed", path, exc_info=err)
        reason = f"{type(err).__name__}: {err}"
        raise BadArgument(f"{path}: not an importable session ({reason[:200]}); details in {where}") from None


def _rehearse(imported: Imported, title: str) -> None:
    """Record the import in a throwaway in-memory store: every check the real record makes, no writes."""
    from avibe.store import open_store

    try:
        with open_store("sqlite://", in_memory=True) as scratch:
            record_import(scratch, imported, title)
    except (ValueError, TypeError, OverflowError, AvibeError) as err:
        raise BadArgument(f"cannot import: {err}; nothing was recorded") from None


def import_command(
    path: Annotated[
        Path,
        typer.Argument(help=f"The session to import: {import_files(FORMATS)}."),
    ],
    fmt: Annotated[str, typer.Option("--format", "-f", help=f"auto, {listed(FORMATS)}.")] = "auto",
    user: Annotated[str | None, typer.Option("--user", help="The person's name; default AVIBE_USER.")] = None,
    title: Annotated[str, typer.Option("--title", help="Session title.")] = "",
    scenario_out: Annotated[
        Path | None,
        typer.Option("--scenario-out", help="Also write the replay conversation as a scenario file."),
    ] = None,
) -> None:
    """Import a session: the person's messages and the replies go into the record (tool output does not);
    the whole conversation is kept for replays."""
    if fmt != "auto" and fmt not in FORMATS:
        raise BadArgument(f"--format must be auto, {listed(FORMATS)}, not {shown(fmt)}")
    _check_text("--user", user, 128)
    _check_text("--title", title, MAX_TITLE)
    _check_out(scenario_out)
    source = _check_source(path)
    settings = load_settings()
    chosen: Format | None = next((f for f in FORMATS if f == fmt), None)
    imported = _parse(source, user or settings.user_name, chosen, settings)
    _rehearse(imported, title)
    if scenario_out is not None:
        save_scenario(imported.scenario, scenario_out)
    from avibe.store import open_store

    with open_store(settings.database_url) as store:
        session = record_import(store, imported, title)
    events = imported.scenario.events
    users = sum(isinstance(e, UserMessage) for e in events)
    tools = sum(len(e.tool_uses) for e in events if isinstance(e, AssistantTurn))
    typer.echo(
        f"session {session}: {users} user messages, {len(events) - users} assistant turns, "
        f"{tools} tool calls ({imported.format}); replay with `vibe eval --session {session}`"
    )


def register(app: typer.Typer) -> None:
    app.command("import")(import_command)
