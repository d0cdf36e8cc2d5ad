"""What the chat's session thread works with: the hosted session as it needs it (`Live`), which session
to host next (`Target`), a record entry as the screen shows it, and the stop Ctrl-C raises into the loop."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Final, Protocol

from avibe.errors import ModelError
from avibe.host.agent import ContextControls
from avibe.host.session import SessionHost
from avibe.ports import RecordStore
from avibe.record.agents import VIBEY
from avibe.record.entries import Entry
from avibe.record.sources import render_entry_text
from avibe.tui.updates import Line


class StepCancelled(ModelError):
    """Raised into the loop at a clean stopping point; the loop ends the turn as a stop."""

    MESSAGE: Final = "cancelled by the user (Ctrl-C)"

    def __init__(self) -> None:
        super().__init__(self.MESSAGE)


class Live(Protocol):
    """A hosted session as the chat needs it (`avibe.host.sessions.HostedSession`: with Vibey, or with
    Claude Code, Codex or OpenCode in it and no Vibey)."""

    @property
    def host(self) -> SessionHost: ...
    @property
    def context(self) -> ContextControls | None: ...  # None: an external agent (its own context, L5)
    @property
    def store(self) -> RecordStore: ...
    @property
    def session_id(self) -> str: ...
    @property
    def user_name(self) -> str: ...
    @property
    def stop(self) -> threading.Event: ...  # set: the process the agent waits on is killed


@dataclass(frozen=True, slots=True)
class Target:
    """Which session to host next, on which model or agent (None: a new session; agent None: the one
    that last worked in the session)."""

    session_id: str | None
    model: str
    agent: str | None = None


def ends_turn(entry: Entry, agent: str) -> bool:
    """An entry that ends an agent's turn: Vibey's reply without tool calls, an external agent's reply
    (one a turn, its calls in it), or the notice of the agent's failure."""
    if entry.kind == "assistant":
        return not entry.calls or entry.source.name != VIBEY
    return entry.kind == "harness" and entry.source.name == agent


def entry_line(entry: Entry) -> Line:
    """A record entry for the screen: the tag line apart from the text for any non-user input (T1)."""
    calls = tuple(f"{c.name} {c.arguments}" for c in entry.calls)
    if entry.kind in ("user", "assistant"):
        agent = entry.source.name if entry.kind == "assistant" else ""
        return Line(entry.seq, entry.kind, "", entry.text, calls, agent)
    tag, _, body = render_entry_text(entry).partition("\n")
    return Line(entry.seq, entry.kind, tag, body, calls)
