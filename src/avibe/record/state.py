"""The session state documents other than Vibey's live state (`agent/state.py`): one frozen dataclass
per kind, only its fields, stored with `RecordStore.save_state` under its key. Every reader and writer
goes through `to_dict` / `from_stored`, which all documents share (`Document`, `StateDocument`), so a
document has one shape; a stored document of the wrong shape (written by hand, by another version, or
cut short) is a StateError that names the key and the field - never a KeyError from deep inside a host.
Both directions are pydantic over the dataclasses themselves: `to_dict` dumps the fields in order,
`from_stored` validates what the store returned (`_read`: strict JSON types - a count is no bool and no
string; absent fields get their defaults, unknown ones are ignored).

    "workdir"           WorkdirState        the folder the session works in (any host runs it there)
    "agent"             AgentState          which agent works in the session (absent: Vibey)
    "title"             TitleState          the title the person gave the session (the chat's /rename)
    "settings"          SessionSettings     the person's settings for the session: any host runs it so
    "host_activity"     HostActivity        whether its host is in a turn now (an attached chat shows it)
    "backend.<name>"    BackendState        an external agent's own session id and how far it has read
    "delegations"       DelegationsState    the runs this session delegated, and which were reported
    "background_jobs"   JobsState           the job counter, and the jobs running when it was saved
    "context"           ContextHeader       the limits the inspector's plot draws (`host/context_log.py`)
    "context/<i>"       ContextChunk        its points and marks, a chunk at a time
    "activity"          ActivityHeader      where each chunk of tool outputs and errors starts
    "activity/<i>"      ActivityChunk       its items, a chunk at a time

`EncodedDocument` is a document that comes with its JSON text already made (Vibey's live state: each
message encoded once while it stays in the context, not again at every save).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Final, Literal, Self, TypeVar, cast

from pydantic import TypeAdapter, ValidationError
from pydantic_core import ErrorDetails

from avibe.errors import StateError

VIBEY: Final = "vibey"
T = TypeVar("T")


class EncodedDocument(dict[str, Any]):
    """A state document with its exact JSON text (`text`, made by `json.dumps(..., allow_nan=False)` of
    its parts): a store may write that text as it is instead of encoding the document again. To anything
    else it is the plain dict it holds."""

    __slots__ = ("text",)

    def __init__(self, document: Mapping[str, Any], text: str) -> None:
        super().__init__(document)
        self.text = text


_ADAPTERS: dict[type[Any], TypeAdapter[Any]] = {}  # one per document kind, built on its first read


def _adapter(cls: type[T]) -> TypeAdapter[T]:
    adapter = _ADAPTERS.get(cls)
    if adapter is None:
        adapter = _ADAPTERS[cls] = TypeAdapter(cls)
    return cast(TypeAdapter[T], adapter)


def _read(cls: type[T], key: str, data: object) -> T:
    """The document `data` (as the store returned it) as a `cls`: absent fields get their defaults, every
    field present must have its JSON type exactly; else a StateError naming `key` and the field."""
    if not isinstance(data, Mapping):
        raise StateError(f"session state {key!r} is {type(data).__name__}, not a JSON object")
    try:
        text = json.dumps(data, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise StateError(f"session state {key!r} is not plain JSON: {exc}") from None
    try:
        return _adapter(cls).validate_json(text, strict=True)
    except ValidationError as exc:
        raise StateError(_problem(key, exc.errors()[0])) from None


def _problem(key: str, error: ErrorDetails) -> str:
    """One line: the document, the field (and where it sits, when nested), what is wrong with it."""
    loc = error["loc"]
    names = [part for part in loc if isinstance(part, str)]
    name = names[-1] if names else "?"
    where = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc).lstrip(".")
    found = type(error["input"]).__name__
    if error["type"] == "missing":
        what = "is missing"
    elif error["type"] in {"dict_type", "dataclass_type", "model_type"}:
        what = f"is {found}, not a JSON object"
    else:
        what = f"is {found}: {error['msg'][0].lower()}{error['msg'][1:]}"
    at = f" (at {where})" if where != name else ""
    return (
        f"session state {key!r}: {name!r}{at} {what}; the stored document is damaged "
        "(remove it or fix it by hand)"
    )


class Document:
    """A stored document, or a part of one: a frozen dataclass of JSON-typed fields, and nothing else.
    Its stored form is what pydantic dumps of it (the fields in order, tuples as lists); `read` is the
    store boundary, where what the store returned is validated (`_read`)."""

    __slots__ = ()

    def to_dict(self) -> dict[str, Any]:
        return cast(dict[str, Any], _adapter(type(self)).dump_python(self, mode="json"))

    @classmethod
    def read(cls, key: str, data: object | None) -> Self:
        """The document stored under `key` (`data`; None: none stored, so every field's default)."""
        return cls() if data is None else _read(cls, key, data)


class StateDocument(Document):
    """A document stored under one fixed key."""

    __slots__ = ()
    KEY: ClassVar[str]

    @classmethod
    def from_stored(cls, data: object | None) -> Self:
        return cls.read(cls.KEY, data)


@dataclass(frozen=True, slots=True)
class WorkdirState(StateDocument):
    KEY = "workdir"
    path: str = ""


@dataclass(frozen=True, slots=True)
class AgentState(StateDocument):
    KEY = "agent"
    name: str = VIBEY

    @classmethod
    def from_stored(cls, data: object | None) -> Self:
        read = cls.read(cls.KEY, data)
        return read if read.name else replace(read, name=VIBEY)  # an empty name was stored once: Vibey


@dataclass(frozen=True, slots=True)
class TitleState(StateDocument):
    """The session's title as the person named it (the session row's own `title` is the folder it was
    started in, which `--continue` looks sessions up by, so a title of words lives here)."""

    KEY = "title"
    title: str = ""


@dataclass(frozen=True, slots=True)
class SessionSettings(StateDocument):
    """The settings a session runs with (docs/serve.md): its model, approval mode, sandbox mode and
    way of making room, recorded when a host starts it and when the person changes one; whichever host
    takes the session over - `vibe serve` included - runs it with them. An empty field: not recorded."""

    KEY = "settings"
    model: str = ""
    approval: str = ""
    sandbox: str = ""
    compaction: str = ""


@dataclass(frozen=True, slots=True)
class HostActivity(StateDocument):
    """What the session's host does now, for a chat attached from elsewhere (`host/turn_watch.py`): in a
    turn or not, and the tool call it waits on. Only as true as its host is live (the lease says)."""

    KEY = "host_activity"  # it once shared "activity" with ActivityHeader, and wrote over the timeline's
    turn: bool = False
    doing: str = ""


@dataclass(frozen=True, slots=True)
class BackendState(Document):
    """What survives a restart of Avibe for an external agent: its own session id, the newest seq it has
    taken in (`cursor`), and the newest seq it answered (`answered`): inputs after `answered` - those of
    a turn that crashed, and the crash notice - go with the next turn."""

    PREFIX = "backend."
    session: str = ""
    cursor: int = 0
    answered: int = 0

    @classmethod
    def key(cls, backend: str) -> str:
        return cls.PREFIX + backend

    @classmethod
    def from_stored(cls, data: object | None, backend: str) -> Self:
        return cls.read(cls.key(backend), data)


@dataclass(frozen=True, slots=True)
class DelegatedRun(Document):
    """A session this one delegated a task to: the child, the task as shown, the seq of the task in the
    child, whether its final reply was reported back, and who works in it."""

    child: str
    task: str = ""  # absent in a stored run: read as before, only the child is required
    from_seq: int = 0
    reported: bool = False
    worker: str = VIBEY


@dataclass(frozen=True, slots=True)
class DelegationsState(StateDocument):
    KEY = "delegations"
    runs: tuple[DelegatedRun, ...] = ()

    @property
    def out(self) -> tuple[DelegatedRun, ...]:
        """The runs whose final reply has not been reported yet."""
        return tuple(run for run in self.runs if not run.reported)


@dataclass(frozen=True, slots=True)
class LostJob(Document):
    """A background job as saved while it ran: a later process reports it lost if it is still listed."""

    command: str = "?"
    pid: int | None = None
    sandboxed: bool = False


@dataclass(frozen=True, slots=True)
class JobsState(StateDocument):
    KEY = "background_jobs"
    next_number: int = 1
    running: Mapping[str, LostJob] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ContextHeader(StateDocument):
    """The context series' header: the limits the run used, and how many chunks of points there are."""

    KEY = "context"
    model: str = ""
    window: int = 0
    threshold: int = 0
    hard_limit: int = 0
    chunks: int = 0


@dataclass(frozen=True, slots=True)
class ContextChunk(Document):
    """Up to a chunk's worth of the context series: one point per model request, the marks (checkpoints,
    move-outs) placed among them. Points and marks are the plot's JSON objects, kept as they are."""

    points: tuple[Mapping[str, Any], ...] = ()
    marks: tuple[Mapping[str, Any], ...] = ()

    @staticmethod
    def key(index: int) -> str:
        return f"{ContextHeader.KEY}/{index}"

    @classmethod
    def from_stored(cls, data: object | None, index: int) -> Self:
        return cls.read(cls.key(index), data)


ActivityKind = Literal["tool", "stopped", "checkpoint_failed"]


@dataclass(frozen=True, slots=True)
class ActivityItem(Document):
    """One thing that happened after entry `after`. `kind`:
    tool               a tool call: `name`, `call_id`, `output` (its first OUTPUT_KEPT characters),
                       `chars` and `lines` (the whole output's), `seconds`; `error` when it failed
                       (`message`: the reason an external agent's stream gave, if any)
    stopped            the turn stopped before its answer: `message` says why (the model failed, ...)
    checkpoint_failed  a checkpoint was not made: `message` says why (nothing changed, V5)
    """

    after: int
    kind: ActivityKind
    at: str  # ISO 8601, UTC
    name: str = ""
    call_id: str = ""
    error: bool = False
    output: str = ""
    chars: int = 0
    lines: int = 0
    seconds: float = 0.0
    message: str = ""

    @property
    def cut(self) -> int:
        """Characters of the output not kept."""
        return max(0, self.chars - len(self.output))


@dataclass(frozen=True, slots=True)
class ActivityHeader(StateDocument):
    """Where each chunk starts: the `after` of its first item, so a page of the timeline reads only the
    chunks that can hold its entries' items."""

    KEY = "activity"
    starts: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class ActivityChunk(Document):
    items: tuple[ActivityItem, ...] = ()

    @staticmethod
    def key(index: int) -> str:
        return f"{ActivityHeader.KEY}/{index}"

    @classmethod
    def from_stored(cls, data: object | None, index: int) -> Self:
        return cls.read(cls.key(index), data)
