"""Support for the chat's pilot tests: a session opener over a real SQLite record, real tools and the strict
scripted model (as `vibe run` wires one, minus the lease and background jobs), a model whose streamed
pieces wait on a gate, and helpers to wait for what the screen shows. (A module of its own name:
`from conftest import` is ambiguous when several test folders run in one pytest call.)"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "agent"))

from vibey_doubles import CharCounter, StepClock

from avibe.agent.loop import RunConfig, Vibey
from avibe.host import SessionHost
from avibe.host.events import EventSink
from avibe.host.sessions import HostedSession
from avibe.ports import CompletionRequest
from avibe.providers.scripted import ScriptedModel, Step, pieces
from avibe.record.entries import Source
from avibe.record.messages import ModelFacts, ModelReply
from avibe.store import open_store
from avibe.tools import ToolBox, default_tools
from avibe.tools.approval import ApprovalPolicy, Approver, Rules
from avibe.tools.undo import UNDO_DIR, undo_last_turn
from avibe.tui.app import ChatApp
from avibe.tui.widgets import Bubble, InputBubble


class GatedModel:
    """The scripted model, streaming each reply in pieces, and three "" heartbeats per tool call (as the
    embedded model beats per token of a call it does not show); while `gate` is clear, every piece after
    the first waits for it (so a test sees a reply half-written on the screen, or cancels it there)."""

    def __init__(self, steps: Sequence[Step], **facts: Any) -> None:
        self.inner = ScriptedModel.of(steps, **facts)
        self.gate = threading.Event()
        self.gate.set()
        self.waiting = threading.Event()  # set while a piece waits for the gate

    @property
    def facts(self) -> ModelFacts:
        return self.inner.facts

    def complete(self, request: CompletionRequest) -> ModelReply:
        reply = self.inner.complete(replace(request, on_text=None))
        on_text = request.stream
        if on_text is not None:
            beats = [""] * (3 * len(reply.tool_calls))
            for number, piece in enumerate([*pieces(reply.text, 4), *beats]):
                if number and not self.gate.is_set():
                    self.waiting.set()
                    self.gate.wait(30)
                    self.waiting.clear()
                on_text(piece)
        return reply


@dataclass
class Sessions:
    """Opens scripted sessions on one record; remembers which (session, model) each open asked for."""

    home: Path
    workdir: Path
    model: GatedModel
    approval: str = "auto"
    window: int | None = None
    opened: list[tuple[str | None, str]] = field(default_factory=list)
    new_id: str | None = None  # the id of the next new session (a stable screenshot); None: the store's

    @property
    def url(self) -> str:
        return f"sqlite:///{self.home / 'avibe.db'}"

    @contextmanager
    def __call__(
        self, session_id: str | None, model: str, events: EventSink, approver: Approver, *, agent: str | None
    ) -> Iterator[HostedSession[Vibey]]:
        assert agent in (None, "vibey"), "the scripted sessions are Vibey's (tests/backends runs the others)"
        self.opened.append((session_id, model))
        with open_store(self.url) as store:
            if session_id is None:
                info = store.create_session(str(self.workdir), session_id=self.new_id)
            else:
                info = store.get_session(session_id)
            user = Source("user", name=RunConfig().user_name)  # a no's reason: the person's message
            tell = lambda reason: host.post(user, reason).seq  # noqa: E731 - as compose/vibey.py tells
            policy = ApprovalPolicy(self.approval, Rules(), approver, tell=tell)  # type: ignore[arg-type]
            stop = threading.Event()  # the session's stop switch, as `host_session` makes it
            undo = self.home / "sessions" / info.id / UNDO_DIR  # as `vibe chat` keeps them (Avibe's home)
            tools = default_tools(self.workdir, store=store, session_id=info.id, approval=policy, stop=stop,
                                  undo_dir=undo)  # fmt: skip
            toolbox = ToolBox(tools)
            clock = StepClock()
            vibey = Vibey(
                store=store,
                model=self.model,
                counter=CharCounter(),
                clock=clock,
                session_id=info.id,
                session_dir=self.home / "sessions" / info.id,
                tool_specs=toolbox.specs,
                run_tool=toolbox.dispatch,
                config=RunConfig(checkpoint_mode="structured", window=self.window),
                events=events,
                undo=lambda: _undone(undo),
            )
            host = SessionHost(store, info.id, vibey, clock, events)
            try:
                yield HostedSession(host, vibey, store, vibey.config.user_name, stop, context=vibey)
            finally:
                host.close()


def _undone(folder: Path) -> tuple[bool, str]:
    """/undo as `compose.vibey` wires it: the session's snapshots reverted; anything?, the line shown."""
    undone = undo_last_turn(folder)
    return undone.found, undone.line()


async def until(pilot: Any, check: Callable[[], object], timeout: float = 15.0, what: str = "") -> None:
    """Wait (letting the app run) until `check()` is true; fail with what the screen shows."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or check}; screen: {screen_text(pilot.app)}")
        await pilot.pause(0.05)


def bubbles(app: ChatApp, kind: str | None = None) -> list[str]:
    """The conversation's lines as shown (prefix and text), optionally of one kind."""
    found = []
    for widget in app.query(Bubble):
        if kind is None or widget.kind == kind:
            found.append(widget.prefix + widget.body)
    return found


def inputs(app: ChatApp) -> list[str]:
    return [str(widget.render()) for widget in app.query(InputBubble)]


def status(app: ChatApp) -> str:
    return str(app.query_one("#status").render())


def screen_text(app: ChatApp) -> str:
    return " | ".join([*bubbles(app), *inputs(app), status(app)])


def run(scenario: Callable[[], Any]) -> None:
    asyncio.run(scenario())
