"""The context over time: one point per model request of a session, kept with the record (issue 15).

The typed events are not stored; the inspector's plot needs the size of every request, so `ContextLog`
listens to a session's events and keeps what the plot needs in the session's state (`save_state`), where
any process - `vibe serve`, `vibe inspect` on another machine sharing PostgreSQL - can read it:

    "context"      {"model", "window", "threshold", "hard_limit", "chunks"}   (the limits the run used)
    "context/<i>"  {"points": [...], "marks": [...]}                          (CHUNK points per chunk)

A point is one ModelCalled (`n` counts from 1 across the session's life, also across processes); a mark
is a checkpoint (CheckpointAccepted) or a model-free move-out (CheckpointFallback, V7), placed after the
`after` points that preceded it. Chunks bound each write: a request rewrites at most CHUNK points.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from avibe.host.events import CheckpointAccepted, CheckpointFallback, Event, EventSink, ModelCalled
from avibe.ports import RecordStore

HEADER_KEY: Final = "context"
CHUNK: Final = 200


def chunk_key(index: int) -> str:
    return f"{HEADER_KEY}/{index}"


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
    points: tuple[dict[str, Any], ...]
    marks: tuple[dict[str, Any], ...]


def load_series(store: RecordStore, session_id: str) -> ContextSeries:
    header = store.load_state(session_id, HEADER_KEY) or {}
    limits = Limits(
        str(header.get("model", "")),
        int(header.get("window", 0)),
        int(header.get("threshold", 0)),
        int(header.get("hard_limit", 0)),
    )
    points: list[dict[str, Any]] = []
    marks: list[dict[str, Any]] = []
    for index in range(int(header.get("chunks", 0))):
        chunk = store.load_state(session_id, chunk_key(index)) or {}
        points += chunk.get("points", [])
        marks += chunk.get("marks", [])
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
    _header: dict[str, Any] | None = None
    _chunk: dict[str, Any] = field(default_factory=dict)
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

    def _load(self) -> dict[str, Any]:
        if self._header is None:
            self._header = dict(self.store.load_state(self.session_id, HEADER_KEY) or {"chunks": 0})
            chunks = int(self._header.get("chunks", 0))
            if chunks:
                last = self.store.load_state(self.session_id, chunk_key(chunks - 1)) or {}
                self._chunk = {"points": list(last.get("points", [])), "marks": list(last.get("marks", []))}
                earlier = (chunks - 1) * CHUNK
                self._count = earlier + len(self._chunk["points"])
        return self._header

    def _point(self, event: ModelCalled) -> None:
        header = self._load()
        limits = self.limits()
        wanted = {"model": limits.model, "window": limits.window, "threshold": limits.threshold,
                  "hard_limit": limits.hard_limit}  # fmt: skip
        if not header.get("chunks") or len(self._chunk.get("points", [])) >= CHUNK:
            self._chunk = {"points": [], "marks": []}
            header["chunks"] = int(header.get("chunks", 0)) + 1
            header.update(wanted)
            self._save_header()
        elif any(header.get(k) != v for k, v in wanted.items()):
            header.update(wanted)
            self._save_header()
        self._count += 1
        seq = self.store.get_session(self.session_id).entry_count
        at = self.now().isoformat()
        point = {"n": self._count, "at": at, "step": event.step, "view": event.view_tokens,
                 "prompt": event.prompt_tokens, "cached": event.cached_tokens, "output": event.output_tokens,
                 "seconds": event.seconds, "tools": event.tool_calls, "seq": seq}  # fmt: skip
        self._chunk["points"].append(point)
        self._save_chunk()

    def _mark(self, mark: dict[str, Any]) -> None:
        header = self._load()
        if not header.get("chunks"):
            return  # a mark before any request of this log: nothing to place it after
        self._chunk["marks"].append({**mark, "after": self._count, "at": self.now().isoformat()})
        self._save_chunk()

    def _save_header(self) -> None:
        assert self._header is not None
        self.store.save_state(self.session_id, HEADER_KEY, self._header)

    def _save_chunk(self) -> None:
        assert self._header is not None
        self.store.save_state(self.session_id, chunk_key(int(self._header["chunks"]) - 1), self._chunk)
