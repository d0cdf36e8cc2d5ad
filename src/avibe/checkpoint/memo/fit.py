"""The memo's lines and their text: labels, copying from the record (N4), cutting to the budgets (N5).

API:
    Label = int | str       a checklist line's number: 12 (the whole message #12) or "12.3" (its 3rd sentence)
    label_of(seq, part) -> Label       parse_label(label) -> (seq, part) | None
    clean_labels(raw) -> frozenset[Label]   well-formed labels only, normalised
    label_order(label) -> (seq, part)  the order of lines in the record (-1, -1 for junk)
    cut_note(seq) -> str               "\\n[... cut; full text: message #12 in the record]"
    sentence_note(seq) -> str          " (from #12)": the pointer after a sentence kept alone
    cut_message(entry, counter, per_message) -> MemoItem      the text, or its prefix + cut_note (N5)
    sentence_item(entry, part, counter, per_message) -> MemoItem    one sentence verbatim + its pointer
    prefix_kept(entry, counter, per_message) -> int   characters the whole-message item carries
    copy_line(label, entries, previous, counter, budgets) -> MemoItem | Problem
    build_memo(ticked, entries_by_seq, counter, budgets, previous_memo=()) -> MemoOutcome(items, problems)
    memo_text_matches(item, record_text) -> bool    verbatim, a prefix + cut_note, or a piece + sentence_note
    memo_labels(items, entries=None) -> list[Label]  the checklist label of each memo item
    memo_tokens(items, counter) -> int       over_budget_problem(total, budget) -> Problem

build_memo copies the text from the entries given, never from model output (N4), and re-checks the kind; a
ticked seq that is not a user entry is refused. A previous memo item may be kept as it is when its entry
is not given (it was copied from the record by an earlier checkpoint).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from avibe.checkpoint.budgets import Budgets
from avibe.checkpoint.memo.words import sentences
from avibe.checkpoint.model import MemoItem, Problem
from avibe.ports import TokenCounter
from avibe.record.entries import Entry

SENTENCE_CUT: Final = " ..."  # a sentence itself over the per-message budget is cut, marked so
Label = int | str
_WORD_BREAK_SHARE: Final = 5  # cut at a space when one is within the last fifth of the prefix


def label_of(seq: int, part: int) -> Label:
    return seq if part == 0 else f"{seq}.{part}"


def parse_label(label: object) -> tuple[int, int] | None:
    """(seq, part) of a label (an int, or "12" / "12.3"); None for anything else (a bool included)."""
    if type(label) is int:
        return (label, 0) if label >= 0 else None
    if isinstance(label, str) and re.fullmatch(r"\d+(\.\d+)?", label):
        seq, _, part = label.partition(".")
        return int(seq), int(part or 0)
    return None


def clean_labels(raw: Iterable[object]) -> frozenset[Label]:
    """The well-formed labels among `raw`, normalised ("12" -> 12); junk and bools dropped (True == 1 in a
    set, so a bool left in would hide message #1's label)."""
    return frozenset(label_of(*parsed) for label in raw if (parsed := parse_label(label)))


def label_order(label: Label) -> tuple[int, int]:
    return parse_label(label) or (-1, -1)


@dataclass(frozen=True, slots=True)
class MemoOutcome:
    items: tuple[MemoItem, ...]
    problems: list[Problem]


def _sentence_part(item: MemoItem, entry: Entry | None) -> int:
    """Which sentence of its message a kept sentence item is (0: the item is not one it can place)."""
    if entry is None or not item.text.endswith(sentence_note(item.seq)):
        return 0
    body = item.text.removesuffix(sentence_note(item.seq)).removesuffix(SENTENCE_CUT)
    for k, (a, b) in enumerate(sentences(entry.text), 1):
        if entry.text[a:b].startswith(body):
            return k
    return 0


def memo_labels(items: Sequence[MemoItem], entries: Mapping[int, Entry] | None = None) -> list[Label]:
    """The checklist label of each memo item: its seq, or "seq.k" for a sentence kept alone (k placed from
    the entry when given, else numbered by its position among that message's sentence items)."""
    labels: list[Label] = []
    used: set[Label] = set()
    for item in items:
        part = 0
        if item.text.endswith(sentence_note(item.seq)):
            part = _sentence_part(item, (entries or {}).get(item.seq))
            while part == 0 or label_of(item.seq, part) in used:
                part += 1
        label = label_of(item.seq, part)
        used.add(label)
        labels.append(label)
    return labels


def cut_note(seq: int) -> str:
    return f"\n[... cut; full text: message #{seq} in the record]"


def sentence_note(seq: int) -> str:
    return f" (from #{seq})"


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

    Budgets from budgets_for are at least MIN_MEMO_MESSAGE (150) tokens, room for the note and a paragraph;
    below the note's own size the item is the note alone (and validate reports it over its cap)."""
    if _fits(entry.text, counter, per_message):
        return MemoItem(seq=entry.seq, text=entry.text, cut=False)
    note = cut_note(entry.seq)
    k = _word_boundary(entry.text, _longest_prefix(entry.text, note, counter, per_message))
    while k > 0 and not _fits(entry.text[:k] + note, counter, per_message):
        k -= 1  # a tokenizer whose counts are not monotone in length
    return MemoItem(seq=entry.seq, text=entry.text[:k] + note, cut=True)


def sentence_item(entry: Entry, part: int, counter: TokenCounter, per_message: int) -> MemoItem:
    """Sentence `part` (1-based) of the entry, verbatim, with its pointer to the whole message; a sentence
    itself over the per-message budget is cut (its longest prefix that fits, marked SENTENCE_CUT)."""
    a, b = sentences(entry.text)[part - 1]
    sentence, note = entry.text[a:b], sentence_note(entry.seq)
    if _fits(sentence + note, counter, per_message):
        return MemoItem(seq=entry.seq, text=sentence + note, cut=True)
    tail = SENTENCE_CUT + note
    k = _word_boundary(sentence, _longest_prefix(sentence, tail, counter, per_message))
    while k > 1 and not _fits(sentence[:k] + tail, counter, per_message):
        k -= 1
    return MemoItem(seq=entry.seq, text=sentence[: max(k, 1)] + tail, cut=True)


def memo_text_matches(item: MemoItem, record_text: str) -> bool:
    """True when the item holds the record text byte for byte; or (cut) a proper prefix plus the cut note;
    or (cut) a non-empty verbatim piece of the record - a sentence, or its start marked SENTENCE_CUT - plus
    the sentence pointer " (from #N)"."""
    if not item.cut:
        return item.text == record_text
    note = cut_note(item.seq)
    if item.text.endswith(note):
        prefix = item.text[: len(item.text) - len(note)]
        return len(prefix) < len(record_text) and record_text.startswith(prefix)
    pointer = sentence_note(item.seq)
    if not item.text.endswith(pointer):
        return False
    body = item.text[: len(item.text) - len(pointer)]
    start = body.removesuffix(SENTENCE_CUT)
    return bool(body.strip()) and (body in record_text or (bool(start.strip()) and start in record_text))


def memo_tokens(items: Iterable[MemoItem], counter: TokenCounter) -> int:
    return sum(counter.count(item.text) for item in items)


def copy_line(
    label: Label,
    entries: Mapping[int, Entry],
    previous: Mapping[Label, MemoItem],
    counter: TokenCounter,
    budgets: Budgets,
) -> MemoItem | Problem:
    seq, part = label_order(label)
    entry = entries.get(seq)
    if entry is None:
        if label in previous:
            return previous[label]
        return Problem(
            "memo.unknown_message", f"Message #{label} is not in the checklist's record; untick it."
        )
    if not entry.is_user:
        return Problem(
            "memo.not_user",
            f"Message #{seq} was not written by the user ({entry.kind}); only the "
            "user's own messages can be kept. Untick it.",
        )
    if part == 0:
        return cut_message(entry, counter, budgets.memo_per_message)
    if part > len(sentences(entry.text)):
        return Problem("memo.unknown_message", f"Message #{seq} has no sentence {part}; untick #{label}.")
    return sentence_item(entry, part, counter, budgets.memo_per_message)


def _redundant(item: MemoItem, whole: MemoItem | None, record: str | None) -> bool:
    """A sentence item whose words the kept whole message already holds (its uncut text, or its prefix)."""
    if whole is None or record is None or not item.text.endswith(sentence_note(item.seq)):
        return False
    body = item.text.removesuffix(sentence_note(item.seq)).removesuffix(SENTENCE_CUT)
    held = whole.text.removesuffix(cut_note(item.seq)) if whole.cut else whole.text
    at = record.find(body)
    return at >= 0 and at + len(body) <= len(held) and record.startswith(held)


def build_memo(
    ticked: Iterable[Label],
    entries_by_seq: Mapping[int, Entry],
    counter: TokenCounter,
    budgets: Budgets,
    previous_memo: Sequence[MemoItem] = (),
) -> MemoOutcome:
    """Copy each ticked message's (or sentence's) original text from the record entries (N4), cut per
    message (N5); a sentence the kept whole message already holds is not repeated; a problem when the
    total passes the memo budget (V3)."""
    previous = dict(zip(memo_labels(previous_memo, entries_by_seq), previous_memo, strict=True))
    items: list[MemoItem] = []
    problems: list[Problem] = []
    wholes: dict[int, MemoItem] = {}
    labels = {label for raw in set(ticked) if (parsed := parse_label(raw)) for label in [label_of(*parsed)]}
    for label in sorted(labels, key=label_order):
        copied = copy_line(label, entries_by_seq, previous, counter, budgets)
        if isinstance(copied, Problem):
            problems.append(copied)
            continue
        entry = entries_by_seq.get(copied.seq)
        if _redundant(copied, wholes.get(copied.seq), entry.text if entry else None):
            continue
        if any(item.seq == copied.seq and item.text == copied.text for item in items):
            continue  # a sentence said twice in one message: kept once (a repeat would fail validation)
        if label_order(label)[1] == 0:
            wholes[copied.seq] = copied
        items.append(copied)
    total = memo_tokens(items, counter)
    if total > budgets.memo_total:
        problems.append(over_budget_problem(total, budgets.memo_total))
    return MemoOutcome(items=tuple(items), problems=problems)


def prefix_kept(entry: Entry, counter: TokenCounter, per_message: int) -> int:
    """How many characters of the entry its whole-message memo item carries (all of them when uncut)."""
    whole = cut_message(entry, counter, per_message)
    return len(whole.text) - len(cut_note(entry.seq)) if whole.cut else len(entry.text)


def over_budget_problem(total: int, budget: int) -> Problem:
    return Problem(
        "memo.over_budget",
        f"The ticked messages total {total} tokens; the memo holds at most "
        f"{budget}. Untick the ones that are done, superseded or already in the mind.",
    )
