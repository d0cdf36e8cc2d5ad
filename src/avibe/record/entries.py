"""Record entries: every input and reply of a session, with its true source (SPEC C1, T1, A3).

Values only. Identity (`seq`) and storage belong to the store; tool output is never an entry (A3).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Final, Literal, get_args

Kind = Literal["user", "assistant", "watch", "timer", "callback", "agent", "harness"]
KINDS: Final[tuple[Kind, ...]] = get_args(Kind)
# Inputs not typed by a person: each is shown with a harness-written source tag (T1).
NON_HUMAN_INPUT_KINDS: Final[frozenset[Kind]] = frozenset({"watch", "timer", "callback", "agent", "harness"})


@dataclass(frozen=True, slots=True)
class Source:
    """How an input was delivered. Stored fields; the tag line is rendered from these only (T1).

    kind:  the delivery path.
    name:  user name (user), watch name, timer name, callback name, agent name, harness component.
    ref:   watch id, timer id, callback/command id, sending session id; empty where none.
    event: what a callback's service said it is, from its verified headers, never its body
           ("github workflow_run", "stripe"); empty for every other input (T1).
    """

    kind: Kind
    name: str = ""
    ref: str = ""
    event: str = ""


@dataclass(frozen=True, slots=True)
class CallRecord:
    """A tool call an assistant reply made: its name and arguments (compact JSON). The record keeps what
    the agent did, so `vibe log` shows every step; never the tool's output (A3)."""

    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class NewEntry:
    """An entry before the store gives it its number."""

    session: str
    source: Source
    text: str
    at: datetime
    turn_id: str = ""
    calls: tuple[CallRecord, ...] = ()
    # Idempotency: a second entry with the same key in the same session records nothing new; the store
    # gives back the entry the first one made (a watch tick, a timer fire, a callback's key).
    delivery_key: str = ""

    @property
    def kind(self) -> Kind:
        return self.source.kind


@dataclass(frozen=True, slots=True)
class Entry:
    """A stored entry. `seq` is the message number the memo and the user refer to: dense 1, 2, 3 ...
    per session, never reused."""

    session: str
    seq: int
    source: Source
    text: str
    at: datetime
    turn_id: str = ""
    calls: tuple[CallRecord, ...] = ()

    @property
    def kind(self) -> Kind:
        return self.source.kind

    @property
    def is_user(self) -> bool:
        """True only for input typed by the person (N7: decided by stored kind, never by text)."""
        return self.source.kind == "user"


@dataclass(frozen=True, slots=True)
class SessionInfo:
    id: str
    created_at: datetime
    title: str = ""
    entry_count: int = 0
    last_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class EntryQuery:
    """Filters over one session's record (A3, A4). Every bound is inclusive; None means unbounded."""

    session: str
    kinds: frozenset[Kind] | None = None
    seq_from: int | None = None
    seq_to: int | None = None
    since: datetime | None = None
    until: datetime | None = None
    text: str | None = None
    limit: int | None = None
