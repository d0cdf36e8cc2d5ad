"""The context over time: one point per model request of a session, kept with the record.

The typed events are not stored; the inspector's plot needs the size of every request, so `ContextLog`
listens to a session's events and keeps what the plot needs in the session's state (`save_state`), where
any process - `vibe serve`, `vibe inspect` on another machine sharing PostgreSQL - can read it:

    "context"      {"model", "window", "threshold", "hard_limit", "chunks"}   (the limits the run used)
    "context/<i>"  {"points": [...], "marks": [...]}                          (CHUNK points per chunk)

A point is one ModelCalled (`n` counts from 1 across the session's life, also across processes); a mark
is a checkpoint (CheckpointAccepted) or a model-free move-out (CheckpointFallback, V7), placed after the
`after` points that preceded it. Chunks bound each write: a request rewrites at most CHUNK points. A point
names its model, so what each request cost is known after a `/model` switch (`avibe.providers.prices`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Final

from avibe.host.events import CheckpointAccepted, CheckpointFallback, Event, EventSink, ModelCalled
from avibe.ports import RecordStore
from avibe.record.state import ContextChunk, ContextHeader

HEADER_KEY: Final = ContextHeader.KEY
CHUNK: Final = 200


def chunk_key(index: int) -> str:
    return ContextChunk.key(index)


@dataclass(frozen=True, slots=True)
class Limits:
    """What the plot draws lines for: the model, its window and the trigger line (F1)."""

    model: str = ""
    window: int = 0
    threshold: int = 0
    hard_limit: int = 0


@dataclass(frozen=True, slots=True)
class ContextSeries:
    """Every point and mark kept for a session, oldest first."""

    limits: Limits
    points: tuple[Mapping[str, Any], ...]
    marks: tuple[Mapping[str, Any], ...]


def load_series(store: RecordStore, session_id: str) -> ContextSeries:
    header = ContextHeader.from_stored(store.load_state(session_id, HEADER_KEY))
    limits = Limits(header.model, header.window, header.threshold, header.hard_limit)
    points: list[Mapping[str, Any]] = []
    marks: list[Mapping[str, Any]] = []
    for index in range(header.chunks):
        chunk = ContextChunk.from_stored(store.load_state(session_id, chunk_key(index)), index)
        points += chunk.points
        marks += chunk.marks
    return ContextSeries(limits, tuple(points), tuple(marks))


@dataclass
class ContextLog:
    """An event sink that keeps the context series, then passes every event on to `inner`.

    `limits` is asked at the first model call (the agent knows its window only once its model is open).
    A failed write is the store's error: it propagates like any other write of the session."""

    store: RecordStore
    session_id: str
    limits: Callable[[], Limits]
    inner: EventSink
    now: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    _header: ContextHeader | None = None
    _points: list[Mapping[str, Any]] = field(default_factory=list)  # the newest chunk's
    _marks: list[Mapping[str, Any]] = field(default_factory=list)
    _count: int = 0

    def __call__(self, event: Event) -> None:
        if isinstance(event, ModelCalled):
            self._point(event)
        elif isinstance(event, CheckpointAccepted):
            self._mark({"kind": "checkpoint", "number": event.number, "before": event.before,
                        "after_tokens": event.after, "fallback": event.fallback})  # fmt: skip
        elif isinstance(event, CheckpointFallback):
            self._mark({"kind": "move-out", "number": event.number, "before": event.before,
                        "after_tokens": event.after, "reason": event.reason})  # fmt: skip
        self.inner(event)

    def _load(self) -> ContextHeader:
        if self._header is None:
            self._header = ContextHeader.from_stored(self.store.load_state(self.session_id, HEADER_KEY))
            chunks = self._header.chunks
            if chunks:
                last = ContextChunk.from_stored(
                    self.store.load_state(self.session_id, chunk_key(chunks - 1)), chunks - 1
                )
                self._points, self._marks = list(last.points), list(last.marks)
                self._count = (chunks - 1) * CHUNK + len(self._points)
        return self._header

    def _point(self, event: ModelCalled) -> None:
        header = self._load()
        limits = self.limits()
        wanted = replace(header, model=limits.model, window=limits.window, threshold=limits.threshold,
                         hard_limit=limits.hard_limit)  # fmt: skip
        if not header.chunks or len(self._points) >= CHUNK:
            self._points, self._marks = [], []
            self._save_header(replace(wanted, chunks=header.chunks + 1))
        elif wanted != header:
            self._save_header(wanted)
        self._count += 1
        seq = self.store.get_session(self.session_id).entry_count
        at = self.now().isoformat()
        point = {"n": self._count, "at": at, "step": event.step, "view": event.view_tokens,
                 "prompt": event.prompt_tokens, "cached": event.cached_tokens, "output": event.output_tokens,
                 "seconds": event.seconds, "tools": event.tool_calls, "seq": seq,
                 "model": limits.model}  # fmt: skip
        self._points.append(point)
        self._save_chunk()

    def _mark(self, mark: dict[str, Any]) -> None:
        header = self._load()
        if not header.chunks:
            return  # a mark before any request of this log: nothing to place it after
        self._marks.append({**mark, "after": self._count, "at": self.now().isoformat()})
        self._save_chunk()

    def _save_header(self, header: ContextHeader) -> None:
        self._header = header
        self.store.save_state(self.session_id, HEADER_KEY, header.to_dict())

    def _save_chunk(self) -> None:
        assert self._header is not None
        chunk = ContextChunk(tuple(self._points), tuple(self._marks))
        self.store.save_state(self.session_id, chunk_key(self._header.chunks - 1), chunk.to_dict())
