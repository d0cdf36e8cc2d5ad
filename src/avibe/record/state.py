"""The session state documents other than Vibey's live state (`agent/state.py`): one frozen dataclass
per kind, stored with `RecordStore.save_state` under its key. Every reader and writer goes through
`to_dict` / `from_stored`, so a document has one shape; a stored document of the wrong shape (written by
hand, by another version, or cut short) is a StateError that names the key and the field - never a
KeyError from deep inside a host.

    "workdir"           WorkdirState        the folder the session works in (any host runs it there)
    "agent"             AgentState          which agent works in the session (absent: Vibey)
    "title"             TitleState          the title the person gave the session (the chat's /rename)
    "backend.<name>"    BackendState        an external agent's own session id and how far it has read
    "delegations"       DelegationsState    the runs this session delegated, and which were reported
    "background_jobs"   JobsState           the job counter, and the jobs running when it was saved
    "context"           ContextHeader       the limits the inspector's plot draws (`host/context_log.py`)
    "context/<i>"       ContextChunk        its points and marks, a chunk at a time

`EncodedDocument` is a document that comes with its JSON text already made (Vibey's live state: each
message encoded once while it stays in the context, not again at every save).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Self, TypeVar

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


def _field(key: str, data: Mapping[str, Any], name: str, kind: type[T], default: T) -> T:
    """`data[name]` when it is a `kind` (an int is no bool), `default` when absent; else StateError."""
    value = data.get(name, default)
    if isinstance(value, bool) and kind is not bool:
        value = None  # True is an int to Python, never a count or a seq here
    if not isinstance(value, kind):
        raise StateError(
            f"session state {key!r}: {name!r} is {type(value).__name__}, not {kind.__name__}; "
            "the stored document is damaged (remove it or fix it by hand)"
        )
    return value


def _document(key: str, data: object) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise StateError(f"session state {key!r} is {type(data).__name__}, not a JSON object")
    return data


@dataclass(frozen=True, slots=True)
class WorkdirState:
    KEY = "workdir"
    path: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path}

    @classmethod
    def from_stored(cls, data: object | None) -> Self:
        if data is None:
            return cls()
        return cls(_field(cls.KEY, _document(cls.KEY, data), "path", str, ""))


@dataclass(frozen=True, slots=True)
class AgentState:
    KEY = "agent"
    name: str = VIBEY

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name}

    @classmethod
    def from_stored(cls, data: object | None) -> Self:
        if data is None:
            return cls()
        return cls(_field(cls.KEY, _document(cls.KEY, data), "name", str, VIBEY) or VIBEY)


@dataclass(frozen=True, slots=True)
class TitleState:
    """The session's title as the person named it (the session row's own `title` is the folder it was
    started in, which `--continue` looks sessions up by, so a title of words lives here)."""

    KEY = "title"
    title: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"title": self.title}

    @classmethod
    def from_stored(cls, data: object | None) -> Self:
        if data is None:
            return cls()
        return cls(_field(cls.KEY, _document(cls.KEY, data), "title", str, ""))


@dataclass(frozen=True, slots=True)
class BackendState:
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

    def to_dict(self) -> dict[str, Any]:
        return {"session": self.session, "cursor": self.cursor, "answered": self.answered}

    @classmethod
    def from_stored(cls, data: object | None, backend: str) -> Self:
        if data is None:
            return cls()
        key = cls.key(backend)
        doc = _document(key, data)
        return cls(
            _field(key, doc, "session", str, ""),
            _field(key, doc, "cursor", int, 0),
            _field(key, doc, "answered", int, 0),
        )


@dataclass(frozen=True, slots=True)
class DelegatedRun:
    """A session this one delegated a task to: the child, the task as shown, the seq of the task in the
    child, whether its final reply was reported back, and who works in it."""

    child: str
    task: str
    from_seq: int
    reported: bool = False
    worker: str = VIBEY

    def to_dict(self) -> dict[str, Any]:
        return {"child": self.child, "task": self.task, "from_seq": self.from_seq,
                "reported": self.reported, "worker": self.worker}  # fmt: skip

    @classmethod
    def from_dict(cls, data: object) -> Self:
        key = DelegationsState.KEY
        doc = _document(key, data)
        if "child" not in doc:
            raise StateError(f"session state {key!r}: a run has no 'child'")
        return cls(
            _field(key, doc, "child", str, ""),
            _field(key, doc, "task", str, ""),
            _field(key, doc, "from_seq", int, 0),
            _field(key, doc, "reported", bool, False),
            _field(key, doc, "worker", str, VIBEY),
        )


@dataclass(frozen=True, slots=True)
class DelegationsState:
    KEY = "delegations"
    runs: tuple[DelegatedRun, ...] = ()

    @property
    def out(self) -> tuple[DelegatedRun, ...]:
        """The runs whose final reply has not been reported yet."""
        return tuple(run for run in self.runs if not run.reported)

    def to_dict(self) -> dict[str, Any]:
        return {"runs": [run.to_dict() for run in self.runs]}

    @classmethod
    def from_stored(cls, data: object | None) -> Self:
        if data is None:
            return cls()
        runs = _field(cls.KEY, _document(cls.KEY, data), "runs", list, [])
        return cls(tuple(DelegatedRun.from_dict(run) for run in runs))


@dataclass(frozen=True, slots=True)
class LostJob:
    """A background job as saved while it ran: a later process reports it lost if it is still listed."""

    command: str = "?"
    pid: int | None = None
    sandboxed: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"command": self.command, "pid": self.pid, "sandboxed": self.sandboxed}

    @classmethod
    def from_dict(cls, data: object) -> Self:
        key = JobsState.KEY
        doc = _document(key, data)
        pid = doc.get("pid")
        if pid is not None and (isinstance(pid, bool) or not isinstance(pid, int)):
            raise StateError(f"session state {key!r}: a job's 'pid' is {type(pid).__name__}, not int")
        return cls(_field(key, doc, "command", str, "?"), pid, _field(key, doc, "sandboxed", bool, False))


@dataclass(frozen=True, slots=True)
class JobsState:
    KEY = "background_jobs"
    next_number: int = 1
    running: Mapping[str, LostJob] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        running = {job_id: job.to_dict() for job_id, job in self.running.items()}
        return {"next_number": self.next_number, "running": running}

    @classmethod
    def from_stored(cls, data: object | None) -> Self:
        if data is None:
            return cls()
        doc = _document(cls.KEY, data)
        running = _field(cls.KEY, doc, "running", dict, {})
        jobs = {str(job_id): LostJob.from_dict(job) for job_id, job in running.items()}
        return cls(_field(cls.KEY, doc, "next_number", int, 1), jobs)


@dataclass(frozen=True, slots=True)
class ContextHeader:
    """The context series' header: the limits the run used, and how many chunks of points there are."""

    KEY = "context"
    model: str = ""
    window: int = 0
    threshold: int = 0
    hard_limit: int = 0
    chunks: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "window": self.window, "threshold": self.threshold,
                "hard_limit": self.hard_limit, "chunks": self.chunks}  # fmt: skip

    @classmethod
    def from_stored(cls, data: object | None) -> Self:
        if data is None:
            return cls()
        doc = _document(cls.KEY, data)
        ints = (
            _field(cls.KEY, doc, name, int, 0) for name in ("window", "threshold", "hard_limit", "chunks")
        )
        return cls(_field(cls.KEY, doc, "model", str, ""), *ints)


@dataclass(frozen=True, slots=True)
class ContextChunk:
    """Up to a chunk's worth of the context series: one point per model request, the marks (checkpoints,
    move-outs) placed among them. Points and marks are the plot's JSON objects, kept as they are."""

    points: tuple[Mapping[str, Any], ...] = ()
    marks: tuple[Mapping[str, Any], ...] = ()

    @staticmethod
    def key(index: int) -> str:
        return f"{ContextHeader.KEY}/{index}"

    def to_dict(self) -> dict[str, Any]:
        return {"points": [dict(p) for p in self.points], "marks": [dict(m) for m in self.marks]}

    @classmethod
    def from_stored(cls, data: object | None, index: int) -> Self:
        if data is None:
            return cls()
        key = cls.key(index)
        doc = _document(key, data)
        points, marks = _field(key, doc, "points", list, []), _field(key, doc, "marks", list, [])
        return cls(tuple(_document(key, p) for p in points), tuple(_document(key, m) for m in marks))
