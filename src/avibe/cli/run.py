"""`vibe run` (headless Vibey) and `vibe demo` (the bundled example task on the embedded model)."""

from __future__ import annotations

import shutil
import tempfile
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from avibe.agent.loop import fresh_checkpoint_for_display
from avibe.cli.wiring import EventPrinter, HostedSession, die, open_session, settings_or_die, setup_logging
from avibe.errors import AvibeError
from avibe.record.entries import KINDS, Source

DEMO_WINDOW = 6144  # small enough that the example task checkpoints at least twice on the embedded model
# The 0.5B default model keeps every harness guarantee, but as an agent it loops on one tool call and
# never gets through a ticket; the 1.5B tier does the tickets, so the demo shows checkpoints in real work.
DEMO_MODEL = "embedded-1.5b"

ModelOpt = Annotated[
    str | None, typer.Option("--model", "-m", help="Model name (default: $AVIBE_MODEL or embedded).")
]
WindowOpt = Annotated[
    int | None,
    typer.Option("--window", help="Use a smaller context window than the model's (forces checkpoints)."),
]
SessionOpt = Annotated[
    str | None, typer.Option("--session", "-s", help="Resume this session instead of a new one.")
]
StepsOpt = Annotated[int, typer.Option("--max-steps", help="Model calls allowed per turn.")]


def run(
    task: Annotated[str, typer.Argument(help="What Vibey should do (the user's message).")],
    model: ModelOpt = None,
    window: WindowOpt = None,
    session: SessionOpt = None,
    workdir: Annotated[Path, typer.Option("--workdir", "-C", help="Folder Vibey works in.")] = Path("."),
    max_steps: StepsOpt = 30,
    resume_latest: Annotated[
        bool, typer.Option("--continue", "-c", help="Resume the latest session of the working directory.")
    ] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Also show model calls and checkpoints.")
    ] = False,
    json_lines: Annotated[bool, typer.Option("--json", help="Print every event as one JSON line.")] = False,
    no_wait: Annotated[
        bool,
        typer.Option("--no-wait", help="Stop when the turn ends, without waiting for background jobs."),
    ] = False,
) -> None:
    """Run Vibey headless on TASK: host the session until Vibey is idle and no background job it waits
    for is still running (a finished job wakes it again)."""
    settings = settings_or_die()
    log_path = setup_logging(settings)
    if not workdir.is_dir():
        die(f"--workdir {workdir} is not a directory")
    if session is not None and resume_latest:
        die("--session and --continue both choose a session; give one")
    printer = EventPrinter(verbose=verbose, json_lines=json_lines)
    try:
        with open_session(
            settings,
            model_name=model or settings.model,
            workdir=workdir.resolve(),
            session_id=session,
            window=window,
            max_steps=max_steps,
            events=printer,
            continue_latest=resume_latest,
        ) as live:
            if not json_lines:
                typer.echo(f"[session] {live.session_id} (log: {log_path})")
            result = live.send(task)
            results = [result, *live.host.run_until_idle(wait_for_jobs=not no_wait)]
    except AvibeError as exc:
        die(str(exc))
    raise typer.Exit(1 if results[-1].stopped else 0)


def _demo_inputs() -> list[dict[str, Any]]:
    script = resources.files("avibe.examples").joinpath("release_queue/script.yaml").read_text("utf-8")
    inputs: list[dict[str, Any]] = yaml.safe_load(script)["inputs"]
    return inputs


def _copy_workspace(target: Path) -> None:
    source = resources.files("avibe.examples").joinpath("release_queue/workspace")
    with resources.as_file(source) as folder:
        shutil.copytree(folder, target, dirs_exist_ok=True)


def demo(
    model: Annotated[
        str, typer.Option("--model", "-m", help="Model name (the demo's default: the 1.5B embedded tier).")
    ] = DEMO_MODEL,
    window: Annotated[int, typer.Option("--window", help="Context window for the demo.")] = DEMO_WINDOW,
    workdir: Annotated[
        Path | None, typer.Option("--workdir", "-C", help="Where to copy the example (default: a temp dir).")
    ] = None,
    max_steps: StepsOpt = 12,
) -> None:
    """Run Vibey on the bundled example: a ticket queue handled oldest first, on a small window so
    checkpoints happen; then show what the last checkpoint kept."""
    settings = settings_or_die()
    log_path = setup_logging(settings)
    target = workdir or Path(tempfile.mkdtemp(prefix="vibey-demo-"))
    _copy_workspace(target)
    try:
        with open_session(
            settings,
            model_name=model,
            workdir=target.resolve(),
            session_id=None,
            window=window,
            max_steps=max_steps,
            events=EventPrinter(verbose=True),  # the demo shows the checkpoints a normal run keeps quiet
        ) as live:
            typer.echo(f"[session] {live.session_id} in {target} (window {window}; log: {log_path})")
            for item in _demo_inputs():
                _demo_input(live, item)
            live.host.run_until_idle()
            stored = live.store.list_checkpoints(live.session_id)
            typer.echo(f"\n=== {len(stored)} checkpoints; what the last one kept ===")
            typer.echo(fresh_checkpoint_for_display(stored[-1] if stored else None))
            typer.echo(f"\nInspect: vibe checkpoints -s {live.session_id}; vibe log -s {live.session_id}")
    except AvibeError as exc:
        die(str(exc))


def _demo_input(live: HostedSession, item: dict[str, Any]) -> None:
    """A user input starts a turn; any other is posted with its source and read by the next turn."""
    if "user" in item:
        typer.echo(f"\nuser> {item['user']}")
        live.send(item["user"])
        return
    kind = next(iter(item))
    if kind not in KINDS or kind in ("user", "assistant"):
        raise AvibeError(f"demo script: unknown input kind {kind!r}")
    fields = item[kind]
    live.host.post(Source(kind, name=fields["name"], ref=fields.get("ref", "")), fields["text"])


def register(app: typer.Typer) -> None:
    app.command("run")(run)
    app.command("demo")(demo)
