"""The memo's checklist: the candidates the model is offered (N1, N5-N7), rendered as checkbox lines, and
the ticks read back from an edited checklist, where every change but a checkbox is a problem (N4, V3).

API:
    Candidate(seq, text, ticked=False, kept=False, part=0)   one checklist line; kept: from the last memo;
        part: 0 for the whole message, k >= 1 for its k-th sentence;  .label -> Label
    memo_candidates(moved_out, previous_memo, already_dismissed, *, counter=None, per_message=0,
                    entries=None) -> list[Candidate]
        with a counter and per_message, a message too long to keep whole also gets one line per sentence
        that its cut would lose (at most MAX_SENTENCE_LINES, the last ones)
    render_checklist(candidates, preview_chars=80) -> str    "- [ ] #12 preview", "- [ ] #12.3 preview"
    read_ticks(original, edited) -> TickResult(ticked, problems)
    dismissed(candidates, kept) -> frozenset[int]   seqs none of whose lines is kept (N6)

Candidates are chosen by the stored kind ("user") only, never by text (N7). Long messages keep their rules
(N5, L3): a message over the per-message budget is cut, and a rule in its last sentence was lost with the
cut ("Never modify anything under vendor/" in the demo). So such a message also gets a checklist line per
sentence the cut loses; a ticked sentence is copied by the harness from the record, verbatim, with the
pointer " (from #N)" to the whole message - the model still only ticks.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from avibe.checkpoint.memo.fit import Label, label_of, label_order, memo_labels, parse_label, prefix_kept
from avibe.checkpoint.memo.words import sentences
from avibe.checkpoint.model import MemoItem, Problem
from avibe.ports import TokenCounter
from avibe.record.entries import Entry

DEFAULT_PREVIEW_CHARS: Final = 80
_CHECK_LINE = re.compile(r"^[-*][ \t]*\[([ xX])\][ \t]*#(\d+(?:\.\d+)?)(?:[ \t]+(.*?))?[ \t]*$")
MAX_SENTENCE_LINES: Final = 12  # sentence lines per long message: the last ones (rules come at the end)


@dataclass(frozen=True, slots=True)
class Candidate:
    seq: int
    text: str
    ticked: bool = False
    kept: bool = False
    part: int = 0  # 0: the whole message; k >= 1: its k-th sentence

    @property
    def label(self) -> Label:
        return label_of(self.seq, self.part)


@dataclass(frozen=True, slots=True)
class TickResult:
    ticked: frozenset[Label]
    problems: list[Problem]


def _sentence_candidates(entry: Entry, counter: TokenCounter, per_message: int) -> list[Candidate]:
    """A message too long to keep whole: one line per sentence its cut would lose (the last ones)."""
    if per_message <= 0 or counter.count(entry.text) <= per_message:
        return []
    kept = prefix_kept(entry, counter, per_message)
    lost = [
        Candidate(entry.seq, entry.text[a:b], part=k)
        for k, (a, b) in enumerate(sentences(entry.text), 1)
        if b > kept
    ]
    return lost[-MAX_SENTENCE_LINES:]


def memo_candidates(
    moved_out: Sequence[Entry],
    previous_memo: Sequence[MemoItem],
    already_dismissed: frozenset[int],
    *,
    counter: TokenCounter | None = None,
    per_message: int = 0,
    entries: Mapping[int, Entry] | None = None,
) -> list[Candidate]:
    """The previous memo's items (ticked) plus the user entries moved out now and never dismissed, in
    order; with a counter, a message too long to keep whole also gets a line per sentence its cut loses."""
    by_label: dict[Label, Candidate] = {}
    for item, label in zip(previous_memo, memo_labels(previous_memo, entries), strict=True):
        part = label_order(label)[1]
        by_label[label] = Candidate(item.seq, item.text, ticked=True, kept=True, part=part)
    kept_seqs = {item.seq for item in previous_memo}
    for entry in moved_out:
        if entry.is_user and entry.seq not in kept_seqs and entry.seq not in already_dismissed:
            by_label[entry.seq] = Candidate(entry.seq, entry.text)
            for sentence in _sentence_candidates(entry, counter, per_message) if counter else ():
                by_label[sentence.label] = sentence
    return [by_label[label] for label in sorted(by_label, key=label_order)]


def _preview(text: str, limit: int) -> str:
    one_line = " ".join(text.split())
    if len(one_line) <= limit:
        return one_line
    return one_line[: max(1, limit - 3)].rstrip() + "..."


def render_checklist(candidates: Sequence[Candidate], preview_chars: int = DEFAULT_PREVIEW_CHARS) -> str:
    """One line per candidate: checkbox, message number, single-line preview (N1)."""
    lines = [
        f"- [{'x' if c.ticked else ' '}] #{c.label} {_preview(c.text, preview_chars)}" for c in candidates
    ]
    return "".join(line.rstrip() + "\n" for line in lines)


def _parse_lines(text: str) -> list[tuple[str, re.Match[str] | None]]:
    """Non-blank lines (trailing spaces ignored) with their checklist match, if any."""
    return [(line.rstrip(), _CHECK_LINE.match(line.rstrip())) for line in text.splitlines() if line.strip()]


def _preview_of(match: re.Match[str] | None) -> str:
    return (match.group(3) or "") if match else ""


def _line_problems(original: dict[str, str], edited: list[tuple[str, re.Match[str] | None]]) -> list[Problem]:
    problems: list[Problem] = []
    seen: list[str] = []
    for line, match in edited:
        seq = match.group(2) if match else None
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
    original_lines = {m.group(2): _preview_of(m) for _, m in original_parsed if m}
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
        _as_label(m.group(2)) for _, m in checks if m and m.group(1) in "xX" and m.group(2) in original_lines
    )
    return TickResult(ticked=ticked, problems=problems)


def _as_label(text: str) -> Label:
    return int(text) if text.isdigit() else text


def dismissed(candidates: Sequence[Candidate], kept: Collection[Label]) -> frozenset[int]:
    """Messages none of whose lines is kept: never listed again (N6); they stay in the record under their
    number. `kept` holds labels (a message's seq counts for the message, "12.3" for message 12)."""
    kept_seqs = {parsed[0] for label in kept if (parsed := parse_label(label))}
    return frozenset(c.seq for c in candidates if c.seq not in kept_seqs)
