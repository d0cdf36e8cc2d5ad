"""`vibe`, the command line (edge layer). Each command lives in its own module with `register(app)`.

One error boundary for every command (`_Vibe.main`), and one exit-code rule:

| exit | when |
|------|------|
| 0    | the command did what was asked; an empty answer is an answer (`vibe sessions`, `vibe log` and   |
|      | `vibe checkpoints` on a home with no record print nothing to list)                             |
| 1    | `vibe run` ran, but Vibey stopped before the task was done (U3)                                 |
| 2    | the command could not do it: a bad argument, setting or file, something named that does not     |
|      | exist (session, checkpoint, skill, model), an unreachable database, an unexpected failure      |
| 130  | interrupted (Ctrl-C)                                                                            |

Every exit 2 is exactly one line `vibe: ...` on stderr, never a traceback: usage errors from the parser,
AvibeError, OSError; anything else is logged with its traceback and named as an internal error.
"""

from __future__ import annotations

import importlib
import logging
import sys
import tempfile
import traceback
from collections.abc import Sequence
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Annotated, Any

import typer
from typer._click.exceptions import NoArgsIsHelpError, UsageError  # typer 0.29 ships its own click
from typer.core import TyperGroup

from avibe.cli.options import one_line
from avibe.errors import AvibeError

EXIT_FAILED = 2
# Until a command sends them to the log file, the `avibe` loggers say nothing (never Python's last-resort
# printing to stderr: a failure is one line, U2).
logging.getLogger("avibe").addHandler(logging.NullHandler())


def _fail(message: str) -> int:
    typer.echo(f"vibe: {one_line(message)}", err=True)
    return EXIT_FAILED


def _log_file() -> Path:
    """Where an unexpected failure's traceback goes: Avibe's log, or a temp file when the home is unusable."""
    try:
        from avibe.config import load_settings

        log_dir = load_settings().log_dir
        log_dir.mkdir(parents=True, exist_ok=True)
        return log_dir / "avibe.log"
    except (AvibeError, OSError):
        return Path(tempfile.gettempdir()) / "avibe-crash.log"


def _unexpected(exc: BaseException, argv: Sequence[str]) -> int:
    path = _log_file()
    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    try:
        with path.open("a", encoding="utf-8", errors="backslashreplace") as handle:
            handle.write(f"{stamp} ERROR avibe.cli: vibe {' '.join(argv)} failed unexpectedly\n")
            handle.write("".join(traceback.format_exception(exc)))
    except OSError:
        path = Path("(nowhere: the log file cannot be written)")
    logging.getLogger("avibe.cli").debug("unexpected failure", exc_info=exc)
    return _fail(f"internal error ({type(exc).__name__}: {exc}); the traceback is in {path}")


def _usage(exc: typer.TyperException) -> int:
    message = exc.format_message()
    ctx = getattr(exc, "ctx", None)
    if isinstance(exc, UsageError) and ctx is not None:
        message += f" (see `{ctx.command_path} --help`)"
    return _fail(message)


_ROOT_OPTIONS = frozenset({"-h", "--help", "-v", "--version", "--install-completion", "--show-completion"})


def _opens_chat(argv: Sequence[str]) -> bool:
    """`vibe` alone, or with the chat's options first (`vibe --approval ask`), is `vibe chat`."""
    return not argv or (argv[0].startswith("-") and argv[0].split("=")[0] not in _ROOT_OPTIONS)


class _Vibe(TyperGroup):
    """The `vibe` group whose `main` is the CLI's one error boundary (also under typer's CliRunner)."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        argv = list(sys.argv[1:] if args is None else args)
        if _opens_chat(argv) and sys.stdin.isatty() and sys.stdout.isatty():
            argv = ["chat", *argv]  # `vibe [chat options]` on a terminal opens the chat; else the help
        try:
            result = super().main(
                argv, prog_name, complete_var, standalone_mode=False, windows_expand_args=False, **extra
            )
            code = result if isinstance(result, int) else 0
        except NoArgsIsHelpError as exc:
            typer.echo(exc.ctx.get_help())  # `vibe` or `vibe skill` alone: the help, as asked
            code = 0
        except typer.TyperException as exc:  # the parser's usage errors, a callback's BadParameter
            code = _usage(exc)
        except typer.Abort:
            code = 130
        except KeyboardInterrupt:
            code = 130
        except AvibeError as exc:
            code = _fail(str(exc))
        except OSError as exc:
            where = f": {exc.filename}" if exc.filename else ""
            code = _fail(f"{exc.strerror or exc}{where}")
        except Exception as exc:
            code = _unexpected(exc, argv)
        if not standalone_mode:
            return code
        sys.exit(code)


def _show_version(value: bool) -> None:
    if value:
        try:
            found = version("avibe")
        except PackageNotFoundError:  # running from a source tree that was never installed
            found = "unknown (not installed)"
        typer.echo(f"vibe (avibe) {found}")
        raise typer.Exit()


app = typer.Typer(
    name="vibe",
    cls=_Vibe,
    help="Avibe: run Vibey, inspect the record and its checkpoints.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},  # every command: -h as its peers take it
)


@app.callback()
def _root(
    show_version: Annotated[
        bool,
        typer.Option(
            "--version", "-v", help="Print the version and exit.", callback=_show_version, is_eager=True
        ),
    ] = False,
) -> None:
    """Avibe: run Vibey, inspect the record and its checkpoints."""


# Each module defines register(app). Order = order in `vibe --help`.
_COMMAND_MODULES: tuple[str, ...] = (
    "chat",
    "run",
    "serve",
    "feeds",
    "checkpoints",
    "models",
    "eval",
    "importer",
    "log",
    "inspect",
    "agents",
    "mcp",
    "config",
)


def _register_all() -> None:
    for name in _COMMAND_MODULES:
        module = importlib.import_module(f"avibe.cli.{name}")
        module.register(app)


_register_all()


def main() -> None:
    app()
