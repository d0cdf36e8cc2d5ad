"""`vibe`, the command line (edge layer). Each command lives in its own module with `register(app)`."""

from __future__ import annotations

import importlib
import sys

import typer

app = typer.Typer(
    name="vibe",
    help="Avibe: run Vibey, inspect the record and its checkpoints.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Each module defines register(app). Order = order in `vibe --help`.
_COMMAND_MODULES: tuple[str, ...] = ("run", "checkpoints", "models", "eval", "importer", "log")


def _register_all() -> None:
    for name in _COMMAND_MODULES:
        module = importlib.import_module(f"avibe.cli.{name}")
        module.register(app)


_register_all()


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)
