"""The memo: the user's own words, copied from the record, never retold (N1-N7).

API:
    Candidate(seq: int, text: str, ticked: bool, kept: bool)   one checklist line; kept: from the last memo
    memo_candidates(moved_out: Sequence[Entry], previous_memo: Sequence[MemoItem],
                    already_dismissed: frozenset[int]) -> list[Candidate]          (N1, N6, N7)
    render_checklist(candidates: Sequence[Candidate], preview_chars: int = 80) -> str   "- [ ] #12 preview"
    read_ticks(original: str, edited: str) -> TickResult(ticked: frozenset[int], problems: list[Problem])
    dismissed(candidates: Sequence[Candidate], ticked: frozenset[int]) -> frozenset[int]    unticked seqs (N6)
    cut_note(seq: int) -> str              "\\n[... cut; full text: message #12 in the record]"
    cut_message(entry: Entry, counter: TokenCounter, per_message: int) -> MemoItem   (N5; any entry kind -
                                           the caller has already chosen user entries)
    build_memo(ticked: Iterable[int], entries_by_seq: Mapping[int, Entry], counter: TokenCounter,
               budgets: Budgets, previous_memo: Sequence[MemoItem] = ()) -> MemoOutcome(items, problems)
    memo_text_matches(item: MemoItem, record_text: str) -> bool    verbatim, or a prefix + cut_note (N4)
    memo_tokens(items: Iterable[MemoItem], counter: TokenCounter) -> int

Candidates are chosen by the stored kind ("user") only, never by text (N7). build_memo copies the text
from the entries given, never from model output (N4), and re-checks the kind; a ticked seq that is not a
user entry is refused. A previous memo item may be kept as it is when its entry is not given (it was
copied from the record by an earlier checkpoint).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from avibe.checkpoint.budgets import Budgets
from avibe.checkpoint.model import MemoItem, Problem
from avibe.ports import TokenCounter
from avibe.record.entries import Entry

DEFAULT_PREVIEW_CHARS: Final = 80
_CHECK_LINE = re.compile(r"^[-*][ \t]*\[([ xX])\][ \t]*#(\d+)(?:[ \t]+(.*?))?[ \t]*$")
_WORD_BREAK_SHARE: Final = 5  # cut at a space when one is within the last fifth of the prefix


@dataclass(frozen=True, slots=True)
class Candidate:
    seq: int
    text: str
    ticked: bool = False
    kept: bool = False


@dataclass(frozen=True, slots=True)
class TickResult:
    ticked: frozenset[int]
    problems: list[Problem]


@dataclass(frozen=True, slots=True)
class MemoOutcome:
    items: tuple[MemoItem, ...]
    problems: list[Problem]


def memo_candidates(
    moved_out: Sequence[Entry],
    previous_memo: Sequence[MemoItem],
    already_dismissed: frozenset[int],
) -> list[Candidate]:
    """The previous memo's items (ticked) plus the user entries moved out now and never dismissed, by seq."""
    by_seq = {item.seq: Candidate(item.seq, item.text, ticked=True, kept=True) for item in previous_memo}
    for entry in moved_out:
        if entry.is_user and entry.seq not in by_seq and entry.seq not in already_dismissed:
            by_seq[entry.seq] = Candidate(entry.seq, entry.text)
    return [by_seq[seq] for seq in sorted(by_seq)]


def _preview(text: str, limit: int) -> str:
    one_line = " ".join(text.split())
    if len(one_line) <= limit:
        return one_line
    return one_line[: max(1, limit - 3)].rstrip() + "..."


def render_checklist(candidates: Sequence[Candidate], preview_chars: int = DEFAULT_PREVIEW_CHARS) -> str:
    """One line per candidate: checkbox, message number, single-line preview (N1)."""
    lines = [f"- [{'x' if c.ticked else ' '}] #{c.seq} {_preview(c.text, preview_chars)}" for c in candidates]
    return "".join(line.rstrip() + "\n" for line in lines)


def _parse_lines(text: str) -> list[tuple[str, re.Match[str] | None]]:
    """Non-blank lines (trailing spaces ignored) with their checklist match, if any."""
    return [(line.rstrip(), _CHECK_LINE.match(line.rstrip())) for line in text.splitlines() if line.strip()]


def _preview_of(match: re.Match[str] | None) -> str:
    return (match.group(3) or "") if match else ""


def _line_problems(original: dict[int, str], edited: list[tuple[str, re.Match[str] | None]]) -> list[Problem]:
    problems: list[Problem] = []
    seen: list[int] = []
    for line, match in edited:
        seq = int(match.group(2)) if match else None
        if seq is None or seq not in original:
            problems.append(
                Problem(
                    "memo.line_added",
                    f"The line '{line[:70]}' is not in the checklist. "
                    "Remove it; only tick or untick the boxes.",
                )
            )
        elif seq in seen:
            problems.append(Problem("memo.line_repeated", f"The line for #{seq} appears twice; keep one."))
        else:
            seen.append(seq)
            if _preview_of(match) != original[seq]:
                problems.append(
                    Problem(
                        "memo.line_changed",
                        f"The text of line #{seq} was changed. Put it "
                        "back as it was; change only the box: [x] keep, [ ] let go.",
                    )
                )
    problems += [
        Problem(
            "memo.line_removed",
            f"The line for #{seq} was removed. Put it back; to let the message go, leave its box empty: [ ].",
        )
        for seq in original
        if seq not in seen
    ]
    if seen != [seq for seq in original if seq in seen]:
        problems.append(
            Problem(
                "memo.lines_reordered",
                "The lines were reordered. Keep them in the original order; change only the boxes.",
            )
        )
    return problems


def read_ticks(original: str, edited: str) -> TickResult:
    """The ticked numbers of an edited checklist; every change but a checkbox is a problem (N4, V3).

    Blank lines and trailing spaces are ignored; other non-checklist lines of the original (a header)
    must stay as they are."""
    original_parsed = _parse_lines(original)
    original_lines = {int(m.group(2)): _preview_of(m) for _, m in original_parsed if m}
    fixed = Counter(line for line, m in original_parsed if not m)
    checks: list[tuple[str, re.Match[str] | None]] = []
    for line, match in _parse_lines(edited):
        if match is None and fixed[line] > 0:
            fixed[line] -= 1
        else:
            checks.append((line, match))
    problems = _line_problems(original_lines, checks)
    problems += [
        Problem("memo.line_removed", f"The line '{line[:70]}' was removed. Put it back as it was.")
        for line in fixed.elements()
    ]
    ticked = frozenset(
        int(m.group(2)) for _, m in checks if m and m.group(1) in "xX" and int(m.group(2)) in original_lines
    )
    return TickResult(ticked=ticked, problems=problems)


def dismissed(candidates: Sequence[Candidate], ticked: frozenset[int]) -> frozenset[int]:
    """Candidates left unticked: never listed again (N6); they stay in the record under their number."""
    return frozenset(c.seq for c in candidates if c.seq not in ticked)


def cut_note(seq: int) -> str:
    return f"\n[... cut; full text: message #{seq} in the record]"


def _fits(text: str, counter: TokenCounter, budget: int) -> bool:
    return counter.count(text) <= budget


def _longest_prefix(text: str, note: str, counter: TokenCounter, budget: int) -> int:
    """Largest k with text[:k] + note within budget (binary search; counts grow with length)."""
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if _fits(text[:middle] + note, counter, budget):
            low = middle
        else:
            high = middle - 1
    return low


def _word_boundary(text: str, k: int) -> int:
    space = text.rfind(" ", 0, k)
    return space if space > k - k // _WORD_BREAK_SHARE and space > 0 else k


def cut_message(entry: Entry, counter: TokenCounter, per_message: int) -> MemoItem:
    """The entry's text verbatim, or its longest prefix that fits with a note pointing at the record (N5).

    Budgets from budgets_for are at least MIN_MEMO_MESSAGE (60) tokens, room for the note and some words;
    below the note's own size the item is the note alone (and validate reports it over its cap)."""
    if _fits(entry.text, counter, per_message):
        return MemoItem(seq=entry.seq, text=entry.text, cut=False)
    note = cut_note(entry.seq)
    k = _word_boundary(entry.text, _longest_prefix(entry.text, note, counter, per_message))
    while k > 0 and not _fits(entry.text[:k] + note, counter, per_message):
        k -= 1  # a tokenizer whose counts are not monotone in length
    return MemoItem(seq=entry.seq, text=entry.text[:k] + note, cut=True)


def memo_text_matches(item: MemoItem, record_text: str) -> bool:
    """True when the item holds the record text byte for byte, or (cut) a proper prefix plus the cut note."""
    if not item.cut:
        return item.text == record_text
    note = cut_note(item.seq)
    if not item.text.endswith(note):
        return False
    prefix = item.text[: len(item.text) - len(note)]
    return len(prefix) < len(record_text) and record_text.startswith(prefix)


def memo_tokens(items: Iterable[MemoItem], counter: TokenCounter) -> int:
    return sum(counter.count(item.text) for item in items)


def _copy(
    seq: int,
    entries: Mapping[int, Entry],
    previous: Mapping[int, MemoItem],
    counter: TokenCounter,
    budgets: Budgets,
) -> MemoItem | Problem:
    entry = entries.get(seq)
    if entry is None:
        if seq in previous:
            return previous[seq]
        return Problem("memo.unknown_message", f"Message #{seq} is not in the checklist's record; untick it.")
    if not entry.is_user:
        return Problem(
            "memo.not_user",
            f"Message #{seq} was not written by the user ({entry.kind}); only the "
            "user's own messages can be kept. Untick it.",
        )
    return cut_message(entry, counter, budgets.memo_per_message)


def build_memo(
    ticked: Iterable[int],
    entries_by_seq: Mapping[int, Entry],
    counter: TokenCounter,
    budgets: Budgets,
    previous_memo: Sequence[MemoItem] = (),
) -> MemoOutcome:
    """Copy each ticked message's original text from the record entries (N4), cut per message (N5);
    a problem when the total passes the memo budget (V3)."""
    previous = {item.seq: item for item in previous_memo}
    items: list[MemoItem] = []
    problems: list[Problem] = []
    for seq in sorted(set(ticked)):
        copied = _copy(seq, entries_by_seq, previous, counter, budgets)
        if isinstance(copied, Problem):
            problems.append(copied)
        else:
            items.append(copied)
    total = memo_tokens(items, counter)
    if total > budgets.memo_total:
        problems.append(over_budget_problem(total, budgets.memo_total))
    return MemoOutcome(items=tuple(items), problems=problems)


def over_budget_problem(total: int, budget: int) -> Problem:
    return Problem(
        "memo.over_budget",
        f"The ticked messages total {total} tokens; the memo holds at most "
        f"{budget}. Untick the ones that are done, superseded or already in the mind.",
    )
