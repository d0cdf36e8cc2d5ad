"""A kept rule and the user's later words about it, by subject, never by wording (N3, P3).

API:
    subject(text) -> frozenset[str]     what a message speaks of: its subject words (`memo.subject_words`)
                                        less words that name nothing, and each part of a path
    about_same(line, later) -> bool     `later` speaks of something `line` speaks of (one shared word)
    later_changes(memo) -> dict[int, tuple[int, ...]]
        for each memo item worded as a rule, grant or limit, the later memo items about the same thing
    settle_changes(candidates, labels, entries, counter, budgets, previous_memo=(), first=(), live=())
        -> Settled(labels, beside, let_go)
        every kept rule with every later user message about the same thing (moving out, kept before, or
        still in the conversation) copied beside it; where one cannot fit, the rule is let go

Why by subject: "Scratch what I said about the snapshots" withdraws "You may delete the snapshots without
asking me." in words no list of corrections knows; the model unticked the grant, the harness kept it back
as a rule, and the recollection showed it as still in force. Whatever the user's words, a later message
that names the same thing as a kept rule travels with it, newest last, and the recollection marks the
rule as changed later. A false match costs memo budget and a note, never a word of the user's. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from avibe.checkpoint.budgets import Budgets
from avibe.checkpoint.memo import (
    Candidate,
    Label,
    build_memo,
    changes_beside,
    label_of,
    memo_labels,
    memo_tokens,
    reads_as_rule,
    sentence_note,
    sentences,
    subject_words,
)
from avibe.checkpoint.model import MemoItem
from avibe.ports import TokenCounter
from avibe.record.entries import Entry

# Words of four letters or more that name no thing a rule could be about - function words, and the
# verbs of what may be done to anything ("delete", "touch"): sharing one says nothing ("You may delete
# the snapshots" is not about "Never delete the vendor folder").
_NAMES_NOTHING: Final = frozenset(
    re.findall(
        r"\S+",
        "about without within through across around over under into onto upon those these their there "
        "anything everything something nothing whatever thank look "
        "said what that this there here some more than like want need make made sure know think "
        "thing going done okay good fine well were been being does doing also only just very really "
        "time later again still first last next back ahead earlier before after while asking check "
        "delete deleting remove removing change changing update updating edit editing write writing read "
        "reading touch touching modify modifying wipe wiping prune pruning rewrite rewriting keep keeping "
        "leave leaving create creating move moving rename renaming install installing commit committing "
        "merge merging push pushing open close clean cleaning work working help whenever",
    )
)
_PATH_PART: Final = re.compile(r"[^\W_]{4,}")


def subject(text: str) -> frozenset[str]:
    """The words a message speaks of: `subject_words` (content words, plurals folded, no rule wording)
    without words that name nothing ("about", "said"), and a path's parts too ("vendor/lib" also
    "vendor" and "lib" when four letters or more), so "the vendor folder" meets "vendor/"."""
    words: set[str] = set()
    for word in subject_words(text):
        words.add(word)
        if "/" in word or "." in word:
            words.update(p for p in _PATH_PART.findall(word) if p not in _NAMES_NOTHING)
    return frozenset(w for w in words if w not in _NAMES_NOTHING)


def about_same(line: str, later: str) -> bool:
    """Whether `later` speaks of something `line` speaks of: one shared subject word."""
    return bool(subject(line) & subject(later))


def _said(item: MemoItem) -> str:
    """A memo item's words without the harness's pointer after a sentence kept alone."""
    return item.text.removesuffix(sentence_note(item.seq))


def later_changes(memo: Sequence[MemoItem]) -> dict[int, tuple[int, ...]]:
    """For each memo item worded as a standing rule, grant or limit (N2), the message numbers of the later
    memo items about the same thing (`about_same`), in order; items with none are left out."""
    links: dict[int, tuple[int, ...]] = {}
    for item in memo:
        if not reads_as_rule(_said(item)):
            continue
        later = sorted({o.seq for o in memo if o.seq > item.seq and about_same(_said(item), _said(o))})
        if later:
            links[item.seq] = (*links.get(item.seq, ()), *later)
    return {seq: tuple(sorted(set(seqs))) for seq, seqs in links.items()}


@dataclass(frozen=True, slots=True)
class Settled:
    labels: frozenset[Label]  # the memo's lines after this step
    beside: tuple[Label, ...] = ()  # later messages added beside a rule about the same thing
    let_go: tuple[Label, ...] = ()  # rules let go because their later words could not fit


def _later_pool(
    candidates: Sequence[Candidate], entries: Mapping[int, Entry], live: Collection[int]
) -> dict[Label, tuple[int, str]]:
    """The user's messages a rule's change can be: every whole message moving out or kept before, every
    line kept before, and every message still in the conversation (user entries by stored kind, N7)."""
    pool: dict[Label, tuple[int, str]] = {}
    for c in candidates:
        if c.part == 0 or c.kept:
            entry = entries.get(c.seq)
            pool[c.label] = (c.seq, entry.text if entry is not None and c.part == 0 else c.text)
    for seq in live:
        entry = entries.get(seq)
        if entry is not None and entry.is_user:
            pool.setdefault(seq, (seq, entry.text))
    return pool


def _shown_as(change: Label, rule: str, entries: Mapping[int, Entry]) -> list[Label]:
    """The lines that can show a later message beside a rule, best first: the whole message, then each
    of its sentences about the same thing alone, shortest first (" (from #N)" points to the whole)."""
    entry = entries.get(change) if type(change) is int else None
    if entry is None:
        return [change]
    spans = [(b - a, k) for k, (a, b) in enumerate(sentences(entry.text), 1)]
    about = [
        (n, k) for n, k in spans if len(spans) > 1 and about_same(rule, entry.text[slice(*_span(entry, k))])
    ]
    return [change, *(label_of(entry.seq, k) for _, k in sorted(about))]


def _number(label: Label) -> tuple[int, ...]:
    """A line's place in the record: 12 -> (12,), "12.3" -> (12, 3)."""
    return tuple(int(part) for part in str(label).split("."))


def _span(entry: Entry, k: int) -> tuple[int, int]:
    return sentences(entry.text)[k - 1]


def _drop_orphans(
    kept: set[Label],
    beside: Sequence[Label],
    let_go: list[Label],
    items: Sequence[MemoItem],
    entries: Mapping[int, Entry],
    live: set[int],
) -> None:
    """A copy (a message still in the conversation, or one added here) stays only beside a line still
    kept that it speaks of: a rule let go since takes the copies kept for it along."""
    lines = list(zip(memo_labels(items, entries), items, strict=True))
    anchored = [item for label, item in lines if label not in beside and item.seq not in live]
    for label, item in sorted(lines, key=lambda line: line[1].seq):
        if label not in beside and item.seq not in live:
            continue
        said = _said(item)
        if any(
            other.seq < item.seq
            and (
                changes_beside(_said(other), said)
                or (reads_as_rule(_said(other)) and about_same(_said(other), said))
            )
            for other in anchored
        ):
            anchored.append(item)  # in order: a copy beside a copy kept is kept
        else:
            kept.discard(label)
            let_go.append(label)


def settle_changes(
    candidates: Sequence[Candidate],
    labels: Collection[Label],
    entries: Mapping[int, Entry],
    counter: TokenCounter,
    budgets: Budgets,
    previous_memo: Sequence[MemoItem] = (),
    first: Collection[Label] = (),
    live: Collection[int] = (),
) -> Settled:
    """The memo's lines with every kept rule's later words beside it (N3, P3): for each line worded as a
    rule (newest first), each later user message about the same thing (`about_same`) that no line holds
    is added where it fits, whole or its sentences about the same thing alone; where it cannot, the
    rule is let go (never kept alone as if in force). `first` (the
    mission's source) is never let go. Repeats until settled: an added change may be a rule itself, and
    a rule let go takes the earlier rules whose change it was with it."""
    kept = set(labels)
    protected = set(first)
    beside: list[Label] = []
    let_go: list[Label] = []
    left_out: set[Label] = set()  # rules let go because their change could not fit
    pool = _later_pool(candidates, entries, live)

    def memo(lines: Collection[Label]) -> tuple[MemoItem, ...]:
        return build_memo(lines, entries, counter, budgets, previous_memo).items

    def fits(lines: Collection[Label]) -> bool:
        return memo_tokens(memo(lines), counter) <= budgets.memo_total

    def room_for(label: Label) -> bool:
        """A rule's later words take no other line's place (they are still in the conversation, or
        `newest_kept` has already made room for them): they fit, or the rule goes."""
        return fits(kept | {label})

    for _ in range(2 * (len(pool) + len(kept)) + 2):  # each round adds a change, or lets a rule go
        items = memo(kept)
        held = {item.seq for item in items}
        rules = [
            (lab, item)
            for lab, item in zip(memo_labels(items, entries), items, strict=True)
            if lab in kept and reads_as_rule(_said(item))
        ]
        wanted = [
            (rule, change)
            for rule, item in reversed(rules)
            for change, (seq, text) in sorted(pool.items(), key=lambda kv: kv[1][0])
            if seq > item.seq and seq not in held and about_same(_said(item), text)
        ]
        if not wanted:
            break
        rule, change = wanted[0]
        rule_text = _said(next(item for lab, item in rules if lab == rule))
        fitting = [] if change in left_out else _shown_as(change, rule_text, entries)
        if (shown := next((label for label in fitting if room_for(label)), None)) is not None:
            kept.add(shown)
            beside.append(shown)
        elif rule in protected:  # the mission's source stays (its entry's status says the change)
            pool = {k: v for k, v in pool.items() if k != change}
        else:  # let go, and never back as another rule's change: that rule goes too (no cycle)
            kept.discard(rule)
            let_go.append(rule)
            left_out.add(rule)
    for rule in [g for g in let_go if g in left_out]:  # a rule whose changes all came in after all
        rule_text = next((text for label, (_, text) in pool.items() if label == rule), "")
        held = {item.seq for item in memo(kept)}
        seq = _number(rule)[0]
        unshown = [
            s for s, text in pool.values() if s > seq and s not in held and about_same(rule_text, text)
        ]
        if rule_text and not unshown and fits(kept | {rule}):
            kept.add(rule)
            beside.append(rule)
    _drop_orphans(kept, beside, let_go, memo(kept), entries, set(live))
    back = set(beside) & set(let_go)
    return Settled(
        frozenset(kept),
        tuple(b for b in beside if b not in back),
        tuple(g for g in let_go if g not in back),
    )
