"""`vibe run` (headless Vibey) and `vibe demo` (the bundled example task on the embedded model)."""

from __future__ import annotations

import shutil
import tempfile
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from avibe.agent.loop import Vibey, fresh_checkpoint_for_display
from avibe.cli.wiring import die, open_session, settings_or_die, setup_logging
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
) -> None:
    """Run Vibey headless on TASK; progress lines show turns, tool calls and checkpoints."""
    settings = settings_or_die()
    log_path = setup_logging(settings)
    if not workdir.is_dir():
        die(f"--workdir {workdir} is not a directory")
    try:
        with open_session(
            settings,
            model_name=model or settings.model,
            workdir=workdir.resolve(),
            session_id=session,
            window=window,
            max_steps=max_steps,
        ) as vibey:
            typer.echo(f"[session] {vibey.session_id} (log: {log_path})")
            result = vibey.send(task)
    except AvibeError as exc:
        die(str(exc))
    raise typer.Exit(1 if result.stopped else 0)


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
        ) as vibey:
            typer.echo(f"[session] {vibey.session_id} in {target} (window {window}; log: {log_path})")
            for item in _demo_inputs():
                _demo_input(vibey, item)
            stored = vibey.store.list_checkpoints(vibey.session_id)
            typer.echo(f"\n=== {len(stored)} checkpoints; what the last one kept ===")
            typer.echo(fresh_checkpoint_for_display(stored[-1] if stored else None))
            typer.echo(f"\nInspect: vibe checkpoints -s {vibey.session_id}; vibe log -s {vibey.session_id}")
    except AvibeError as exc:
        die(str(exc))


def _demo_input(vibey: Vibey, item: dict[str, Any]) -> None:
    """A user input starts a turn; any other is delivered with its source and read by the next turn."""
    if "user" in item:
        typer.echo(f"\nuser> {item['user']}")
        vibey.send(item["user"])
        return
    kind = next(iter(item))
    if kind not in KINDS or kind in ("user", "assistant"):
        raise AvibeError(f"demo script: unknown input kind {kind!r}")
    fields = item[kind]
    typer.echo(f"\n[{kind} {fields['name']}] {fields['text']}")
    vibey.deliver(Source(kind, name=fields["name"], ref=fields.get("ref", "")), fields["text"])


def register(app: typer.Typer) -> None:
    app.command("run")(run)
    app.command("demo")(demo)
