"""Checkpoint values shared by the whole core (C2): problems, memo items, the checkpoint itself.

API:
    MIND_SECTIONS: tuple[str, ...]             the four mind headings' names, in their fixed order (M1)
    Problem(code: str, message: str)           one thing wrong; `.part` is "mind" | "memo" | "scene" | ...
    MemoItem(seq: int, text: str, cut: bool)   one kept user message, copied from the record (N4, N5)
        .to_dict() -> dict[str, Any];  MemoItem.from_dict(data) -> MemoItem  (raises ValueError)
    CheckpointDraft(mind: str, memo: tuple[MemoItem, ...], scene: str)   a proposed or accepted checkpoint
        .memo_dicts() -> list[dict[str, Any]]   (the StoredCheckpoint.memo shape)
    Checkpoint = CheckpointDraft                 an accepted draft is the same value
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from avibe.record.checkpoint import MemoItem

__all__ = ["MIND_SECTIONS", "Checkpoint", "CheckpointDraft", "MemoItem", "Problem"]

MIND_SECTIONS: Final[tuple[str, ...]] = ("I am here", "Goals", "Key decisions", "Lessons")


@dataclass(frozen=True, slots=True)
class Problem:
    """One problem found in a checkpoint or an edit, phrased so a small model can act on it.

    `code` is "<part>.<what>", e.g. "mind.heading_missing", "memo.text_changed", "scene.too_short".
    """

    code: str
    message: str

    @property
    def part(self) -> str:
        """Which part of the checkpoint the problem is in ("mind", "memo", "scene", "edit", ...)."""
        return self.code.split(".", 1)[0]


@dataclass(frozen=True, slots=True)
class CheckpointDraft:
    """The three parts of a checkpoint (C2): the mind (edited), the memo (ticked), the scene (rewritten)."""

    mind: str
    memo: tuple[MemoItem, ...]
    scene: str

    def memo_dicts(self) -> list[dict[str, Any]]:
        return [item.to_dict() for item in self.memo]


Checkpoint = CheckpointDraft
