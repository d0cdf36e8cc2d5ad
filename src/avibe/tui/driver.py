"""The chat's session thread: it hosts one session at a time (opening it loads the model, after the
screen is up), runs a turn whenever input is waiting, shows inputs other sources delivered while idle, and
tells the screen everything through one `notify` callback (`avibe.tui.updates`). The screen never waits
for it: the person's messages go into the record from a small ingress thread, so a message typed during a
turn reaches that turn at its next step (the host's inbox), or starts the next turn.

Ctrl-C (`cancel`) stops the running step at the next point the loop can stop cleanly: before the model
call, while the reply streams - a tool call too, which shows nothing but beats at every token - or when
the call returns (the model's unfinished reply is dropped). A shell command or an external agent that is
running is stopped at once through the session's stop switch (its whole process group killed),
and the step's calls not started yet never start. The cancel is recorded as a harness note in the
session's record - naming the calls that did not finish, as after a crash - which the agent sees with its
next input; the note itself does not start a turn.

A session another live process hosts (`vibe serve`) is attached instead, as `vibe run
--session` attaches: the chat runs no turn and holds no lease; it shows every entry that host records
(inputs from anywhere, replies, tool calls) and posts the person's messages into the record. If the host
goes away while a message of the person's waits for its answer, the chat hosts the session itself.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Final, Protocol

from avibe.agent.interrupted import NOT_STARTED, stopped_text
from avibe.compose.session_settings import record_change
from avibe.errors import AvibeError
from avibe.host.agent import ToolHook, ToolRunner
from avibe.host.events import (
    Event,
    EventSink,
    ModelCalled,
    ModelStarted,
    Notice,
    ReplyDelta,
    Stopped,
    ToolCalled,
    TurnEnded,
)
from avibe.host.session import STOPPED_BY_PERSON, after_last_stop
from avibe.ports import RecordStore, ToolResult
from avibe.record.agents import VIBEY
from avibe.record.entries import CallRecord, Entry, EntryQuery, SessionInfo, Source
from avibe.record.messages import ToolCall
from avibe.tools.approval import Answer, ApprovalRequest, Approver
from avibe.tui.hosted import Live, StepCancelled, Target, ends_turn, entry_line
from avibe.tui.updates import (
    ApprovalAsked,
    ApprovalClosed,
    Busy,
    Cancelled,
    Closed,
    EventArrived,
    Failure,
    InputShown,
    Line,
    Opened,
    OpenFailed,
    ToolOutput,
    Update,
)

log = logging.getLogger("avibe.tui")
POLL_S: Final = 0.2
HISTORY: Final = 60  # record entries shown when a session opens
TAKE_OVER_S: Final = 5.0  # attached: how long a message waits with nobody hosting before the chat hosts
CANCEL_SOURCE: Final = STOPPED_BY_PERSON  # the note says the person stopped the turn: nobody resumes it
CANCEL_NOTE: Final = (
    "The user pressed Ctrl-C and cancelled the running step; its unfinished reply was dropped. "
    "Tools that had already run did run."
)


@dataclass(frozen=True)
class Attached:
    """A session another live process hosts (`vibe serve`): the chat follows its record
    and posts into it, as `vibe run --session` does, and runs no turn of its own."""

    store: RecordStore
    session_id: str
    user_name: str
    agent: str  # who works in it
    host: str  # which process hosts it ("pid 123 on box")
    post: Callable[[str], Entry]  # the person's message into the record (ingress, T1: source `user`)
    hosted: Callable[[], bool]  # whether a live process still holds the session's lease
    in_turn: Callable[[], bool] = lambda: False  # whether its host runs a turn now (as it records)
    stop: Callable[[], object] = lambda: None  # Ctrl-C: the stop note into the record; the host stops


class Opener(Protocol):
    """Hosts a session: `session_id` (None: a new one) with `agent` in it - Vibey on `model`, or the
    external agent named (None: whoever last worked in the session, Vibey for a new one) - or attaches
    to it when another live process hosts it."""

    def __call__(
        self, session_id: str | None, model: str, events: EventSink, approver: Approver, *, agent: str | None
    ) -> AbstractContextManager[Live | Attached]: ...


Notify = Callable[[Update], None]


class ChatDriver:
    def __init__(self, opener: Opener, notify: Notify, target: Target, *, poll_s: float = POLL_S) -> None:
        self._opener, self._notify, self._first, self.poll_s = opener, notify, target, poll_s
        self._switch: queue.Queue[Target | None] = queue.Queue()
        self._texts: queue.Queue[str | None] = queue.Queue()
        self._jobs: queue.Queue[Callable[[Live], str]] = queue.Queue()  # run between turns
        self._wake, self._cancel, self._quit = threading.Event(), threading.Event(), threading.Event()
        self._answered = threading.Event()
        self._answer: Answer = "no"
        self._lock = threading.Lock()
        self._live: Live | None = None
        self._attached: Attached | None = None  # a session another process hosts, followed here
        self._mine: set[int] = set()  # attached: the seqs of the person's messages sent from here
        self._asked = 0  # attached: the newest message sent from here that has no answer yet
        self._ready = threading.Event()  # a session is hosted (the ingress thread may post)
        self._shown = 0  # the newest record seq the screen has (shown or deliberately skipped)
        self._floor = 0  # a turn that raised does not run again for inputs up to this seq
        self._cancelled = False
        self._announced = ""  # the id of the step's tool call the loop is about to run (ToolCalled)
        self._stopped: CallRecord | None = None  # the call that ran when Ctrl-C came
        self._not_run: list[CallRecord] = []  # the step's calls Ctrl-C kept from starting
        self.busy = False
        self.model = target.model
        self.agent = target.agent or VIBEY  # who works in the hosted session (known once it opens)
        self._thread = threading.Thread(target=self._main, name="vibe-chat-session", daemon=True)
        self._ingress = threading.Thread(target=self._post_texts, name="vibe-chat-ingress", daemon=True)

    # ---- the screen's side (never blocks on the model) -----------------------------------------------

    def start(self) -> None:
        self._thread.start()
        self._ingress.start()

    def send(self, text: str) -> None:
        """The person's message: into the record as soon as a session is hosted (T1: source `user`)."""
        self._texts.put(text)

    def cancel(self, *, host: bool = True) -> None:
        """Ctrl-C: the step stops at its next clean point, and what runs now (a shell command, an external
        agent) is killed at once through the session's stop switch; `host=False` (the terminal went
        away) leaves the step of an attached session's host to it."""
        self._cancel.set()
        with self._lock:
            live, attached = self._live, self._attached
        if live is not None and self.busy:
            live.stop.set()
        if attached is not None and self.busy and host:  # its host stops the turn (avibe.host.turn_watch)
            attached.stop()

    def switch(self, target: Target) -> None:
        """Host another session (or a new one, or the same one on another model) once the turn ends."""
        self._cancel.set() if self.busy else None
        self._switch.put(target)
        self._wake.set()

    def use_compaction(self, name: str) -> str:
        """/compaction NAME: Vibey makes room that way from its next request on; the name in force, or
        ValueError (no Vibey hosted, or a name the registry lacks)."""
        live = self._live
        context = live.context if live is not None else None
        if live is None or context is None:
            raise ValueError("/compaction is Vibey's; an external agent keeps its own context")
        if name:
            context.use_compaction(name)
            record_change(live.store, live.session_id, compaction=name)  # any later host makes room so
        return context.use_compaction("")

    def between_turns(self, job: Callable[[Live], str]) -> None:
        """Run `job` on the session thread once no turn runs (/compact, /undo: never beside a turn);
        the line it returns is shown. An attached session's host is another process: it is not run."""
        attached = self._attached
        if attached is not None:
            self._notify(Failure(f"this session is hosted by {attached.host}; run that there"))
            return
        self._jobs.put(job)
        self._wake.set()

    def answer(self, decision: Answer) -> None:
        self._answer = decision
        self._answered.set()

    def stop(self, timeout: float = 5.0) -> None:
        """Quit: cancel what runs, release the session (its lease), end both threads. A model call that
        does not return within `timeout` is left to die with the process (its lease is then taken over at
        once by the next process on this machine)."""
        if self._quit.is_set():
            return
        self._quit.set()
        self._cancel.set()
        self._switch.put(None)
        self._texts.put(None)
        self._wake.set()
        self._ready.set()
        for thread in (self._thread, self._ingress):
            if thread.is_alive() and thread is not threading.current_thread():
                thread.join(timeout)

    def sessions(self) -> list[SessionInfo]:
        """The sessions in the record (for /resume); none while no session is hosted."""
        live = self._live
        return live.store.list_sessions() if live is not None else []

    @property
    def session_id(self) -> str | None:
        live = self._live
        return live.session_id if live is not None else None

    @property
    def store(self) -> RecordStore | None:
        """The hosted session's record (/sessions, /rename); None while no session is hosted."""
        live = self._live
        return live.store if live is not None else None

    # ---- the session thread ----------------------------------------------------------------------------

    def _main(self) -> None:
        target: Target | None = self._first
        try:
            while target is not None and not self._quit.is_set():
                target = self._host(target)
        finally:
            self._notify(Closed())

    def _host(self, target: Target) -> Target | None:
        """Host `target` until a switch or quit; a session that cannot open is shown, and the next
        /new, /resume or /model is awaited."""
        self.model = target.model
        try:
            with self._opener(
                target.session_id, target.model, self._on_event, self._approve, agent=target.agent
            ) as live:
                if isinstance(live, Attached):
                    return self._attach(live)
                self._adopt(live, resumed=target.session_id is not None)
                try:
                    return self._serve(live)
                finally:
                    self._ready.clear()
                    with self._lock:
                        self._live = None
        except (AvibeError, OSError) as exc:
            log.warning("the chat could not host a session: %s", exc)
            self._notify(OpenFailed(str(exc)))
        except Exception as exc:  # unexpected: shown on the screen, the traceback in the log
            log.exception("the chat's session thread failed")
            self._notify(OpenFailed(f"internal error ({type(exc).__name__}: {exc}); see Avibe's log"))
        return self._switch.get()

    def _history(self, store: RecordStore, session_id: str) -> tuple[Line, ...]:
        """The session's last entries, as the screen shows them when it opens."""
        first = max(1, store.get_session(session_id).entry_count - HISTORY + 1)
        history = store.query(EntryQuery(session_id, seq_from=first))
        self._shown = history[-1].seq if history else 0
        return tuple(entry_line(e) for e in history)

    def _adopt(self, live: Live, *, resumed: bool) -> None:
        lines = self._history(live.store, live.session_id)
        context = live.context
        self.agent = live.host.agent.name
        if context is None:  # an external agent keeps its own context (L5): no meter marks of ours
            opened = Opened(live.session_id, self.model, 0, 0, 0, lines, resumed, agent=self.agent)
        else:
            context.add_tool_hook(self._tool_hook(live.stop))
            meter = context.meter()
            opened = Opened(
                live.session_id, self.model, meter.window, meter.threshold, meter.tokens, lines, resumed,
                compaction=meter.compaction,
            )  # fmt: skip
        self._floor = 0  # what was waiting when a session resumes runs now (e.g. after a crash)
        with self._lock:
            self._live = live
        self._notify(opened)
        self._ready.set()

    def _tool_hook(self, stop: threading.Event) -> ToolHook:
        """Around each tool's execution: its output goes to the screen too (a tool line expands to it);
        never to the record (A3). After Ctrl-C the step's calls not started yet are answered without
        running, and the one that was running when it came is noted."""

        def shown(call: ToolCall, run: ToolRunner) -> ToolResult:
            record = CallRecord(call.name, json.dumps(dict(call.arguments), ensure_ascii=False))
            if call.id == self._announced and self._cancel.is_set():  # the loop's own call, not started
                self._not_run.append(record)
                result = ToolResult(output=f"[{NOT_STARTED}]", is_error=True)
            else:
                result = run(call)
                if call.id == self._announced and stop.is_set():
                    self._stopped = record
            self._notify(ToolOutput(call.id, result.output, result.is_error))
            return result

        return shown

    def _attach(self, attached: Attached) -> Target | None:
        """Follow a session another process hosts until a switch, quit, or (a message of the person's
        waiting, nobody hosting) taking it over here."""
        lines = self._history(attached.store, attached.session_id)
        self.agent = attached.agent
        opened = Opened(attached.session_id, self.model, 0, 0, 0, lines, True, attached.agent, attached.host)
        self._mine, self._asked = set(), 0
        with self._lock:
            self._attached = attached
        self._notify(opened)
        self._ready.set()
        try:
            return self._follow(attached)
        finally:
            self._ready.clear()
            with self._lock:
                self._attached = None
            if self.busy:
                self.busy = False
                self._notify(Busy(False))

    def _follow(self, attached: Attached) -> Target | None:
        alone_since: float | None = None  # when a message of the person's was found waiting, unhosted
        while True:
            try:
                return self._switch.get_nowait()
            except queue.Empty:
                pass
            with self._lock:  # a message posted meanwhile is in the record and in `_mine`, or in neither
                self._show_recorded(attached)
            self._show_host_state(attached)
            if self._asked and not attached.hosted():
                alone_since = alone_since or time.monotonic()
                if time.monotonic() - alone_since >= TAKE_OVER_S:  # its host went away: host it here
                    return Target(attached.session_id, self.model)
            else:
                alone_since = None
            self._wake.wait(self.poll_s)
            self._wake.clear()

    def _show_recorded(self, attached: Attached) -> None:
        """What the host recorded since the last look: each entry as the screen shows it (the person's
        own messages sent from here are on it already); an answer ends the wait for one."""
        for entry in attached.store.query(EntryQuery(attached.session_id, seq_from=self._shown + 1)):
            self._shown = max(self._shown, entry.seq)
            if entry.source == CANCEL_SOURCE:  # the person's stop (from here or elsewhere): one short line
                self._notify(Cancelled(entry.seq))
            elif entry.seq not in self._mine:
                self._notify(InputShown(entry_line(entry)))
            if entry.seq > self._asked > 0 and ends_turn(entry, attached.agent):
                self._asked = 0  # answered (the screen is told by `_show_host_state`)

    def _show_host_state(self, attached: Attached) -> None:
        """Working while the host runs a turn (a message from anywhere) or a message sent from here
        waits; idle otherwise."""
        busy = bool(self._asked) or (attached.in_turn() and attached.hosted())
        if busy != self.busy:
            self.busy = busy
            self._notify(Busy(busy))

    def _serve(self, live: Live) -> Target | None:
        while True:
            try:
                return self._switch.get_nowait()
            except queue.Empty:
                pass
            self._show_new(live)
            if self._pending(live):
                self._turn(live)
                continue
            self._run_jobs(live)
            self._wake.wait(self.poll_s)
            self._wake.clear()

    def _run_jobs(self, live: Live) -> None:
        while not self._jobs.empty():
            job = self._jobs.get_nowait()
            self.busy = True
            self._notify(Busy(True))
            try:
                self._notify(EventArrived(Notice(job(live))))
            except Exception as exc:  # shown, never swallowed; the traceback in the log
                log.exception("session %s: a command between turns failed", live.session_id)
                self._notify(Failure(f"the command failed ({type(exc).__name__}: {exc})"))
            finally:
                self.busy = False
                self._notify(Busy(False))

    def _pending(self, live: Live) -> bool:
        """Input the agent has not taken in (its replies and the chat's cancel notes do not wake it)."""
        cursor = live.host.agent.cursor()
        live.host.after(cursor)  # lets the sources deliver what is due (a finished background job)
        entries = live.store.query(EntryQuery(live.session_id, seq_from=max(cursor, self._floor) + 1))
        return any(e.kind != "assistant" for e in after_last_stop(entries))

    def _show_new(self, live: Live) -> None:
        """Inputs that arrived from other sources (watches, timers, callbacks, sessions), with their tag;
        the person's own messages are on the screen already."""
        for entry in live.store.query(EntryQuery(live.session_id, seq_from=self._shown + 1)):
            self._shown = max(self._shown, entry.seq)
            chats = entry.source.kind == CANCEL_SOURCE.kind and entry.source.name == CANCEL_SOURCE.name
            if entry.kind not in ("user", "assistant") and not chats:  # the chat's notes are for the model
                self._notify(InputShown(entry_line(entry)))  # (a cancel's, /undo's): the screen said it

    def _turn(self, live: Live) -> None:
        self._cancel.clear()
        live.stop.clear()
        self._cancelled, self.busy = False, True
        self._stopped, self._not_run = None, []
        self._notify(Busy(True))
        ended_stopped = False
        try:
            ended_stopped = live.host.agent.run_turn(live.host, live.host.emit).stopped  # the host's sink
        except Exception as exc:  # shown, never swallowed; not retried until a new input arrives
            log.exception("session %s: the turn failed", live.session_id)
            newest = live.store.query(EntryQuery(live.session_id, seq_from=self._shown + 1))
            self._floor = max([self._shown, *(e.seq for e in newest)])
            self._notify(Failure(f"the turn failed ({type(exc).__name__}: {exc})"))
        finally:
            self.busy = False
            stop_asked = live.stop.is_set()
            live.stop.clear()
            if self._cancelled:
                note = live.host.post(CANCEL_SOURCE, self._cancel_note(live))
                self._notify(Cancelled(note.seq))
            elif stop_asked and ended_stopped and live.context is None:  # its own notice says it was stopped
                self._notify(Cancelled(live.store.get_session(live.session_id).entry_count))
            self._notify(Busy(False))

    def _cancel_note(self, live: Live) -> str:
        """The plain note, or (a tool was stopped or kept from starting) which calls did not finish."""
        if self._stopped is None and not self._not_run:
            return CANCEL_NOTE
        count = live.store.get_session(live.session_id).entry_count
        query = EntryQuery(live.session_id, kinds=frozenset({"assistant"}), seq_from=max(1, count - 50))
        steps = live.store.query(query)
        return stopped_text(steps[-1].seq if steps else count, self._stopped, self._not_run)

    def _on_event(self, event: Event) -> None:
        """The host's and the loop's events, on the session thread: cancel at a clean point, else pass on."""
        if isinstance(event, ModelStarted | ReplyDelta | ModelCalled) and self._cancel.is_set():
            self._cancel.clear()
            self._cancelled = True
            raise StepCancelled()
        if isinstance(event, ToolCalled):
            self._announced = event.call_id
        live = self._live
        if isinstance(event, Stopped) and live is not None and live.stop.is_set():
            event = Stopped(StepCancelled.MESSAGE)  # an external agent stopped by Ctrl-C: said by `Cancelled`
        if isinstance(event, ReplyDelta) and not event.text:
            return  # a heartbeat while a tool call is written: only a point to cancel at
        if isinstance(event, TurnEnded):
            self._cancel.clear()
        if isinstance(event, ModelStarted) and live is not None:
            self._show_new(live)  # inputs the step just took in, before its reply
        self._notify(EventArrived(event))

    def _approve(self, request: ApprovalRequest) -> Answer:
        """Ask mode: the screen asks yes / no / always; Ctrl-C or quitting is a no."""
        self._answered.clear()
        self._answer = "no"
        self._notify(ApprovalAsked(request))
        while not self._answered.wait(0.05):
            if self._quit.is_set() or self._cancel.is_set():
                self._notify(ApprovalClosed())
                return "no"
        return self._answer

    def _sent_attached(self, attached: Attached, text: str) -> None:
        """Into the record of the session another process hosts: that host answers it."""
        entry = attached.post(text)
        self._mine.add(entry.seq)
        self._asked = entry.seq  # working from now (`_show_host_state`)

    # ---- the ingress thread ----------------------------------------------------------------------------

    def _post_texts(self) -> None:
        while (text := self._texts.get()) is not None:
            while not self._quit.is_set() and not self._post(text):
                self._ready.wait()

    def _post(self, text: str) -> bool:
        """Into the hosted (or attached) session's record; False while there is none (a switch)."""
        with self._lock:
            live, attached = self._live, self._attached
            if live is None and attached is None:
                return False
            try:
                if attached is not None:
                    self._sent_attached(attached, text)
                elif live is not None:
                    live.host.post(Source("user", name=live.user_name), text)
            except AvibeError as exc:  # e.g. a NUL byte in pasted text: said, never dropped silently
                self._notify(Failure(f"the message was not sent: {exc}"))
        self._wake.set()
        return True
