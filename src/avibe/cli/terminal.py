"""What the CLI says on the terminal, and asks there: its one way to fail (`die`), the settings or one
line, the loosened settings in force, a run's events as lines (or JSON lines), and ask-mode approvals.
Sessions themselves are built in `avibe.compose` and hosted by `avibe.host.sessions`."""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from typing import TYPE_CHECKING, Final, NoReturn

import typer

from avibe.cli.options import terminal_safe
from avibe.config import Settings, load_settings
from avibe.errors import AvibeError
from avibe.host.events import (
    CHECKPOINT_KINDS,
    CheckpointAccepted,
    CheckpointFailed,
    CheckpointFallback,
    CheckpointStarted,
    Event,
    Idle,
    InputArrived,
    ModelCalled,
    ModelStarted,
    Notice,
    Replied,
    ReplyDelta,
    Stopped,
    ToolCalled,
    ToolFinished,
    TurnStarted,
    event_to_dict,
)
from avibe.record.display import json_shown
from avibe.record.display import shown as shown_text
from avibe.record.sources import FRAME, frame_lines
from avibe.tools.approval import typed_answer

if TYPE_CHECKING:
    from avibe.tools.approval import Answer, ApprovalRequest, Approver

REASON_SHOWN: Final = 160  # a failed tool's reason on its `[tool] ... failed` line (`--json` has it whole)


def die(message: str, code: int = 2) -> NoReturn:
    """One clear line on stderr and a non-zero exit: the CLI's only way to fail."""
    typer.echo(f"vibe: {message}", err=True)
    raise typer.Exit(code)


def settings_or_die() -> Settings:
    """The settings, or one clear line and exit 2."""
    try:
        return load_settings()
    except AvibeError as exc:
        die(str(exc))


_announced: set[str] = set()  # the notices this process has printed


def announce(settings: Settings) -> None:
    """Settings.notices on stderr - what a project config tried to loosen, the loosened settings in force
    - one `vibe: ` line each, once per process. Called where a session starts: once
    `vibe run` holds the session's lease (`on_hosted`), in `vibe chat` before its screen, in `vibe serve`
    before it listens; after the pre-flight checks, so a command that fails still says one line (exit 2).
    The session starts here, so here the project's tightening is remembered (avibe.tightening)."""
    from avibe.cli.options import one_line
    from avibe.tightening import remember

    for line in (*settings.notices, *remember(settings.home, settings.remember)):
        if line not in _announced:
            _announced.add(line)
            typer.echo(f"vibe: {one_line(line)}", err=True)


class EventPrinter:
    """Progress lines of a headless run. What the user sees follows the seed: replies, tool calls, inputs
    from other sources and stops; context work (checkpoints) only with `verbose` (U1, U2) - the user
    hears about context only at the U3 stop. `json_lines` prints every event as one JSON line instead.
    A reply streams: its pieces are printed on one `vibey> ` line as they come, which the next event ends;
    the `Replied` of a streamed reply prints nothing more."""

    def __init__(self, *, verbose: bool = False, json_lines: bool = False) -> None:
        self.verbose, self.json_lines = verbose, json_lines
        self._ticker: _Ticker | None = None
        self._line_open = False  # a streamed reply's line is being written
        self._streamed = False  # the current model call streamed text
        self._fresh_line = False  # a streamed reply's line just ended: the next piece starts a framed one

    def __call__(self, event: Event) -> None:
        if self.json_lines:
            if not (isinstance(event, ReplyDelta) and not event.text):  # a heartbeat shows nothing
                typer.echo(json_shown(json.dumps(event_to_dict(event), ensure_ascii=False, default=str)))
            return
        self._tick(event)
        if isinstance(event, ReplyDelta):
            self._stream(event.text)
            return
        if self._line_open:
            if not self._fresh_line:
                typer.echo("")
            self._line_open = self._fresh_line = False
        if isinstance(event, ModelStarted):
            self._streamed = False
        if isinstance(event, Replied) and self._streamed:
            return  # it was shown as it came
        line = self._line(event)
        if line is not None:
            typer.echo(terminal_safe(line))

    def _stream(self, text: str) -> None:
        """A piece of a streamed reply: shown terminal-safe, and every line after the first behind the
        frame mark, so no line of it starts where a person's prompt or a harness line would."""
        if not text:
            return
        if not self._line_open:
            typer.echo(REPLY_PREFIX, nl=False)
            self._line_open = self._streamed = True
        for piece in re.split(r"(\n)", terminal_safe(text)):
            if piece == "\n":
                typer.echo("")
                self._fresh_line = True
            elif piece:
                if self._fresh_line:
                    typer.echo(f"{FRAME} ", nl=False)
                    self._fresh_line = False
                typer.echo(piece, nl=False)

    def _tick(self, event: Event) -> None:
        """Elapsed time while the model works (a silent first call on the embedded model takes minutes)."""
        if isinstance(event, ModelStarted):
            self._ticker = _Ticker.start()
        elif self._ticker is not None:
            self._ticker.stop()
            self._ticker = None

    def _line(self, event: Event) -> str | None:
        if isinstance(event, Replied):
            return reply_shown(event.text)
        if isinstance(event, Stopped):
            return f"[stop] {event.message}"
        if isinstance(event, Notice):
            return f"[note] {event.message}"
        if isinstance(event, ToolCalled):
            arguments = json.dumps(event.arguments, ensure_ascii=False)
            return f"[tool] {shown_text(event.name, lines=False)} {shown_text(arguments[:120], lines=False)}"
        if isinstance(event, ToolFinished) and event.is_error:
            name = shown_text(event.name, lines=False)
            return f"[tool] {name} failed" + (f" {failure_shown(event.error)}" if event.error else "")
        if isinstance(event, InputArrived) and event.source not in ("user",):
            # the tag, then the body framed: no line of it passes for a tag, a reply or a header
            return "\n".join([event.tag, *frame_lines(event.text[:200])])
        if isinstance(event, TurnStarted | ModelCalled | Idle) and self.verbose:
            return _verbose_line(event)
        if event.kind in CHECKPOINT_KINDS and self.verbose:
            return _verbose_line(event)
        return None


REPLY_PREFIX: Final = "vibey> "


def reply_shown(text: str) -> str:
    """A reply as `vibe run` prints it: behind `vibey> `, every further line behind the frame mark, so
    no line the model wrote starts at the left edge, where a prompt (`user>`) or a harness line starts.
    (The caller prints it terminal-safe.)"""
    first, *rest = text.replace("\r\n", "\n").split("\n")
    return "\n".join([f"{REPLY_PREFIX}{first}", *(f"{FRAME} {line}" if line else FRAME for line in rest)])


def failure_shown(reason: str, limit: int = REASON_SHOWN) -> str:
    """A failed tool's reason on one line: behind the frame mark (what the tool said, not the person or
    the harness), its first line, cut at `limit`, no escape sequence obeyed."""
    from avibe.cli.options import one_line

    lines = reason.strip().splitlines()
    first = lines[0] if lines else ""
    cut = first if len(first) <= limit else first[: limit - 1] + "…"
    return f"{FRAME} {one_line(cut)}"


def _verbose_line(event: Event) -> str:
    if isinstance(event, ModelCalled):
        return (
            f"[model] step {event.step}: {event.view_tokens} tokens in view, {event.prompt_tokens} prompt "
            f"({event.cached_tokens} cached), {event.output_tokens} out, {event.seconds:.1f}s"
        )
    if isinstance(event, CheckpointAccepted):
        how = f" ({event.fallback})" if event.fallback else ""
        return (
            f"[checkpoint] {event.number}{how}: {event.before} -> {event.after} tokens, {event.seconds:.0f}s"
        )
    if isinstance(event, CheckpointFallback):
        return f"[checkpoint] {event.number} (model-free): {event.before} -> {event.after} tokens"
    if isinstance(event, CheckpointFailed):
        return f"[checkpoint] failed: {event.reason}"
    if isinstance(event, CheckpointStarted):
        return f"[checkpoint] started at {event.tokens} tokens ({event.reason})"
    if isinstance(event, Idle):
        return "[idle]" + (f" waiting for {', '.join(event.waiting_for)}" if event.waiting_for else "")
    data = event_to_dict(event)
    return f"[{data.pop('kind')}] " + " ".join(f"{k}={v}" for k, v in data.items())


class _Ticker:
    """Prints the seconds a model call has taken so far on stderr, in place, when stderr is a terminal."""

    def __init__(self) -> None:
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._started = time.monotonic()

    @classmethod
    def start(cls) -> _Ticker:
        ticker = cls()
        if sys.stderr.isatty():
            ticker._thread.start()
        return ticker

    def _run(self) -> None:
        while not self._done.wait(1.0):
            sys.stderr.write(f"\r[model] working {time.monotonic() - self._started:.0f}s ")
            sys.stderr.flush()

    def stop(self) -> None:
        self._done.set()
        if self._thread.is_alive():
            self._thread.join()
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


class TerminalApprover:
    """Asks the person on the terminal: the request on stderr, the answer from stdin
    - y(es), n(o) - with a reason after it, "n - use pnpm", which reaches the model as their message -
    or a(lways); end of input is no. What the model wrote is shown terminal-safe: an
    escape sequence in a command cannot hide part of it from the person."""

    ALLOW: Final = "  allow? [y]es / [n]o (n - what to do instead) / [a]lways (this session): "

    def __call__(self, request: ApprovalRequest) -> Answer:
        verb = {"command": "run", "call": "call"}.get(request.action, "change")
        detail = f" ({request.detail})" if request.detail else ""
        lines = terminal_safe(request.subject).splitlines() or [""]
        count = f" - {len(lines)} lines" if verb == "run" and len(lines) > 1 else ""
        framed = "".join(f"  {FRAME} {line}\n" for line in lines)  # no line of it passes for the question
        sys.stderr.write(f"\n[approve] {request.tool} wants to {verb}{detail}{count}:\n{framed}")
        if request.diff:
            sys.stderr.write(diff_shown(request.diff, colour=sys.stderr.isatty()))
        while True:
            sys.stderr.write(self.ALLOW)
            sys.stderr.flush()
            line = sys.stdin.readline()
            if not line:
                return "no"
            answer = typed_answer(line)
            if answer is not None:
                return answer


DIFF_LINES: Final = 40  # the question must stay on the screen


def diff_shown(diff: str, *, colour: bool, limit: int = DIFF_LINES) -> str:
    """A write's diff before the question, as the chat shows it: terminal-safe, indented, additions green
    and removals red on a terminal, at most `limit` lines and then how many more."""
    lines = diff.splitlines()
    shown = []
    for line in lines[:limit]:
        text = terminal_safe(line).replace("\t", "    ")
        if colour and line.startswith(("+", "-")) and not line.startswith(("+++", "---")):
            text = f"\x1b[{32 if line.startswith('+') else 31}m{text}\x1b[0m"
        shown.append(f"  {text}\n")
    if len(lines) > limit:
        shown.append(f"  ... {len(lines) - limit} more lines\n")
    return "".join(shown)


def terminal_approver() -> Approver | None:
    """The terminal when standard input is one; else nobody (ask-mode actions are then refused)."""
    return TerminalApprover() if sys.stdin.isatty() else None
