"""The structured answers applied by the harness: ticks, mind edits and a rendered scene - never the
model's own text for the memo (N4, N7), never a rewrite of the mind (M2, M3).

API:
    APPLY: dict[str, Callable[[Work, Mapping[str, Any]], None]]   part -> how its parsed answer applies
    ensure_mission(work) -> None     a mission entry from the record when the model gave none (M4, P1)
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Final

from avibe.checkpoint.facts import HARNESS_MARK
from avibe.checkpoint.memo import says_nothing_that_stays
from avibe.checkpoint.memo.asked import ASKED_FRAME
from avibe.checkpoint.mind import MISSION_HEADING, PER_REASON, WORKSTREAMS_HEADING, mission_lines
from avibe.checkpoint.scene import SCENE_LABELS, SCENE_MIN_CHARS, SceneParts, render_scene, scene_blocks
from avibe.checkpoint.structured.edits import append_under, edit, merge_entries
from avibe.checkpoint.structured.schemas import room_chars, scene_limits
from avibe.checkpoint.structured.work import (
    ENTRY_CHARS,
    FILLER,
    GATE,
    MAX_NEW,
    MAX_NEW_MISSION,
    MIN_ENTRY_CHARS,
    MODEL_SCENE_PARTS,
    SCENE_MIN_CHARS_PER_PART,
    SOURCE,
    WORKSTREAM_STATUSES,
    Work,
    clean,
    entry_text,
    is_filler,
    next_id,
    norm,
    one_line,
    strings,
    workstream_lines,
)

_MISSION_STATUS = re.compile(r"^([-*+][ \t]+\[M\d+\][ \t]*)(?:\([^)\n]*\))?[ \t]*")


# ---- memo (N1-N4) -----------------------------------------------------------------------------------


def _apply_memo(work: Work, data: Mapping[str, Any]) -> None:
    keep = data.get("keep")
    if not isinstance(keep, list):
        work.problem("memo", 'The answer needs "keep": a list of message numbers.')
        return
    known = {c.label for c in work.candidates}
    ticked = {n for n in keep if type(n) in (int, str) and n in known}
    dropped = [repr(n) for n in keep if not (type(n) in (int, str) and n in known)]
    if dropped:  # the grammar forbids these; a model without one may still name them
        work.notes.append(f"memo answer named numbers that are not candidates, ignored: {', '.join(dropped)}")
    work.ticked = frozenset(ticked)
    gate = data.get(GATE)
    work.mission_gate = gate if isinstance(gate, bool) else None  # not given: the mission question decides


# ---- mission (M4) -----------------------------------------------------------------------------------


def _status_ok(status: Any, targets: Sequence[str]) -> bool:
    if status in ("active", "done", "withdrawn"):
        return True
    return isinstance(status, str) and status.startswith("replaced by ") and status[12:] in targets


def _with_status(line: str, status: str, source: int | None, existing: Collection[str]) -> str:
    """The line with its new status. Done, withdrawn or replaced by an entry already there names the user's
    message it comes from ("(per #N)"), which the harness's M4 check wants (checkpoint/mind.py
    guard_new_missions); replaced by a new entry needs none: the new entry says "(from #N)"."""
    match = _MISSION_STATUS.match(line)
    if match is None:
        return line
    by_new = status.startswith("replaced by ") and status[12:] not in existing
    per = f"(per #{source}) " if source is not None and status != "active" and not by_new else ""
    rest = PER_REASON.sub("", line[match.end() :], count=1)  # the reason of its previous status goes with it
    return f"{match.group(1)}({status}) {per}{rest}"


def _apply_mission(work: Work, data: Mapping[str, Any]) -> None:
    current = mission_lines(work.mind)
    if current and data.get(GATE) is not True:  # M4: the mission changes only when the user changed it
        if data.get("new") or data.get("status"):
            work.notes.append(f"mission answer ignored: {GATE} was not true")
        return
    first_new = next_id(list(current))
    known = {norm(line.split(")", 1)[-1]) for line in current.values()}
    new = [t for t in strings(work, data.get("new"))[:MAX_NEW_MISSION] if norm(t) not in known]
    source = data.get(SOURCE)
    cited = source if type(source) is int and source in work.since else None
    if current and new:  # M4: a change of the mission names the user's message it comes from
        if cited is None:
            work.notes.append(
                f"new mission entries dropped (M4): {SOURCE} {source!r} is not a user message since the "
                f"last checkpoint: {new!r}"
            )
            new = []
        else:
            new = [f"(from #{source}) {text}" for text in new]  # first: a cut to the cap keeps it
    targets = [*current, *(f"M{first_new + k}" for k in range(len(new)))]
    changes = data.get("status", [])
    for change in changes if isinstance(changes, list) else []:
        mid, status = (change.get("id"), change.get("status")) if isinstance(change, dict) else (None, None)
        if not isinstance(mid, str) or mid not in current or not _status_ok(status, targets):
            work.notes.append(f"mission status change ignored (unknown id or status): {change!r}")
            continue
        line = current[str(mid)]
        edit(work, "mission", line, _with_status(line, str(status), cited, current))
        current = mission_lines(work.mind)  # the same id named again edits the line as it is now
    entries = [f"- [M{first_new + k}] (active) {text}" for k, text in enumerate(new)]
    append_under(work, "mission", MISSION_HEADING, entries)


def ensure_mission(work: Work) -> None:
    """A mind must never leave a checkpoint without a mission (M4, P1). When the model gave none - a
    small model's answer is often only an echo of the question, dropped - the harness writes one from
    the stored record: the earliest user message being moved out, quoted and marked as such (the words
    are the user's, copied, never the model's)."""
    if mission_lines(work.mind) or not work.candidates:
        return
    first = min(work.candidates, key=lambda c: c.seq)
    room = max(room_chars(work, "Goals", 1), MIN_ENTRY_CHARS * 2)
    quoted = one_line(first.text, min(room, ENTRY_CHARS))
    line = f'- [M1] (active) The user\'s request (message #{first.seq}): "{quoted}"'
    if len(quoted) < len(" ".join(first.text.split())):  # L3: cut, with a pointer to the whole message
        line += f" [... cut; full text: message #{first.seq} in the record]"
    append_under(work, "mission", MISSION_HEADING, [line])
    work.notes.append(f"no mission given: M1 written by the harness from message #{first.seq}")


# ---- workstreams (M1, M5) ---------------------------------------------------------------------------


def _apply_workstreams(work: Work, data: Mapping[str, Any]) -> None:
    items = data.get("workstreams")
    if not isinstance(items, list):
        work.problem("workstreams", 'The answer needs "workstreams": a list (it may be empty).')
        return
    current = workstream_lines(work.mind)
    next_number = next_id(list(current))
    added: list[str] = []
    new_texts: set[str] = set()  # normalised: the 0.5B wrote the same new one three times
    for item in items:
        wid, status = (item.get("id"), item.get("status")) if isinstance(item, dict) else (None, None)
        if (
            status not in WORKSTREAM_STATUSES
            or not isinstance(wid, str)
            or (wid != "new" and wid not in current)
        ):
            work.notes.append(f"workstream change ignored (unknown id or status): {item!r}")
            continue
        text = entry_text(work, item.get("text", ""))
        if wid == "new" and norm(text) in new_texts | {norm(t) for _, t in current.values()}:
            work.notes.append(f"new workstream repeats an existing one, ignored: {text!r}")
            continue
        if wid == "new" and text and len(added) < MAX_NEW:
            added.append(f"- [W{next_number}] ({status}) {text}")
            new_texts.add(norm(text))
            next_number += 1
        elif wid in current:
            line, old_text = current[str(wid)]
            edit(work, "workstreams", line, f"- [{wid}] ({status}) {text or old_text}")
            current = workstream_lines(work.mind)  # the same id named again edits the line as it is now
    append_under(work, "workstreams", WORKSTREAMS_HEADING, added)
    retire = data.get("retire")
    if isinstance(retire, list) and retire:
        merge_entries(
            work, "workstreams", {"retire": [r for r in retire if isinstance(r, str) and r[:1] == "W"]}
        )


def _apply_room(work: Work, data: Mapping[str, Any]) -> None:
    """M3: merge and retire what the model chose, then add the entries that did not fit (again left out,
    with a note, when there is still no room)."""
    pending, work.pending = work.pending, {}
    merge_entries(work, "room", data)
    headings = {"Goals": WORKSTREAMS_HEADING}
    for section, lines in pending.items():
        append_under(work, "room", headings.get(section, f"## {section}"), lines)


# ---- notes: I am here, key decisions, lessons ----------------------------------------------------------


def _decisions(work: Work, value: Any) -> list[str]:
    lines = []
    for item in value[:MAX_NEW] if isinstance(value, list) else []:
        if isinstance(item, dict) and isinstance(item.get("decision"), str):
            decision = entry_text(work, item["decision"], 160)
            reason = clean(work, item.get("reason", ""), 160)
            if decision:
                lines.append(f"- {decision}" + (f" - because {reason}" if reason else ""))
    return lines


def _apply_notes(work: Work, data: Mapping[str, Any]) -> None:
    merge_entries(work, "notes", data)  # M3: merges and retirements first, so new entries find room
    append_under(work, "notes", "## I am here", [f"- {t}" for t in strings(work, data.get("i_am_here"))])
    append_under(work, "notes", "## Key decisions", _decisions(work, data.get("decisions")))
    append_under(work, "notes", "## Lessons", [f"- {t}" for t in strings(work, data.get("lessons"), 160)])


# ---- scene (S1-S6) ----------------------------------------------------------------------------------

SCENE_COMPLETED: Final = "scene too short"  # the note's start when the harness completed a scene part
SCENE_DROPPED: Final = "scene part dropped"  # the note's start when a part was a copy or names only
# A part this long (in words) found whole in the tool output is a copy, not a state; shorter ones - a
# path, a test name - are the references a scene should name.
COPY_MIN_WORDS: Final = 6
# ... or a part whose longest run of words found in the tool output covers this share of it (a copied
# line with a few words of the model's own before it: "Working on collect_manifest records, limit ...").
COPY_SHARE: Final = 0.8
# A part needs this many plain words (letters only: not a code name, path or number) to say anything: the
# 0.5B's late_rule scene was "collect_window, emit_batch, load_receipt, ..." and "Pitfalls: The 90".
MIN_PLAIN_WORDS: Final = 2
_PLAIN_WORD = re.compile(r"[A-Za-z]{2,}")
_STATUSES: Final = frozenset(WORKSTREAM_STATUSES) | {"in progress"}  # "none, blocked, pending": a list
# Where a part's text comes from is the harness's to say: the 0.5B copied its previous scene into one part
# ("Next step: ..., pitfalls: none, exact references: (from Avibe's own state) ran ..."), which would make
# its own words read as the record's or the harness's. The 1.5B also made a memo line's frame its next step
# ("my question before it, in #13: \"1. Start implementing ...?\""): a question the user had answered.
FROM_MIND: Final = "from the mind"
FROM_RECORD: Final = "from the record"
_SCENE_FORMAT = re.compile(
    "|".join(
        [rf"\b{re.escape(label)}\s*:" for label in SCENE_LABELS if label != "Progress"]  # "in progress:"
        + [re.escape(mark) for mark in (HARNESS_MARK, f"({FROM_MIND})", f"({FROM_RECORD})", ASKED_FRAME)]
    ),
    re.IGNORECASE,
)


def _apply_scene(work: Work, data: Mapping[str, Any]) -> None:
    limits = scene_limits(work.budgets.window)
    values = {
        name: _scene_part(work, name, data.get(name, ""), limit) if name in MODEL_SCENE_PARTS else ""
        for name, limit in limits.items()
    }  # the other parts are the harness's (S3, S6)
    values = _copied_or_repeated(work, values)
    scene = render_scene(SceneParts(**values))
    said_nothing = any(not values[part] for part in SCENE_MIN_CHARS_PER_PART)
    if said_nothing or len(scene_blocks(scene)[0].strip()) < SCENE_MIN_CHARS:  # V1
        scene = render_scene(SceneParts(**_completed_scene(work, values, limits)))
    work.scene = scene


def _scene_part(work: Work, part: str, value: Any, limit: int) -> str:
    """A scene part as `clean` leaves it, with a note (SCENE_DROPPED) when it drops what the model wrote:
    padding made of placeholders ("none yet, none, none, ..."; one "none" alone is the answer the question
    asks for where there is nothing) or an echo of the questions."""
    text = clean(work, value, limit)
    written = " ".join(str(value).split())[:limit]
    if text or not norm(written) or norm(written) in FILLER:
        return text
    why = "filler" if is_filler(written) else "echoes the question"
    work.notes.append(f"{SCENE_DROPPED} ({why}): {part}")
    return ""


def _copied_or_repeated(work: Work, values: dict[str, str]) -> dict[str, str]:
    """The scene parts with copies dropped: a part that is a line of tool output (the 0.5B's "current
    step" on late_rule was `collect_manifest records, limit: int = 431, ...`, and its progress and
    pitfalls the same line), one that repeats an earlier part word for word, or one of names and numbers
    only. None says where the work stands, and each crowds out what would; `_completed_scene` then
    completes the part from what the harness holds. Each drop is noted (SCENE_DROPPED)."""
    kept: dict[str, str] = {}
    seen: dict[str, str] = {}  # an earlier part's words -> its name
    for part, text in values.items():
        words = norm(text)
        why = _why_not_a_state(work, text, words, seen) if part in MODEL_SCENE_PARTS and words else ""
        if why:
            work.notes.append(f"{SCENE_DROPPED} ({why}): {part}")
            kept[part] = ""
            continue
        seen.setdefault(words, part)
        kept[part] = text
    return kept


def _why_not_a_state(work: Work, text: str, words: str, seen: Mapping[str, str]) -> str:
    if words in seen:
        return f"repeats {seen[words]}"
    if _from_tool_output(work, words):
        return "from tool output"
    if _SCENE_FORMAT.search(text):
        return "a scene's labels or origin marks copied"
    plain = [w for w in text.split() if _PLAIN_WORD.fullmatch(w.strip(".,;:!?\"'()[]"))]
    if len(plain) < MIN_PLAIN_WORDS or is_filler(text, also=_STATUSES):
        return "names or numbers only"
    return ""


def _from_tool_output(work: Work, words: str) -> bool:
    """Whether most of a part's words are one run of the tool output's words (COPY_MIN_WORDS, COPY_SHARE)."""
    tokens = words.split()
    if len(tokens) < COPY_MIN_WORDS or not work.tool_output:
        return False
    haystack, best = f" {work.tool_output} ", 0
    for start in range(len(tokens)):
        end = start + best + 1  # only a run longer than the best so far matters
        while end <= len(tokens) and f" {' '.join(tokens[start:end])} " in haystack:
            best, end = end - start, end + 1
    return best >= COPY_MIN_WORDS and best >= COPY_SHARE * len(tokens)


def _completed_scene(work: Work, values: dict[str, str], limits: Mapping[str, int]) -> dict[str, str]:
    """Scene parts the model left empty - most often a small model's echo or key names, dropped by
     `clean` - or a scene too short for V1, completed from what the harness holds, never invented: the
     mind's workstream (or mission) lines as current step and progress (S1, S2), and the latest user
     message moving out, quoted, as the next step (S4). Each addition says where it came from and is
     noted (SCENE_COMPLETED; the eval counts such checkpoints apart from first-pass valid ones). Done on
     the first answer: asking again cost the 0.5B a repair call (~12 s) that echoed the same key names
    ."""
    streams = [line.strip("-* ").strip() for line, _ in workstream_lines(work.mind).values()]
    missions = [line.strip("-* ").strip() for line in mission_lines(work.mind).values()]
    latest = _latest_request(work)
    quote = quote_user_words(latest[1], max(limits["next_step"] - 60, MIN_ENTRY_CHARS)) if latest else ""
    additions = {
        "current_step": (FROM_MIND, "; ".join(streams[:1] or missions[:1])),
        "progress": (FROM_MIND, "; ".join(streams)),
        "next_step": (FROM_RECORD, f'the user\'s message #{latest[0]}: "{quote}"' if latest else ""),
    }
    completed = dict(values)
    for part, (origin, extra) in additions.items():
        if extra and len(completed[part]) < SCENE_MIN_CHARS_PER_PART[part]:
            text = f"({origin}) {extra}"
            completed[part] = one_line(
                f"{completed[part]}; {text}" if completed[part] else text, limits[part]
            )
            work.notes.append(f"{SCENE_COMPLETED}: {part} completed {origin}")
    return completed


QUOTE_HEAD_SHARE: Final = 0.4  # of a cut quote's room: its opening; the rest keeps its end


def quote_user_words(text: str, limit: int) -> str:
    """The user's words on one line within `limit`. A longer text keeps its opening and its end, cut at
    words and joined by " ... " (inside a word only where one word outgrows the room): a correction's value
    is at its end (the eval's "I meant the max_connections of the marrowgate-indexer pool must be 16, not
    48" had shown as "... pool must...", and before that as "must be 1")."""
    whole = one_line(text, len(text) + 1)
    if len(whole) <= limit:
        return whole
    room = max(limit - len(" ... "), 2)
    head = whole[: max(int(room * QUOTE_HEAD_SHARE), 1) + 1]
    head = head[: head.rfind(" ")] if " " in head.strip() else head[:-1]
    tail = whole[len(whole) - (room - len(head)) - 1 :]
    tail = tail[tail.find(" ") + 1 :] if " " in tail.strip() else tail[1:]
    return f"{head.rstrip(' ,;:')} ... {tail.lstrip()}"


def _latest_request(work: Work) -> tuple[int, str] | None:
    """The user's latest request the scene may quote (S4): the newest user message, moving out now or
    still in the conversation, that says something that stays (words, and not only "Thanks. What's
    next?", N3); else the newest at all. The newest moving out was quoted even when a later message
    still in the conversation had corrected it: the eval's self_correction scene said "set it to 48"
    under the user's "I meant 16, not 48", and the 0.5B answered 48. And on the 1.5B a real session's
    first checkpoint, no user message moving out, failed V1 at 193 characters after a repair."""
    said = {c.seq: c.text for c in work.candidates} | dict(work.said)
    telling = {
        seq: text
        for seq, text in said.items()
        if len(text.strip()) >= MIN_ENTRY_CHARS and not says_nothing_that_stays(text)
    }
    return max((telling or said).items()) if said else None


APPLY: Final[dict[str, Callable[[Work, Mapping[str, Any]], None]]] = {
    "memo": _apply_memo,
    "mission": _apply_mission,
    "workstreams": _apply_workstreams,
    "notes": _apply_notes,
    "room": _apply_room,
    "scene": _apply_scene,
}
