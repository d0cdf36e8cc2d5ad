"""How an answer changes the mind: always as `apply_edit` edits, never a rewrite (M2, M3), within the
section caps (M6), and without a weak model's repetitions.

API:
    edit(work, part, old, new) -> None                  one edit; its problem lands on `work`
    append_under(work, part, heading, new_lines) -> None   lines added at the end of a (sub)section; the
        lines a full section leaves out are noted and kept in `work.pending` (the "room" question asks
        which entries to merge so they fit)
    entry_labels(mind) -> dict[str, (section, line)]    "H1", "D2", "L3", "W1": entries that may merge
    merge_entries(work, part, data) -> None             M3: merge / replace / retire by label
    fit_caps(work, previous_mind) -> None               M4, M6: cut lines (with a marker) until every
                                                        section fits its cap; mission entries never go
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from avibe.checkpoint.mind import MISSION_HEADING, apply_edit, section_at, section_texts, strip_guidance
from avibe.checkpoint.structured.work import LOOSE_MATCH_WORDS, MIN_ENTRY_CHARS, Work, clean, norm

_COMMENT = re.compile(r"<!--.*?(-->|\Z)", re.DOTALL)
_LIST_LINE = re.compile(r"^[-*+][ \t]")


def _section_end(lines: list[str], start: int, heading: str) -> int:
    level3 = heading.startswith("### ")
    for i in range(start + 1, len(lines)):
        if lines[i].startswith("## ") or (level3 and lines[i].startswith("### ")):
            return i
    return len(lines)


def append_under(work: Work, part: str, heading: str, new_lines: Sequence[str]) -> None:
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
    edit(work, part, old, old + "\n" + "\n".join(new))


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
        left = kept.pop()
        work.pending.setdefault(section, []).insert(0, left)
        work.notes.append(f"left out to keep '## {section}' within its cap of {cap} tokens: {left!r}")
    return kept


def _not_repeated(work: Work, lines: Sequence[str], new_lines: Sequence[str]) -> list[str]:
    """New lines that say something new: a line whose words already stand in the mind (or in a line
    added just before it) is a small model's repetition - often the same entry cut shorter - and
    is left out, with a note (M3: memory converges instead of growing)."""
    seen = [f" {norm(line)} " for line in lines if norm(line)]
    kept = []
    for line in new_lines:
        words = f" {norm(line)} "
        # a line cut short by a length limit ends mid-word: match it without its last word boundary
        loose = words.rstrip() if len(words.split()) >= LOOSE_MATCH_WORDS else words
        if words.strip() and any(loose in old for old in seen):
            work.notes.append(f"repeated entry left out: {line.strip()!r}")
            continue
        kept.append(line)
        seen.append(words)
    return kept


def edit(work: Work, part: str, old: str, new: str) -> None:
    """One harness-made edit. The harness names whole lines, but `apply_edit` matches text: an entry line
    that also stands inside a longer line ("- Use pnpm" in "- Use pnpm for installs") was refused as
    ambiguous, and the checkpoint failed on an edit the model never wrote (the 1.5B's real set). So an
    ambiguous edit is widened to the neighbouring lines of its first whole-line match until it is unique."""
    outcome = apply_edit(work.mind, old, new)
    if outcome.problem is not None and outcome.problem.code == "edit.old_ambiguous":
        widened = _widened(work.mind, old, new)
        outcome = apply_edit(work.mind, *widened) if widened else outcome
    if outcome.applied:
        work.mind = outcome.document
    elif outcome.problem is not None:
        work.problems.setdefault(part, []).append(outcome.problem)


def _widened(document: str, old: str, new: str) -> tuple[str, str] | None:
    """`old` and `new` with the lines around `old`'s first whole-line match added, one more on each side
    at a time, until `old` occurs once; None when it stands on no whole lines or never becomes unique."""
    lines, olds = document.split("\n"), old.split("\n")
    at = next((i for i in range(len(lines)) if lines[i : i + len(olds)] == olds), None)
    if at is None:
        return None
    for grow in range(1, len(lines) + 1):
        before, after = lines[max(0, at - grow) : at], lines[at + len(olds) : at + len(olds) + grow]
        wide = "\n".join([*before, *olds, *after])
        if document.count(wide) == 1:
            return wide, "\n".join([*before, new, *after])
    return None


# ---- merge, replace, retire (M3) --------------------------------------------------------------------

_PREFIX: Final[dict[str, str]] = {"I am here": "H", "Key decisions": "D", "Lessons": "L"}
_HEAD = re.compile(r"^([-*+][ \t]+(?:\[[MW]\d+\][ \t]*)?(?:\([^)\n]*\)[ \t]*)?)(.*)$")
_QUOTED_FROM = re.compile(r"\(message #(\d+)\)")
_WORKSTREAM_ID = re.compile(r"^[-*+][ \t]+\[(W\d+)\]")


def entry_labels(mind: str) -> dict[str, tuple[str, str]]:
    """Every entry the questions may merge, replace or retire: label -> (section, its line). "H1", "D2",
    "L3" number the list lines of I am here, Key decisions and Lessons; workstreams keep their W ids.
    Mission entries are never offered (M4: never deleted, only their status changes)."""
    labels: dict[str, tuple[str, str]] = {}
    for section, body in section_texts(mind).items():
        number = 0
        for line in _COMMENT.sub("", body).split("\n"):
            if not _LIST_LINE.match(line):
                continue
            if section == "Goals":
                found = _WORKSTREAM_ID.match(line)
                if found and found.group(1) not in labels:
                    labels[found.group(1)] = (section, line)
            elif section in _PREFIX:
                number += 1
                labels[f"{_PREFIX[section]}{number}"] = (section, line)
    return labels


def _remove_line(work: Work, part: str, line: str) -> None:
    lines = work.mind.split("\n")
    if lines.count(line) != 1:
        work.notes.append(f"entry not retired (its line is not unique): {line!r}")
        return
    at = lines.index(line)
    context = lines[at - 1 : at + 1] if at > 0 else lines[at : at + 2]
    old = "\n".join(context)
    new = "\n".join(x for x in context if x != line)
    edit(work, part, old, new)


def merge_entries(work: Work, part: str, data: Mapping[str, Any]) -> None:
    """M3: {"merge": [{"ids": [...], "text": "..."}], "retire": [...]} - the entries named in one merge
    become one line (the first keeps its place; "replace" is a merge of one), retired entries go. Only
    entries of one section merge together; unknown ids are ignored with a note."""
    labels = entry_labels(work.mind)
    merges = data.get("merge")
    for merge in merges if isinstance(merges, list) else []:
        ids = merge.get("ids") if isinstance(merge, dict) else None
        text = clean(work, merge.get("text", "")) if isinstance(merge, dict) else ""
        chosen = (
            [i for i in dict.fromkeys(ids) if isinstance(i, str) and i in labels]
            if isinstance(ids, list)
            else []
        )
        sections = {labels[i][0] for i in chosen}
        if not chosen or not text or len(sections) != 1:
            work.notes.append(f"merge ignored (unknown ids, mixed sections or no text): {merge!r}")
            continue
        first = labels[chosen[0]][1]
        head = _HEAD.match(first)
        merged = f"{head.group(1) if head else '- '}{text}"
        edit(work, part, first, merged)
        for other in chosen[1:]:
            _remove_line(work, part, labels[other][1])
        labels = entry_labels(work.mind)
    retired = data.get("retire")
    for label in retired if isinstance(retired, list) else []:
        if isinstance(label, str) and label in labels:
            _remove_line(work, part, labels[label][1])
            work.notes.append(f"entry retired: {labels[label][1].strip()!r}")
            labels = entry_labels(work.mind)
        else:
            work.notes.append(f"retire ignored (unknown id): {label!r}")


# ---- every section within its cap, whatever the answers (M4, M6) ------------------------------------


def _marker(line: str) -> str:
    quoted = _QUOTED_FROM.search(line)
    if quoted:
        return f" [... cut; full text: message #{quoted.group(1)} in the record]"
    return " [... cut to fit the cap]"


def _cut_line(line: str, keep: int) -> str:
    """The line with its text cut to `keep` characters (at a word boundary) and a marker; its markup
    (list mark, id, status) stays whole."""
    head = _HEAD.match(line)
    if head is None:
        return line
    text = head.group(2)
    marker = _marker(line)
    if len(text) <= keep or text.endswith(marker):
        return line
    cut = text[:keep]
    space = cut.rfind(" ")
    cut = cut[:space] if space > keep // 2 else cut
    return f"{head.group(1)}{cut.rstrip()}{marker}"


def _over(work: Work, section: str) -> int:
    assert work.counter is not None
    body = section_texts(strip_guidance(work.mind)).get(section, "")
    return work.counter.count(body) - work.budgets.mind_cap(section)


def fit_caps(work: Work, previous_mind: str) -> None:
    """A cap never makes a checkpoint impossible (M6, M4, L3): a section still over its cap after the
    answers has its longest lines cut, with a marker pointing at the record - first the lines this
    checkpoint added or changed, then older ones, first to MIN_ENTRY_CHARS of text, then to the markup
    alone. Mission entries are cut, never deleted. Each cut is noted."""
    if work.counter is None:
        return
    before = set(previous_mind.split("\n"))
    for section in section_texts(work.mind):
        if section not in work.budgets.mind_caps:
            continue
        for keep in (MIN_ENTRY_CHARS, 0):
            if _over(work, section) <= 0:
                break
            body = _COMMENT.sub("", section_texts(work.mind)[section])
            lines = [line for line in body.split("\n") if _LIST_LINE.match(line)]
            lines.sort(key=lambda line: (line in before, -len(line)))
            for line in lines:
                if _over(work, section) <= 0:
                    break
                _shrink(work, section, line, keep)
        if _over(work, section) > 0:
            work.notes.append(f"'## {section}' is still over its cap after every cut")


def _shrink(work: Work, section: str, line: str, keep: int) -> None:
    """Cut `line` only as far as needed (binary search on its text length), not below `keep`."""
    head = _HEAD.match(line)
    if head is None or work.mind.split("\n").count(line) != 1:
        return
    low, high = keep, len(head.group(2))
    original = work.mind
    while low < high:  # the longest text that makes the section fit
        middle = (low + high + 1) // 2
        work.mind = original.replace(line, _cut_line(line, middle), 1)
        fits = _over(work, section) <= 0
        work.mind = original
        if fits:
            low = middle
        else:
            high = middle - 1
    cut = _cut_line(line, low)
    if cut != line:
        edit(work, "notes", line, cut)
        work.notes.append(f"cut to keep '## {section}' within its cap: {line.strip()!r}")
