"""The five structured questions: each a small text (from `avibe.prompts`) and a JSON schema.

API:
    QUESTIONS: dict[str, Callable[[Work], Question | None]]    part -> its question (None: nothing to ask)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from avibe.checkpoint.mind import mission_lines
from avibe.checkpoint.structured.schemas import (
    array,
    object_schema,
    room_chars,
    scene_limits,
    sized_array,
    text,
)
from avibe.checkpoint.structured.work import (
    ENTRY_CHARS,
    GATE,
    MAX_NEW,
    MAX_NEW_MISSION,
    PREVIEW_CHARS,
    SCENE_MIN_CHARS_PER_PART,
    WORKSTREAM_STATUSES,
    Question,
    Work,
    next_id,
    one_line,
    workstream_lines,
)
from avibe.prompts import render


def _memo_question(work: Work) -> Question | None:
    """N1-N4: which user messages stay word for word (the answer only names numbers)."""
    if not work.candidates:
        return None
    lines = "\n".join(
        f"#{c.label}{' (kept)' if c.kept else ''}: {one_line(c.text, PREVIEW_CHARS)}" for c in work.candidates
    )
    seqs = [c.label for c in work.candidates]  # 12 for a message, "12.3" for one of its sentences (N5)
    # maxItems: the grammar cannot enforce uniqueItems, and a small model repeats numbers without end
    keep = {
        "type": "array",
        "items": {"enum": seqs}
        if any(isinstance(s, str) for s in seqs)
        else {"type": "integer", "enum": seqs},
        "uniqueItems": True,
        "maxItems": len(seqs),
    }
    return Question("memo", render("q_memo", lines=lines), object_schema({"keep": keep}))


def _mission_question(work: Work) -> Question:
    """M4: the mission, which changes only when the user changed it (behind the GATE flag)."""
    current = mission_lines(work.mind)
    ids = list(current)
    first_new = next_id(ids)
    targets = [*ids, *(f"M{first_new + k}" for k in range(MAX_NEW_MISSION))]
    statuses = ["active", "done", "withdrawn", *(f"replaced by {t}" for t in targets)]
    properties: dict[str, Any] = {"new": array(text(), MAX_NEW_MISSION)}
    rule = render("q_mission_first_rule").strip()
    if ids:
        change = object_schema(
            {"id": {"type": "string", "enum": ids}, "status": {"type": "string", "enum": statuses}}
        )
        properties = {GATE: {"type": "boolean"}, **properties, "status": array(change, len(ids))}
        rule = render("q_mission_change_rule", gate=GATE).strip()
    listing = "\n".join(current.values()) or "(none yet)"
    return Question("mission", render("q_mission", missions=listing, rule=rule), object_schema(properties))


def _workstreams_question(work: Work) -> Question:
    """M1, M5: the workstreams that changed and the new ones."""
    current = workstream_lines(work.mind)
    lines = "\n".join(line for line, _ in current.values())
    chars = min(ENTRY_CHARS, room_chars(work, "Goals", len(current) + MAX_NEW, replaced=lines))
    item = object_schema(
        {
            "id": {"type": "string", "enum": [*current, "new"]},
            "status": {"type": "string", "enum": list(WORKSTREAM_STATUSES)},
            "text": text(max(chars, 1)),
        }
    )
    listing = "\n".join(line for line, _ in current.values()) or "(none yet)"
    schema = object_schema({"workstreams": array(item, len(current) + MAX_NEW)})
    return Question("workstreams", render("q_workstreams", workstreams=listing), schema)


def _notes_question(work: Work) -> Question:
    """I am here, key decisions, lessons: only what is new, each list sized to its section's cap."""
    here = min(ENTRY_CHARS, room_chars(work, "I am here", MAX_NEW))
    decided = min(160, room_chars(work, "Key decisions", MAX_NEW) // 2)
    learned = min(160, room_chars(work, "Lessons", MAX_NEW))
    decision = object_schema({"decision": text(decided), "reason": text(decided)})
    schema = object_schema(
        {
            "i_am_here": sized_array(text(here), here),
            "decisions": sized_array(decision, decided * 2),
            "lessons": sized_array(text(learned), learned),
        }
    )
    return Question("notes", render("q_notes"), schema)


def _scene_question(work: Work) -> Question:
    """S1-S6: the six scene parts, each sized to the window (V1's minimum through minLength)."""
    parts = {name: text(limit) for name, limit in scene_limits(work.budgets.window).items()}
    for name, least in SCENE_MIN_CHARS_PER_PART.items():
        parts[name]["minLength"] = least
    schema = object_schema(parts)
    return Question("scene", render("q_scene"), schema)


QUESTIONS: Final[dict[str, Callable[[Work], Question | None]]] = {
    "memo": _memo_question,
    "mission": _mission_question,
    "workstreams": _workstreams_question,
    "notes": _notes_question,
    "scene": _scene_question,
}
