"""`vibe eval`: the memory evaluation - scenarios x strategies x seeds x K on one model, resumable,
with a Markdown report, PNG plots and the raw JSONL results (SPEC E1)."""

from __future__ import annotations

import shlex
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, cast, get_args

import typer

from avibe.agent.compaction import COMPACTORS
from avibe.checkpoint.effects import Mode
from avibe.cli.options import MAX_SQL_INT, BadArgument, check_model, check_session_id, log_to_file, shown
from avibe.config import MAX_WINDOW, MIN_WINDOW, Settings, load_settings
from avibe.evals.generators import SCENARIO_TYPES
from avibe.evals.importers import REPLAY_STATE_KEY
from avibe.evals.replay import trigger_fraction
from avibe.evals.report import write_report
from avibe.evals.runner import Job, RunSettings, key_of, plan, read_results, run_all
from avibe.evals.scenario import Scenario, ScenarioError, load_scenario, save_scenario, scenario_from_dict
from avibe.evals.strategies import STRATEGY_NAMES, available_strategies
from avibe.ports import ModelClient, TokenCounter

MODES: tuple[str, ...] = get_args(Mode)
SETS = ("real",)  # named scenario sets: the real-session set (avibe.evals.realset)
DEFAULT_WINDOW_CAP = 8192  # small windows keep the default run affordable on the embedded model
RESULTS = "results.jsonl"
MAX_K = 64  # compactions per scenario; a K of 64 is already hours on the embedded model
MAX_JOBS = 64
MAX_SIZE = 10_000  # filler turns of a generated scenario


def _open_model(name: str, settings: Settings) -> ModelClient:
    """The model under evaluation, checked first (installed, key set ...; a seam the tests replace with
    a scripted model)."""
    from avibe.cli.options import preflight_model
    from avibe.providers import open_model

    preflight_model(name, settings)
    return open_model(name, settings)


def _open_counter(name: str, settings: Settings, model: ModelClient) -> TokenCounter:
    from avibe.providers import open_counter

    return open_counter(name, settings, model)


def _load_file(path: Path) -> Scenario:
    text = str(path)
    if "\x00" in text or not path.is_file():
        raise BadArgument(f"--scenario {shown(text)} is not a file")
    try:
        return load_scenario(path)
    except ScenarioError as err:
        raise BadArgument(str(err)) from None
    except RecursionError:
        raise BadArgument(f"--scenario {text}: nested too deeply to be a scenario") from None
    except Exception as err:  # a malformed file the reader did not foresee: one line, not a traceback
        raise BadArgument(f"--scenario {text}: not a scenario file ({type(err).__name__}: {err})") from None


def _scenarios(files: list[Path], sessions: list[str], settings: Settings) -> list[Scenario]:
    """Every scenario to run, read before any model is opened; the record is only read (read-only)."""
    found = [_load_file(path) for path in files]
    if sessions:
        from avibe.store import open_store

        with open_store(settings.database_url, read_only=True) as store:
            for session in sessions:
                state = store.load_state(store.get_session(session).id, REPLAY_STATE_KEY)
                if state is None:
                    raise BadArgument(
                        f"session {session} has no imported conversation to replay (see `vibe import`)"
                    )
                try:
                    found.append(scenario_from_dict(state))
                except (ScenarioError, ValueError, TypeError, KeyError) as err:
                    raise BadArgument(
                        f"session {session}: its imported conversation is damaged ({err})"
                    ) from None
    return found


def _set_scenarios(names: list[str]) -> list[Scenario]:
    """The scenarios of the named sets; `real:ID,ID` picks sessions of the set (a long run goes session
    by session). A real session whose segment is not fetched is one line on stderr, not an error; a set
    with none at all is, and so is an id the set does not have."""
    from avibe.evals.realset import RealSessionError, load_manifest, real_set

    found: list[Scenario] = []
    for name in dict.fromkeys(names):
        base, _, picked = name.partition(":")
        if base not in SETS:
            raise BadArgument(f"unknown set {shown(name)}; choose from {', '.join(SETS)}")
        try:
            sessions = load_manifest()
            wanted = [i for i in picked.split(",") if i]
            unknown = sorted(set(wanted) - {s.id for s in sessions})
            if unknown:
                raise BadArgument(f"the real set has no session {shown(unknown[0])}")
            chosen = real_set(sessions=[s for s in sessions if not wanted or s.id in wanted])
        except RealSessionError as err:
            raise BadArgument(str(err).splitlines()[0]) from None
        for line in chosen.missing:
            typer.echo(line, err=True)
        if not chosen.scenarios:
            raise BadArgument("no session of the real set is here: run scripts/fetch_real_sessions.py")
        found += chosen.scenarios
    return found


def _check_choices(types: list[str], strategies: list[str]) -> None:
    for kind in types:
        if kind not in SCENARIO_TYPES:
            raise BadArgument(f"unknown scenario type {shown(kind)}; choose from {', '.join(SCENARIO_TYPES)}")
    for name in strategies:
        if name not in STRATEGY_NAMES and name not in COMPACTORS:  # `vibe run --compaction`'s names too
            raise BadArgument(f"unknown strategy {shown(name)}; choose from {', '.join(STRATEGY_NAMES)}")


def _check_numbers(seeds: list[int], ks: list[int], window: int | None, jobs: int) -> None:
    for seed in seeds:
        if not 0 <= seed <= MAX_SQL_INT:
            raise BadArgument(f"--seed {seed} is out of range (0 to {MAX_SQL_INT})")
    for k in ks:
        if not 1 <= k <= MAX_K:
            raise BadArgument(f"--k {k} is out of range; K, the compactions per scenario, is 1 to {MAX_K}")
    if window is not None and not MIN_WINDOW <= window <= MAX_WINDOW:
        raise BadArgument(f"--window {window} is out of range ({MIN_WINDOW} to {MAX_WINDOW:,} tokens)")
    if not 1 <= jobs <= MAX_JOBS:
        raise BadArgument(f"--jobs {jobs} is out of range (1 to {MAX_JOBS})")


def _check_folder(option: str, path: Path) -> None:
    """A folder to write into: it, or the nearest folder above it that exists, is a folder."""
    text = str(path)
    if "\x00" in text:
        raise BadArgument(f"{option} {shown(text)} contains a NUL byte")
    probe = path.absolute()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise BadArgument(f"{option} {shown(text)} is not a folder (or would be inside a file)")


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
    sets: list[str] | None = None,
    checkpoint_mode: str | None = None,
) -> str:
    """The command that reproduces this report, with every default spelled out."""
    words = ["vibe", "eval"] + [w for name in sets or [] for w in ("--set", name)]
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
    words += ["--checkpoint-mode", checkpoint_mode] if checkpoint_mode else []
    return shlex.join(words)


def _check_sessions(values: list[str] | None) -> list[str] | None:
    for value in values or []:
        check_session_id(value)
    return values


def eval_command(
    types: Annotated[
        list[str] | None, typer.Option("--type", "-t", help="Scenario type (repeat); default all twelve.")
    ] = None,
    scenario: Annotated[
        list[Path] | None, typer.Option("--scenario", help="A scenario file (JSON/YAML) to add.")
    ] = None,
    session: Annotated[
        list[str] | None,
        typer.Option("--session", help="An imported session to replay.", callback=_check_sessions),
    ] = None,
    scenario_set: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            help="A named set of scenarios to add: 'real', public Claude Code and Codex sessions with their "
            "truth (fetch the ones not kept here with scripts/fetch_real_sessions.py); 'real:ID,ID' some of "
            "them.",
        ),
    ] = None,
    strategy: Annotated[
        list[str] | None, typer.Option("--strategy", "-s", help="Strategy (repeat); default all available.")
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            "-m",
            help="Model under evaluation; default the configured one (embedded).",
            callback=check_model,
        ),
    ] = None,
    judge: Annotated[
        str | None,
        typer.Option(
            "--judge", help="Judge model for rubric probes; default the model itself.", callback=check_model
        ),
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
            "--threshold",
            help="Compact above this fraction of the window; default Vibey's own checkpoint trigger.",
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
    checkpoint_mode: Annotated[
        str | None,
        typer.Option(
            "--checkpoint-mode",
            help="How the checkpoint turn asks: tools, structured (one question a call), three (a call "
            "each for the memo, the mind and the scene) or grouped; default Vibey's pick for the model. "
            "Use a new --out for each mode.",
        ),
    ] = None,
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
    types = list(types or ([] if scenario or session or scenario_set else SCENARIO_TYPES))
    strategies = list(strategy or available_strategies())
    _check_choices(types, strategies)
    _check_numbers(list(seed or []), list(k or []), window, jobs)
    if threshold is not None and not 0 < threshold <= 1:  # NaN is refused here too
        raise BadArgument(f"--threshold {threshold} is out of range; a fraction of the window in (0, 1]")
    if checkpoint_mode is not None and checkpoint_mode not in MODES:
        choices = ", ".join(MODES)
        raise BadArgument(f"unknown --checkpoint-mode {shown(checkpoint_mode)}; choose from {choices}")
    if origin is not None and not origin.isprintable():
        raise BadArgument("--origin must be printable text")
    _check_folder("--out", out)
    settings = load_settings()
    files = _scenarios(list(scenario or []), list(session or []), settings)
    files += _set_scenarios(list(scenario_set or []))
    log_to_file(settings)
    name = model or settings.model
    first = _open_model(name, settings)
    counter = _open_counter(name, settings, first)
    judge_model = _open_model(judge, settings) if judge else None
    size = window or min(first.facts.window, DEFAULT_WINDOW_CAP)
    try:
        fraction = threshold or trigger_fraction(first.facts, size)
    except ValueError as err:
        raise BadArgument(f"--window {size}: {err}") from None
    matrix = plan(
        types, files, strategies, list(seed or [1]), list(k or [1, 2, 4, 8]), size, counter, fraction
    )
    out.mkdir(parents=True, exist_ok=True)
    models = iter([first])

    def model_for() -> ModelClient:
        return next(models, None) or _open_model(name, settings)

    mode = cast("Mode | None", checkpoint_mode)
    run_settings = RunSettings(size, fraction, probes, checkpoint_mode=mode, code=source_commit())

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
        types, scenario, session, strategies, name, judge, seed, k, size, fraction, out, probes, scenario_set,
        checkpoint_mode,
    )  # fmt: skip
    header = {
        "model": name,
        "judge": judge or name,
        "window": f"{size:,} tokens",
        "threshold": f"{fraction:.0%} of the window ({int(fraction * size):,} tokens)",
        **({"checkpoint mode": checkpoint_mode} if checkpoint_mode else {}),
        "command": f"`{origin or command}`",
        "written": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    files_written = write_report(read_results(out / RESULTS), out, header, plots=not no_plots)
    typer.echo(f"report: {files_written.markdown}")


def source_commit() -> str:
    """The commit of the avibe source this run uses, "-dirty" when its files differ from it; "" outside a
    git checkout (an installed wheel). Each result row keeps it, so a report can say what code made it."""
    src = Path(__file__).resolve().parents[1]

    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(src), *args], capture_output=True, text=True, timeout=10)
        return done.stdout.strip() if done.returncode == 0 else ""

    try:
        head = git("rev-parse", "--short=10", "HEAD")
        return head + ("-dirty" if head and git("status", "--porcelain", "--", ".") else "")
    except (OSError, subprocess.SubprocessError):
        return ""


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
    if not 0 <= size <= MAX_SIZE:
        raise BadArgument(f"--size {size} is out of range; 0 to {MAX_SIZE:,} filler turns")
    if not 0 <= seed <= MAX_SQL_INT:
        raise BadArgument(f"--seed {seed} is out of range (0 to {MAX_SQL_INT})")
    _check_folder("OUT", out)
    out.mkdir(parents=True, exist_ok=True)
    for kind in chosen:
        path = save_scenario(
            generate(kind, seed, size), out / f"{kind}-s{seed}-n{size}.{'yaml' if yaml_format else 'json'}"
        )
        typer.echo(str(path))


def register(app: typer.Typer) -> None:
    app.command("eval")(eval_command)
    app.command("eval-scenarios")(scenarios_command)
