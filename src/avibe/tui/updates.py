"""What the chat's session thread tells the screen: frozen values, no logic ("messages up", STYLE.md).

The thread that hosts the session (`avibe.tui.driver`) sends these through one callback; the app
(`avibe.tui.app`) renders them. Host events (`avibe.host.events`) travel inside `EventArrived` as they are.
"""

from __future__ import annotations

from dataclasses import dataclass

from avibe.host.events import Event
from avibe.record.entries import Kind
from avibe.tools.approval import ApprovalRequest


@dataclass(frozen=True, slots=True)
class Line:
    """One entry of the record as the chat shows it: who (`kind`), the source tag line for anything the
    person did not type (T1, written by the harness from stored fields), the text, and the tool calls
    an assistant reply made (names and arguments), and for a reply the agent that wrote it (a session may
    change agents: each reply keeps its own label)."""

    seq: int
    kind: Kind
    tag: str
    text: str
    calls: tuple[str, ...] = ()
    agent: str = ""


@dataclass(frozen=True, slots=True)
class Opened:
    """A session is hosted: its id, the model, the meter's fixed marks, and the latest record lines."""

    session_id: str
    model: str
    window: int
    threshold: int
    view_tokens: int
    history: tuple[Line, ...]
    resumed: bool
    agent: str = "vibey"  # another agent (Claude Code, Codex, OpenCode) keeps its own context
    attached: str = ""  # the process that hosts it, when the chat follows a session hosted elsewhere
    compaction: str = "checkpoint"  # how Vibey makes room (the meter names any other way)


@dataclass(frozen=True, slots=True)
class OpenFailed:
    message: str


@dataclass(frozen=True, slots=True)
class EventArrived:
    event: Event


@dataclass(frozen=True, slots=True)
class InputShown:
    """An input from a watch, timer, callback, another session or the harness, with its tag (T1); in a
    session the chat follows (hosted elsewhere), any entry that host recorded - replies too."""

    line: Line


@dataclass(frozen=True, slots=True)
class ToolOutput:
    call_id: str
    output: str
    is_error: bool


@dataclass(frozen=True, slots=True)
class ApprovalAsked:
    request: ApprovalRequest


@dataclass(frozen=True, slots=True)
class ApprovalClosed:
    """The question went away without the person's answer (cancelled or quitting): it was a no."""


@dataclass(frozen=True, slots=True)
class Busy:
    """A turn started (True) or ended (False)."""

    busy: bool


@dataclass(frozen=True, slots=True)
class Cancelled:
    """Ctrl-C stopped the running step; the record holds a harness note saying so (`seq`)."""

    seq: int


@dataclass(frozen=True, slots=True)
class Failure:
    """Something went wrong outside the turn's own stops: shown, never swallowed (its traceback is in
    Avibe's log)."""

    message: str


@dataclass(frozen=True, slots=True)
class Closed:
    """The session thread has ended (the app is quitting)."""


Update = (
    Opened
    | OpenFailed
    | EventArrived
    | InputShown
    | ToolOutput
    | ApprovalAsked
    | ApprovalClosed
    | Busy
    | Cancelled
    | Failure
    | Closed
)
