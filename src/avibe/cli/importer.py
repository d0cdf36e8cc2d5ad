"""`vibe import`: a Claude Code session, a Codex rollout or an OpenCode session becomes an Avibe session,
replayable by `vibe eval --session ID` through every strategy."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from avibe.cli.wiring import die, open_record, settings_or_die
from avibe.errors import AvibeError
from avibe.evals.importers import FORMATS, Format, SessionImportError, parse_session_file, record_import
from avibe.evals.scenario import AssistantTurn, UserMessage, save_scenario


def import_command(
    path: Annotated[
        Path,
        typer.Argument(
            help="A Claude Code <session>.jsonl, a Codex rollout-*.jsonl, or an OpenCode session "
            "(`opencode export` JSON, or storage/session/<project>/<id>.json)."
        ),
    ],
    fmt: Annotated[str, typer.Option("--format", "-f", help="auto, claude, codex or opencode.")] = "auto",
    user: Annotated[str | None, typer.Option("--user", help="The person's name; default AVIBE_USER.")] = None,
    title: Annotated[str, typer.Option("--title", help="Session title.")] = "",
    scenario_out: Annotated[
        Path | None,
        typer.Option("--scenario-out", help="Also write the replay conversation as a scenario file."),
    ] = None,
) -> None:
    """Import a session: the person's messages and the replies go into the record (tool output does not,
    A3); the whole conversation is kept for replays."""
    if fmt != "auto" and fmt not in FORMATS:
        die(f"--format must be auto, claude, codex or opencode, not {fmt!r}")
    settings = settings_or_die()
    chosen: Format | None = next((f for f in FORMATS if f == fmt), None)
    try:
        imported = parse_session_file(path, user or settings.user_name, chosen)
        session = record_import(open_record(settings), imported, title)
    except (SessionImportError, AvibeError) as err:
        die(str(err))
    events = imported.scenario.events
    users = sum(isinstance(e, UserMessage) for e in events)
    tools = sum(len(e.tool_uses) for e in events if isinstance(e, AssistantTurn))
    if scenario_out is not None:
        save_scenario(imported.scenario, scenario_out)
    typer.echo(
        f"session {session}: {users} user messages, {len(events) - users} assistant turns, "
        f"{tools} tool calls ({imported.format}); replay with `vibe eval --session {session}`"
    )


def register(app: typer.Typer) -> None:
    app.command("import")(import_command)
