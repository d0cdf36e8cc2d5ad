"""`vibe eval`: the memory evaluation - scenarios x strategies x seeds x K on one model, resumable,
with a Markdown report, PNG plots and the raw JSONL results (SPEC E1, issue 6)."""

from __future__ import annotations

import shlex
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from avibe.cli.wiring import die, open_record, settings_or_die, setup_logging
from avibe.config import Settings
from avibe.errors import AvibeError
from avibe.evals.generators import SCENARIO_TYPES
from avibe.evals.importers import REPLAY_STATE_KEY
from avibe.evals.replay import trigger_fraction
from avibe.evals.report import write_report
from avibe.evals.runner import Job, RunSettings, key_of, plan, read_results, run_all
from avibe.evals.scenario import Scenario, ScenarioError, load_scenario, save_scenario, scenario_from_dict
from avibe.evals.strategies import STRATEGY_NAMES, available_strategies
from avibe.ports import ModelClient, TokenCounter

DEFAULT_WINDOW_CAP = 8192  # small windows keep the default run affordable on the embedded model
RESULTS = "results.jsonl"


def _open_model(name: str, settings: Settings) -> ModelClient:
    """The model under evaluation (a seam the tests replace with a scripted model)."""
    from avibe.providers import open_model

    return open_model(name, settings)


def _open_counter(name: str, settings: Settings, model: ModelClient) -> TokenCounter:
    from avibe.providers import open_counter

    return open_counter(name, settings, model)


def _scenarios(files: list[Path], sessions: list[str], settings: Settings) -> list[Scenario]:
    found = [load_scenario(path) for path in files]
    if sessions:
        store = open_record(settings)
        for session in sessions:
            state = store.load_state(store.get_session(session).id, REPLAY_STATE_KEY)
            if state is None:
                die(f"session {session} has no imported conversation to replay (see `vibe import`)")
            found.append(scenario_from_dict(state))
    return found


def _check_choices(types: list[str], strategies: list[str]) -> None:
    for kind in types:
        if kind not in SCENARIO_TYPES:
            die(f"unknown scenario type {kind!r}; choose from {', '.join(SCENARIO_TYPES)}")
    for name in strategies:
        if name not in STRATEGY_NAMES:
            die(f"unknown strategy {name!r}; choose from {', '.join(STRATEGY_NAMES)}")


def _run_with_progress(jobs: list[Job], run: Any, out: Path) -> None:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    finished = {key_of(r) for r in read_results(out / RESULTS) if r.get("status") in {"ok", "n/a"}}
    done_before = sum(job.key.as_tuple() in finished for job in jobs)  # what a resumed run skips
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, transient=False) as progress:
        task = progress.add_task("eval", total=len(jobs))
        progress.advance(task, done_before)

        def on_done(row: dict[str, Any]) -> None:
            progress.update(task, advance=1, description=f"{row['strategy']} / {row['scenario']}")

        run(on_done)


def _command_line(
    types: list[str],
    files: list[Path] | None,
    sessions: list[str] | None,
    strategies: list[str],
    model: str,
    judge: str | None,
    seeds: list[int] | None,
    ks: list[int] | None,
    window: int,
    threshold: float,
    out: Path,
    probes: bool = True,
) -> str:
    """The command that reproduces this report, with every default spelled out."""
    words = ["vibe", "eval"]
    words += [w for t in types for w in ("-t", t)] + [w for f in files or [] for w in ("--scenario", str(f))]
    words += [w for s in sessions or [] for w in ("--session", s)] + [
        w for s in strategies for w in ("-s", s)
    ]
    words += ["--model", model] + (["--judge", judge] if judge else [])
    words += [w for s in seeds or [1] for w in ("--seed", str(s))] + [
        w for x in ks or [1, 2, 4, 8] for w in ("--k", str(x))
    ]
    words += ["--window", str(window), "--threshold", f"{threshold:.4g}", "--out", str(out)]
    words += [] if probes else ["--no-probes"]
    return shlex.join(words)


def eval_command(
    types: Annotated[
        list[str] | None, typer.Option("--type", "-t", help="Scenario type (repeat); default all eight.")
    ] = None,
    scenario: Annotated[
        list[Path] | None, typer.Option("--scenario", help="A scenario file (JSON/YAML) to add.")
    ] = None,
    session: Annotated[
        list[str] | None, typer.Option("--session", help="An imported session to replay.")
    ] = None,
    strategy: Annotated[
        list[str] | None, typer.Option("--strategy", "-s", help="Strategy (repeat); default all available.")
    ] = None,
    model: Annotated[
        str | None,
        typer.Option("--model", "-m", help="Model under evaluation; default the configured one (embedded)."),
    ] = None,
    judge: Annotated[
        str | None, typer.Option("--judge", help="Judge model for rubric probes; default the model itself.")
    ] = None,
    seed: Annotated[list[int] | None, typer.Option("--seed", help="Seed (repeat); default 1.")] = None,
    k: Annotated[
        list[int] | None,
        typer.Option("--k", help="Target number of compactions K (repeat); default 1 2 4 8."),
    ] = None,
    window: Annotated[
        int | None,
        typer.Option(
            "--window", help=f"Context window in tokens; default min(model window, {DEFAULT_WINDOW_CAP})."
        ),
    ] = None,
    threshold: Annotated[
        float | None,
        typer.Option(
            "--threshold", help="Compact above this fraction of the window; default Vibey's own trigger (F1)."
        ),
    ] = None,
    jobs: Annotated[int, typer.Option("--jobs", "-j", help="Runs in parallel (one model per worker).")] = 1,
    probes: Annotated[
        bool, typer.Option("--probes/--no-probes", help="Ask the probes after each run.")
    ] = True,
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Results folder; rerunning with it resumes.")
    ] = Path("eval-results"),
    no_plots: Annotated[bool, typer.Option("--no-plots", help="Skip the PNG plots.")] = False,
    origin: Annotated[
        str | None,
        typer.Option(
            "--origin",
            help="What produced the results in --out, for the report's header (default: this command); "
            "for results gathered by several commands, e.g. a script.",
        ),
    ] = None,
) -> None:
    """Run the memory evaluation and write report.md, PNG plots and results.jsonl into --out."""
    settings = settings_or_die()
    setup_logging(settings)
    types = list(types or ([] if scenario or session else SCENARIO_TYPES))
    strategies = list(strategy or available_strategies())
    _check_choices(types, strategies)
    if (threshold is not None and not 0 < threshold <= 1) or jobs < 1:
        die("--threshold must be in (0, 1] and --jobs at least 1")
    name = model or settings.model
    try:
        first = _open_model(name, settings)
        counter = _open_counter(name, settings, first)
        judge_model = _open_model(judge, settings) if judge else None
        files = _scenarios(list(scenario or []), list(session or []), settings)
    except (AvibeError, ScenarioError) as err:
        die(str(err))
    size = window or min(first.facts.window, DEFAULT_WINDOW_CAP)
    try:
        fraction = threshold or trigger_fraction(first.facts, size)
    except ValueError as err:
        die(f"--window {size}: {err}")
    matrix = plan(
        types, files, strategies, list(seed or [1]), list(k or [1, 2, 4, 8]), size, counter, fraction
    )
    out.mkdir(parents=True, exist_ok=True)
    models = iter([first])

    def model_for() -> ModelClient:
        return next(models, None) or _open_model(name, settings)

    run_settings = RunSettings(size, fraction, probes)

    def run(on_done: Any) -> None:
        run_all(
            matrix,
            model_for,
            counter,
            run_settings,
            out / RESULTS,
            judge=judge_model,
            parallel=jobs,
            on_done=on_done,
        )

    _run_with_progress(matrix, run, out)
    command = _command_line(
        types, scenario, session, strategies, name, judge, seed, k, size, fraction, out, probes
    )
    header = {
        "model": name,
        "judge": judge or name,
        "window": f"{size:,} tokens",
        "threshold": f"{fraction:.0%} of the window ({int(fraction * size):,} tokens)",
        "command": f"`{origin or command}`",
        "written": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    files_written = write_report(read_results(out / RESULTS), out, header, plots=not no_plots)
    typer.echo(f"report: {files_written.markdown}")


def scenarios_command(
    out: Annotated[Path, typer.Argument(help="Folder to write the generated scenario files into.")],
    types: Annotated[
        list[str] | None, typer.Option("--type", "-t", help="Scenario type (repeat); default all.")
    ] = None,
    seed: Annotated[int, typer.Option("--seed")] = 1,
    size: Annotated[int, typer.Option("--size", help="Filler turns.")] = 20,
    yaml_format: Annotated[bool, typer.Option("--yaml", help="Write YAML instead of JSON.")] = False,
) -> None:
    """Write generated scenarios as files (docs/eval-format.md), e.g. to start your own from one."""
    from avibe.evals.generators import generate

    chosen = list(types or SCENARIO_TYPES)
    _check_choices(chosen, [])
    out.mkdir(parents=True, exist_ok=True)
    for kind in chosen:
        path = save_scenario(
            generate(kind, seed, size), out / f"{kind}-s{seed}-n{size}.{'yaml' if yaml_format else 'json'}"
        )
        typer.echo(str(path))


def register(app: typer.Typer) -> None:
    app.command("eval")(eval_command)
    app.command("eval-scenarios")(scenarios_command)
