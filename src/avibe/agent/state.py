"""The live context and the run's bookkeeping: session state persisted after every step, so a session
resumes after a crash or restart. Tool output lives here only, never in the record (A3)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from avibe.agent.plan_note import FileEvent
from avibe.record.checkpoint import PlanItem
from avibe.record.messages import ChatMessage, ToolCall
from avibe.record.state import EncodedDocument

STATE_KEY = "live"


def message_to_dict(message: ChatMessage) -> dict[str, Any]:
    """Field by field: `dataclasses.asdict` deep-copies every string, and this runs for the whole live
    context after every step (the store copies the document anyway when it writes it)."""
    return {
        "role": message.role,
        "content": message.content,
        "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in message.tool_calls],
        "tool_call_id": message.tool_call_id,
        "name": message.name,
        "seq": message.seq,
        "kind": message.kind,
    }


def message_from_dict(data: dict[str, Any]) -> ChatMessage:
    calls = tuple(ToolCall(**call) for call in data.get("tool_calls", ()))
    return ChatMessage(
        role=data["role"],
        content=data["content"],
        tool_calls=calls,
        tool_call_id=data.get("tool_call_id"),
        name=data.get("name"),
        seq=data.get("seq"),
        kind=data.get("kind"),
    )


@dataclass(frozen=True, slots=True)
class LoadedSkill:
    name: str
    order: int  # increasing with each load: recency for A1
    call_id: str = ""  # the tool call whose output holds the loaded text (while it is in the context)


@dataclass(frozen=True, slots=True)
class LiveState:
    """Everything the loop needs to go on where it stopped.

    last_seq:          the newest record entry already in `messages` (inputs arrive by seq > last_seq).
    turn_start:        index in `messages` where the current turn began (F5).
    turn_user_seqs:    the current turn's user messages (kept verbatim through a checkpoint, F5).
    dismissed:         memo candidates unticked at an earlier checkpoint: never listed again (N6).
    """

    messages: tuple[ChatMessage, ...] = ()
    last_seq: int = 0
    turn_start: int = 0
    turn_user_seqs: tuple[int, ...] = ()
    skills: tuple[LoadedSkill, ...] = ()
    files_read: tuple[str, ...] = ()
    files_modified: tuple[str, ...] = ()
    file_events: tuple[FileEvent, ...] = ()  # the reads and changes in order, oldest first (plan_note)
    dismissed: tuple[int, ...] = ()
    plan: tuple[PlanItem, ...] = ()  # the agent's plan (update_plan), kept by the harness
    calls_since_plan: int = 0  # tool calls since the last update_plan (0: the plan was the latest call)
    commands: tuple[str, ...] = ()  # the latest shell commands run, newest first (S6)
    finished_jobs: tuple[str, ...] = ()  # background jobs that reported back, newest first (S6)
    checkpointing: bool = False  # set while a checkpoint runs: a crash mid-checkpoint is visible on resume
    # the last failing tool call: name, arguments, error line, and what worked after it ("" until then)
    last_failure: tuple[str, str, str, str] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"messages": [message_to_dict(m) for m in self.messages], **self.bookkeeping()}

    def bookkeeping(self) -> dict[str, Any]:
        """Everything but the messages, as stored."""
        return {
            "last_seq": self.last_seq,
            "turn_start": self.turn_start,
            "turn_user_seqs": list(self.turn_user_seqs),
            "skills": [{"name": s.name, "order": s.order, "call_id": s.call_id} for s in self.skills],
            "files_read": list(self.files_read),
            "files_modified": list(self.files_modified),
            "file_events": [list(event) for event in self.file_events],
            "dismissed": list(self.dismissed),
            "plan": [{"step": p.step, "status": p.status} for p in self.plan],
            "calls_since_plan": self.calls_since_plan,
            "commands": list(self.commands),
            "finished_jobs": list(self.finished_jobs),
            "checkpointing": self.checkpointing,
            "last_failure": list(self.last_failure) if self.last_failure else None,
            "extra": dict(self.extra),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LiveState:
        return cls(
            messages=tuple(message_from_dict(m) for m in data.get("messages", ())),
            last_seq=int(data.get("last_seq", 0)),
            turn_start=int(data.get("turn_start", 0)),
            turn_user_seqs=tuple(data.get("turn_user_seqs", ())),
            skills=tuple(LoadedSkill(**s) for s in data.get("skills", ())),
            files_read=tuple(data.get("files_read", ())),
            files_modified=tuple(data.get("files_modified", ())),
            file_events=_file_events(data.get("file_events", ())),
            dismissed=tuple(data.get("dismissed", ())),
            plan=tuple(PlanItem(p["step"], p["status"]) for p in data.get("plan", ())),
            calls_since_plan=int(data.get("calls_since_plan", 0)),
            commands=tuple(data.get("commands", ())),
            finished_jobs=tuple(data.get("finished_jobs", ())),
            checkpointing=bool(data.get("checkpointing", False)),
            last_failure=_failure(data.get("last_failure")),
            extra=dict(data.get("extra", {})),
        )


class StateEncoder:
    """The live state as the document it is stored as, with its JSON text: each message is turned into a
    dict and encoded once while it stays in the context (a step adds a message or two to a context of
    hundreds), the bookkeeping every time."""

    def __init__(self) -> None:
        self._by_id: dict[int, tuple[ChatMessage, dict[str, Any], str]] = {}

    def encode(self, state: LiveState) -> EncodedDocument:
        known, seen = self._by_id, {}
        for message in state.messages:
            hit = known.get(id(message))
            if hit is None or hit[0] is not message:
                as_dict = message_to_dict(message)
                hit = (message, as_dict, json.dumps(as_dict, allow_nan=False))
            seen[id(message)] = hit
        self._by_id = seen  # forget messages that left the context
        rest = state.bookkeeping()
        hits = [seen[id(message)] for message in state.messages]
        text = (
            '{"messages": ['
            + ", ".join(hit[2] for hit in hits)
            + "], "
            + json.dumps(rest, allow_nan=False)[1:]
        )
        return EncodedDocument({"messages": [hit[1] for hit in hits], **rest}, text)


def _failure(value: Any) -> tuple[str, str, str, str] | None:
    """A saved last failure; one saved before `then` existed has three fields."""
    if isinstance(value, list | tuple) and len(value) in (3, 4) and all(isinstance(v, str) for v in value):
        return (value[0], value[1], value[2], value[3] if len(value) == 4 else "")
    return None


def _file_events(value: Any) -> tuple[FileEvent, ...]:
    """The saved reads and changes; an entry of another shape (a hand-edited or older state) is left out."""
    events: list[FileEvent] = []
    for item in value if isinstance(value, list | tuple) else ():
        shaped = isinstance(item, list | tuple) and len(item) == 2 and isinstance(item[1], str)
        if shaped and item[0] in ("read", "modified"):
            events.append(("read" if item[0] == "read" else "modified", item[1]))
    return tuple(events)


def remember_file(paths: tuple[str, ...], path: str, keep: int = 50) -> tuple[str, ...]:
    """Most recent first, deduplicated, bounded."""
    return (path, *[p for p in paths if p != path])[:keep]
