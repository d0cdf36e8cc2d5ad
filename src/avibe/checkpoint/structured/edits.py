"""How an answer changes the mind: always as `apply_edit` edits, never a rewrite (M2, M3), within the
section caps (M6), and without a weak model's repetitions.

API:
    edit(work, part, old, new) -> None                  one edit; its problem lands on `work`
    append_under(work, part, heading, new_lines) -> None   lines added at the end of a (sub)section
"""

from __future__ import annotations

from collections.abc import Sequence

from avibe.checkpoint.mind import MISSION_HEADING, apply_edit, section_at, section_texts, strip_guidance
from avibe.checkpoint.structured.work import LOOSE_MATCH_WORDS, Work, norm


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
        work.notes.append(f"left out to keep '## {section}' within its cap of {cap} tokens: {kept.pop()!r}")
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
    outcome = apply_edit(work.mind, old, new)
    if outcome.applied:
        work.mind = outcome.document
    elif outcome.problem is not None:
        work.problems.setdefault(part, []).append(outcome.problem)
