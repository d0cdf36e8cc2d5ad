"""Which lines the harness keeps besides the model's ticks: the mission's source (M4) and the rules (N2).

API:
    mission_sources(missions, candidates, entries, counter, per_message) -> list[Label]
        for each mission text (the model's words, M4), the line with the user's sentence that says most of it
    rules_kept(candidates, ticked, entries, counter, budgets, previous_memo=(), first=())
        -> RulesKept(added, let_go)
        every rule-worded sentence of a message moving out now, or memo item kept before, that the ticks
        leave out; newest first, within the memo budget, letting go ticked lines that state no rule (oldest
        first) to make room, and fitting over-ticking

Why (N2 as a harness guarantee): a small model, offered every sentence, ticked others than the rules at
the ends (the eval's late_rule: 0 of 3 kept on the 0.5B). So each sentence of a message moving out now
that reads as a standing rule ("never", "do not", "only", "may" ...) and that no ticked line holds is kept
by the harness too - copied from the record like any tick, within the memo budget, the newest messages
first; and so is a rule-worded memo item kept before that the model now lets go (the 0.5B dropped them at
the next checkpoint). Choosing by text here only adds more of the user's own words: candidates are still
user entries by stored kind (N7). What ends a rule's stay is the budget: newer rules push out older ones.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from avibe.checkpoint.budgets import Budgets
from avibe.checkpoint.memo.checklist import Candidate
from avibe.checkpoint.memo.fit import (
    Label,
    build_memo,
    clean_labels,
    copy_line,
    cut_note,
    label_of,
    label_order,
    memo_labels,
    memo_tokens,
    parse_label,
    prefix_kept,
    sentence_note,
)
from avibe.checkpoint.memo.words import content_words, reads_as_rule, says_nothing_that_stays, sentences
from avibe.checkpoint.model import MemoItem, Problem
from avibe.ports import TokenCounter
from avibe.record.entries import Entry


def _rule_lines(
    entry: Entry, ticked: Collection[Label], counter: TokenCounter, per_message: int
) -> list[Label]:
    """The lines that would carry the rule-like sentences of `entry` that its ticked lines do not: the whole
    message for a sentence inside what the whole item keeps (all of it when uncut), else the sentence's own
    line ("12.7")."""
    prefix = prefix_kept(entry, counter, per_message)
    parts = {p[1] for label in ticked if (p := parse_label(label)) and p[0] == entry.seq}
    lines: list[Label] = []
    for k, (a, b) in enumerate(sentences(entry.text), 1):
        inside = b <= prefix
        if k in parts or (inside and 0 in parts) or not reads_as_rule(entry.text[a:b]):
            continue
        lines.append(entry.seq if inside else label_of(entry.seq, k))
    return list(dict.fromkeys(lines))


def _unticked_rules(
    candidates: Sequence[Candidate],
    ticked: Collection[Label],
    entries: Mapping[int, Entry],
    counter: TokenCounter,
    per_message: int,
) -> list[Label]:
    """Every line that would carry a rule-worded sentence the ticks leave out: of a message moving out now
    (its sentences, see _rule_lines), or a memo item kept before (its line); newest first."""
    lines: list[Label] = []
    for seq in sorted({c.seq for c in candidates}, reverse=True):
        entry = entries.get(seq)
        mine = [c for c in candidates if c.seq == seq]
        if any(not c.kept for c in mine) and entry is not None and entry.is_user:
            lines += reversed(_rule_lines(entry, ticked, counter, per_message))
        for c in sorted((c for c in mine if c.kept), key=lambda c: c.part, reverse=True):
            body = c.text.removesuffix(sentence_note(seq)).removesuffix(cut_note(seq))
            if c.label not in ticked and reads_as_rule(body):
                lines.append(c.label)
    return lines


MISSION_MATCH_WORDS: Final = 3  # at least this many of the mission's content words in the sentence ...
MISSION_MATCH_SHARE: Final = 0.5  # ... and at least this share of them


def mission_sources(
    missions: Sequence[str],
    candidates: Sequence[Candidate],
    entries: Mapping[int, Entry],
    counter: TokenCounter,
    per_message: int,
) -> list[Label]:
    """For each mission text, the line carrying the earliest user sentence it says: one sharing at least
    MISSION_MATCH_WORDS content words with it, and MISSION_MATCH_SHARE of the shorter's (a mission the
    model wrote from several sentences still finds the one that set the goal; the earliest, because the
    user states the purpose before the details, and not one already the source of an earlier mission).
    The whole message when its memo item holds that sentence, else the sentence's own line. Candidates
    only (user entries by stored kind, N7); none for a mission that already holds the sentence (quoted
    from the record)."""
    wanted_each = [content_words(mission) for mission in missions]
    if not wanted_each:
        return []
    said = [
        (text, content_words(text), label)
        for text, label in _sentence_lines(candidates, entries, counter, per_message)
    ]
    lines: list[Label] = []
    for mission, wanted in zip(missions, wanted_each, strict=True):
        for text, words, label in said:
            least = max(MISSION_MATCH_WORDS, min(len(wanted), len(words)) * MISSION_MATCH_SHARE)
            if label not in lines and len(wanted & words) >= least and text not in mission:
                lines.append(label)
                break
    return lines


def _sentence_lines(
    candidates: Sequence[Candidate], entries: Mapping[int, Entry], counter: TokenCounter, per_message: int
) -> Iterator[tuple[str, Label]]:
    """(sentence, the line carrying it) for each sentence of the candidates' user entries, in order."""
    for seq in sorted({c.seq for c in candidates}):
        entry = entries.get(seq)
        if entry is None or not entry.is_user:
            continue
        prefix = prefix_kept(entry, counter, per_message)
        for k, (a, b) in enumerate(sentences(entry.text), 1):
            yield entry.text[a:b], seq if b <= prefix else label_of(seq, k)


@dataclass(frozen=True, slots=True)
class RulesKept:
    added: tuple[Label, ...]  # lines kept besides the model's ticks, newest first
    let_go: tuple[Label, ...] = ()  # ticked lines let go: N3's push-alongs, then to fit the budget


def rules_kept(
    candidates: Sequence[Candidate],
    ticked: Collection[Label],
    entries: Mapping[int, Entry],
    counter: TokenCounter,
    budgets: Budgets,
    previous_memo: Sequence[MemoItem] = (),
    first: Sequence[Label] = (),
) -> RulesKept:
    """The memo's lines as the harness settles them around the model's ticks (N2, N5): `first` (the
    mission's source, `mission_sources`) before everything, kept and never let go like a rule; every
    rule-worded sentence of a user message moving out now that no ticked line holds, and every
    rule-worded memo item kept before that the model let go, is added - newest first. Rules come before
    what the model ticked that states none, and the total stays within the budget: ticked lines without a
    rule are let go, oldest first, to make room - and when the ticks alone pass the budget (a 0.5B model
    ticks every number it can count, and a repair round rarely fixes it), those first, then the oldest
    ticked rules."""
    ticked_labels = clean_labels(ticked)
    previous = dict(zip(memo_labels(previous_memo, entries), previous_memo, strict=True))

    def total(labels: Collection[Label]) -> int:
        return memo_tokens(build_memo(labels, entries, counter, budgets, previous_memo).items, counter)

    plain: list[tuple[Label, int]] = []  # ticked lines that state no rule, oldest first, with their cost
    ruled: list[Label] = []
    let_go: list[Label] = []
    for label in sorted(ticked_labels, key=label_order):
        item = copy_line(label, entries, previous, counter, budgets)
        if isinstance(item, MemoItem) and (label in first or reads_as_rule(item.text)):
            ruled.append(label)
        elif isinstance(item, MemoItem) and says_nothing_that_stays(item.text):
            let_go.append(label)  # N3: a tick on "Thanks. What's next?" is let go whatever the budget
        elif isinstance(item, MemoItem):
            plain.append((label, counter.count(item.text)))
    used = total(ticked_labels)
    while used > budgets.memo_total and (plain or ruled):  # over-ticked: fit the budget, rules last
        let_go.append(plain.pop(0)[0] if plain else ruled.pop(0))
        used = total(ticked_labels - set(let_go))
    added: list[Label] = []
    wanted = [*first, *_unticked_rules(candidates, ticked_labels, entries, counter, budgets.memo_per_message)]
    for label in wanted:
        item = copy_line(label, entries, previous, counter, budgets)
        if label in ticked_labels or label in added or isinstance(item, Problem):
            continue
        cost = counter.count(item.text)
        if used + cost - sum(c for _, c in plain) > budgets.memo_total:
            continue  # not even with every plain line gone
        while used + cost > budgets.memo_total:
            gone, freed = plain.pop(0)
            let_go.append(gone)
            used -= freed
        used += cost
        added.append(label)
    while added and total((ticked_labels - set(let_go)) | set(added)) > budgets.memo_total:
        added.pop()  # counted apart, lines can differ from the memo built (a sentence its whole holds)
    return RulesKept(tuple(added), tuple(let_go))
