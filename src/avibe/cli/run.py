"""`vibe run` (headless Vibey) and `vibe demo` (the bundled example task on the embedded model)."""

from __future__ import annotations

import hashlib
import re
import shutil
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, cast

import typer
import yaml

from avibe.agent.loop import fresh_checkpoint_for_display
from avibe.cli.options import (
    BadArgument,
    DemoWorkdirOpt,
    ModelOpt,
    SessionOpt,
    StepsOpt,
    WindowOpt,
    WorkdirOpt,
    check_task,
    log_to_file,
    preflight_model,
    require_session,
    shown,
)
from avibe.cli.terminal import EventPrinter, announce, die, settings_or_die, terminal_approver
from avibe.compose import SystemClock, VibeySession, open_record, open_session, session_agent
from avibe.config import Settings
from avibe.errors import AvibeError
from avibe.host.events import CheckpointAccepted, CheckpointFallback, Event
from avibe.host.sessions import find_session
from avibe.ports import RecordStore
from avibe.record.entries import KINDS, Source

DEMO_WINDOW = 8192  # small enough that the example checkpoints within minutes; at 6,144 the system prompt
# (~1,600 tokens of rules and tool schemas) and the checkpoint left room for two steps between checkpoints
# The 0.5B default model keeps every harness guarantee, but as an agent it loops on one tool call and
# never gets through a ticket; the 1.5B tier does the tickets, so the demo shows checkpoints in real work.
DEMO_MODEL = "embedded-1.5b"
DEMO_WATCH_WAIT_S = 30.0  # how long the demo waits for its watch to see a change (it looks every second)

TaskOpt = Annotated[
    str | None,
    typer.Argument(help="What Vibey should do (the user's message); - reads it from standard input."),
]
FileOpt = Annotated[
    Path | None,
    typer.Option("--file", "-f", help="Read the task from this file (for long tasks).", dir_okay=False),
]


def _task_text(task: str | None, file: Path | None) -> str:
    """The user's message: the argument, standard input (`-`) or a file - one of them."""
    if (task is None) == (file is None):
        raise BadArgument("give the task as an argument, as - (standard input), or with --file; one of them")
    if file is not None:
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise BadArgument(f"--file {shown(str(file))}: cannot read it as UTF-8 text ({exc})") from None
    elif task == "-":
        text = sys.stdin.read()
    else:
        text = task or ""
    try:
        return check_task(text)
    except typer.BadParameter as exc:
        raise BadArgument(str(exc)) from None


def session_to_resume(
    settings: Settings, session: str | None, resume_latest: bool, workdir: Path
) -> str | None:
    """Checked read-only before anything is written: a session named must exist, and `--continue` needs
    a session of this folder (neither creates a record)."""
    if session is not None and resume_latest:
        raise BadArgument("--session and --continue both choose a session; give one")
    if session is not None:
        require_session(settings, session)
        return session
    if not resume_latest:
        return None
    from avibe.errors import NoRecord
    from avibe.store import open_store

    try:
        with open_store(settings.database_url, read_only=True) as store:
            return find_session(store, None, workdir)
    except NoRecord:
        raise BadArgument(f"no session has run in {workdir} yet; start one without --continue") from None


def run(
    task: TaskOpt = None,
    file: FileOpt = None,
    model: ModelOpt = None,
    window: WindowOpt = None,
    session: SessionOpt = None,
    workdir: WorkdirOpt = Path("."),
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
    agent: Annotated[
        str | None,
        typer.Option(
            "--agent",
            help="Who works in the session: vibey, or claude-code, codex, opencode run as they are "
            "(their own model settings; see `vibe agents`). Default: the one that worked in the "
            "session resumed, else vibey.",
        ),
    ] = None,
    agent_timeout: Annotated[
        float | None,
        typer.Option(
            "--agent-timeout",
            min=1.0,
            help="With --agent: the longest one turn of the program may take, in seconds; it is stopped "
            "then, whatever it says meanwhile (default: no limit, but a program that says nothing for "
            "900 seconds is stopped).",
        ),
    ] = None,
) -> None:
    """Run Vibey headless on TASK: host the session until Vibey is idle and no background job it waits
    for is still running (a finished job wakes it again)."""
    settings = settings_or_die()
    model_name = model or settings.model
    text = _task_text(task, file)
    workdir = workdir.resolve()
    resume = session_to_resume(settings, session, resume_latest, workdir)
    if agent is None and resume is not None:
        agent = session_agent(settings, resume)
    if agent is not None and agent != "vibey":
        from avibe.cli.agents import run_backend

        if model is not None or window is not None:
            raise BadArgument(f"--model and --window are Vibey's; {agent} uses the model configured for it")
        raise typer.Exit(
            run_backend(
                agent,
                text,
                settings=settings,
                workdir=workdir,
                session=resume,
                verbose=verbose,
                json_lines=json_lines,
                no_wait=no_wait,
                timeout_s=agent_timeout,
            )
        )
    preflight_model(model_name, settings)  # before a session or a database file exists
    log_path = log_to_file(settings)
    printer = EventPrinter(verbose=verbose, json_lines=json_lines)
    sent = False
    if resume is not None:  # hosted elsewhere (`vibe serve`): post there and follow (issue 12 item 1)
        answered, sent = _attach(settings, resume, text, printer, json_lines)
        if answered:
            raise typer.Exit(0)
    with open_session(
        settings,
        model_name=model_name,
        workdir=workdir,
        session_id=resume,
        window=window,
        max_steps=max_steps,
        events=printer,
        approver=terminal_approver(),
        on_hosted=lambda: announce(settings),  # the session starts: its loosened settings said
    ) as live:
        if not json_lines:
            typer.echo(f"[session] {live.session_id} (log: {log_path})")
        results = [] if sent else [live.send(text)]  # a message posted while attached is waiting already
        results += live.host.run_until_idle(wait_for_jobs=not no_wait)
    raise typer.Exit(1 if results and results[-1].stopped else 0)


def _attach(
    settings: Settings, session: str, text: str, printer: EventPrinter, json_lines: bool
) -> tuple[bool, bool]:
    """(answered, sent): when another live process hosts the session, post the message there and follow
    the record to the answer; if that host goes away first, the caller hosts the session here."""
    from avibe.cli.attach import live_lease, send_attached

    store = open_record(settings)
    lease = live_lease(store, session)
    if lease is None:
        return False, False
    if not json_lines:
        typer.echo(f"[session] {session} (hosted by pid {lease.owner.pid} on {lease.owner.host}: attached)")
    followed = send_attached(store, session, settings.user_name, text, printer, SystemClock())
    return followed.reply is not None, True


def _demo_script() -> dict[str, Any]:
    script = resources.files("avibe.examples").joinpath("release_queue/script.yaml").read_text("utf-8")
    data: dict[str, Any] = yaml.safe_load(script)
    return data


def _demo_inputs() -> list[dict[str, Any]]:
    inputs: list[dict[str, Any]] = _demo_script()["inputs"]
    return inputs


def _tree_digest(folder: Path) -> dict[str, str]:
    """Every file under `folder` (relative path -> sha256): to tell whether the user's rule held."""
    if not folder.is_dir():
        return {}
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _ticket_done(workdir: Path, check: dict[str, str]) -> str | None:
    """None when the ticket's change is in the files, else what is missing."""
    path = workdir / check["file"]
    if not path.is_file():
        return f"{check['file']} does not exist"
    text = path.read_text(encoding="utf-8", errors="replace")
    if "has" in check and check["has"] not in text:
        return f"{check['file']} lacks {check['has']!r}"
    if "lacks" in check and check["lacks"] in text:
        return f"{check['file']} still has {check['lacks']!r}"
    return None


def demo_report(workdir: Path, protected_before: dict[str, str]) -> list[str]:
    """What a person would check after the demo: the tickets done, the changelog, and the user's rule."""
    script = _demo_script()
    lines = ["=== How the work went (checked in the files) ==="]
    for ticket, check in script["checks"].items():
        missing = _ticket_done(workdir, check)
        lines.append(f"ticket {ticket}: " + ("done" if missing is None else f"not done ({missing})"))
    changelog = workdir / "CHANGELOG.md"
    logged = re.findall(r"^- *(\d{3})\b", changelog.read_text(encoding="utf-8", errors="replace"), re.M)
    lines.append(f"CHANGELOG.md lines for tickets: {', '.join(logged) or 'none'}")
    protected = script["protected"]
    after = _tree_digest(workdir / protected)
    changed = sorted(k for k in {*protected_before, *after} if protected_before.get(k) != after.get(k))
    rule = f'the user\'s rule "never modify anything under {protected}/"'
    lines.append(f"{rule}: " + (f"BROKEN ({', '.join(changed)} changed)" if changed else "kept (unchanged)"))
    return lines


def _copy_workspace(target: Path) -> None:
    source = resources.files("avibe.examples").joinpath("release_queue/workspace")
    with resources.as_file(source) as folder:
        shutil.copytree(folder, target, dirs_exist_ok=True)


def demo(
    model: ModelOpt = None,
    window: WindowOpt = DEMO_WINDOW,
    workdir: DemoWorkdirOpt = None,
    max_steps: StepsOpt = 12,
) -> None:
    """Run Vibey on the bundled example: a ticket queue handled oldest first, on a small window so
    checkpoints happen; then show what the last checkpoint kept. (Model default: the 1.5B embedded tier.)"""
    settings = settings_or_die()
    model_name = model or DEMO_MODEL
    printer = DemoPrinter(verbose=True)  # the demo shows the checkpoints a normal run keeps quiet
    preflight_model(model_name, settings)
    log_path = log_to_file(settings)
    target = workdir or Path(tempfile.mkdtemp(prefix="vibey-demo-"))
    _copy_workspace(target)
    protected_before = _tree_digest(target / _demo_script()["protected"])
    started = time.monotonic()
    try:
        with open_session(
            settings,
            model_name=model_name,
            workdir=target.resolve(),
            session_id=None,
            window=window,
            max_steps=max_steps,
            events=printer,
            approver=terminal_approver(),
            on_hosted=lambda: announce(settings),
        ) as live:
            printer.store, printer.session = live.store, live.session_id
            typer.echo(f"[session] {live.session_id} in {target} (window {window}; log: {log_path})")
            _demo_feeds(live)
            for item in _demo_inputs():
                _demo_input(live, target, item)
            live.host.run_until_idle()
            stored = live.store.list_checkpoints(live.session_id)
            typer.echo(f"\n=== {len(stored)} checkpoints; what the last one kept ===")
            typer.echo(  # no placeholder scene when there was none: it read like a failed checkpoint
                fresh_checkpoint_for_display(stored[-1])
                if stored
                else "(none: the context stayed below the trigger)"
            )
            typer.echo("\n" + "\n".join(demo_report(target, protected_before)))
            minutes = (time.monotonic() - started) / 60
            typer.echo(f"\n{len(stored)} checkpoints in {minutes:.1f} minutes.")
            typer.echo(f"Inspect: vibe checkpoints -s {live.session_id}; vibe log -s {live.session_id}")
    except AvibeError as exc:
        die(str(exc))


class DemoPrinter(EventPrinter):
    """The demo says what each checkpoint kept as it happens (a normal run keeps it quiet, U1)."""

    store: RecordStore | None = None
    session = ""

    def __call__(self, event: Event) -> None:
        super().__call__(event)
        if self.store is not None and isinstance(event, CheckpointAccepted | CheckpointFallback):
            stored = self.store.list_checkpoints(self.session)
            kept = fresh_checkpoint_for_display(stored[-1] if stored else None)
            typer.echo("  " + kept.replace("\n", "\n  "))


def _demo_feeds(live: VibeySession) -> None:
    """The demo's watches, real ones: stored with the record and run by the session's host."""
    import secrets

    from avibe.ports import FeedStore
    from avibe.record.feeds import ID_PREFIX, Feed
    from avibe.sources.feeds import check_spec

    store = cast(FeedStore, live.store)
    for item in _demo_script().get("feeds", []):
        fields = dict(item["watch"])
        wake = not fields.pop("queue", False)
        name = fields.pop("name")
        feed_id = f"{ID_PREFIX['watch']}-{secrets.token_hex(4)}"
        store.add_feed(Feed(feed_id, live.session_id, "watch", name, check_spec("watch", fields), wake))


def _demo_write(live: VibeySession, workdir: Path, fields: dict[str, str]) -> None:
    """Change a workspace file as another program would, then let the watch on it see the change."""
    from avibe.ports import FeedStore

    store = cast(FeedStore, live.store)
    watches = [f for f in store.list_feeds(live.session_id) if f.spec.get("file") == fields["file"]]
    deadline = time.monotonic() + DEMO_WATCH_WAIT_S
    while any("digest" not in f.state for f in watches) and time.monotonic() < deadline:
        live.host.poll_sources()  # the first look sets the baseline
        time.sleep(0.2)
        watches = [f for f in store.list_feeds(live.session_id) if f.spec.get("file") == fields["file"]]
    before = live.store.get_session(live.session_id).entry_count
    (workdir / fields["file"]).write_text(fields["text"] + "\n", encoding="utf-8")
    while live.store.get_session(live.session_id).entry_count == before and time.monotonic() < deadline:
        live.host.poll_sources()  # the watch posts (its tag line is printed as it arrives)
        time.sleep(0.2)


def _demo_input(live: VibeySession, workdir: Path, item: dict[str, Any]) -> None:
    """A user input starts a turn; a write changes a file that a watch sees; anything else is posted with
    its source and read by the next turn."""
    if "user" in item:
        typer.echo(f"\nuser> {item['user']}")
        live.send(item["user"])
        return
    if "write" in item:
        _demo_write(live, workdir, item["write"])
        return
    kind = next(iter(item))
    if kind not in KINDS or kind in ("user", "assistant"):
        raise AvibeError(f"demo script: unknown input kind {kind!r}")
    fields = item[kind]
    live.host.post(Source(kind, name=fields["name"], ref=fields.get("ref", "")), fields["text"])


def register(app: typer.Typer) -> None:
    app.command("run")(run)
    app.command("demo")(demo)
