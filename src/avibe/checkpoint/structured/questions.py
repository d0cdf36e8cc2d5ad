"""The structured questions: each a small text (from `avibe.prompts`) and a JSON schema.

A question whose sections cannot have changed since the last checkpoint is not asked (None), and its
sections stay exactly as an answer of "no change" would leave them (each question is
a model call that re-reads the conversation): the memo when no user message moves out, the mission when
the user did not change it, the notes when nothing since is worded as a rule, decision or lesson.

API:
    QUESTIONS: dict[str, Callable[[Work], Question | None]]    part -> its question (None: nothing to ask)
    notes_due(first, user_texts, other_texts) -> bool           whether the notes question is asked
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Final

from avibe.checkpoint.memo import Candidate, reads_as_rule
from avibe.checkpoint.mind import mission_lines
from avibe.checkpoint.structured.edits import entry_labels
from avibe.checkpoint.structured.schemas import (
    array,
    object_schema,
    room_chars,
    scene_limits,
    sized_array,
    text,
)
from avibe.checkpoint.structured.work import (
    DECISION_OR_LESSON,
    ENTRY_CHARS,
    GATE,
    KEPT_PREVIEW_CHARS,
    MAX_NEW,
    MAX_NEW_MISSION,
    MIN_ENTRY_CHARS,
    MODEL_SCENE_PARTS,
    NOTES_MAX_NEW,
    PREVIEW_CHARS,
    SCENE_MIN_CHARS_PER_PART,
    SOURCE,
    WORKSTREAM_STATUSES,
    Question,
    Work,
    next_id,
    one_line,
    workstream_lines,
)
from avibe.prompts import fill, render

NONE_YET: Final = "(none yet)"  # a listing with no entries


def _new_user_messages(work: Work) -> bool:
    """Whether a user message moves out now (candidates not kept from an earlier checkpoint)."""
    return any(not c.kept for c in work.candidates)


def _memo_line(candidate: Candidate) -> str:
    """One checklist line; a line kept last time shows less of itself (it was read whole then)."""
    if candidate.kept:
        return f"#{candidate.label} (kept): {one_line(candidate.text, KEPT_PREVIEW_CHARS)}"
    return f"#{candidate.label}: {one_line(candidate.text, PREVIEW_CHARS)}"


def _memo_question(work: Work) -> Question | None:
    """N1-N4: which user messages stay word for word (the answer only names numbers). Not asked when no
    user message moves out now: the memo then stays as it was (nothing the user said since can have
    withdrawn or superseded an entry, N3), and the question - every kept entry listed again - is saved.

    M4: with a mission already in the mind, the same question asks whether these messages changed it
    (GATE); only a "true" brings the mission question, so a checkpoint where the user did not touch the
    purpose asks one question fewer."""
    if not _new_user_messages(work):
        return None
    lines = "\n".join(_memo_line(c) for c in work.candidates)
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
    properties: dict[str, Any] = {"keep": keep}
    gate = gate_wording = also = ""
    missions = mission_lines(work.mind)
    if missions:
        properties[GATE] = {"type": "boolean"}
        listing = "\n".join(one_line(line, ENTRY_CHARS) for line in missions.values())
        gate = "\n" + render("q_memo_gate", missions=listing, gate=GATE).strip()
        gate_wording = "\n" + render("q_memo_gate", missions="", gate=GATE).strip()
        also = f', "{GATE}": true or false'
    text = render("q_memo", lines=lines, gate=gate, also=also)
    wording = render("q_memo", lines="", gate=gate_wording, also=also)
    return Question("memo", text, object_schema(properties), wording)


def _mission_question(work: Work) -> Question | None:
    """M4: the mission, which changes only when the user changed it (behind the GATE flag). Not asked
    when there is a mission and no user message moves out now (nothing that may change it is leaving), or
    when the memo question's answer said the user did not change it."""
    current = mission_lines(work.mind)
    if current and (not _new_user_messages(work) or work.mission_gate is False):
        return None
    ids = list(current)
    first_new = next_id(ids)
    targets = [*ids, *(f"M{first_new + k}" for k in range(MAX_NEW_MISSION))]
    statuses = ["active", "done", "withdrawn", *(f"replaced by {t}" for t in targets)]
    # sized to the room left in Goals (a longer entry is cut to fit anyway, M6): never below two short lines
    room = max(min(ENTRY_CHARS, room_chars(work, "Goals", 1)), MIN_ENTRY_CHARS * 2)
    properties: dict[str, Any] = {"new": array(text(room), MAX_NEW_MISSION)}
    rule = render("q_mission_first_rule").strip()
    if ids:
        change = object_schema(
            {"id": {"type": "string", "enum": ids}, "status": {"type": "string", "enum": statuses}}
        )
        # M4: a new entry names the user's message that changed the mission - the grammar offers only the
        # user's messages since the last checkpoint; with none, no new entry is offered at all
        cite = {SOURCE: {"type": "integer", "enum": sorted(work.since)}} if work.since else {}
        new = properties if work.since else {}
        properties = {GATE: {"type": "boolean"}, **new, **cite, "status": array(change, len(ids))}
        rule = render("q_mission_change_rule", gate=GATE, source=SOURCE).strip()
    listing = "\n".join(current.values()) or NONE_YET
    asked = render("q_mission", missions=listing, rule=rule)
    wording = render("q_mission", missions=_own(listing), rule=rule)
    return Question("mission", asked, object_schema(properties), wording)


def _workstreams_question(work: Work) -> Question:
    """M1, M5: the workstreams that changed, the new ones, and those to retire (M3)."""
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
    listing = "\n".join(line for line, _ in current.values()) or NONE_YET
    retire = {"retire": _label_list(list(current))} if current else {}  # no ids: no key to read
    schema = object_schema({"workstreams": array(item, len(current) + MAX_NEW), **retire})
    wording = render("q_workstreams", workstreams=_own(listing))
    return Question("workstreams", render("q_workstreams", workstreams=listing), schema, wording)


def _label_list(labels: list[str]) -> dict[str, Any]:
    if not labels:
        return {"type": "array", "items": {"type": "string"}, "maxItems": 0}
    return {
        "type": "array",
        "items": {"type": "string", "enum": labels},
        "uniqueItems": True,
        "maxItems": len(labels),
    }


def _merge_schema(labels: list[str]) -> dict[str, Any]:
    """M3: {"merge": [{"ids": [...], "text": ...}], "retire": [...]} over the given entry labels; nothing
    without labels (the keys could only be empty lists, and every structured call reads its schema)."""
    if not labels:
        return {}
    merge = object_schema({"ids": _label_list(labels), "text": text()})
    return {"merge": array(merge, MAX_NEW), "retire": _label_list(labels)}


def _listing(labels: dict[str, tuple[str, str]]) -> str:
    lines = [
        f"{label}: {one_line(line.lstrip('-*+ '), PREVIEW_CHARS)}" for label, (_, line) in labels.items()
    ]
    return "\n".join(lines) or NONE_YET


def _own(listing: str) -> str:
    """A listing as it stands in a question's `wording`: the harness's placeholder is its own words; the
    mind's entries and the user's messages are not (an answer may name them)."""
    return listing if listing == NONE_YET else ""


def notes_due(first: bool, user_texts: Iterable[str], other_texts: Iterable[str]) -> bool:
    """Whether the notes question is worth a call: always at the first checkpoint (I am here: who the work
    is for); later only when a message since the last checkpoint can add to I am here, Key decisions or
    Lessons - a user's message worded as a rule, limit or agreement (N2's wording), or any message (the
    user's, Vibey's, another source's; not tool output) worded as a decision or a lesson
    (DECISION_OR_LESSON). Not asked, the sections stay as an empty answer leaves them (M2: only what
    changed is edited)."""
    if first:
        return True
    users = list(user_texts)
    if any(reads_as_rule(text) for text in users):
        return True
    return any(DECISION_OR_LESSON.search(text) for text in (*users, *other_texts))


def _notes_question(work: Work) -> Question | None:
    """I am here, key decisions, lessons: only what is new, each list sized to its section's cap; and
    which entries merge, get a new text, or retire (M3). Not asked when nothing since the last checkpoint
    can add to them (`notes_due`)."""
    if not work.notes_due:
        return None
    labels = {k: v for k, v in entry_labels(work.mind).items() if v[0] != "Goals"}
    here = min(ENTRY_CHARS, room_chars(work, "I am here", MAX_NEW))
    decided = min(160, room_chars(work, "Key decisions", MAX_NEW) // 2)
    learned = min(160, room_chars(work, "Lessons", MAX_NEW))
    decision = object_schema({"decision": text(decided), "reason": text(decided)})
    schema = object_schema(
        {
            "i_am_here": sized_array(text(here), here, NOTES_MAX_NEW),
            "decisions": sized_array(decision, decided * 2, NOTES_MAX_NEW),
            "lessons": sized_array(text(learned), learned, NOTES_MAX_NEW),
            **_merge_schema(list(labels)),
        }
    )
    edits = fill("q_notes_edits", entries=_listing(labels)) if labels else ""
    own = fill("q_notes_edits", entries="") if labels else ""
    return Question("notes", render("q_notes", edits=edits), schema, render("q_notes", edits=own))


def _room_question(work: Work) -> Question | None:
    """M3: a section at its cap left new entries out; which entries merge or retire so they fit?"""
    if not work.pending:
        return None
    labels = {k: v for k, v in entry_labels(work.mind).items() if v[0] in work.pending}
    if not labels:
        return None
    full = "\n".join(
        f"'## {section}': " + "; ".join(one_line(line.lstrip("-*+ "), PREVIEW_CHARS) for line in lines)
        for section, lines in work.pending.items()
    )
    schema = object_schema(_merge_schema(list(labels)))
    asked = render("q_room", full=full, entries=_listing(labels))
    return Question("room", asked, schema, render("q_room", full="", entries=""))


def _scene_question(work: Work) -> Question:
    """S1, S2, S4, S5: the model's scene parts, each sized to the window (V1's minimum through minLength);
    S3 and S6 come from the harness's own state (MODEL_SCENE_PARTS)."""
    limits = scene_limits(work.budgets.window)
    parts = {name: text(limits[name]) for name in MODEL_SCENE_PARTS}
    for name, least in SCENE_MIN_CHARS_PER_PART.items():
        parts[name]["minLength"] = least
    schema = object_schema(parts)
    return Question("scene", render("q_scene"), schema)


QUESTIONS: Final[dict[str, Callable[[Work], Question | None]]] = {
    "memo": _memo_question,
    "mission": _mission_question,
    "workstreams": _workstreams_question,
    "notes": _notes_question,
    "room": _room_question,
    "scene": _scene_question,
}
