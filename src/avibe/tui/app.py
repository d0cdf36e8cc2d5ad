"""`vibe` / `vibe chat`: the chat in the terminal (Textual). An edge: it renders what the session thread
reports and sends the person's input back; it decides nothing about the session.

The screen paints first; the session (and the model it loads) opens in the session thread afterwards, so
typing never waits for the model: a message written while the model loads or works is queued, sent, and
taken in at the next step.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import ClassVar, Final

from textual import events, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Static

from avibe.host.events import (
    CheckpointAccepted,
    CheckpointFallback,
    Event,
    ModelCalled,
    ModelStarted,
    Notice,
    Replied,
    ReplyDelta,
    Stopped,
    ToolCalled,
    ToolFinished,
)
from avibe.record.agents import VIBEY
from avibe.tools.approval import Refusal
from avibe.tui.between import JOBS
from avibe.tui.commands import HELP, Cli, Command, CommandError, arguments, complete, parse, with_session
from avibe.tui.cost import priced
from avibe.tui.driver import ChatDriver, Opener
from avibe.tui.hosted import StepCancelled, Target
from avibe.tui.meter import Meter
from avibe.tui.screen import ChatScreen
from avibe.tui.sessions import checked_title, rename, session_rows, sessions_text
from avibe.tui.terminal import HungUp
from avibe.tui.updates import (
    ApprovalAsked,
    ApprovalClosed,
    Busy,
    Cancelled,
    EventArrived,
    Failure,
    InputShown,
    Line,
    Opened,
    OpenFailed,
    ToolOutput,
    Update,
)
from avibe.tui.widgets import ApprovalBar, Bubble, ChatInput, ChatLog, InputBubble, ToolLine

QUIT_AGAIN_S: Final = 3.0  # a second Ctrl-C within this many seconds quits
PROMPTS: Final = {"user": "you› ", "assistant": "vibey› "}


class ChatApp(ChatScreen):
    TITLE = "vibe"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+c", "interrupt", "cancel / quit", priority=True),
        Binding("ctrl+q", "quit", "quit", priority=True),
        Binding("tab", "complete", "complete a /command", show=False, priority=True),  # never moves focus
        # The conversation scrolls by page from the input too (the input is one line or a few).
        Binding("pageup", "page(-1)", "scroll up", show=False, priority=True),
        Binding("pagedown", "page(1)", "scroll down", show=False, priority=True),
    ]

    class Updated(Message):
        """An update from the session thread (posted thread-safely)."""

        def __init__(self, update: Update) -> None:
            super().__init__()
            self.update = update

    def __init__(
        self,
        opener: Opener,
        cli: Cli,
        *,
        model: str,
        session_id: str | None,
        workdir: Path,
        agent: str | None = None,
        markdown: bool = True,
    ) -> None:
        super().__init__()
        self.cli, self.workdir = cli, workdir
        self.markdown = markdown  # replies rendered as markdown; /plain shows them as written
        self.driver = ChatDriver(opener, self._from_session, Target(session_id, model, agent))
        self.meter = Meter()
        self.session_id: str | None = None
        self.state = "loading the model…"
        self.painted_at: float | None = None  # when the first frame was drawn (benchmarks/chat_latency.py)
        self._reply: Bubble | None = None
        self._streamed = False
        self._tools: dict[str, ToolLine] = {}
        self._ask: ApprovalBar | None = None
        self._busy_since: float | None = None
        self._last_interrupt = 0.0
        self._kept: str | None = None  # the session a switch goes on in (its history is on the screen)
        self.hung_up = False  # the terminal went away (its window closed): the chat quit by itself

    def compose(self) -> ComposeResult:
        yield ChatLog(id="log")
        yield Static("▼ new messages below · PageDown or scroll down to follow", id="below")
        yield Vertical(id="asks")
        yield ChatInput(id="input")
        yield Static(id="status")

    def on_mount(self) -> None:
        self.query_one(ChatInput).focus()
        self._status()
        self.set_interval(0.5, self._status)
        self.call_after_refresh(self._painted)

    def _painted(self) -> None:
        """The screen is up: now the session opens (and loads its model) in its own thread."""
        self.painted_at = time.monotonic()
        self.driver.start()

    def _from_session(self, update: Update) -> None:
        self.post_message(self.Updated(update))

    # ---- what the session reports --------------------------------------------------------------------

    def on_chat_app_updated(self, message: Updated) -> None:
        update = message.update
        if isinstance(update, EventArrived):
            self._event(update.event)
        elif isinstance(update, Opened):
            self._opened(update)
        elif isinstance(update, InputShown):
            self._history_line(update.line)
        elif isinstance(update, ToolOutput):
            if update.call_id in self._tools:
                self._tools[update.call_id].finished(update.output, update.is_error)
        elif isinstance(update, ApprovalAsked):
            self._asked(ApprovalBar(update.request))
        elif isinstance(update, ApprovalClosed):
            self._close_ask()
            self._say("not approved (cancelled)", "notice")
        elif isinstance(update, Busy):
            self._busy_since = time.monotonic() if update.busy else None
            self.state = "working" if update.busy else "idle"
        elif isinstance(update, Cancelled):
            self._say("step cancelled (Ctrl-C)", "notice")  # one short line; the model's note: the record
        elif isinstance(update, Failure):
            self._say(update.message, "error")
        elif isinstance(update, OpenFailed):
            self.state, self.session_id = "no session", None
            self._say(f"could not open the session: {update.message}", "error")
            self._say("/model NAME picks another model, /new starts a new session, /help", "notice")
        self._status()

    def _opened(self, opened: Opened) -> None:
        self.session_id = opened.session_id
        external = opened.agent != VIBEY
        kept_by = opened.agent if external else ""
        self.meter = Meter(opened.view_tokens, opened.threshold, opened.window, kept_by=kept_by,
                           compaction=opened.compaction)  # fmt: skip
        if not external:
            self.meter = priced(self.meter, self.driver.store, opened.session_id, opened.model)
        self.state = "idle"
        if opened.session_id != self._kept:  # the same session on another model or agent: shown already
            for line in opened.history:
                self._history_line(line)
        self._kept = None
        how = "resumed" if opened.resumed else "new"
        who = f"{opened.agent} (its own model and compaction)" if external else opened.model
        if opened.attached:  # hosted by another process: what it records shows here, messages go there
            self.meter = Meter(kept_by=opened.attached)
            how, who = "attached to", f"{opened.agent} in {opened.attached}"
        self._say(f"{how} session {opened.session_id} · {who} · {self.workdir} · /help", "notice")

    def _prompt(self, kind: str, agent: str = "") -> str:
        """`you› `, and the name of the agent that wrote a reply before it (`vibey› `, `claude-code› `):
        a reply in the history keeps its writer's name after the session changed agents."""
        return f"{agent or self.driver.agent}› " if kind == "assistant" else PROMPTS[kind]

    def _history_line(self, line: Line) -> None:
        if line.kind in PROMPTS:
            if line.text.strip():
                self._add(self._bubble(line.text, line.kind, self._prompt(line.kind, line.agent)))
            for call in line.calls:
                self._say(f"⚙ {call[:140]}", "notice")
        else:
            self._add(InputBubble(line.tag, line.text))

    def _event(self, event: Event) -> None:
        self.meter = self.meter.after(event)  # a checkpoint only moves the meter (U1)
        if isinstance(event, ModelStarted):
            self._end_reply()
            self._streamed = False
        elif isinstance(event, ReplyDelta) and event.text:  # "" is a heartbeat (a tool call being written)
            if self._reply is None:
                self._reply = self._add(self._bubble("", "assistant", self._prompt("assistant")))
            self._reply.add(event.text)
            self._streamed = True
            self._grew()
        elif isinstance(event, ModelCalled):
            self._end_reply()
        elif isinstance(event, Replied) and not self._streamed:
            self._add(self._bubble(event.text, "assistant", self._prompt("assistant")))
        elif isinstance(event, ToolCalled):
            self._tools[event.call_id] = self._add(ToolLine(event.call_id, event.name, event.arguments))
        elif isinstance(event, ToolFinished) and event.error and event.call_id in self._tools:
            self._tools[event.call_id].failed_because(event.error)  # an external agent's: no ToolOutput
        elif isinstance(event, Stopped):
            self._end_reply()
            if StepCancelled.MESSAGE not in event.message:  # a cancel is said by `Cancelled`
                self._say(f"stopped: {event.message}", "error")
        elif isinstance(event, Notice):
            self._say(event.message, "notice")
        elif isinstance(event, CheckpointAccepted | CheckpointFallback):
            pass  # nothing interrupts; the meter dropped

    def _end_reply(self) -> None:
        if self._reply is not None:
            self._reply.complete()
        self._reply = None

    def _bubble(self, text: str, kind: str, prefix: str) -> Bubble:
        return Bubble(text, kind, prefix=prefix, markdown=self.markdown and kind == "assistant")

    # ---- the person's input --------------------------------------------------------------------------

    def on_chat_input_submitted(self, message: ChatInput.Submitted) -> None:
        text = message.text
        if self._ask is not None and self._ask.reasoning:  # a no with the person's words (r)
            self._add(Bubble(text, "user", prefix=PROMPTS["user"]))
            self.on_approval_bar_answered(ApprovalBar.Answered(Refusal(text)))
            return
        if text.startswith("/") and not text.startswith("//"):
            self._command(text)
            return
        self._add(Bubble(text, "user", prefix=PROMPTS["user"]))
        if self.session_id is None and self.state == "no session":
            self._say("no session is open: the message waits for /new, /resume or /model", "notice")
        self.driver.send(text[1:] if text.startswith("//") else text)

    def on_approval_bar_answered(self, message: ApprovalBar.Answered) -> None:
        self._close_ask()
        said = "no, saying why" if isinstance(message.decision, Refusal) else message.decision
        self._say(f"approval: {said}", "notice")
        self.driver.answer(message.decision)

    def on_approval_bar_reasoning(self, message: ApprovalBar.Reasoning) -> None:
        if self._ask is not None:
            self._ask.reasoning = True
            self.query_one(ChatInput).focus()
            self._say("type what the agent should do instead, then Enter (Ctrl-C: a plain no)", "notice")

    async def action_interrupt(self) -> None:
        """Ctrl-C: answer no to a question, else stop the running step; while a step runs or is being
        stopped, Ctrl-C only stops (again) - it never quits then, so pressing it twice to be sure loses
        nothing; idle, a second Ctrl-C soon after the first quits."""
        now = time.monotonic()
        stopping = self._ask is not None or self.driver.busy or self.state == "cancelling"
        again = not stopping and now - self._last_interrupt < QUIT_AGAIN_S
        self._last_interrupt = 0.0 if stopping else now  # only idle presses count towards quitting
        if self._ask is not None:
            self.on_approval_bar_answered(ApprovalBar.Answered("no"))
        if stopping:
            self.driver.cancel()
            self.state = "cancelling"
        elif again:
            await self.action_quit()
        else:
            self.notify("Ctrl-C again to quit", timeout=QUIT_AGAIN_S)
        self._status()

    def action_complete(self) -> None:
        """Tab: the focus stays on (or comes back to) the input, and a slash command's name is completed
        (the names that fit are listed when several do); the approval bar keeps the keys while it asks."""
        if self._ask is not None:
            return
        field = self.query_one(ChatInput)
        field.focus()
        text, fits = complete(field.text, arguments(self.cli, self.driver.model))
        if text != field.text:
            field.text = text
            field.move_cursor(field.document.end)
        elif len(fits) > 1:
            self.notify("  ".join(fits if " " in text else (f"/{name}" for name in fits)), timeout=4)

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        """A click on a tool line focuses it, with no visible cue; typing must still land in the input, so
        the focus goes back there - the approval bar alone keeps it while it asks."""
        if self._ask is None and not isinstance(event.widget, ChatInput):
            self.query_one(ChatInput).focus()

    async def action_quit(self) -> None:
        self.state = "quitting"
        self._status()
        await asyncio.to_thread(self.driver.stop)
        self.exit()

    def on_hung_up(self, _: HungUp) -> None:
        """The terminal is gone: quit. A step this process runs stops as Ctrl-C stops it (the record says
        so, and no host runs it again); one another host runs is left to that host."""
        self.hung_up = True
        self.driver.cancel(host=False)
        self.call_later(self.action_quit)

    def on_unmount(self) -> None:
        self.driver.stop(timeout=2.0)  # a no-op after /quit or Ctrl-C; else (the app ended otherwise) quit

    # ---- slash commands ------------------------------------------------------------------------------

    def _command(self, text: str) -> None:
        self._say(text, "notice")
        try:
            command = parse(text)
        except CommandError as exc:
            self._say(str(exc), "error")
            return
        if command.name in ("quit", "exit"):
            self.call_later(self.action_quit)
        elif command.name == "help":
            self._say(HELP, "output")
        elif command.name == "plain":
            self._plain()
        elif command.name == "new":
            self._switch(Target(None, self.driver.model, self.driver.agent))
        else:
            self._slow_command(command)

    def _plain(self) -> None:
        """/plain: replies as written (markdown source), or again rendered; the whole conversation."""
        self.markdown = not self.markdown
        for bubble in self.query(Bubble):
            if bubble.kind == "assistant":
                bubble.set_markdown(self.markdown)
        self._say(
            "replies shown as written (/plain again renders them)"
            if not self.markdown
            else "replies rendered as markdown (/plain shows them as written)",
            "notice",
        )

    def _switch(self, target: Target) -> None:
        """Host `target`; going on in the same session (/model, /agent) keeps the conversation on the
        screen as it is, each reply under the name of the agent that wrote it."""
        self._kept = target.session_id if target.session_id == self.session_id else None
        if self._kept is None:
            self._tools.clear()
            self.query_one("#log", ChatLog).clear()
        self.state = "opening"
        self.driver.switch(target)

    @work(thread=True, group="commands")
    def _slow_command(self, command: Command) -> None:
        """Commands that read the record or check a model run off the screen's thread."""
        name, args, session = command.name, command.args, self.session_id
        if name == "resume":
            self._resume(args)
        elif name == "model":
            self._model(args)
        elif name == "agent":
            self._agent(args)
        elif name == "compaction":
            self._compaction(args)
        elif name == "skills":
            self._output(self.cli.run(["skill", "list", "--workdir", str(self.workdir)]))
        elif name == "mcp":  # the session's live servers: this process hosts it
            self._output(self.cli.run(["mcp", "list", *with_session(args, session)]))
        elif name == "sessions":
            self._sessions()
        elif name == "rename":
            self._rename(args)
        elif name in JOBS:  # /compact, /undo: on the session's thread, between turns
            self.driver.between_turns(JOBS[name](args))
        else:  # log, checkpoints: vibe's own command over this session unless told otherwise
            self._output(self.cli.run([name, *with_session(args, session)]))

    def _sessions(self) -> None:
        store = self.driver.store
        if store is None:
            self._output("no session is open; `vibe sessions` lists the record's", error=True)
            return
        self._output(sessions_text(session_rows(store), self.session_id, datetime.now(UTC)))

    def _rename(self, args: tuple[str, ...]) -> None:
        store, session_id = self.driver.store, self.session_id
        if store is None or session_id is None:
            self._output("no session is open to rename", error=True)
            return
        try:
            title = checked_title(args)
        except ValueError as exc:
            self._output(str(exc), error=True)
            return
        rename(store, session_id, title)
        self._output(f"this session is now titled: {title}")

    def _resume(self, args: tuple[str, ...]) -> None:
        sessions = self.driver.sessions()
        if args:
            found = [s for s in sessions if s.id.startswith(args[0])]
        else:
            mine = [s for s in sessions if s.title == str(self.workdir) and s.id != self.session_id]
            found = sorted(mine, key=lambda s: s.last_at or s.created_at)[-1:]
        if len(found) != 1:
            what = "no such session" if not found else f"{len(found)} sessions start with {args[0]}"
            self._output(f"{what}; /sessions lists them", error=True)
            return
        self.call_from_thread(self._switch, Target(found[0].id, self.driver.model))  # its own agent

    def _model(self, args: tuple[str, ...]) -> None:
        if not args:
            self._output(self.cli.run(["models", self.driver.model]) + "\n/model NAME switches")
            return
        if self.driver.agent != VIBEY:
            agent = self.driver.agent
            self._output(f"/model is Vibey's; {agent} uses the model configured for it", error=True)
            return
        problem = self.cli.check_model(args[0])
        if problem is not None:
            self._output(f"cannot use {args[0]}: {problem}", error=True)
            return
        self.call_from_thread(self._switch, Target(self.session_id, args[0], VIBEY))

    def _agent(self, args: tuple[str, ...]) -> None:
        """`/agent`: who works in this session and the agents found; `/agent NAME`: go on in this session
        with NAME (Vibey, or Claude Code, Codex, OpenCode as they are: SPEC L5)."""
        if not args:
            self._output(f"this session: {self.driver.agent}\n" + self.cli.run(["agents"]))
            return
        problem = self.cli.check_agent(args[0])
        if problem is not None:
            self._output(f"cannot use {args[0]}: {problem}", error=True)
            return
        self.call_from_thread(self._switch, Target(self.session_id, self.driver.model, args[0]))

    def _compaction(self, args: tuple[str, ...]) -> None:
        """/compaction: how Vibey makes room; /compaction NAME: that way from its next request on."""
        try:
            name = self.driver.use_compaction(args[0] if args else "")
        except ValueError as exc:
            self._output(str(exc), error=True)
            return
        self.call_from_thread(self._show_compaction, name)
        self._output(f"compaction: {name}" + ("" if args else " (/compaction NAME switches)"))

    def _show_compaction(self, name: str) -> None:
        self.meter = replace(self.meter, compaction=name)
        self._status()

    def _output(self, text: str, *, error: bool = False) -> None:
        self.call_from_thread(self._say, text.rstrip() or "(nothing)", "error" if error else "output")

    # ---- drawing (the log's own in `avibe.tui.screen`) ------------------------------------------------

    def _asked(self, bar: ApprovalBar) -> None:
        self._close_ask()
        self._ask = bar
        self.query_one("#asks", Vertical).mount(bar)
        bar.focus()
        self.state = "asking"

    def _close_ask(self) -> None:
        if self._ask is not None:
            self._ask.remove()
            self._ask = None
            self.query_one(ChatInput).focus()
            self.state = "working"

    def _status(self) -> None:
        state = self.state
        if state == "working" and self._busy_since is not None:
            state = f"working {time.monotonic() - self._busy_since:.0f}s"
        who = self.driver.model if self.driver.agent == VIBEY else self.driver.agent
        parts = [state, self.meter.text(), who, self.session_id or "no session"]
        for status in self.query("#status").results(Static):  # none while the app shuts down
            status.update(" · ".join(parts))
            status.tooltip = self.meter.fell_back or None  # why the last checkpoint fell back, on hover
