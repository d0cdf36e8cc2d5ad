"""The user's newest words and what changes a kept rule (N1, N3, P3), settled after the ticks and rules.

API:
    MIN_NEWEST_WORDS                   a shorter reply means nothing alone: not kept for its recency
    line_text(label, entries, previous) -> str   a line's words from the record (or the memo kept before),
                                       without the harness's pointers
    newest_kept(candidates, chosen, entries, counter, budgets, previous_memo=(), first=(), live=())
        -> NewestKept(added, let_go, labels, beside)
        a later message about a kept rule stays with it (or the rule goes), each message moving out now is
        kept whole, newest first (one too long for a memo line goes on sentence by sentence, in order), and
        a message still in the conversation that changes a kept line is copied beside it where it fits

Why: `rules_kept` keeps rule-WORDED sentences; a rule worded without any of those words ("dont use /tmp
keep everything within the claude dir", a real session's newest rule) left with the model's untick. So
every user message moving out now is kept whole as well, newest first, as a handoff copies the user's
recent messages - after the rules, before the chatter the model ticked that is older. And a rule never
stays as if in force when the user changed it later (N3, P3): a later user message about the same thing
(`about_same`: a thing both name, never a list of rule or correction words) stays beside it, or the rule
is let go. A later message still in the conversation is not copied for a rule: the recollection marks the
rule "changed later" and points at it (`later.mark_later`); it is kept beside the rule when it moves out.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from avibe.checkpoint.budgets import Budgets
from avibe.checkpoint.memo.checklist import Candidate
from avibe.checkpoint.memo.fit import (
    Label,
    build_memo,
    clean_labels,
    cut_note,
    label_of,
    label_order,
    memo_labels,
    memo_tokens,
    prefix_kept,
    sentence_note,
)
from avibe.checkpoint.memo.words import (
    about_same,
    changes_beside,
    reads_as_rule,
    says_nothing_that_stays,
    sentences,
    word_count,
)
from avibe.checkpoint.model import MemoItem
from avibe.ports import TokenCounter
from avibe.record.entries import Entry

MIN_NEWEST_WORDS: Final = 3  # a shorter reply means nothing alone (N3): not kept for its recency


def line_text(label: Label, entries: Mapping[int, Entry], previous: Mapping[Label, MemoItem]) -> str:
    """The words a line carries: its message or sentence from the record, else the memo item kept before
    (without its cut note or sentence pointer, which are the harness's words)."""
    seq, part = label_order(label)
    entry = entries.get(seq)
    if entry is None:
        item = previous.get(label)
        return item.text.removesuffix(cut_note(seq)).removesuffix(sentence_note(seq)) if item else ""
    spans = sentences(entry.text)
    return entry.text if part == 0 or part > len(spans) else entry.text[slice(*spans[part - 1])]


def means_something(text: str) -> bool:
    """A message worth keeping for itself (N3): MIN_NEWEST_WORDS words or more, and more than pleasantries,
    go-aheads and questions for information (`says_nothing_that_stays`)."""
    return word_count(text) >= MIN_NEWEST_WORDS and not says_nothing_that_stays(text)


@dataclass(frozen=True, slots=True)
class NewestKept:
    added: tuple[Label, ...]  # lines kept besides what was chosen before: newest first
    let_go: tuple[Label, ...] = ()  # lines chosen before that gave way to newer words of the user's
    labels: frozenset[Label] = frozenset()  # the memo's lines after this step
    beside: tuple[Label, ...] = ()  # of `labels`: messages still in the conversation copied beside a line


@dataclass
class _Settling:
    """The lines being settled, and what each step added or let go; `protected`: the mission's source."""

    candidates: Sequence[Candidate]
    entries: Mapping[int, Entry]
    counter: TokenCounter
    budgets: Budgets
    previous_memo: Sequence[MemoItem]
    kept: set[Label]
    protected: set[Label]
    added: list[Label] = field(default_factory=list)
    let_go: list[Label] = field(default_factory=list)
    left_out: set[Label] = field(default_factory=set)  # rules let go: their change could not be shown

    def __post_init__(self) -> None:
        self.by_label = {c.label: c for c in self.candidates}
        self.previous = dict(
            zip(memo_labels(self.previous_memo, self.entries), self.previous_memo, strict=True)
        )

    def text(self, label: Label) -> str:
        return line_text(label, self.entries, self.previous)

    def total(self, labels: Collection[Label]) -> int:
        built = build_memo(labels, self.entries, self.counter, self.budgets, self.previous_memo)
        return memo_tokens(built.items, self.counter)

    def is_rule(self, label: Label) -> bool:
        return label in self.protected or reads_as_rule(self.text(label))

    def held(self, label: Label) -> bool:
        seqs = {label_order(k)[0] for k in self.kept if k in self.by_label}
        return label in self.kept or (type(label) is int and label in seqs)

    def changes_a_rule(self, label: Label) -> bool:
        """A later message about the same thing as a kept rule: it stays as long as the rule does."""
        said = self.text(label)
        return any(
            label_order(k)[0] < label_order(label)[0] and about_same(self.text(k), said)
            for k in self.kept
            if k in self.by_label and self.is_rule(k)
        )

    def make_room(self, label: Label, older_than: tuple[int, int], own_later: bool = False) -> bool:
        """Let go kept lines that state no rule, change none, and come before `older_than`, oldest first -
        then, with `own_later`, the sentences of `label`'s own message after it, the last first - until
        `label` fits; False when it cannot."""
        seq, part = label_order(label)
        while self.total(self.kept | {label}) > self.budgets.memo_total:
            free = [
                k
                for k in self.kept
                if k not in self.protected and not self.is_rule(k) and not self.changes_a_rule(k)
            ]
            out = sorted((k for k in free if label_order(k) < older_than), key=label_order)
            if own_later:
                after = (k for k in free if label_order(k)[0] == seq and label_order(k)[1] > part)
                out += sorted(after, key=label_order, reverse=True)
            if not out:
                return False
            self.drop(out[0])
        return True

    def unshown_change(self, rule: Label) -> Label | None:
        """The first later user message about the same thing as `rule` (moving out now, or kept before)
        that no memo line holds."""
        said = self.text(rule)
        seq = label_order(rule)[0]
        later = {c.label for c in self.candidates if c.seq > seq and (c.part == 0 or c.kept)}
        for label in sorted(later, key=label_order):
            if not self.held(label) and about_same(said, self.text(label)):
                return label
        return None

    def kept_rules(self, mission_too: bool = False) -> list[Label]:
        rules = (
            k
            for k in self.kept
            if k in self.by_label and (mission_too or k not in self.protected) and self.is_rule(k)
        )
        return sorted(rules, key=label_order)

    def keep(self, label: Label) -> None:
        self.kept.add(label)
        self.added.append(label)

    def drop(self, label: Label, for_good: bool = False) -> None:
        self.kept.discard(label)
        self.let_go.append(label)
        if for_good:
            self.left_out.add(label)


def _keep_changes(s: _Settling) -> None:
    """1. Each kept rule with the user's later words about it (N3, P3), newest rules first; where a change
    cannot fit, the rule is left out, never kept alone - but the mission's source, whose entry's status
    says the change."""
    for rule in reversed(s.kept_rules(mission_too=True)):
        while rule in s.kept and (change := s.unshown_change(rule)) is not None:
            if s.make_room(change, label_order(change)):
                s.keep(change)
            elif rule in s.protected:
                break
            else:
                s.drop(rule, for_good=True)


def _keep_newest(s: _Settling) -> None:
    """2. The newest user messages moving out now, whole, newest first while they fit (an older message
    never takes a newer one's place), but those that mean nothing alone (`means_something`). 3. What that
    added may leave a rule without its change once more: such a rule goes too, and the room it frees goes
    to the newest words again."""
    moving = sorted((c for c in s.candidates if c.part == 0 and not c.kept), key=lambda c: -c.seq)
    for _ in range(len(moving) + 1):
        for c in moving:
            gone = c.label in s.left_out and s.unshown_change(c.label) is not None  # still without its change
            if c.label in s.kept or gone or c.seq not in s.entries or not means_something(c.text):
                continue
            if not s.make_room(c.label, (c.seq, 0), own_later=True):
                break
            s.keep(c.label)
            if not _go_on(s, c.seq):
                break
        stale = [rule for rule in s.kept_rules() if s.unshown_change(rule) is not None]
        if not stale:
            return
        for rule in stale:
            s.drop(rule, for_good=True)


def _go_on(s: _Settling, seq: int) -> bool:
    """2b. A newest message kept cut (over the per-message budget) goes on, sentence by sentence in its
    order, while the memo has room - as a handoff copies its newest messages whole. A real reply of 26
    sentences answered the agent point by point, three of its points standing rules without a rule word;
    its cut kept the first three sentences and the 1.5B ticked list numbers and headings from its end.
    The model's ticks of this message's later sentences give way to its words in order (those worded as
    rules stay). Its sentences worded as rules go first: the same reply's last points, two rules in Chinese,
    were the ones the memo had no room left for. False when a sentence did not fit: then no older message
    may take a newer one's place."""
    entry = s.entries[seq]
    held = prefix_kept(entry, s.counter, s.budgets.memo_per_message)
    spans = sentences(entry.text)
    worded = [reads_as_rule(entry.text[start:end]) for start, end in spans]
    parts = sorted(range(1, len(spans) + 1), key=lambda p: not worded[p - 1])
    for part in parts:  # sorted() is stable: the rules in order, then the rest in order
        label, end = label_of(seq, part), spans[part - 1][1]
        if end <= held or label in s.kept:
            continue
        if not s.make_room(label, (seq, 0), own_later=True):
            return False
        s.keep(label)
    return True


def _copy_beside(s: _Settling, live: Collection[int]) -> list[Label]:
    """4. A user message still in the conversation that changes a kept line (`changes_beside`: two shared
    words) copied beside it where it fits without letting anything go: the eval's 0.5B answered the memo's
    "Set ... to 48" under the live "I meant ... 16, not 48", and 16 with the correction copied beside it."""
    beside: list[Label] = []
    lines = sorted((k for k in s.kept if k not in s.protected), key=label_order)
    for seq in sorted(set(live) - {label_order(k)[0] for k in s.kept}):
        said = s.text(seq)
        if not means_something(said):
            continue
        if (
            any(label_order(k)[0] < seq and changes_beside(s.text(k), said) for k in lines)
            and s.total(s.kept | {seq}) <= s.budgets.memo_total
        ):
            s.kept.add(seq)
            beside.append(seq)
    return beside


def newest_kept(
    candidates: Sequence[Candidate],
    chosen: Collection[Label],
    entries: Mapping[int, Entry],
    counter: TokenCounter,
    budgets: Budgets,
    previous_memo: Sequence[MemoItem] = (),
    first: Collection[Label] = (),
    live: Collection[int] = (),
) -> NewestKept:
    """The memo's lines after the user's newest words are settled around `chosen` (the ticks as rules_kept
    left them), within the budget - `_keep_changes`, `_keep_newest`, `_copy_beside` in turn; `live`: the
    record numbers of the user's entries still in the conversation (in `entries`). `first` (the mission's
    source) is never let go. Pure; candidates are user entries by stored kind (N7)."""
    s = _Settling(
        candidates,
        entries,
        counter,
        budgets,
        previous_memo,
        kept=set(clean_labels(chosen)) | set(clean_labels(first)),
        protected=set(clean_labels(first)),
    )
    _keep_changes(s)
    _keep_newest(s)
    beside = _copy_beside(s, live)
    back = set(s.added) & set(s.let_go)  # a line let go and added back is neither
    return NewestKept(
        tuple(a for a in s.added if a not in back),
        tuple(g for g in s.let_go if g not in back),
        frozenset(s.kept),
        tuple(beside),
    )
