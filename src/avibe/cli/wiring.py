"""Wiring at the edge: settings -> store, model, counter, tools, background jobs -> a Vibey session."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import NoReturn

import typer

from avibe.agent.events import Event
from avibe.agent.loop import RunConfig, Vibey
from avibe.config import Settings, load_settings
from avibe.errors import AvibeError
from avibe.ports import RecordStore

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


def die(message: str, code: int = 2) -> NoReturn:
    """One clear line on stderr and a non-zero exit: the CLI's only way to fail."""
    typer.echo(f"vibe: {message}", err=True)
    raise typer.Exit(code)


def settings_or_die() -> Settings:
    try:
        return load_settings()
    except AvibeError as exc:
        die(str(exc))


def setup_logging(settings: Settings) -> Path:
    """U2: failures go to Avibe's log file, never to the screen."""
    settings.log_dir.mkdir(parents=True, exist_ok=True)
    path = settings.log_dir / "avibe.log"
    root = logging.getLogger("avibe")
    if not any(isinstance(h, logging.FileHandler) for h in root.handlers):
        handler = logging.FileHandler(path, encoding="utf-8")
        handler.setFormatter(logging.Formatter(LOG_FORMAT))
        root.addHandler(handler)
        root.setLevel(logging.INFO)
        root.propagate = False
    return path


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


def print_event(event: Event) -> None:
    """Progress lines of a headless run: turns, model calls, tool calls, checkpoints."""
    if event.kind == "reply":
        typer.echo(f"vibey> {event.text}")
    elif event.kind == "stop":
        typer.echo(f"[stop] {event.text}")
    elif event.kind == "tool":
        arguments = json.dumps(event.data.get("arguments", {}), ensure_ascii=False)
        typer.echo(f"[tool] {event.text} {arguments[:120]}")
    else:
        typer.echo(f"[{event.kind}] {event.text}")


def _skill_dirs(settings: Settings, workdir: Path) -> list[Path]:
    return [workdir / ".avibe" / "skills", settings.home / "skills"]


def _agents_md(workdir: Path) -> str:
    path = workdir / "AGENTS.md"
    return path.read_text(encoding="utf-8") if path.is_file() else ""


@contextmanager
def open_session(
    settings: Settings,
    *,
    model_name: str,
    workdir: Path,
    session_id: str | None,
    window: int | None,
    max_steps: int,
    quiet: bool = False,
) -> Iterator[Vibey]:
    """A ready Vibey over a new or existing session; background jobs stopped on the way out."""
    from avibe.providers import is_local, open_counter, open_model
    from avibe.sources.background import BackgroundJobs
    from avibe.tools import ToolBox, catalogue_text, default_tools, discover_skills, find_skill, skill_text

    store = open_record(settings)
    session = store.get_session(session_id) if session_id else store.create_session(title=str(workdir))
    model = open_model(model_name, settings)
    counter = open_counter(model_name, settings, model)
    skill_dirs = _skill_dirs(settings, workdir)
    session_dir = settings.sessions_dir / session.id
    jobs = BackgroundJobs(store, session.id, workdir)
    toolbox = ToolBox(
        default_tools(workdir, store=store, session_id=session.id, skill_dirs=skill_dirs, jobs=jobs)
    )

    def current_skill(name: str) -> str | None:
        found = find_skill(skill_dirs, name)
        return skill_text(found) if found else None

    config = RunConfig(
        window=window,
        max_steps=max_steps,
        checkpoint_mode="structured" if is_local(model_name) else "tools",
        agents_md=_agents_md(workdir),
        skill_catalogue=catalogue_text(discover_skills(skill_dirs)),
        user_name=settings.user_name,
        record_where=f"Avibe's record ({_masked(settings.database_url)}), session {session.id}",
    )
    vibey = Vibey(
        store=store,
        model=model,
        counter=counter,
        clock=SystemClock(),
        session_id=session.id,
        session_dir=session_dir,
        tool_specs=toolbox.specs,
        run_tool=toolbox.dispatch,
        config=config,
        events=(lambda _: None) if quiet else print_event,
        poll_inputs=jobs.collect_finished,
        skill_text=current_skill,
    )
    try:
        yield vibey
    finally:
        jobs.kill_all()


def _masked(url: str) -> str:
    if "@" not in url or "://" not in url:
        return url
    scheme, rest = url.split("://", 1)
    creds, host = rest.rsplit("@", 1)
    user = creds.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}"
