"""The mind: four Markdown sections, most stable first (M1-M5).

API:
    HEADINGS: tuple[str, ...]          "## I am here", "## Goals", "## Key decisions", "## Lessons" (M1)
    MISSION_HEADING = "### Mission";  WORKSTREAMS_HEADING = "### Workstreams"   (inside ## Goals)
    EMPTY_MIND: str                    the template for the first checkpoint (F2), with guidance comments
    MissionEntry(id: str, status: str, text: str, replaced_by: str | None)   "- [M1] (active) ..." (M4)
    WorkstreamEntry(id: str | None, status: str, text: str)                  "- [W1] (active) ..." (M1, M5)
    ParsedMind(sections: dict[str, str], missions: tuple[MissionEntry, ...],
               workstreams: tuple[WorkstreamEntry, ...])
    parse_mind(text: str) -> ParsedMind | list[Problem]     every structural problem at once; never raises
    heading_problems(text: str) -> list[Problem]            only the four-headings check (V2)
    heading_titles(text: str) -> list[str]                  titles of the level-2 headings, in order
    section_at(text: str, index: int) -> str                title of the section holding line `index`
    section_texts(text: str) -> dict[str, str]              body of each heading found (tolerant)
    mission_ids(text: str) -> tuple[str, ...]               distinct "M<n>" ids of mission lines, in order
    mission_lines(text: str) -> dict[str, str]              id -> the mission line as written
    (the M4 guard of new mission entries: checkpoint/mission_guard.py)
    active_missions(text: str) -> list[str]                 the text of each active mission entry (M4)
    strip_guidance(text: str) -> str                        the text without <!-- --> guidance comments
    apply_edit(document: str, old: str, new: str) -> EditOutcome   (M2, M3)
    EditOutcome(applied: bool, document: str, problem: Problem | None);  .message -> str

Mission statuses: active, done, withdrawn, "replaced by M<n>". Mission entries are never deleted (M4):
parse_mind only checks the form; validate.py compares with the previous mind.
Headings are level-2 lines outside fenced code; HTML comments (<!-- -->) are guidance, not entries.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Final

from avibe.checkpoint.model import MIND_SECTIONS, Problem
from avibe.prompts import render

HEADINGS: Final[tuple[str, ...]] = tuple(f"## {name}" for name in MIND_SECTIONS)
MISSION_HEADING: Final = "### Mission"
WORKSTREAMS_HEADING: Final = "### Workstreams"
MISSION_STATUSES: Final[tuple[str, ...]] = ("active", "done", "withdrawn", "replaced by M<n>")
ORDER_TEXT: Final = ", ".join(f"'{h}'" for h in HEADINGS)

EMPTY_MIND: Final = render("empty_mind")  # the template for the first checkpoint (F2)

_HEADING2 = re.compile(r"^##(?!#)[ \t]*(.*?)\s*$")
_HEADING3 = re.compile(r"^###(?!#)[ \t]*(.*?)\s*$")
_FENCE = re.compile(r"^(```|~~~)")
_COMMENT = re.compile(r"<!--.*?(-->|\Z)", re.DOTALL)
_LIST_ITEM = re.compile(r"^[-*+][ \t]")
MISSION_LINE = re.compile(r"^[-*+][ \t]+\[(M\d+)\][ \t]*\(([^)\n]*)\)[ \t]*(.*)$")
_MISSION_ID = re.compile(r"^[-*+][ \t]+\[(M\d+)\]")
_WORKSTREAM_LINE = re.compile(r"^[-*+][ \t]+(?:\[(W\d+)\][ \t]*)?\(([^)\n]+)\)[ \t]*(.*)$")
REPLACED_BY = re.compile(r"^replaced by (m\d+)$", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class MissionEntry:
    id: str
    status: str
    text: str
    replaced_by: str | None = None


@dataclass(frozen=True, slots=True)
class WorkstreamEntry:
    id: str | None
    status: str
    text: str


@dataclass(frozen=True, slots=True)
class ParsedMind:
    sections: dict[str, str]
    missions: tuple[MissionEntry, ...]
    workstreams: tuple[WorkstreamEntry, ...]


@dataclass(frozen=True, slots=True)
class EditOutcome:
    applied: bool
    document: str
    problem: Problem | None = None

    @property
    def message(self) -> str:
        return "Edit applied." if self.problem is None else self.problem.message


def short(text: str, limit: int = 60) -> str:
    one_line = " ".join(text.split())
    return one_line if len(one_line) <= limit else one_line[: limit - 3] + "..."


def _lines_outside_fences(text: str) -> list[tuple[int, str]]:
    """(index, line) for every line not inside fenced code; indexes refer to text.splitlines()."""
    result, fenced = [], False
    for index, line in enumerate(text.splitlines()):
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            result.append((index, line))
    return result


def _headings(text: str) -> list[tuple[int, str]]:
    """(line index, title) of each level-2 heading outside fenced code."""
    found = []
    for index, line in _lines_outside_fences(text):
        match = _HEADING2.match(line)
        if match:
            found.append((index, match.group(1)))
    return found


def heading_titles(text: str) -> list[str]:
    return [title for _, title in _headings(text)]


def section_at(text: str, index: int) -> str:
    """Title of the level-2 section that line `index` (of text.splitlines()) belongs to; "" before any."""
    return next((title for at, title in reversed(_headings(text)) if at <= index), "")


def _headings_complete(text: str) -> bool:
    return heading_titles(text) == list(MIND_SECTIONS)


def section_texts(text: str) -> dict[str, str]:
    """Body of each of the four sections found (first occurrence), up to the next level-2 heading."""
    lines = text.splitlines()
    heads = _headings(text)
    bodies: dict[str, str] = {}
    for position, (index, title) in enumerate(heads):
        end = heads[position + 1][0] if position + 1 < len(heads) else len(lines)
        if title in MIND_SECTIONS and title not in bodies:
            bodies[title] = "\n".join(lines[index + 1 : end])
    return bodies


def heading_problems(text: str) -> list[Problem]:
    """Missing, renamed, unknown, repeated or reordered headings (M1, V2)."""
    titles = heading_titles(text)
    problems = [
        Problem(
            "mind.heading_unknown",
            f"'## {t}' is not one of the four headings ({ORDER_TEXT}). "
            f"Rename it back, or make it '### {t}' inside a section.",
        )
        for t in dict.fromkeys(titles)
        if t not in MIND_SECTIONS
    ]
    for position, name in enumerate(MIND_SECTIONS):
        count = titles.count(name)
        if count == 0:
            problems.append(Problem("mind.heading_missing", _missing_message(position)))
        elif count > 1:
            problems.append(Problem("mind.heading_repeated", f"'## {name}' appears {count} times; keep one."))
    known = [t for t in dict.fromkeys(titles) if t in MIND_SECTIONS]
    if known != [n for n in MIND_SECTIONS if n in known]:
        problems.append(
            Problem("mind.heading_order", f"The headings are out of order. Keep them as {ORDER_TEXT}.")
        )
    return problems


def _missing_message(position: int) -> str:
    heading = HEADINGS[position]
    if position == 0:
        where = f"as the first line, before '{HEADINGS[1]}'"
    else:
        where = f"after the '{HEADINGS[position - 1]}' section"
    return f"The heading '{heading}' is missing. Put the line '{heading}' back, exactly, {where}."


def _text_before_first_heading(text: str) -> list[Problem]:
    heads = _headings(text)
    first = heads[0][0] if heads else len(text.splitlines())
    before = _COMMENT.sub("", "\n".join(text.splitlines()[:first]))
    stray = [line for line in before.splitlines() if line.strip() and not line.startswith("# ")]
    if not stray:
        return []
    return [
        Problem(
            "mind.text_outside_sections",
            f"Text before '{HEADINGS[0]}' belongs to no section: "
            f"'{short(stray[0])}'. Move it under one of the four headings.",
        )
    ]


def _subsections(body: str) -> dict[str, list[str]]:
    """Level-3 subsections of a section body (comments removed): title -> lines."""
    parts: dict[str, list[str]] = {"": []}
    current = ""
    for _, line in _lines_outside_fences(_COMMENT.sub("", body)):
        match = _HEADING3.match(line)
        if match:
            current = match.group(1)
            parts.setdefault(current, [])
        else:
            parts[current].append(line)
    return parts


def _parse_status(entry_id: str, raw: str) -> tuple[str, str | None, Problem | None]:
    status = " ".join(raw.split()).lower()
    replaced = REPLACED_BY.match(status)
    if replaced:
        new_id = replaced.group(1).upper()
        return f"replaced by {new_id}", new_id, None
    if status in MISSION_STATUSES[:3]:
        return status, None, None
    message = (
        f"Mission entry [{entry_id}] has the status '({raw})'. Use one of: (active), (done), "
        f"(withdrawn), (replaced by M<n>)."
    )
    return status, None, Problem("mind.mission_status", message)


def _parse_missions(lines: list[str]) -> tuple[list[MissionEntry], list[Problem]]:
    entries: list[MissionEntry] = []
    problems: list[Problem] = []
    for line in lines:
        if not line.strip() or line[0] in " \t":
            continue  # blank or a continuation of the entry above
        match = MISSION_LINE.match(line)
        if not match:
            problems.append(
                Problem(
                    "mind.mission_format",
                    f"Under '{MISSION_HEADING}' the line "
                    f"'{short(line)}' is not a mission entry. Write it as '- [M1] (active) <purpose>'.",
                )
            )
            continue
        status, replaced_by, problem = _parse_status(match.group(1), match.group(2))
        problems.extend([problem] if problem else [])
        entries.append(MissionEntry(match.group(1), status, match.group(3).strip(), replaced_by))
    return entries, problems


def _mission_consistency(entries: list[MissionEntry]) -> list[Problem]:
    ids = [e.id for e in entries]
    problems = [
        Problem(
            "mind.mission_repeated",
            f"Mission id [{i}] is used {ids.count(i)} times; give the newer entry a new id.",
        )
        for i in dict.fromkeys(ids)
        if ids.count(i) > 1
    ]
    for entry in entries:
        if entry.replaced_by is not None and entry.replaced_by not in ids:
            problems.append(
                Problem(
                    "mind.mission_replaced_unknown",
                    f"[{entry.id}] is (replaced by "
                    f"{entry.replaced_by}) but there is no [{entry.replaced_by}]. Add the new entry "
                    f"'- [{entry.replaced_by}] (active) <new purpose>' or fix the id.",
                )
            )
    return problems


def _parse_workstreams(lines: list[str]) -> tuple[list[WorkstreamEntry], list[Problem]]:
    entries: list[WorkstreamEntry] = []
    problems: list[Problem] = []
    for line in lines:
        if not _LIST_ITEM.match(line):
            continue  # prose, blank lines and indented details (queue, next) are allowed
        match = _WORKSTREAM_LINE.match(line)
        if match:
            entries.append(WorkstreamEntry(match.group(1), match.group(2).strip(), match.group(3).strip()))
        else:
            problems.append(
                Problem(
                    "mind.workstream_format",
                    f"Workstream '{short(line)}' needs a status: "
                    f"'- [W1] (active) <what>; queue position 2 of 5; next: <item>'.",
                )
            )
    return entries, problems


def _missions_outside(text: str, mission_lines: list[str]) -> list[Problem]:
    everywhere = Counter(line for line in _plain_lines(text) if _MISSION_ID.match(line))
    outside = list(
        (everywhere - Counter(line for line in mission_lines if _MISSION_ID.match(line))).elements()
    )
    return [
        Problem(
            "mind.mission_misplaced",
            f"The mission entry '{short(line)}' is outside "
            f"'{MISSION_HEADING}'. Move it under '{MISSION_HEADING}' in '## Goals'.",
        )
        for line in outside
    ]


def _plain_lines(text: str) -> list[str]:
    return [line for _, line in _lines_outside_fences(_COMMENT.sub("", text))]


def _goals_problems(goals: str) -> tuple[list[MissionEntry], list[WorkstreamEntry], list[Problem]]:
    subsections = _subsections(goals)
    problems: list[Problem] = []
    for heading in (MISSION_HEADING, WORKSTREAMS_HEADING):
        if heading[4:] not in subsections:
            problems.append(
                Problem(
                    "mind.goals_part_missing",
                    f"'## Goals' needs a line '{heading}' with its entries under it.",
                )
            )
    missions, mission_problems = _parse_missions(subsections.get("Mission", []))
    workstreams, workstream_problems = _parse_workstreams(subsections.get("Workstreams", []))
    problems += mission_problems + _mission_consistency(missions) + workstream_problems
    return missions, workstreams, problems


def parse_mind(text: str) -> ParsedMind | list[Problem]:
    """The mind's sections and Goals entries, or every structural problem found (M1, M4, V2)."""
    problems = heading_problems(text) + _text_before_first_heading(text)
    sections = section_texts(text)
    missions: list[MissionEntry] = []
    workstreams: list[WorkstreamEntry] = []
    if "Goals" in sections:
        missions, workstreams, goal_problems = _goals_problems(sections["Goals"])
        problems += goal_problems
        subsections = _subsections(sections["Goals"])
        if "Mission" in subsections:  # else "### Mission is missing" already says where entries go
            problems += _missions_outside(text, subsections["Mission"])
    if problems:
        return problems
    return ParsedMind(sections, tuple(missions), tuple(workstreams))


def mission_ids(text: str) -> tuple[str, ...]:
    """Distinct ids of every mission line anywhere in the text (comments and code ignored), in order."""
    ids = [m.group(1) for line in _plain_lines(text) if (m := _MISSION_ID.match(line))]
    return tuple(dict.fromkeys(ids))


def _refuse(code: str, document: str, message: str) -> EditOutcome:
    return EditOutcome(applied=False, document=document, problem=Problem(code, message))


def _heading_change_message(before: list[str], after: list[str]) -> str:
    removed = [f"'## {t}'" for t in dict.fromkeys(before) if after.count(t) < before.count(t)]
    added = [f"'## {t}'" for t in dict.fromkeys(after) if after.count(t) > before.count(t)]
    if removed:
        change = f"remove {', '.join(removed)}" + (f" and add {', '.join(added)}" if added else "")
    elif added:
        change = f"add {', '.join(added)}"
    else:
        change = "reorder the headings"
    return (
        f"Refused: this edit would {change}. Keep the four headings exactly as they are "
        f"({ORDER_TEXT}) and change only the text under them."
    )


def _occurrences(document: str, old: str) -> int:
    """How often `old` occurs, overlapping occurrences included (more than one means ambiguous)."""
    count, start = 0, document.find(old)
    while start != -1 and count < 2:
        count, start = count + 1, document.find(old, start + 1)
    return count if count < 2 else max(2, document.count(old))


def strip_guidance(text: str) -> str:
    """The text without HTML comments (the template's guidance); blank-line runs left by them collapse."""
    return re.sub(r"\n{3,}", "\n\n", _COMMENT.sub("", text))


def apply_edit(document: str, old: str, new: str) -> EditOutcome:
    """Replace the one occurrence of `old` by `new` (M2); refuse, with a message to act on, an edit that
    is ambiguous, overwrites the whole mind, or removes, renames, adds or reorders a heading. A single
    section may be rewritten whole, heading included (M3)."""
    if not old:
        return _refuse(
            "edit.old_empty",
            document,
            "The 'old' text is empty. Copy the exact lines you want to change from the mind file into 'old'.",
        )
    count = _occurrences(document, old)
    if count == 0:
        return _refuse(
            "edit.old_not_found",
            document,
            f"The 'old' text '{short(old)}' is not in the mind "
            "file. Copy it exactly from the file (same spaces and line breaks), or use a shorter part.",
        )
    if count > 1:
        return _refuse(
            "edit.old_ambiguous",
            document,
            f"The 'old' text appears {count} times in the mind "
            "file. Add a neighbouring line to 'old' so it matches only once.",
        )
    if old.strip() == document.strip() or all(h in old.splitlines() for h in HEADINGS):
        return _refuse(
            "edit.whole_document",
            document,
            "Refused: this edit replaces the whole mind. The "
            "file may be edited but never overwritten whole: change one section at a time.",
        )
    result = document.replace(old, new, 1)
    before, after = heading_titles(document), heading_titles(result)
    if after != before and not _headings_complete(result):
        return _refuse("edit.heading_changed", document, _heading_change_message(before, after))
    return EditOutcome(applied=True, document=result)


def active_missions(text: str) -> list[str]:
    """The text of each active mission entry, without its id and status ("- [M1] (active) Ship v2" ->
    "Ship v2")."""
    texts = []
    for line in mission_lines(text).values():
        match = MISSION_LINE.match(line)
        if match and match.group(2).strip().casefold() == "active":
            texts.append(match.group(3).strip())
    return texts


def mission_lines(text: str) -> dict[str, str]:
    """Mission id -> its first line as written (comments and code ignored); used to ask for it back."""
    lines: dict[str, str] = {}
    for line in _plain_lines(text):
        match = _MISSION_ID.match(line)
        if match and match.group(1) not in lines:
            lines[match.group(1)] = line.rstrip()
    return lines


PER_REASON: Final = re.compile(r"^\(per #\d+\) ")  # the reason a line gives for its status
