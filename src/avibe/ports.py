"""Ports: the interfaces between the core/orchestration and the adapters (DESIGN.md).

Only Protocols and the small values they exchange. Adapters implement them; the agent gets them passed in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from avibe.record.checkpoint import PlanItem
from avibe.record.checkpoint import StoredCheckpoint as StoredCheckpoint
from avibe.record.entries import Entry, EntryQuery, NewEntry, SessionInfo, Source
from avibe.record.feeds import Feed
from avibe.record.messages import ChatMessage, ModelFacts, ModelReply, ToolSpec


@runtime_checkable
class RecordStore(Protocol):
    """The durable, append-only record of every input and reply (C1, A3) plus session state."""

    def create_session(self, title: str = "", session_id: str | None = None) -> SessionInfo: ...
    def get_session(self, session_id: str) -> SessionInfo: ...  # raises UnknownSession
    def latest_session(self) -> SessionInfo | None: ...
    def list_sessions(self) -> list[SessionInfo]: ...
    def append(self, entry: NewEntry) -> Entry: ...  # assigns the next dense seq atomically
    def query(self, query: EntryQuery) -> list[Entry]: ...  # time (= seq) order
    def save_checkpoint(  # assigns the number; with state_key/state: both in one transaction
        self,
        checkpoint: StoredCheckpoint,
        *,
        state_key: str | None = None,
        state: Mapping[str, Any] | None = None,
    ) -> StoredCheckpoint: ...
    def list_checkpoints(self, session_id: str) -> list[StoredCheckpoint]: ...
    def save_state(self, session_id: str, key: str, value: Mapping[str, Any]) -> None: ...
    def load_state(self, session_id: str, key: str) -> dict[str, Any] | None: ...
    # One writer per session: the hosting process holds the session's lease.
    def acquire_lease(  # raises SessionHosted while another live owner holds it; a stale one is replaced
        self, session_id: str, owner: LeaseOwner, *, ttl_s: float
    ) -> LeaseGrant: ...
    def renew_lease(self, lease: Lease, *, ttl_s: float) -> Lease | None: ...  # None: no longer held
    def release_lease(self, lease: Lease) -> None: ...  # a no-op when it is no longer held
    def session_lease(self, session_id: str) -> Lease | None: ...  # the lease held now, if any (read only)


@runtime_checkable
class FeedStore(Protocol):
    """The feeds (watches, timers, callbacks) that post into sessions, kept with the record."""

    def add_feed(self, feed: Feed) -> Feed: ...
    def list_feeds(self, session_id: str | None = None, *, include_removed: bool = False) -> list[Feed]: ...
    def get_feed(self, feed_id: str) -> Feed: ...  # raises UnknownFeed
    def stop_feed(self, feed_id: str) -> Feed: ...
    def save_feed_state(self, feed_id: str, state: Mapping[str, Any]) -> None: ...


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens in the session model's own units (DESIGN: budgets are model tokens)."""

    def count(self, text: str) -> int: ...
    def count_messages(self, messages: Sequence[ChatMessage]) -> int: ...


@runtime_checkable
class ModelClient(Protocol):
    """One chat model. Errors are raised as avibe.errors.ModelError subclasses.

    `on_text`, when given, is called with each piece of the reply's visible text as it is generated
    (never tool-call markup), and with "" while the model generates what is not shown (a tool call's
    arguments): a heartbeat, so a caller can stop the call by raising from `on_text` however long a tool
    call takes (Ctrl-C in the chat). The reply returned is the same complete ModelReply as without it.
    Calls with a `json_schema` do not stream."""

    @property
    def facts(self) -> ModelFacts: ...

    def complete(self, request: CompletionRequest) -> ModelReply: ...


@dataclass(frozen=True, slots=True)
class CompletionRequest:
    """One model call: the messages, the tools offered, and how to answer - a JSON schema the reply must
    fit (a structured call, which never streams), the most tokens it may write, the temperature, and
    where its visible text goes as it is written (`on_text`; None: no streaming)."""

    messages: Sequence[ChatMessage]
    tools: Sequence[ToolSpec] = ()
    json_schema: Mapping[str, Any] | None = None
    max_tokens: int | None = None
    temperature: float = 0.0
    on_text: Callable[[str], None] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:  # a caller's list cannot change the request after the fact
        object.__setattr__(self, "messages", tuple(self.messages))
        object.__setattr__(self, "tools", tuple(self.tools))

    @property
    def stream(self) -> Callable[[str], None] | None:
        """Where the text streams to: `on_text`, except for a structured call."""
        return self.on_text if self.json_schema is None else None


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool returns to the loop. Output goes to the live context only, never the record (A3)."""

    output: str
    is_error: bool = False
    files_read: tuple[str, ...] = ()
    files_modified: tuple[str, ...] = ()
    skill_loaded: str | None = None
    plan: tuple[PlanItem, ...] | None = None  # the agent's whole plan, when the tool set it


@runtime_checkable
class Tool(Protocol):
    @property
    def spec(self) -> ToolSpec: ...

    def run(self, arguments: Mapping[str, Any]) -> ToolResult: ...


@runtime_checkable
class Clock(Protocol):
    def now(self) -> datetime: ...


class Delivery(Protocol):
    """Hands an input that did not come from the person typing (a background command's completion, a
    watch ...) to the session's record with its source, and returns the stored entry (T1). Adapters in
    avibe/sources get one passed in instead of calling the orchestration's ingress (DESIGN layers)."""

    def __call__(self, source: Source, text: str) -> Entry: ...


class KeyedDelivery(Protocol):
    """A Delivery with an idempotency key: a key the session has seen records nothing new."""

    def __call__(self, source: Source, text: str, key: str) -> Entry: ...


@dataclass(frozen=True, slots=True)
class LeaseOwner:
    """A process that hosts a session: its name on a machine, and a random token only it knows.
    `machine` is the host name plus the PID namespace: only there does `pid` name this process, so only
    there may a dead `pid` mark the lease stale at once (elsewhere the lease must expire)."""

    host: str
    pid: int
    token: str
    machine: str


@dataclass(frozen=True, slots=True)
class Lease:
    """A session's lease as stored: who holds it, since when, its last heartbeat and when it expires."""

    session: str
    owner: LeaseOwner
    acquired_at: datetime
    renewed_at: datetime
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class LeaseGrant:
    """A lease just acquired; `replaced` is the stale lease it took over, `reason` why it was stale."""

    lease: Lease
    replaced: Lease | None = None
    reason: str = ""
