"""A checkpoint as the record keeps it: typed values, no dicts across layers. JSON
appears only inside the store adapter, which writes `StoredCheckpoint.meta` (the flat document of the
carry and the provenance) and reads it back with `Carry.from_dict` / `Provenance.from_dict`.

    MemoItem     one kept user message, copied from the record (N4, N5)
    SkillRef     a loaded skill and its load order (A1: put back by recency)
    Carry        what the checkpoint hands to the views after it: skills, the file list (A2), the
                 current request's seqs (F5), the window it was made for
    Provenance   why and how it was made: trigger, tokens before/after, calls, repair, fallback, cost
    StoredCheckpoint   the three parts, the seq it covers, its carry and provenance
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any, Final, Literal, get_args

from pydantic import StrictBool, StrictInt, StrictStr, TypeAdapter
from pydantic.dataclasses import dataclass as pydantic_dataclass


@dataclass(frozen=True, slots=True)
class MemoItem:
    """A kept user message: `text` is the record's text, byte for byte, or a prefix plus a cut note.

    `later`: the record numbers of the user's later messages about the same thing that were still in the
    conversation when the checkpoint was made (N3): not copied into the memo - the recollection marks the
    line as changed later, in the conversation below. `asked`: for a short reply, the question of the
    agent's it answers - the question sentence of the agent's message just before it, from the record
    (N3: "leave it" means nothing alone). Both set by the harness, never by the model; notes on the item,
    not its words, so two items with the same words are equal whatever their notes."""

    seq: int
    text: str
    cut: bool = False
    later: tuple[int, ...] = field(default=(), compare=False)
    asked: str = field(default="", compare=False)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"seq": self.seq, "text": self.text, "cut": self.cut}
        data |= {"later": list(self.later)} if self.later else {}
        return data | ({"asked": self.asked} if self.asked else {})

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MemoItem:
        seq, text, cut = data.get("seq"), data.get("text"), data.get("cut", False)
        later, asked = data.get("later", []), data.get("asked", "")
        if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
            raise ValueError(f"memo item needs a positive integer 'seq', got {seq!r}")
        if not isinstance(text, str):
            raise ValueError(f"memo item #{seq} needs a string 'text', got {type(text).__name__}")
        if not isinstance(cut, bool):
            raise ValueError(f"memo item #{seq} needs a boolean 'cut', got {cut!r}")
        if not isinstance(later, list) or not all(
            isinstance(n, int) and not isinstance(n, bool) and n > seq for n in later
        ):
            raise ValueError(
                f"memo item #{seq} needs 'later' as a list of later message numbers, got {later!r}"
            )
        if not isinstance(asked, str):
            raise ValueError(f"memo item #{seq} needs 'asked' as a string, got {type(asked).__name__}")
        return cls(seq=seq, text=text, cut=cut, later=tuple(later), asked=asked)


PlanStatus = Literal["pending", "in_progress", "done"]
PLAN_STATUSES: tuple[PlanStatus, ...] = get_args(PlanStatus)
PLAN_MARKS: dict[str, str] = {"pending": "[ ]", "in_progress": "[>]", "done": "[x]"}


@dataclass(frozen=True, slots=True)
class PlanItem:
    """One item of the agent's plan (the update_plan tool): its words, verbatim, and its status. The
    harness keeps the plan and carries it through checkpoints, so a queue position never depends on what
    a small model writes at checkpoint time."""

    step: str
    status: PlanStatus = "pending"

    def line(self) -> str:
        return f"{PLAN_MARKS[self.status]} {self.step}"


def render_plan(plan: tuple[PlanItem, ...]) -> str:
    return "\n".join(item.line() for item in plan)


def next_step(plan: Sequence[PlanItem]) -> PlanItem | None:
    """The step the plan says to work on now: the one in progress, else the first pending one."""
    return next((p for p in plan if p.status == "in_progress"), None) or next(
        (p for p in plan if p.status == "pending"), None
    )


@dataclass(frozen=True, slots=True)
class SkillRef:
    name: str
    order: int  # increasing with each load: the most recent is put back first (A1)


def _checked(cls_name: str, key: str, value: Any, kind: type | tuple[type, ...]) -> Any:
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ValueError(f"{cls_name}.{key}: expected {kind}, got {value!r}")
    return value


@pydantic_dataclass(frozen=True, slots=True)
class Carry:
    """What a checkpoint hands to the views after it. A pydantic dataclass: every construction is
    validated (`dataclasses.replace` included) - scalars strictly (a bool is no window, "8000" is no
    number), containers as JSON writes them (a list for a tuple, an object for a skill or plan item, a
    plan status one of PLAN_STATUSES). The store reads it with `from_dict` at its boundary."""

    skills: tuple[SkillRef, ...] = ()
    files: StrictStr = ""  # A2's file list, fixed at checkpoint time so the prompt cache holds
    current_request_seqs: tuple[StrictInt, ...] = ()  # F5: kept verbatim, win on conflict
    mid_turn: StrictBool = False
    window: StrictInt = 0
    plan: tuple[PlanItem, ...] = ()  # the agent's plan when the checkpoint was made, verbatim

    def to_dict(self) -> dict[str, Any]:
        data = _CARRY.dump_python(self, mode="json")
        return {"agent_plan": data.pop("plan"), **data}  # "plan" is provenance's key in the flat document

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Carry:
        """Reads the keys it knows (a provenance document shares the mapping); a wrong type raises a
        ValueError (pydantic's ValidationError) naming the field."""
        values = {key: data[key] for key in _CARRY_KEYS if key in data}
        if "agent_plan" in data:
            values["plan"] = data["agent_plan"]
        return _CARRY.validate_python(values)


_CARRY: Final = TypeAdapter(Carry)
_CARRY_KEYS: Final = frozenset(f.name for f in fields(Carry)) - {"plan"}


@dataclass(frozen=True, slots=True)
class Provenance:
    trigger: str = ""
    tokens_before: int = 0
    tokens_after: int = 0
    calls: int = 0
    tool_rounds: int = 0
    problems: tuple[str, ...] = ()  # V1-V3 problems of the first answer
    repair_used: bool = False
    fallback: str | None = None  # None, "partial" (V6), "model-free" (V7)
    plan: str = ""
    freed_tokens: int = 0
    seconds: float = 0.0
    mode: str = ""
    prompt_tokens: int = 0
    cached_tokens: int = 0
    cached_share: float = 0.0
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["problems"], data["notes"] = list(self.problems), list(self.notes)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Provenance:
        """Reads the keys it knows (older records may lack some: their defaults apply)."""
        values: dict[str, Any] = {}
        for f in fields(cls):
            if f.name not in data:
                continue
            value = data[f.name]
            if f.name in ("problems", "notes"):
                value = tuple(_checked("Provenance", f.name, v, str) for v in value)
            elif f.name == "fallback":
                value = None if value is None else _checked("Provenance", f.name, value, str)
            elif f.name in ("seconds", "cached_share"):
                value = float(_checked("Provenance", f.name, value, (int, float)))
            elif f.name in ("trigger", "plan", "mode"):
                value = _checked("Provenance", f.name, value, str)
            elif f.name == "repair_used":
                value = _checked("Provenance", f.name, value, bool)
            else:
                value = _checked("Provenance", f.name, value, int)
            values[f.name] = value
        return cls(**values)


@dataclass(frozen=True, slots=True)
class StoredCheckpoint:
    """A checkpoint as stored: the three parts plus why/how it was made (DESIGN: "a checkpoint is itself
    stored so any past checkpoint can be inspected and diffed")."""

    session: str
    number: int  # 1, 2, 3 ... per session (the store assigns it)
    at: datetime
    mind: str
    memo: tuple[MemoItem, ...]  # copied from the record (N4)
    scene: str
    upto_seq: int  # the last record seq this checkpoint covers (moved out of the live context)
    carry: Carry = field(default_factory=Carry)
    provenance: Provenance = field(default_factory=Provenance)

    @property
    def meta(self) -> dict[str, Any]:
        """The flat document of carry and provenance (what the store writes, `vibe checkpoints` shows)."""
        return self.provenance.to_dict() | self.carry.to_dict()

    def memo_dicts(self) -> list[dict[str, Any]]:
        return [item.to_dict() for item in self.memo]
