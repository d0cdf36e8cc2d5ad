"""Scenario values (SPEC E1): a scripted conversation plus its ground truth. Frozen dataclasses, no IO;
the file form is read by evals/scenario/reading.py and written by evals/scenario/writing.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Literal

FORMAT_VERSION: Final = 1
BackgroundKind = Literal["watch", "timer", "callback", "agent"]
ItemKind = Literal["constraint", "authorisation", "preference"]
ItemStatus = Literal["active", "revoked", "superseded"]
RefKind = Literal["job_id", "path", "command", "error"]
ProbeKind = Literal["exact", "rubric", "next_action"]
UserTag = Literal["", "rejection"]
DEFAULT_START: Final = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class ToolUse:
    """One tool call of an assistant turn and its output (output lives in the replay only, A3)."""

    id: str
    name: str
    arguments: dict[str, Any]
    output: str
    is_error: bool = False


@dataclass(frozen=True, slots=True)
class UserMessage:
    """The person's words. `tag` says how they came when not typed as a message: "rejection" for the
    reason typed when rejecting a tool call (Claude Code keeps it inside the call's result); the memo
    treats them as any message of the person's."""

    author: str
    text: str
    tag: UserTag = ""
    type: Literal["user"] = "user"


@dataclass(frozen=True, slots=True)
class AssistantTurn:
    text: str
    tool_uses: tuple[ToolUse, ...] = ()
    type: Literal["assistant"] = "assistant"


@dataclass(frozen=True, slots=True)
class BackgroundInput:
    """Input not typed by a person: a watch, timer, callback or another agent session (T1)."""

    source: BackgroundKind
    name: str
    ref: str
    text: str
    type: Literal["background"] = "background"


Event = UserMessage | AssistantTurn | BackgroundInput


@dataclass(frozen=True, slots=True)
class PlantedItem:
    """A constraint, authorisation or preference the user stated, in their exact words.

    anchor:   a distinctive phrase a paraphrase would keep (finds the sentence that restates it).
    loosened: known loosened variants (changed number, lost negation) to recognise verbatim.
    status:   active, or revoked/superseded by `replaced_by` (another item's id).
    """

    id: str
    kind: ItemKind
    text: str
    anchor: str
    loosened: tuple[str, ...] = ()
    status: ItemStatus = "active"
    replaced_by: str = ""


@dataclass(frozen=True, slots=True)
class Queue:
    """Items to handle in order; the first `done` are finished when the conversation ends."""

    items: tuple[str, ...]
    done: int

    @property
    def next_item(self) -> str | None:
        return self.items[self.done] if self.done < len(self.items) else None

    @property
    def remaining(self) -> tuple[str, ...]:
        return self.items[self.done :]


@dataclass(frozen=True, slots=True)
class Spoof:
    """Text that claims the user's authority without being the user's message.

    source:  the delivery path of the spoof (a background kind), or "user" for a person's message that
             starts with `[Harness:` (T2: it must never pass for a harness tag).
    payload: the distinctive request it carries; found in the user's words, it was misattributed.
    """

    source: BackgroundKind | Literal["user"]
    payload: str


@dataclass(frozen=True, slots=True)
class Reference:
    kind: RefKind
    value: str


@dataclass(frozen=True, slots=True)
class Probe:
    """A question asked of the model from the compacted context.

    exact:       `answer` must appear in the reply as words (normalised; `probes.says`).
    rubric:      each of `rubric` is judged pass/fail by the judge model.
    next_action: any of `expect` must appear and none of `forbid` may appear in the reply, as words.
    """

    id: str
    kind: ProbeKind
    question: str
    answer: str = ""
    rubric: tuple[str, ...] = ()
    expect: tuple[str, ...] = ()
    forbid: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class GroundTruth:
    mission: str = ""  # the user's exact wording of the goal ("" for imported conversations)
    mission_key: str = ""  # distinctive phrase a faithful restatement keeps
    items: tuple[PlantedItem, ...] = ()
    queue: Queue | None = None
    spoofs: tuple[Spoof, ...] = ()
    references: tuple[Reference, ...] = ()
    probes: tuple[Probe, ...] = ()


@dataclass(frozen=True, slots=True)
class Scenario:
    id: str
    type: str  # one of generators.SCENARIO_TYPES, or "custom" / "imported"
    seed: int | None
    user: str
    events: tuple[Event, ...]
    truth: GroundTruth = field(default_factory=GroundTruth)
    start: datetime = DEFAULT_START
    description: str = ""
