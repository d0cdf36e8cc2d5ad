"""Avibe's checkpoint as an evaluation strategy: Vibey living the transcript (`avibe.evals.lived`) - the
session host and Vibey's own turn loop, trigger, room policy, driver, view and carry - so the eval
measures what users run: skills put back (A1), the file list (A2), the current request (F5), the plan,
V5, V7, V8 and V9. The strategy is `avibe.evals.avibe_checkpoint`; this module, which the engine imports,
names it, keeps what a replay hands on, reads what each checkpoint says about itself (first-pass
validity, repairs, fallbacks) and audits its memo against the record (N4, N7).

mode: "structured" or "three" (small JSON questions under a grammar, one a call or in three calls; Vibey's
choice for local models, by name) or "tools" (edit and tick with tool calls; its choice for hosted models)
- None picks by the model's name, like Vibey.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Final

from pydantic import TypeAdapter
from pydantic.dataclasses import dataclass as pydantic_dataclass

from avibe.agent.driver import mode_for as driver_mode_for
from avibe.checkpoint.structured import SCENE_COMPLETED, SCENE_DROPPED
from avibe.checkpoint.turn import Mode
from avibe.ports import StoredCheckpoint
from avibe.record.checkpoint import Carry, MemoItem
from avibe.record.entries import Entry
from avibe.record.messages import ChatMessage

RECOLLECTION_KIND: Final = "checkpoint"  # ChatMessage.kind of the recollection in the replay's context
NAME: Final = "avibe-checkpoint"


def mode_for(model_name: str) -> Mode:
    """Vibey's choice (the same function `vibe run` uses): structured questions for local models."""
    from avibe.providers import is_local

    return driver_mode_for(model_name, is_local(model_name))


@pydantic_dataclass(frozen=True, slots=True)
class ReplayCarry:
    """What the replay hands on: the last checkpoint as stored (its carry and provenance included), for
    the probes' reminder, and the ones before it, oldest first. A pydantic dataclass: read back
    validated, never by hand."""

    checkpoint: StoredCheckpoint | None = None
    earlier: tuple[StoredCheckpoint, ...] = ()

    @classmethod
    def parse(cls, text: str) -> ReplayCarry:
        """The carry a replay handed on ("" before the first checkpoint: an empty one)."""
        return _REPLAY_CARRY.validate_json(text) if text else cls()

    def dump(self) -> str:
        return _REPLAY_CARRY.dump_json(self).decode()

    def stored(self) -> StoredCheckpoint | None:
        return self.checkpoint


_REPLAY_CARRY: Final = TypeAdapter(ReplayCarry)


def memo_of(carry_text: str) -> tuple[MemoItem, ...]:
    """The memo of the last checkpoint a replay handed on (() before the first)."""
    checkpoint = ReplayCarry.parse(carry_text).checkpoint
    return checkpoint.memo if checkpoint else ()


def memo_audit(memo: Sequence[MemoItem], record: Sequence[Entry]) -> dict[str, int]:
    """The memo's guarantees checked against the record, not taken on trust (N4, N7): how many entries,
    how many hold their record entry's text byte for byte (or a prefix + cut note, N5), and how many
    come from anything but a user message."""
    from avibe.checkpoint.memo import memo_text_matches

    by_seq = {entry.seq: entry for entry in record}
    verbatim = non_user = 0
    for item in memo:
        entry = by_seq.get(item.seq)
        verbatim += entry is not None and memo_text_matches(item, entry.text)
        non_user += entry is None or entry.source.kind != "user"
    return {"memo_entries": len(memo), "memo_verbatim": verbatim, "memo_non_user": non_user}


def labelled(view: Sequence[ChatMessage]) -> tuple[ChatMessage, ...]:
    """The view with its recollection (the second system message) labelled for the replay and report."""
    return tuple(
        replace(m, kind=RECOLLECTION_KIND) if i == 1 and m.role == "system" else m for i, m in enumerate(view)
    )


def carry_audit(carry: Carry) -> dict[str, int]:
    """What the checkpoint hands on besides mind, memo and scene: skills (A1), files (A2), the plan and
    the current request (F5)."""
    files = sum(1 for line in carry.files.splitlines() if line.startswith("- ") and line != "- (none)")
    return {"carry_skills": len(carry.skills), "carry_files": files, "carry_plan": len(carry.plan),
            "carry_request": len(carry.current_request_seqs)}  # fmt: skip


def checkpoint_meta(stored: StoredCheckpoint, record: Sequence[Entry]) -> dict[str, Any]:
    """What a saved checkpoint says about how it was made, and its audits against the record."""
    made = stored.provenance
    completed = any(note.startswith(SCENE_COMPLETED) for note in made.notes)
    dropped = any(note.startswith(SCENE_DROPPED) for note in made.notes)
    return {
        # V1-V3 on the first answer, taken as the model wrote it: the model-free move-out (V7) had no
        # answer to validate; a scene the harness had to complete, or whose parts it dropped (repeats,
        # filler, echoes of the question, copies of tool output), is not the model's valid answer
        "first_pass_valid": made.fallback != "model-free"
        and not made.problems
        and not completed
        and not dropped,
        "scene_completed": completed,
        "repaired": made.repair_used,
        "fallback": made.fallback,
        # what the first answer got wrong (V1-V3) and what the harness decided besides it (a mission entry
        # dropped by M4, a memo item kept or let go, a scene part completed): the report counts them
        "problems": list(made.problems),
        "harness_notes": list(made.notes),
        **memo_audit(stored.memo, record),
        **carry_audit(stored.carry),
    }


def failed_meta(reasons: Sequence[str]) -> dict[str, Any]:
    """A room made with no checkpoint saved (V5: a failed checkpoint changes nothing while it fits)."""
    return {"first_pass_valid": False, "repaired": False, "fallback": "failed", "problems": list(reasons)}
