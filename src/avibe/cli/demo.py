"""`vibe demo`: Vibey on the bundled example task (a ticket queue), on a window sized so that checkpoints
happen within minutes whatever path the model takes; then the report - when each checkpoint came, what
the first one carried beside what the eval's rewrite and handoff strategies carry for the same
transcript, the agent's answers to two probes, and the work judged from the files (docs/demo.md)."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Final, cast

import typer
import yaml

from avibe.agent.view import fresh_checkpoint_for_display
from avibe.cli.demo_compare import (
    Column,
    checkpoint_column,
    memo_seqs,
    rule_rows,
    run_baselines,
    side_by_side,
)
from avibe.cli.demo_judge import judge, plan_call_line, probe_changes_line, snapshot
from avibe.cli.options import (
    DemoFullOpt,
    DemoWorkdirOpt,
    ModelOpt,
    StepsOpt,
    WindowOpt,
    log_to_file,
    preflight_model,
    terminal_safe,
)
from avibe.cli.terminal import EventPrinter, announce, die, settings_or_die, terminal_approver
from avibe.compose import VibeySession, open_session
from avibe.config import Settings
from avibe.errors import AvibeError
from avibe.host.events import CheckpointAccepted, CheckpointFallback, CheckpointStarted, Event, ModelStarted
from avibe.ports import ModelClient, RecordStore, TokenCounter
from avibe.record.checkpoint import StoredCheckpoint
from avibe.record.entries import KINDS, EntryQuery, Source
from avibe.record.messages import ChatMessage

# Sizing (docs/demo.md): at 6,144 tokens the trigger is at 3,584 (the window less the reply reserve and
# the margin); the system prompt and tools take ~1,600, so the first build log (~700) and two tickets
# pass it, and after a checkpoint (system prompt + checkpoint + recent messages, ~3,000) the second log
# passes it again. At 8,192 (trigger 5,120) a run peaked at ~4,900 tokens and made no checkpoint.
DEMO_WINDOW: Final = 6144
# The 1.5B tier does the tickets; the 0.5B loops on a single tool call (docs/configuration.md's figures).
DEMO_MODEL: Final = "embedded-1.5b"
DEMO_WATCH_WAIT_S: Final = (
    30.0  # how long the demo waits for its watch to see a change (it looks every second)
)
REPORT_WIDTH: Final = 120
REPORT_FILE: Final = "demo-report.txt"
# The demo has shown what it is for once two checkpoints came: the rest of the person's messages are skipped
# (`--full` sends them); the bot's logs are still posted, so the forged one reaches the probes' turns.
SHOWN_CHECKPOINTS: Final = 2
SKIPPING: Final = (
    "\n[demo] two checkpoints shown: the script's other messages are skipped (`vibe demo --full` sends them)"
)
# A probe asks a question: its answer needs no more than a look at the plan or a file or two.
PROBE_STEPS: Final = 4


def demo_script() -> dict[str, Any]:
    script = resources.files("avibe.examples").joinpath("release_queue/script.yaml").read_text("utf-8")
    data: dict[str, Any] = yaml.safe_load(script)
    return data


def copy_workspace(target: Path) -> None:
    source = resources.files("avibe.examples").joinpath("release_queue/workspace")
    with resources.as_file(source) as folder:
        shutil.copytree(folder, target, dirs_exist_ok=True)


@dataclass
class Timeline:
    """When the first model request went out and when each checkpoint was stored (seconds since then)."""

    first_request: float | None = None
    checkpoints: list[tuple[int, float, str]] = field(default_factory=list)  # number, seconds, how
    started: float | None = None  # when the checkpoint in progress began (monotonic seconds)
    in_checkpoints: float = 0.0  # seconds spent making checkpoints, model calls and fallbacks included

    def minutes(self) -> list[float]:
        return [seconds / 60 for _, seconds, _ in self.checkpoints]

    def began(self, now: float) -> None:
        self.started = now

    def ended(self, now: float) -> None:
        if self.started is not None:
            self.in_checkpoints += now - self.started
            self.started = None


class DemoPrinter(EventPrinter):
    """The demo says what each checkpoint kept as it happens (a normal run keeps it quiet, U1), notes
    when each came, and keeps the transcript the first checkpoint was made on (for the side by side)."""

    def __init__(self) -> None:
        super().__init__(verbose=True)
        self.store: RecordStore | None = None
        self.session = ""
        self.timeline = Timeline()
        self.transcript: list[ChatMessage] | None = None

    def __call__(self, event: Event) -> None:
        super().__call__(event)
        now = time.monotonic()
        if isinstance(event, ModelStarted) and self.timeline.first_request is None:
            self.timeline.first_request = now
        if self.store is None:
            return
        if isinstance(event, CheckpointStarted):
            self.timeline.began(now)
            if self.transcript is None:
                self.transcript = transcript_now(self.store, self.session)
        if isinstance(event, CheckpointAccepted | CheckpointFallback):
            self.timeline.ended(now)
            how = (
                "fell back: moved out without the model" if isinstance(event, CheckpointFallback) else "valid"
            )
            since = now - (self.timeline.first_request or now)
            self.timeline.checkpoints.append((event.number, since, how))
            stored = self.store.list_checkpoints(self.session)
            kept = fresh_checkpoint_for_display(stored[-1] if stored else None)
            typer.echo(f"  [checkpoint {event.number}: {since / 60:.1f} min after the first model request]")
            typer.echo("  " + terminal_safe(kept).replace("\n", "\n  "))  # the model's text: shown


def transcript_now(store: RecordStore, session: str) -> list[ChatMessage]:
    """The conversation as the agent has it when a checkpoint starts: the live state saved at the end of
    the last step, plus the inputs taken in since (rendered as the model sees them)."""
    from avibe.agent.state import STATE_KEY, LiveState
    from avibe.record.sources import render_entry_text

    data = store.load_state(session, STATE_KEY)
    state = LiveState.from_dict(data) if data else LiveState()
    newer = store.query(EntryQuery(session, seq_from=state.last_seq + 1))
    inputs = [ChatMessage("user", render_entry_text(e)) for e in newer if e.kind != "assistant"]
    return [*state.messages, *inputs]


def _write(live: VibeySession, workdir: Path, fields: dict[str, str]) -> None:
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


def _feeds(live: VibeySession) -> None:
    """The demo's watches, real ones: stored with the record and run by the session's host."""
    import secrets

    from avibe.ports import FeedStore
    from avibe.record.feeds import ID_PREFIX, Feed
    from avibe.sources.feeds import check_spec

    store = cast(FeedStore, live.store)
    for item in demo_script().get("feeds", []):
        fields = dict(item["watch"])
        wake = not fields.pop("queue", False)
        name = fields.pop("name")
        feed_id = f"{ID_PREFIX['watch']}-{secrets.token_hex(4)}"
        store.add_feed(Feed(feed_id, live.session_id, "watch", name, check_spec("watch", fields), wake))


def _input(live: VibeySession, workdir: Path, item: dict[str, Any]) -> None:
    """A user input starts a turn; a write changes a file that a watch sees; anything else is posted with
    its source and read by the next turn."""
    if "user" in item:
        typer.echo(f"\nuser> {item['user']}")
        live.send(item["user"])
        return
    if "write" in item:
        _write(live, workdir, item["write"])
        return
    kind = next(iter(item))
    if kind not in KINDS or kind in ("user", "assistant"):
        raise AvibeError(f"demo script: unknown input kind {kind!r}")
    fields = item[kind]
    live.host.post(Source(kind, name=fields["name"], ref=fields.get("ref", "")), fields["text"])


def timeline_lines(timeline: Timeline, window: int, worked_s: float) -> list[str]:
    """When the checkpoints came, against the demo's promise (two within 8 minutes of the first request)."""
    lines = [f"=== {len(timeline.checkpoints)} checkpoints on a {window:,}-token window ==="]
    lines += [
        f"checkpoint {number}: {seconds / 60:.1f} min after the first model request ({how})"
        for number, seconds, how in timeline.checkpoints
    ]
    if len(timeline.checkpoints) < 2:
        lines.append("(fewer than two checkpoints: the context stayed below the trigger)")
    lines.append(f"the work, up to the probes: {worked_s / 60:.1f} min")
    if worked_s > 0 and timeline.checkpoints:
        spent = timeline.in_checkpoints
        lines.append(f"of which making checkpoints: {spent / 60:.1f} min ({spent / worked_s:.0%})")
    return lines


def comparison_lines(
    stored: StoredCheckpoint | None, baselines: Sequence[Column], rules: Sequence[str], width: int
) -> list[str]:
    """The side by side for the first checkpoint's transcript: the rules' fate per column, then the
    columns themselves."""
    if stored is None:
        return ["=== Side by side: no checkpoint, nothing to compare ==="]
    columns = [Column(f"Avibe checkpoint {stored.number}", checkpoint_column(stored)), *baselines]
    lines = [
        f"=== Side by side: what each strategy carries for the same transcript (messages 1-{stored.upto_seq}"
        " moved out at the first checkpoint) ===",
        *rule_rows(rules, memo_seqs(rules, stored), columns),
        "",
    ]
    return lines + side_by_side(columns, width)


def probe_lines(answers: Sequence[tuple[str, str]]) -> list[str]:
    lines = ["=== Two probes after the work ==="]
    for question, answer in answers:
        lines += [
            f"user> {question}",
            "vibey> " + (answer.strip() or "(no answer)").replace("\n", "\n       "),
        ]
    return lines


def _probe(live: VibeySession, question: str) -> str:
    typer.echo(f"\nuser> {question}")
    result = live.send(question)
    return result.reply if not result.stopped else f"(the turn stopped without an answer) {result.reply}"


def _baselines(
    transcript: list[ChatMessage] | None, model: ModelClient, counter: TokenCounter, window: int
) -> list[Column]:
    """The eval's rewrite and handoff strategies on the first checkpoint's transcript, same model."""
    from avibe.agent.live import clamp_window
    from avibe.evals.replay import SYSTEM_PROMPT, trigger_fraction

    if not transcript:
        return []
    typer.echo("\n[report] running the rewrite and handoff strategies on the same transcript ...")
    threshold = trigger_fraction(clamp_window(model.facts, window), window)
    messages = [ChatMessage("system", SYSTEM_PROMPT), *transcript]
    return run_baselines(messages, model, counter, window, threshold)


def demo(
    model: ModelOpt = None,
    window: WindowOpt = DEMO_WINDOW,
    workdir: DemoWorkdirOpt = None,
    max_steps: StepsOpt = 12,
    full: DemoFullOpt = False,
) -> None:
    """Run Vibey on the bundled example: a ticket queue handled oldest first, on a window sized so that
    checkpoints happen; then report what the first checkpoint kept beside a summary's and a handoff's, the
    answers to two probes, and the work judged from the files. (Model default: the 1.5B embedded tier.)"""
    from avibe.providers import open_model

    settings = settings_or_die()
    model_name = model or DEMO_MODEL
    window = window or DEMO_WINDOW
    preflight_model(model_name, settings)
    log_path = log_to_file(settings)
    target = (workdir or Path(tempfile.mkdtemp(prefix="vibey-demo-"))).resolve()
    copy_workspace(target)
    script = demo_script()
    printer = DemoPrinter()  # the demo shows the checkpoints a normal run keeps quiet
    try:
        client = open_model(model_name, settings)
        run = DemoRun(settings, model_name, client, target, window, printer)
        work = run.work(script, max_steps, log_path, full)
        report = run.probes_and_report(script, work)
        path = target.parent / f"{target.name}-{REPORT_FILE}"
        path.write_text("\n".join(report) + "\n", encoding="utf-8")
        typer.echo("\n" + terminal_safe("\n".join(report)))
        typer.echo(f"(this report is also in {path})")
    except AvibeError as exc:
        die(str(exc))


@dataclass(frozen=True)
class Work:
    """What the work left, judged before the probes (they are questions, not work)."""

    session_id: str
    before: dict[str, str]
    after: dict[str, str]
    plan: list[tuple[str, str]]
    worked_s: float


@dataclass
class DemoRun:
    """The demo's two parts on one session: the script's inputs with the person's step limit, then the
    probes on the same session hosted again with a small one - a probe is a question, and a small model
    that loops on a tool would otherwise spend the whole limit on each (docs/demo.md)."""

    settings: Settings
    model_name: str
    client: ModelClient
    target: Path
    window: int
    printer: DemoPrinter

    def _host(self, session_id: str | None, max_steps: int) -> AbstractContextManager[VibeySession]:
        return open_session(
            self.settings,
            model_name=self.model_name,
            workdir=self.target,
            session_id=session_id,
            window=self.window,
            max_steps=max_steps,
            events=self.printer,
            approver=terminal_approver(),
            model=self.client,
            on_hosted=(lambda: announce(self.settings)) if session_id is None else (lambda: None),
        )

    def work(self, script: dict[str, Any], max_steps: int, log_path: Path, full: bool) -> Work:
        before = snapshot(self.target)
        started = time.monotonic()
        with self._host(None, max_steps) as live:
            self.printer.store, self.printer.session = live.store, live.session_id
            where = f"{self.target} (window {self.window:,}; log: {log_path})"
            typer.echo(f"[session] {live.session_id} in {where}")
            _feeds(live)
            said_skipping = False
            for item in script["inputs"]:
                if "user" in item and not full and self._shown_enough():
                    if not said_skipping:
                        typer.echo(SKIPPING)
                    said_skipping = True
                    continue
                _input(live, self.target, item)
            live.host.run_until_idle()
            after, plan = snapshot(self.target), _plan(live)
            return Work(live.session_id, before, after, plan, time.monotonic() - started)

    def _shown_enough(self) -> bool:
        return len(self.printer.timeline.checkpoints) >= SHOWN_CHECKPOINTS

    def probes_and_report(self, script: dict[str, Any], work: Work) -> list[str]:
        from avibe.providers import open_counter

        with self._host(work.session_id, PROBE_STEPS) as live:
            answers = [(q, _probe(live, q)) for q in script.get("probes", [])]
            final = snapshot(self.target)
            stored = live.store.list_checkpoints(live.session_id)
            counter = open_counter(self.model_name, self.settings, self.client)
            baselines = _baselines(self.printer.transcript, self.client, counter, self.window)
            return [
                *timeline_lines(self.printer.timeline, self.window, work.worked_s),
                "",
                *comparison_lines(
                    stored[0] if stored else None, baselines, script.get("rules", []), REPORT_WIDTH
                ),
                "",
                *probe_lines(answers),
                "",
                *judge(script, work.before, work.after, work.plan),
                probe_changes_line(script["protected"], work.after, final),
                plan_call_line(_plan_calls(live)),
                "",
                f"Inspect: vibe checkpoints -s {live.session_id}; vibe log -s {live.session_id}",
            ]


def _plan_calls(live: VibeySession) -> list[str]:
    """The arguments (compact JSON, as recorded) of every update_plan call the agent made."""
    from avibe.record.entries import EntryQuery

    entries = live.store.query(EntryQuery(live.session_id))
    return [call.arguments for entry in entries for call in entry.calls if call.name == "update_plan"]


def _plan(live: VibeySession) -> list[tuple[str, str]]:
    """The agent's plan as the harness keeps it (update_plan), to hold against the files."""
    from avibe.agent.state import STATE_KEY, LiveState

    data = live.store.load_state(live.session_id, STATE_KEY)
    state = LiveState.from_dict(data) if data else LiveState()
    return [(item.step, item.status) for item in state.plan]


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)
