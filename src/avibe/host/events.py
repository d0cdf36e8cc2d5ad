"""Typed events: what happened in a live session, for the edges to render (`vibe run` lines, `--json`,
the chat, the inspector). They carry no logic ("messages up", STYLE.md); the edges decide what to show -
the seed says the user hears nothing about context until the U3 stop, so `vibe run` shows checkpoint
events only with `--verbose`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal


@dataclass(frozen=True, slots=True)
class InputArrived:
    """An input entered the record through ingress; `tag` is the harness-written source line (T1)."""

    seq: int
    source: str  # the source kind: user, watch, timer, callback, session, harness
    name: str
    tag: str
    text: str
    kind: Literal["input"] = "input"


@dataclass(frozen=True, slots=True)
class TurnStarted:
    session: str
    agent: str
    kind: Literal["turn_started"] = "turn_started"


@dataclass(frozen=True, slots=True)
class TurnEnded:
    reply: str
    stopped: bool
    steps: int
    checkpoints: int
    kind: Literal["turn_ended"] = "turn_ended"


@dataclass(frozen=True, slots=True)
class ModelStarted:
    """A model call went out; `view_tokens` is the request's size as the harness counts it."""

    step: int
    view_tokens: int
    kind: Literal["model_started"] = "model_started"


@dataclass(frozen=True, slots=True)
class ModelCalled:
    step: int
    view_tokens: int
    prompt_tokens: int
    cached_tokens: int
    output_tokens: int
    seconds: float
    tool_calls: int
    kind: Literal["model_call"] = "model_call"


@dataclass(frozen=True, slots=True)
class ToolCalled:
    call_id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    kind: Literal["tool_call"] = "tool_call"


@dataclass(frozen=True, slots=True)
class ToolFinished:
    """A tool call ended; `error` says why it failed in one line (an external agent's tool: the refused
    permission, the error its stream carried), as the program or tool reported it - not the person's words.
    `output` is what the tool gave the model (Vibey's tools; an external agent's stream gives only its
    size): the activity log keeps it for the person (`host/activity_log.py`), never the record (A3)."""

    call_id: str
    name: str
    is_error: bool
    output_chars: int
    seconds: float
    error: str = ""
    output: str = ""
    kind: Literal["tool_result"] = "tool_result"


@dataclass(frozen=True, slots=True)
class CheckpointStarted:
    reason: str
    tokens: int
    partial: bool
    kind: Literal["checkpoint_started"] = "checkpoint_started"


@dataclass(frozen=True, slots=True)
class CheckpointAccepted:
    number: int
    before: int
    after: int
    calls: int
    seconds: float
    fallback: str | None  # None, "partial"
    kind: Literal["checkpoint"] = "checkpoint"


@dataclass(frozen=True, slots=True)
class Compacted:
    """A compactor other than the checkpoint made room (`vibe run --compaction handoff`): its name, the
    view's tokens before and after, and what it cost."""

    strategy: str
    before: int
    after: int
    calls: int
    seconds: float
    kind: Literal["compacted"] = "compacted"


@dataclass(frozen=True, slots=True)
class CheckpointFailed:
    """U2: silent for the user; the reason is in the log and here for `--verbose` and the inspector."""

    reason: str
    kind: Literal["checkpoint_failed"] = "checkpoint_failed"


@dataclass(frozen=True, slots=True)
class CheckpointFallback:
    """V7: the oldest part moved out without the model."""

    number: int
    before: int
    after: int
    reason: str
    kind: Literal["fallback"] = "fallback"


@dataclass(frozen=True, slots=True)
class ReplyDelta:
    """A piece of the reply's visible text as the model generates it (a turn's normal model calls only,
    never a checkpoint's); a `Replied` (or the next step's events) follows. An empty piece is a heartbeat
    while the model writes what is not shown (a tool call): nothing to show, a point to cancel at."""

    text: str
    kind: Literal["reply_delta"] = "reply_delta"


@dataclass(frozen=True, slots=True)
class Replied:
    text: str
    kind: Literal["reply"] = "reply"


@dataclass(frozen=True, slots=True)
class Stopped:
    """The turn ended without an answer: U3, a model error, the step limit, a tool loop."""

    message: str
    kind: Literal["stop"] = "stop"


@dataclass(frozen=True, slots=True)
class Notice:
    """One line for the person about the session's setting, not the model's work: an instruction file
    that was not read (a link where AGENTS.md should be) and why."""

    message: str
    kind: Literal["notice"] = "notice"


@dataclass(frozen=True, slots=True)
class Idle:
    """The host has nothing to do: no input waiting; `waiting_for` names the jobs still running."""

    waiting_for: tuple[str, ...] = ()
    kind: Literal["idle"] = "idle"


Event = (
    InputArrived
    | TurnStarted
    | TurnEnded
    | ModelStarted
    | ModelCalled
    | ToolCalled
    | ToolFinished
    | CheckpointStarted
    | CheckpointAccepted
    | Compacted
    | CheckpointFailed
    | CheckpointFallback
    | ReplyDelta
    | Replied
    | Stopped
    | Notice
    | Idle
)
EventSink = Callable[[Event], None]
CHECKPOINT_KINDS = frozenset(
    {"checkpoint_started", "checkpoint", "compacted", "checkpoint_failed", "fallback"}
)


def event_to_dict(event: Event) -> dict[str, Any]:
    """A JSON-ready dict, `kind` first (for `vibe run --json`)."""
    data = asdict(event)
    return {"kind": data.pop("kind"), **data}


def ignore_events(_: Event) -> None:
    """The sink for callers that do not show progress."""
