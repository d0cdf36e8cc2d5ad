"""The Agent protocol the session host drives (inputs in, events out), and the one function that renders
every input for every backend (T3): Vibey today; Claude Code, Codex and OpenCode as they are (L5)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from avibe.host.events import EventSink
from avibe.ports import ToolResult
from avibe.record.entries import CallRecord, Entry, Kind
from avibe.record.messages import ToolCall
from avibe.record.sources import render_entry_text


@dataclass(frozen=True, slots=True)
class Input:
    """A record entry as an agent receives it. `text` is rendered by the harness from stored fields:
    the source tag line first for anything the person did not type (T1), the user's name in front of a
    user message that starts like a tag (T2) - never from what the text claims."""

    seq: int
    kind: Kind
    role: Literal["user", "assistant"]
    text: str
    ref: str = ""  # the source's id (a callback's job id, a watch id ...), from the stored fields
    calls: tuple[CallRecord, ...] = ()  # an assistant step's tool calls (a resumed step names them)
    agent: str = ""  # which agent wrote an assistant step (a session may change agents)

    @property
    def is_user(self) -> bool:
        return self.kind == "user"


def render_input(entry: Entry) -> Input:
    role: Literal["user", "assistant"] = "assistant" if entry.kind == "assistant" else "user"
    agent = entry.source.name if entry.kind == "assistant" else ""
    return Input(entry.seq, entry.kind, role, render_entry_text(entry), entry.source.ref, entry.calls, agent)


class Inbox(Protocol):
    """Where an agent takes its inputs from: every record entry after `seq`, rendered (inputs from any
    source, and replies it recorded but had not yet taken in, e.g. after a crash). Taking also lets the
    host's sources deliver what is due (a finished background job), so inputs arrive mid-turn too."""

    def after(self, seq: int) -> list[Input]: ...


@dataclass(frozen=True, slots=True)
class TurnResult:
    reply: str
    stopped: bool = False  # the turn ended without an answer (U3, model error, step limit, tool loop)
    steps: int = 0
    checkpoints: int = 0


class Agent(Protocol):
    """One agent working in one session. The host calls `run_turn` whenever input is waiting that the
    agent has not taken in (`cursor` is the newest record seq it has), and idles otherwise."""

    @property
    def name(self) -> str: ...

    def cursor(self) -> int: ...

    def run_turn(self, inbox: Inbox, emit: EventSink) -> TurnResult: ...


# ---- what the edges may ask of an agent whose context Avibe manages (Vibey) -----------------------------

ToolRunner = Callable[[ToolCall], ToolResult]
# Around one tool's execution: given the call and the runner to go on with, returns the result. The chat
# shows each tool's output with one, and answers the calls Ctrl-C kept from starting without running them.
ToolHook = Callable[[ToolCall, ToolRunner], ToolResult]


@dataclass(frozen=True, slots=True)
class Meter:
    """The context meter's figures (the chat shows them): the window, where making room starts, the
    tokens the next request holds now, and the compactor in force (`avibe.agent.compaction`)."""

    window: int
    threshold: int
    tokens: int
    compaction: str


class ContextControls(Protocol):
    """The queries and hooks an edge uses on an agent whose context Avibe manages; an external agent
    keeps its own context (L5) and has none. Edges go through these, never the agent's attributes."""

    def meter(self) -> Meter: ...

    def use_compaction(self, name: str) -> str: ...  # "" keeps the one in force; returns the name in force

    def add_tool_hook(self, hook: ToolHook) -> None: ...

    # Between turns only (the chat's /compact and /undo); each returns the one line the person sees.
    def compact_now(self, host: WaitingInbox, focus: Callable[[], Entry] | None = None) -> str: ...

    def undo_last_turn(self, host: WaitingInbox, note: Callable[[str], Entry]) -> str: ...


class WaitingInbox(Inbox, Protocol):
    """An inbox that also says whether an input waits for the agent (`SessionHost`)."""

    def waiting_input(self) -> bool: ...


def hooked(run: ToolRunner, hooks: Sequence[ToolHook]) -> ToolRunner:
    """`run` with each hook around it, the first hook added outermost."""
    for hook in reversed(hooks):
        run = _around(hook, run)
    return run


def _around(hook: ToolHook, run: ToolRunner) -> ToolRunner:
    return lambda call: hook(call, run)
