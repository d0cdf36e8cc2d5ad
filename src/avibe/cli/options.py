"""Validated options for `vibe run` and `vibe demo`, shared edge helpers, and the model pre-flight check
: a bad argument is refused while the command line is parsed, before any session,
database file or model exists - one line `vibe: ...`, exit code 2 (see `avibe.cli`).

    def run(task: TaskArg, model: ModelOpt = None, window: WindowOpt = None, session: SessionOpt = None,
            workdir: WorkdirOpt = Path("."), max_steps: StepsOpt = 30) -> None:
        settings = load_settings()
        preflight_model(model or settings.model, settings)   # key, server window, model file
        ...
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Final

import typer

from avibe.config import MAX_WINDOW, MIN_WINDOW
from avibe.errors import AuthError, AvibeError, ConfigError
from avibe.record.agents import VIBEY, external_names
from avibe.record.display import shown as shown_text

if TYPE_CHECKING:
    from avibe.config import Settings

MAX_STEPS: Final = 10_000
MAX_SESSION_ID: Final = 128
MAX_SQL_INT: Final = 2**63 - 1  # SQLite's and PostgreSQL's bigint
log = logging.getLogger("avibe.cli")

_SESSION_ID = re.compile(r"[^\s]+")


class BadArgument(AvibeError):
    """A command-line argument that cannot be used as given (the CLI prints it as one line, exit 2)."""


def terminal_safe(text: str) -> str:
    """Text the model, a tool or the world wrote, safe to print: every control, format and invisible
    character (escape sequences, bidi marks, zero-width characters, tags, lone surrogates) shown as its
    escape (`\\x1b`, `\\u200b`) instead of obeyed or hidden; tab and newline stay. The CLI's one way to
    show such text (`avibe.record.display.shown`, which the chat uses too)."""
    return shown_text(text)


def one_line(text: str) -> str:
    """`text` as one terminal-safe line: its lines joined with "; "."""
    parts = [part.strip() for part in text.splitlines() if part.strip()]
    return terminal_safe("; ".join(parts)).replace("\t", " ")


def shown(value: str, limit: int = 60) -> str:
    """A user's value quoted for a message: control characters visible, long ones cut."""
    cut = value if len(value) <= limit else value[:limit] + "..."
    return repr(cut)


# -- callbacks: each returns the value or raises typer.BadParameter (-> "vibe: Invalid value for ...") --


def check_window(value: int | None) -> int | None:
    if value is not None and not MIN_WINDOW <= value <= MAX_WINDOW:
        raise typer.BadParameter(
            f"{value} is out of range; a window is {MIN_WINDOW} to {MAX_WINDOW:,} tokens "
            "(smaller than the model's to force checkpoints)"
        )
    return value


def check_steps(value: int) -> int:
    if not 1 <= value <= MAX_STEPS:
        raise typer.BadParameter(f"{value} is out of range; allow 1 to {MAX_STEPS:,} model calls per turn")
    return value


def check_session_id(value: str | None) -> str | None:
    if value is None:
        return None
    if (
        not value
        or len(value) > MAX_SESSION_ID
        or not value.isprintable()
        or not _SESSION_ID.fullmatch(value)
    ):
        raise typer.BadParameter(
            f"{shown(value)} is not a session id (printable, no spaces, at most {MAX_SESSION_ID} "
            "characters); `vibe sessions` lists them"
        )
    return value


def _path_text(value: Path) -> str:
    text = str(value)
    if "\x00" in text:
        raise typer.BadParameter(f"{shown(text)} contains a NUL byte; no path does")
    return text


def check_workdir(value: Path) -> Path:
    """An existing folder (Vibey works in it)."""
    text = _path_text(value)
    if not value.is_dir():
        what = "is not a folder" if value.exists() else "does not exist"
        raise typer.BadParameter(f"{shown(text)} {what}; give the folder Vibey should work in")
    return value


def check_new_workdir(value: Path | None) -> Path | None:
    """A folder to copy an example into: an existing folder, or a new one whose parent is a folder."""
    if value is None:
        return None
    text = _path_text(value)
    if value.exists() and not value.is_dir():
        raise typer.BadParameter(f"{shown(text)} is not a folder")
    parent = value if value.exists() else value.absolute().parent
    if not parent.is_dir():
        raise typer.BadParameter(f"{shown(text)}: its parent folder {str(parent)!r} does not exist")
    return value


def check_model(value: str | None) -> str | None:
    """A name some backend can open (installed or not: `preflight_model` checks that)."""
    if value is None:
        return None
    from avibe.providers import check_model_name

    try:
        check_model_name(value)
    except AvibeError as exc:
        raise typer.BadParameter(str(exc)) from None
    return value


def check_task(value: str) -> str:
    if not value.strip():
        raise typer.BadParameter("the task is empty; say what Vibey should do")
    if "\x00" in value:
        raise typer.BadParameter("the task contains a NUL byte, which the record cannot store")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise typer.BadParameter("the task is not valid UTF-8 text") from None
    return value


def check_network(value: str | None) -> str | None:
    """`--network on|off`: this run's sandboxed commands have a network or not. The person's
    own choice, like AVIBE_NETWORK, which it sets for this process before the settings are read (a project
    config cannot open the network)."""
    if value is None:
        return None
    chosen = value.strip().lower()
    if chosen not in ("on", "off"):
        raise typer.BadParameter(f"{shown(value)} is not on or off")
    os.environ["AVIBE_NETWORK"] = chosen
    return chosen


def check_approval(value: str | None) -> str | None:
    """`--approval ask|auto`: whether the agent's commands and writes outside the allow rules wait for the
    person's yes (docs/configuration.md). The person's choice for this process, as AVIBE_APPROVAL, which it
    sets before the settings are read (a project config may still make it stricter, never looser)."""
    return _person_setting(value, "AVIBE_APPROVAL", ("ask", "auto"))


def check_sandbox(value: str | None) -> str | None:
    """`--sandbox MODE`: where the agent's commands run (read-only, workspace-write, full-access), as
    AVIBE_SANDBOX for this process."""
    from avibe.tools.layout import MODES

    return _person_setting(value, "AVIBE_SANDBOX", MODES)


def _person_setting(value: str | None, variable: str, choices: tuple[str, ...]) -> str | None:
    if value is None:
        return None
    chosen = value.strip().lower()
    if chosen not in choices:
        raise typer.BadParameter(f"{shown(value)} is not one of {', '.join(choices)}")
    os.environ[variable] = chosen
    return chosen


# -- the option types (typer.Annotated) ----------------------------------------------------------------

TaskArg = Annotated[
    str, typer.Argument(help="What Vibey should do (the user's message).", callback=check_task)
]
ModelOpt = Annotated[
    str | None,
    typer.Option(
        "--model", "-m", help="Model name (default: $AVIBE_MODEL, else embedded-1.5b).", callback=check_model
    ),
]
WindowOpt = Annotated[
    int | None,
    typer.Option(
        "--window",
        help=f"Use a smaller context window than the model's (forces checkpoints); {MIN_WINDOW} or more.",
        callback=check_window,
    ),
]
SessionOpt = Annotated[
    str | None,
    typer.Option(
        "--session", "-s", help="Resume this session instead of a new one.", callback=check_session_id
    ),
]
StepsOpt = Annotated[
    int,
    typer.Option(
        "--max-steps", help=f"Model calls allowed per turn (1-{MAX_STEPS:,}).", callback=check_steps
    ),
]
WorkdirOpt = Annotated[
    Path,
    typer.Option("--workdir", "-C", help="Folder Vibey works in (must exist).", callback=check_workdir),
]
NetworkOpt = Annotated[
    str | None,
    typer.Option(
        "--network",
        help="on: the agent's sandboxed commands may use the network (default off: none, loopback "
        "included; the setting is network / AVIBE_NETWORK).",
        callback=check_network,
    ),
]
ApprovalOpt = Annotated[
    str | None,
    typer.Option(
        "--approval",
        help="ask: commands and writes outside the allow rules wait for your yes (a write shows its diff); "
        "auto (the default): they run at once, inside the sandbox. The setting is approval / AVIBE_APPROVAL.",
        callback=check_approval,
    ),
]
SandboxOpt = Annotated[
    str | None,
    typer.Option(
        "--sandbox",
        help="Where the agent's commands run: workspace-write (the default), read-only or full-access "
        "(the setting is sandbox / AVIBE_SANDBOX).",
        callback=check_sandbox,
    ),
]
AgentOpt = Annotated[
    str | None,
    typer.Option(
        "--agent",
        help=f"Who works in the session: {VIBEY}, or {external_names()} run as they are (their own model "
        "settings; see `vibe agents`). Default: the one that last worked in a resumed session, else vibey.",
    ),
]
DemoWorkdirOpt = Annotated[
    Path | None,
    typer.Option(
        "--workdir",
        "-C",
        help="Where to copy the example (default: a temp dir); created if its parent exists.",
        callback=check_new_workdir,
    ),
]
DemoFullOpt = Annotated[
    bool,
    typer.Option(
        "--full",
        help="Send every message of the script (default: once two checkpoints are shown, the rest of the "
        "person's messages are skipped; the deploy bot still posts its logs).",
    ),
]


# -- the pre-flight check ------------------------------------------------------------


def preflight_model(name: str, settings: Settings, *, fetch: bool = False) -> None:
    """Check, before a session or database file is created, that `name` can run here: an embedded model
    is installed, a `local:` file is a GGUF file, a self-hosted server's window is set, a hosted model's
    API key is in the environment. Raises AvibeError with one line saying what to set; also logged (U2).
    Loads no model; imports LiteLLM (~2 s) only for a hosted model. `fetch`: an embedded model that is
    not here yet is fetched now, its progress on stderr (a person at a terminal, on first use); without
    it the error names `vibe models install` (a script never downloads a gigabyte unasked)."""
    try:
        _preflight(name, settings, fetch)
    except AvibeError as exc:
        log.warning("model %r refused before the start: %s", name, exc)
        raise


def _preflight(name: str, settings: Settings, fetch: bool) -> None:
    from avibe.providers import check_model_name, model_facts, needs_window
    from avibe.providers.modelfile import (
        EMBEDDED_MODELS,
        check_gguf,
        model_path,
        records_dir,
        verify_model_file,
    )

    check_model_name(name)
    if name in EMBEDDED_MODELS:
        spec = EMBEDDED_MODELS[name]
        path = model_path(settings.model_cache, spec)
        if fetch and not path.exists():
            from avibe.cli.fetch import fetch_model

            fetch_model(spec, settings, first_use=True)
        verify_model_file(path, spec, records=records_dir(settings.home))
        return
    if name.startswith("local:"):
        check_gguf(Path(name.removeprefix("local:")).expanduser())
        return
    if needs_window(name) and settings.model_window is None:
        raise ConfigError(
            f"{name} runs on a server of yours, whose context window Avibe cannot know; set "
            "AVIBE_MODEL_WINDOW to the size the server runs with (e.g. AVIBE_MODEL_WINDOW=32768)"
        )
    model_facts(name, settings.model_window)  # a model the map lacks needs AVIBE_MODEL_WINDOW
    from avibe.providers.hosted import missing_keys

    missing = missing_keys(name)
    if missing:
        raise AuthError(f"{name} needs an API key: set {' or '.join(missing)} in the environment")


def require_session(settings: Settings, session_id: str) -> None:
    """Before `--session S` resumes anything: S is in the record. Opens the record read-only, so a missing
    record is reported (BadArgument), never created; an unknown S raises UnknownSession."""
    from avibe.errors import NoRecord
    from avibe.store import open_store

    try:
        with open_store(settings.database_url, read_only=True) as store:
            store.get_session(session_id)
    except NoRecord:
        raise BadArgument(f"no session {session_id!r}: there is no record yet") from None


# -- the log file (U2: failures go to Avibe's log, never to the screen) ----------------------------------

LOG_FORMAT: Final = "%(asctime)s %(levelname)s %(name)s: %(message)s"


LOG_MAX_BYTES: Final = 10 * 1024 * 1024  # avibe.log is rotated past this size ...
LOG_BACKUPS: Final = 3  # ... into avibe.log.1 (newest) to avibe.log.3; older ones are deleted


def log_to_file(settings: Settings) -> Path:
    """Send the `avibe` loggers to `$AVIBE_HOME/logs/avibe.log` (once per process); returns the path.
    The log rotates by size (a `vibe serve` runs for months): at most LOG_MAX_BYTES a file, LOG_BACKUPS
    old files kept. Creates the log folder: call it on a path that is going to write anyway."""
    from logging.handlers import RotatingFileHandler

    settings.log_dir.mkdir(parents=True, exist_ok=True)
    path = settings.log_dir / "avibe.log"
    root = logging.getLogger("avibe")
    if not any(isinstance(handler, logging.FileHandler) for handler in root.handlers):
        handler = RotatingFileHandler(path, maxBytes=LOG_MAX_BYTES, backupCount=LOG_BACKUPS, encoding="utf-8")
        handler.setFormatter(logging.Formatter(LOG_FORMAT))
        root.addHandler(handler)
        root.setLevel(logging.INFO)
        root.propagate = False
    return path


# -- output ----------------------------------------------------------------------------------------------


def print_table(columns: list[str], rows: list[list[str]], *, header: bool = True) -> None:
    """Rows aligned in columns (rich), one line each however wide; every cell terminal-safe and never
    read as rich markup. Right-aligns a column whose name ends with '>' (the '>' is not shown)."""
    import io

    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, show_header=header, show_edge=False, pad_edge=False, header_style="bold")
    for name in columns:
        right = name.endswith(">")
        table.add_column(name.rstrip(">"), justify="right" if right else "left", no_wrap=True)
    for row in rows:
        table.add_row(*(Text(one_line(cell)) for cell in row))
    buffer = io.StringIO()
    Console(file=buffer, width=100_000, highlight=False, color_system=None).print(table, crop=False)
    typer.echo("\n".join(line.rstrip() for line in buffer.getvalue().splitlines()))
