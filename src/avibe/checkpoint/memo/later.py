"""A kept rule and the user's later words about it (N3, P3), by what they name, never by how they are worded.

API:
    said(item) -> str                  a memo item's words, without the harness's cut note or pointer
    mark_later(items, live) -> tuple[MemoItem, ...]
        each rule-worded item with `later`: the user's later messages about the same thing (`about_same`)
        still in the conversation and not in the memo, by record number
    later_links(memo) -> set[tuple[int, int]]
        (rule, later) for each rule-worded item and each later memo item about the same thing, and for
        each message its `later` names: what the recollection marks "changed later"

Why: "Scratch what I said about the snapshots" withdraws "You may delete the snapshots without asking
me." in words no list of corrections knows; the model unticked the grant, the harness kept it back as a
rule, and the recollection showed it as still in force. So whatever the words, a later user message that
names the same thing as a kept rule is shown with it, newest last: beside it in the memo once it has
moved out (`newest_kept` keeps the pair or lets both go), and while it is still in the conversation, the
rule's header says it changed later and where - a pointer costs no memo budget, where a copy of a message
still in view made checkpoints free too little on small windows (V8). A false match costs a note, never a
word of the user's. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

from avibe.checkpoint.memo.fit import cut_note, sentence_note
from avibe.checkpoint.memo.words import about_same, reads_as_rule
from avibe.checkpoint.model import MemoItem
from avibe.record.entries import Entry


def said(item: MemoItem) -> str:
    """A memo item's words as the user wrote them: without the cut note or the sentence pointer."""
    return item.text.removesuffix(cut_note(item.seq)).removesuffix(sentence_note(item.seq))


def mark_later(items: Sequence[MemoItem], live: Iterable[Entry]) -> tuple[MemoItem, ...]:
    """The memo's items, each rule-worded one with the record numbers of the user's later messages about
    the same thing that are still in the conversation and not in the memo (`MemoItem.later`); every other
    item's `later` cleared (a mark made at an earlier checkpoint is made again or not at all). `live`:
    entries still in the conversation; only the user's count (stored kind, N7)."""
    held = {item.seq for item in items}
    words = [(e.seq, e.text) for e in live if e.is_user and e.seq not in held]
    marked = []
    for item in items:
        text = said(item)
        later = tuple(sorted({seq for seq, t in words if seq > item.seq and about_same(text, t)}))
        marked.append(replace(item, later=later if reads_as_rule(text) else ()))
    return tuple(marked)


def later_links(memo: Sequence[MemoItem]) -> set[tuple[int, int]]:
    """(rule, later) for each rule-worded memo item and each later memo item about the same thing, and
    for each message a memo item's `later` names (still in the conversation when it was marked)."""
    links = {(item.seq, seq) for item in memo for seq in item.later}
    for rule in memo:
        if reads_as_rule(said(rule)):
            links |= {
                (rule.seq, then.seq)
                for then in memo
                if then.seq > rule.seq and about_same(said(rule), said(then))
            }
    return links
