"""The structured checkpoint for small local models: a few small JSON questions, answered under a grammar.

A 0.5B model asked for a free-form checkpoint echoes the instructions and ticks whatever it can count. So
each question here is small and comes with a JSON schema (llama.cpp turns it into a grammar), and the
harness - not the model - turns the answers into EDITS on the mind (`apply_edit`, never a rewrite), ticks
on the checklist, and a scene rendered by `render_scene`. The memo's text is never taken from an answer:
an answer only names message numbers, and `build_memo` copies the text from the record (N4, N7).

API (used by turn.py):
    PARTS = ("memo", "mission", "workstreams", "notes", "scene")
    Question(part, text, schema)
    Work.start(previous_mind, candidates, budgets) -> Work      .reset(parts, previous_mind)
    question(part, work) -> Question | None                      None: nothing to ask (no memo candidates)
    apply_answer(part, work, text) -> None                        problems and notes land on `work`
    parts_to_reask(problems, work) -> tuple[str, ...]
    ticked_checklist(candidates, ticked) -> str
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from avibe.checkpoint.budgets import Budgets
from avibe.checkpoint.memo import Candidate, render_checklist
from avibe.checkpoint.mind import (
    MISSION_HEADING,
    WORKSTREAMS_HEADING,
    apply_edit,
    mission_lines,
    section_at,
    section_texts,
    strip_guidance,
)
from avibe.checkpoint.model import Problem
from avibe.checkpoint.scene import SCENE_MIN_CHARS, SceneParts, render_scene, scene_blocks
from avibe.context.prompts import render
from avibe.ports import TokenCounter

PARTS: Final[tuple[str, ...]] = ("memo", "mission", "workstreams", "notes", "scene")
MIND_PARTS: Final[tuple[str, ...]] = ("mission", "workstreams", "notes")
PREVIEW_CHARS: Final = 100
MAX_NEW: Final = 3  # new entries per list and question: a small model answers better with little room
GATE: Final = "user_changed_mission"
FIRST_MISSION_RULE: Final = (
    "There is no mission entry yet: write the purpose the user gave, in your own words."
)
CHANGE_MISSION_RULE: Final = (
    'Set "user_changed_mission" to true only if the user explicitly set, changed, finished or withdrew '
    "the purpose in the messages above; otherwise false, and nothing else changes."
)
MAX_NEW_MISSION: Final = 1  # the user changes the purpose one message at a time; more is a weak model's noise
ENTRY_CHARS: Final = 200
WORKSTREAM_STATUSES: Final = ("active", "done", "blocked", "pending", "waiting")
SCENE_CHARS: Final[dict[str, int]] = {
    "current_step": 300,
    "progress": 400,
    "waiting_for": 300,
    "next_step": 400,
    "pitfalls": 400,
    "exact_references": 400,
}
# Below this window the scene's parts shrink in proportion, to SCENE_FLOOR_CHARS at the least: a small
# model fills whatever room the grammar gives (~700 tokens of scene in a 4k window crowds out the work it
# describes, and generating it costs a minute on two cores). Exact references keep more room (S6).
SCENE_REFERENCE_WINDOW: Final = 32_768
SCENE_FLOOR_CHARS: Final[dict[str, int]] = {
    "current_step": 160,
    "progress": 160,
    "waiting_for": 160,
    "next_step": 200,
    "pitfalls": 200,
    "exact_references": 300,
}
# Least characters per scene part, enforced by the grammar: the labels and "none" in the other parts
# take ~100 characters, so these make even a terse small model's block reach SCENE_MIN_CHARS (V1).
SCENE_MIN_CHARS_PER_PART: Final[dict[str, int]] = {"current_step": 60, "progress": 20, "next_step": 60}
# Sizing the grammar to the mind's caps: a line's markup ("- " ...) costs about LINE_TOKENS; English text
# runs ~4 characters a token, so CHARS_PER_TOKEN = 3 errs on the safe side; below MIN_ENTRY_CHARS a new
# line could say nothing useful, so none is offered.
LINE_TOKENS: Final = 4
CHARS_PER_TOKEN: Final = 3
MIN_ENTRY_CHARS: Final = 24
LOOSE_MATCH_WORDS: Final = 4  # a repeat cut mid-word is only recognised on lines this long
# What a small model writes when it has nothing to say: placeholders and the schema's own key names.
FILLER: Final = frozenset(
    {"", "none", "n a", "na", "null", "nothing", "todo", "tbd", "text", "id", "status", "new", "keep"}
    | {"i am here", "decisions", "decision", "reason", "lessons", "workstreams", "user changed mission"}
    | {" ".join(name.split("_")) for name in SCENE_CHARS}
)
_WORKSTREAM_ID = re.compile(r"^[-*+][ \t]+\[(W\d+)\][ \t]*(?:\([^)\n]*\))?[ \t]*(.*)$")
_MISSION_STATUS = re.compile(r"^([-*+][ \t]+\[M\d+\][ \t]*)(?:\([^)\n]*\))?[ \t]*")


@dataclass(frozen=True, slots=True)
class Question:
    part: str
    text: str
    schema: dict[str, Any]


@dataclass
class Work:
    """The answers applied so far (mutable; lives inside one checkpoint turn)."""

    mind: str
    candidates: list[Candidate]
    budgets: Budgets
    ticked: frozenset[int]
    scene: str = ""
    problems: dict[str, list[Problem]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    echo: str = ""  # the question being answered, normalised (see `_clean`)
    asked_again: frozenset[str] = frozenset()  # parts being asked a second time (the repair round)
    intro: str = ""  # the turn's request text, normalised: a small model copies it into answers too
    counter: TokenCounter | None = None  # sizes the grammar's length limits to the section caps (M6)

    @classmethod
    def start(
        cls,
        previous_mind: str,
        candidates: Sequence[Candidate],
        budgets: Budgets,
        counter: TokenCounter | None = None,
    ) -> Work:
        ticked = frozenset(c.seq for c in candidates if c.ticked)  # kept from last time until answered
        return cls(
            mind=previous_mind, candidates=list(candidates), budgets=budgets, ticked=ticked, counter=counter
        )

    def all_problems(self) -> list[Problem]:
        return [p for part in PARTS for p in self.problems.get(part, [])]

    def reset(self, parts: Sequence[str], previous_mind: str) -> None:
        """Undo the parts about to be asked again (mind parts restart from the previous mind together)."""
        self.asked_again = self.asked_again | frozenset(parts)
        for part in parts:
            self.problems.pop(part, None)
        if any(p in MIND_PARTS for p in parts):
            self.mind = previous_mind
        if "memo" in parts:
            self.ticked = frozenset(c.seq for c in self.candidates if c.ticked)
        if "scene" in parts:
            self.scene = ""

    def problem(self, part: str, message: str) -> None:
        self.problems.setdefault(part, []).append(Problem(f"answer.{part}", message))


# ---- small helpers ----------------------------------------------------------------------------------


def _norm(text: str) -> str:
    """Text compared loosely: words only, case folded (to spot echoes and repeated entries)."""
    return " ".join(re.sub(r"[\W_]+", " ", text).casefold().split())


def _one_line(value: str, limit: int = ENTRY_CHARS) -> str:
    """Model text made safe for one Markdown line: no line breaks, no comment markers, bounded. A weak
    model's filler - an echoed key name, "...", "none" - becomes "" so it never lands in the mind."""
    text = " ".join(value.replace("<!--", "").replace("-->", "").split())[:limit]
    return "" if _norm(text) in FILLER else text


def _clean(work: Work, value: Any, limit: int = ENTRY_CHARS) -> str:
    """`_one_line`, and "" for a phrase copied from the question itself (a small model echoes the
    instructions: "what you may decide alone" as a decision)."""
    text = _one_line(str(value), limit)
    if text and work.echo and f" {_norm(text)} " in f" {work.echo} ":
        work.notes.append(f"answer copied from the question, ignored: {text!r}")
        return ""
    return text


def _strings(work: Work, value: Any, limit: int = ENTRY_CHARS) -> list[str]:
    if not isinstance(value, list):
        return []
    return [line for v in value[:MAX_NEW] if isinstance(v, str) and (line := _clean(work, v, limit))]


def _array(items: Mapping[str, Any], max_items: int = MAX_NEW) -> dict[str, Any]:
    return {"type": "array", "items": dict(items), "maxItems": max_items}


def _object(properties: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": dict(properties),
        "required": list(properties),
        "additionalProperties": False,
    }


def _text(limit: int = ENTRY_CHARS) -> dict[str, Any]:
    return {"type": "string", "maxLength": limit}


def _room_chars(work: Work, section: str, entries: int, *, replaced: str = "") -> int:
    """The most characters each of `entries` new lines of a mind section may have, so that all of them
    together still fit the section's cap (M6): the grammar then makes an over-cap answer impossible.
    `replaced` is text the answer replaces (lines it rewrites), freed for the new ones."""
    if work.counter is None:
        return ENTRY_CHARS
    body = strip_guidance(section_texts(work.mind).get(section, ""))
    used = work.counter.count(body) - (work.counter.count(replaced) if replaced else 0)
    room = work.budgets.mind_cap(section) - used - LINE_TOKENS * entries
    return max(0, room * CHARS_PER_TOKEN // max(entries, 1))


def _sized_array(item: dict[str, Any], chars: int, max_items: int = MAX_NEW) -> dict[str, Any]:
    """An array of at most `max_items` items, none allowed when there is no room for a useful line."""
    return _array(item, max_items if chars >= MIN_ENTRY_CHARS else 0)


def _section_end(lines: list[str], start: int, heading: str) -> int:
    level3 = heading.startswith("### ")
    for i in range(start + 1, len(lines)):
        if lines[i].startswith("## ") or (level3 and lines[i].startswith("### ")):
            return i
    return len(lines)


def _append_under(work: Work, part: str, heading: str, new_lines: Sequence[str]) -> None:
    """Append lines at the end of a section or subsection, as one `apply_edit` (never a rewrite)."""
    lines = work.mind.split("\n")
    new = _not_repeated(work, lines, new_lines)
    if not new:
        return
    start = next((i for i, line in enumerate(lines) if line.strip() == heading), None)
    if start is None:
        work.problem(part, f"The mind has no '{heading}' line to add entries under.")
        return
    end = _section_end(lines, start, heading)
    last = max(i for i in range(start, end) if lines[i].strip())
    if heading != MISSION_HEADING:  # a mission entry is never dropped (M4): validation and repair see it
        new = _within_cap(work, lines, last, new, section_at(work.mind, start))
        if not new:
            return
    old = "\n".join(lines[start : last + 1])
    _edit(work, part, old, old + "\n" + "\n".join(new))


def _within_cap(work: Work, lines: Sequence[str], last: int, new: list[str], section: str) -> list[str]:
    """The new lines that fit the section's cap (M6), newest left out first, each with a note. The grammar
    sizes answers from an estimate of characters per token; this counts the real tokens, so an answer
    can never push a section over its cap and fail the whole checkpoint on a line of notes."""
    if work.counter is None or not section:
        return new
    cap = work.budgets.mind_cap(section)
    kept = list(new)
    while kept:
        mind = "\n".join([*lines[: last + 1], *kept, *lines[last + 1 :]])
        body = section_texts(strip_guidance(mind)).get(section, "")
        if work.counter.count(body) <= cap:
            break
        work.notes.append(f"left out to keep '## {section}' within its cap of {cap} tokens: {kept.pop()!r}")
    return kept


def _not_repeated(work: Work, lines: Sequence[str], new_lines: Sequence[str]) -> list[str]:
    """New lines that say something new: a line whose words already stand in the mind (or in a line
    added just before it) is a small model's repetition - often the same entry cut shorter - and
    is left out, with a note (M3: memory converges instead of growing)."""
    seen = [f" {_norm(line)} " for line in lines if _norm(line)]
    kept = []
    for line in new_lines:
        words = f" {_norm(line)} "
        # a line cut short by a length limit ends mid-word: match it without its last word boundary
        loose = words.rstrip() if len(words.split()) >= LOOSE_MATCH_WORDS else words
        if words.strip() and any(loose in old for old in seen):
            work.notes.append(f"repeated entry left out: {line.strip()!r}")
            continue
        kept.append(line)
        seen.append(words)
    return kept


def _edit(work: Work, part: str, old: str, new: str) -> None:
    outcome = apply_edit(work.mind, old, new)
    if outcome.applied:
        work.mind = outcome.document
    elif outcome.problem is not None:
        work.problems.setdefault(part, []).append(outcome.problem)


def _parse(work: Work, part: str, text: str) -> dict[str, Any] | None:
    try:
        data = json.loads(text, strict=False)  # grammar-made strings may hold raw newlines or tabs
    except json.JSONDecodeError as exc:
        work.problem(part, f"The answer is not JSON ({exc.msg}). Answer with the JSON object only.")
        return None
    if not isinstance(data, dict):
        work.problem(part, "The answer must be one JSON object.")
        return None
    return data


# ---- memo (N1-N4) -----------------------------------------------------------------------------------


def _memo_question(work: Work) -> Question | None:
    if not work.candidates:
        return None
    lines = "\n".join(
        f"#{c.seq}{' (kept)' if c.kept else ''}: {_one_line(c.text, PREVIEW_CHARS)}" for c in work.candidates
    )
    seqs = [c.seq for c in work.candidates]
    # maxItems: the grammar cannot enforce uniqueItems, and a small model repeats numbers without end
    keep = {
        "type": "array",
        "items": {"type": "integer", "enum": seqs},
        "uniqueItems": True,
        "maxItems": len(seqs),
    }
    return Question("memo", render("q_memo", lines=lines), _object({"keep": keep}))


def _apply_memo(work: Work, data: Mapping[str, Any]) -> None:
    keep = data.get("keep")
    if not isinstance(keep, list):
        work.problem("memo", 'The answer needs "keep": a list of message numbers.')
        return
    known = {c.seq for c in work.candidates}
    ticked = {n for n in keep if type(n) is int and n in known}
    dropped = [repr(n) for n in keep if not (type(n) is int and n in known)]
    if dropped:  # the grammar forbids these; a model without one may still name them
        work.notes.append(f"memo answer named numbers that are not candidates, ignored: {', '.join(dropped)}")
    work.ticked = frozenset(ticked)


# ---- mission (M4) -----------------------------------------------------------------------------------


def _next_id(ids: Sequence[str]) -> int:
    """The number after the highest "M<n>" / "W<n>" id."""
    return max((int(i[1:]) for i in ids if i[1:].isdigit()), default=0) + 1


def _mission_question(work: Work) -> Question:
    current = mission_lines(work.mind)
    ids = list(current)
    first_new = _next_id(ids)
    targets = [*ids, *(f"M{first_new + k}" for k in range(MAX_NEW_MISSION))]
    statuses = ["active", "done", "withdrawn", *(f"replaced by {t}" for t in targets)]
    properties: dict[str, Any] = {"new": _array(_text(), MAX_NEW_MISSION)}
    rule = FIRST_MISSION_RULE
    if ids:
        change = _object(
            {"id": {"type": "string", "enum": ids}, "status": {"type": "string", "enum": statuses}}
        )
        properties = {GATE: {"type": "boolean"}, **properties, "status": _array(change, len(ids))}
        rule = CHANGE_MISSION_RULE
    listing = "\n".join(current.values()) or "(none yet)"
    return Question("mission", render("q_mission", missions=listing, rule=rule), _object(properties))


def _status_ok(status: Any, targets: Sequence[str]) -> bool:
    if status in ("active", "done", "withdrawn"):
        return True
    return isinstance(status, str) and status.startswith("replaced by ") and status[12:] in targets


def _with_status(line: str, status: str) -> str:
    match = _MISSION_STATUS.match(line)
    return line if match is None else f"{match.group(1)}({status}) {line[match.end() :]}"


def _apply_mission(work: Work, data: Mapping[str, Any]) -> None:
    current = mission_lines(work.mind)
    if current and data.get(GATE) is not True:  # M4: the mission changes only when the user changed it
        if data.get("new") or data.get("status"):
            work.notes.append(f"mission answer ignored: {GATE} was not true")
        return
    first_new = _next_id(list(current))
    known = {_norm(line.split(")", 1)[-1]) for line in current.values()}
    new = [t for t in _strings(work, data.get("new"))[:MAX_NEW_MISSION] if _norm(t) not in known]
    targets = [*current, *(f"M{first_new + k}" for k in range(len(new)))]
    changes = data.get("status", [])
    for change in changes if isinstance(changes, list) else []:
        mid, status = (change.get("id"), change.get("status")) if isinstance(change, dict) else (None, None)
        if not isinstance(mid, str) or mid not in current or not _status_ok(status, targets):
            work.notes.append(f"mission status change ignored (unknown id or status): {change!r}")
            continue
        line = current[str(mid)]
        _edit(work, "mission", line, _with_status(line, str(status)))
    entries = [f"- [M{first_new + k}] (active) {text}" for k, text in enumerate(new)]
    _append_under(work, "mission", MISSION_HEADING, entries)


def ensure_mission(work: Work) -> None:
    """A mind must never leave a checkpoint without a mission (M4, P1). When the model gave none - a
    small model's answer is often only an echo of the question, dropped - the harness writes one from
    the stored record: the earliest user message being moved out, quoted and marked as such (the words
    are the user's, copied, never the model's)."""
    if mission_lines(work.mind) or not work.candidates:
        return
    first = min(work.candidates, key=lambda c: c.seq)
    room = max(_room_chars(work, "Goals", 1), MIN_ENTRY_CHARS * 2)
    quoted = _one_line(first.text, min(room, ENTRY_CHARS))
    line = f'- [M1] (active) The user\'s request (message #{first.seq}): "{quoted}"'
    _append_under(work, "mission", MISSION_HEADING, [line])
    work.notes.append(f"no mission given: M1 written by the harness from message #{first.seq}")


# ---- workstreams (M1, M5) ---------------------------------------------------------------------------


def _workstream_lines(mind: str) -> dict[str, tuple[str, str]]:
    """Workstream id -> (its line, its text after the status)."""
    found: dict[str, tuple[str, str]] = {}
    for line in mind.split("\n"):
        match = _WORKSTREAM_ID.match(line)
        if match and match.group(1) not in found:
            found[match.group(1)] = (line, match.group(2))
    return found


def _workstreams_question(work: Work) -> Question:
    current = _workstream_lines(work.mind)
    lines = "\n".join(line for line, _ in current.values())
    chars = min(ENTRY_CHARS, _room_chars(work, "Goals", len(current) + MAX_NEW, replaced=lines))
    item = _object(
        {
            "id": {"type": "string", "enum": [*current, "new"]},
            "status": {"type": "string", "enum": list(WORKSTREAM_STATUSES)},
            "text": _text(max(chars, 1)),
        }
    )
    listing = "\n".join(line for line, _ in current.values()) or "(none yet)"
    schema = _object({"workstreams": _array(item, len(current) + MAX_NEW)})
    return Question("workstreams", render("q_workstreams", workstreams=listing), schema)


def _apply_workstreams(work: Work, data: Mapping[str, Any]) -> None:
    items = data.get("workstreams")
    if not isinstance(items, list):
        work.problem("workstreams", 'The answer needs "workstreams": a list (it may be empty).')
        return
    current = _workstream_lines(work.mind)
    next_number = _next_id(list(current))
    added: list[str] = []
    for item in items:
        wid, status = (item.get("id"), item.get("status")) if isinstance(item, dict) else (None, None)
        if (
            status not in WORKSTREAM_STATUSES
            or not isinstance(wid, str)
            or (wid != "new" and wid not in current)
        ):
            work.notes.append(f"workstream change ignored (unknown id or status): {item!r}")
            continue
        text = _clean(work, item.get("text", ""))
        if wid == "new" and _norm(text) in {_norm(t) for _, t in current.values()}:
            work.notes.append(f"new workstream repeats an existing one, ignored: {text!r}")
            continue
        if wid == "new" and text and len(added) < MAX_NEW:
            added.append(f"- [W{next_number}] ({status}) {text}")
            next_number += 1
        elif wid in current:
            line, old_text = current[str(wid)]
            _edit(work, "workstreams", line, f"- [{wid}] ({status}) {text or old_text}")
    _append_under(work, "workstreams", WORKSTREAMS_HEADING, added)


# ---- notes: I am here, key decisions, lessons ----------------------------------------------------------


def _notes_question(work: Work) -> Question:
    here = min(ENTRY_CHARS, _room_chars(work, "I am here", MAX_NEW))
    decided = min(160, _room_chars(work, "Key decisions", MAX_NEW) // 2)
    learned = min(160, _room_chars(work, "Lessons", MAX_NEW))
    decision = _object({"decision": _text(decided), "reason": _text(decided)})
    schema = _object(
        {
            "i_am_here": _sized_array(_text(here), here),
            "decisions": _sized_array(decision, decided * 2),
            "lessons": _sized_array(_text(learned), learned),
        }
    )
    return Question("notes", render("q_notes"), schema)


def _decisions(work: Work, value: Any) -> list[str]:
    lines = []
    for item in value[:MAX_NEW] if isinstance(value, list) else []:
        if isinstance(item, dict) and isinstance(item.get("decision"), str):
            decision, reason = _clean(work, item["decision"], 160), _clean(work, item.get("reason", ""), 160)
            if decision:
                lines.append(f"- {decision}" + (f" - because {reason}" if reason else ""))
    return lines


def _apply_notes(work: Work, data: Mapping[str, Any]) -> None:
    _append_under(work, "notes", "## I am here", [f"- {t}" for t in _strings(work, data.get("i_am_here"))])
    _append_under(work, "notes", "## Key decisions", _decisions(work, data.get("decisions")))
    _append_under(work, "notes", "## Lessons", [f"- {t}" for t in _strings(work, data.get("lessons"), 160)])


# ---- scene (S1-S6) ----------------------------------------------------------------------------------


def scene_limits(window: int) -> dict[str, int]:
    """Each scene part's character limit for this window (see SCENE_REFERENCE_WINDOW)."""
    share = min(1.0, window / SCENE_REFERENCE_WINDOW)
    return {name: max(SCENE_FLOOR_CHARS[name], int(limit * share)) for name, limit in SCENE_CHARS.items()}


def _scene_question(work: Work) -> Question:
    parts = {name: _text(limit) for name, limit in scene_limits(work.budgets.window).items()}
    for name, least in SCENE_MIN_CHARS_PER_PART.items():
        parts[name]["minLength"] = least
    schema = _object(parts)
    return Question("scene", render("q_scene"), schema)


def _apply_scene(work: Work, data: Mapping[str, Any]) -> None:
    limits = scene_limits(work.budgets.window)
    values = {name: _clean(work, data.get(name, ""), limit) for name, limit in limits.items()}
    work.scene = render_scene(SceneParts(**values))
    if "scene" in work.asked_again and len(scene_blocks(work.scene)[0].strip()) < SCENE_MIN_CHARS:
        work.scene = render_scene(SceneParts(**_completed_scene(work, values, limits)))


def _completed_scene(work: Work, values: dict[str, str], limits: Mapping[str, int]) -> dict[str, str]:
    """A scene still too short for V1 when asked again - most often a small model's echo, dropped by
    `_clean` - completed from what the harness holds, never invented, rather than failing the whole
    checkpoint: the mind's workstream (or mission) lines as current step and progress (S1, S2), and the
    latest user message moving out, quoted, as the next step (S4). Each addition says where it came
    from, and is noted. The first answer is never completed, so the first-pass rate measures the model."""
    streams = [line.strip("-* ").strip() for line, _ in _workstream_lines(work.mind).values()]
    missions = [line.strip("-* ").strip() for line in mission_lines(work.mind).values()]
    newest = sorted(work.candidates, key=lambda c: c.seq, reverse=True)
    latest = next((c for c in newest if len(c.text.strip()) >= MIN_ENTRY_CHARS), None) or next(
        iter(newest), None
    )
    quote = _one_line(latest.text, max(limits["next_step"] - 60, MIN_ENTRY_CHARS)) if latest else ""
    additions = {
        "current_step": ("from the mind", "; ".join(streams[:1] or missions[:1])),
        "progress": ("from the mind", "; ".join(streams)),
        "next_step": ("from the record", f'the user\'s message #{latest.seq}: "{quote}"' if latest else ""),
    }
    completed = dict(values)
    for part, (origin, extra) in additions.items():
        if extra and len(completed[part]) < SCENE_MIN_CHARS_PER_PART[part]:
            text = f"({origin}) {extra}"
            completed[part] = _one_line(
                f"{completed[part]}; {text}" if completed[part] else text, limits[part]
            )
            work.notes.append(f"scene too short: {part} completed {origin}")
    return completed


# ---- dispatch ---------------------------------------------------------------------------------------

_QUESTIONS: Final[dict[str, Callable[[Work], Question | None]]] = {
    "memo": _memo_question,
    "mission": _mission_question,
    "workstreams": _workstreams_question,
    "notes": _notes_question,
    "scene": _scene_question,
}
_APPLY: Final[dict[str, Callable[[Work, Mapping[str, Any]], None]]] = {
    "memo": _apply_memo,
    "mission": _apply_mission,
    "workstreams": _apply_workstreams,
    "notes": _apply_notes,
    "scene": _apply_scene,
}


def question(part: str, work: Work) -> Question | None:
    """The part's question (None: nothing to ask); remembers its wording to spot echoed answers."""
    asked = _QUESTIONS[part](work)
    work.echo = f"{_norm(asked.text)} {work.intro}" if asked else ""
    return asked


def remember_request(work: Work, text: str) -> None:
    """Answers copied from the turn's request text are dropped like those copied from a question."""
    work.intro = _norm(text)


def apply_answer(part: str, work: Work, text: str) -> None:
    data = _parse(work, part, text)
    if data is not None:
        _APPLY[part](work, data)


def parts_to_reask(problems: Sequence[Problem], work: Work) -> tuple[str, ...]:
    """The questions to ask again: those whose answer failed, and those behind each validation problem
    (any mind problem re-asks all mind questions, since they restart from the previous mind together)."""
    wanted = {p.code.split(".", 1)[1] for p in problems if p.part == "answer"}
    wanted |= {p.part for p in problems if p.part in ("memo", "scene")}
    if wanted & set(MIND_PARTS) or any(p.part in ("mind", "edit") for p in problems):
        wanted |= set(MIND_PARTS)
    return tuple(part for part in PARTS if part in wanted)


def ticked_checklist(candidates: Sequence[Candidate], ticked: frozenset[int]) -> str:
    """The checklist file as the answers left it (mirrored for inspection, F2)."""
    return render_checklist([replace(c, ticked=c.seq in ticked) for c in candidates])
