"""The reminder after a user's message (F4): the memo's standing rules the message is about, restated
word for word right after it.

API:
    standing_rules(memo) -> tuple[MemoItem, ...]   the memo items that stand as rules (and their changes)
    touched_rules(memo, text, limit=REMINDED_SENTENCES) -> tuple[tuple[int, str], ...]
        (message number, sentence verbatim) of the memo's standing rules that a user message is about
    reminder(memo, message) -> ChatMessage | None    those sentences as a system note (kind "reminder"),
        when the message could go against one of them (`could_go_against`)
    could_go_against(sentence, text) -> bool   the sentence limits what may be done, or excludes what
        the message names
    with_reminder(messages, memo) -> list[ChatMessage]   the note after the newest user message, no other

Why: the 1.5B, shown the whole recollection, still did what a kept rule forbids ("Clean them up." - and it
deleted, where the user had said "do not delete anything in ... without asking me first"). "About" is read
from the words, as the memo relates a rule to its changes (a shared name, or two shared words), so it costs
no model call; only the newest user message gets the note, placed after it rather than at the end so that
it stays put for the turn's later steps (a prompt cache keeps it). Pure.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import pairwise
from typing import Final

from avibe.checkpoint.memo import (
    contrasted,
    han_pairs,
    reads_as_limit,
    reads_as_rule,
    sentences,
    subject_words,
)
from avibe.checkpoint.model import MemoItem
from avibe.context.quote import CUT_NOTE, asked_line, quoted
from avibe.prompts import render
from avibe.record.messages import REMINDER_KIND, ChatMessage

REMINDED_SENTENCES: Final = 4  # a reminder restates at most this many sentences: a few rules, their changes
MIN_ABOUT: Final = 2  # a shared name (2) or two shared words (1 each): what "about" a rule takes
# a word that names one thing: a path or identifier (/ _ . - inside it) or a number in it ...
_NAME_MARK: Final = re.compile(r"[/_.\-\d]")
_FOLDER: Final = re.compile(r"([^\W_][\w.\-]*)/")  # ... or a folder, written with its slash ("vendor/")


def standing_rules(memo: Sequence[MemoItem]) -> tuple[MemoItem, ...]:
    """The memo items "rules-last" restates, in memo order: each worded as a standing rule, limit or
    permission (the harness's own test, N2), and each later item about the same thing as a rule before it
    - by the relation the memo keeps a rule's revocation or re-grant beside it (a shared content word), so
    a change of a rule is never restated apart from the rule it changes."""
    subjects: set[str] = set()
    chosen: list[MemoItem] = []
    for item in memo:
        words = subject_words(item.text)
        if reads_as_rule(item.text) or item.asked:  # a rule, or the user's answer to a question of mine
            subjects |= words
            chosen.append(item)
        elif subjects & words:
            chosen.append(item)
    return tuple(chosen)


def _path_parts(words: set[str]) -> set[str]:
    """The folders and file of each path among `words` ("vendor/parser.txt": "vendor", "parser.txt"), as
    `subject_words` spells them: a rule about vendor/ is about vendor/parser.txt."""
    return subject_words(" ".join(part for word in words if "/" in word for part in word.split("/")))


_INFLECTED: Final = re.compile(r"([^\W\d_]{3,}?)(?:ing|ed)")  # "signing", "signed": "sign"


def _stem(word: str) -> str:
    """A plain word without "-ing" or "-ed", and then without a leading "un-" ("unsigned": "sign"): "never
    commit without signing" is about "Commit the archive changes unsigned" - a real rule the 1.5B broke
    with no note, the two sharing only "commit" as spelt. A name (a path, an identifier, a number) stays."""
    found = _INFLECTED.fullmatch(word) if len(word) > 5 and word.isalpha() else None
    if not found:
        return word
    base = found.group(1)
    return base[2:] if base.startswith("un") and len(base) > 5 else base


def _words(text: str) -> set[str]:
    words = subject_words(text)
    stems = {_stem(word) for word in words}
    return stems | _path_parts(words) | han_pairs(text)  # a Chinese rule is about a Chinese request too


def _names(text: str) -> set[str]:
    """The words of `text` that name one thing - a path, an identifier, a number, a folder ("vendor/"),
    a part of a path - as `subject_words` spells them."""
    folders = subject_words(" ".join(_FOLDER.findall(text)))  # spelt as subject_words spells them
    words = subject_words(text)
    return {_stem(w) for w in words if w in folders or _NAME_MARK.search(w)} | _path_parts(words)  # as _words


def _about(asked: set[str], names: set[str], sentence: str) -> int:
    """How much a sentence is about the message: each shared name counts 2, each other shared word 1."""
    shared = asked & _words(sentence)
    return len(shared) + len(shared & names)


def touched_rules(
    memo: Sequence[MemoItem], text: str, limit: int = REMINDED_SENTENCES
) -> tuple[tuple[int, str], ...]:
    """The sentences of the memo's standing rules (`standing_rules`: each rule and the user's later words
    about it) that `text` is about, as (message number, sentence verbatim), in memo order: those sharing
    a name with it or two words, and at least half as much as the sentence that shares most (one common
    word - "change", "tests" - is not enough: the 1.5B answered a question about the release scripts'
    approver with the brief's sentences about changes); at most `limit`, rule-worded ones first. Two
    adjacent sentences count as one only where each shares a word and neither is about it alone."""
    asked = _words(text)
    if not asked:
        return ()
    names = _names(text)
    found: list[tuple[tuple[bool, int, int], tuple[int, str]]] = []
    for item in standing_rules(memo):
        spans = [s for s in sentences(item.text) if not item.text[s[0] :].startswith(CUT_NOTE)]
        units = [((a, b), _about(asked, names, f"{item.asked}\n{item.text[a:b]}")) for a, b in spans]
        # a thought written over two sentences ("I need (only if there is) the snow and ice.\nBut don't
        # display if there is no chance"): each shares a word with the message, neither is about it alone
        units += [
            ((a[0], b[1]), _about(asked, names, f"{item.asked}\n{item.text[a[0] : b[1]]}"))
            for (a, one), (b, two) in pairwise(units)
            if 0 < one < MIN_ABOUT and 0 < two < MIN_ABOUT
        ]
        for (start, end), score in units:  # an answer is read with its question (`MemoItem.asked`)
            if score >= MIN_ABOUT:
                sentence = item.text[start:end]
                found.append(((reads_as_rule(sentence), score, len(found)), (item.seq, sentence)))
    best = max((key[1] for key, _ in found), default=0)
    kept = [f for f in found if 2 * f[0][1] >= best]
    chosen = sorted(kept, key=lambda f: f[0], reverse=True)[:limit]
    return tuple(pair for _, pair in sorted(chosen, key=lambda f: f[0][2]))


# a sentence that quotes words - the agent's, a document's - in double quotes of any script
_QUOTES: Final = re.compile(r'"[^"\n]+"|“[^”\n]+”|「[^」\n]+」|«[^»\n]+»')


def _with_corrections(
    memo: Sequence[MemoItem], touched: Sequence[tuple[int, str]]
) -> tuple[tuple[int, str], ...]:
    """The touched sentences, each that quotes something with the sentence after it in the same message,
    adjacent ones as one verbatim span. People quote words to correct them, and the correction follows -
    'SilentlyShortLoader says "103 rows remain". It's 98.'; 'a condition says "unless a row-level
    override ...". Rewrite it so that the request's brand kit and template always win.' - sharing none of
    the words that made the quote touched: shown alone, the quote restated the very thing the person had
    changed (the 1.5B then let the override through, on a real session)."""
    texts = {item.seq: item.text for item in memo}
    chosen: dict[int, set[int]] = {}
    unplaced: list[tuple[int, str]] = []  # not a sentence of its item as this memo has it: kept as it is
    for seq, sentence in touched:
        text = texts.get(seq, "")
        spans = sentences(text)
        at = next((i for i, (start, end) in enumerate(spans) if text[start:end] == sentence), None)
        if at is None:
            unplaced.append((seq, sentence))
            continue
        picked = chosen.setdefault(seq, set())
        picked.add(at)
        follows = at + 1 < len(spans) and not text[spans[at + 1][0] :].startswith(CUT_NOTE)
        if follows and _QUOTES.search(sentence):
            picked.add(at + 1)
    out: list[tuple[int, str]] = []
    for seq, picked in chosen.items():  # touched_rules' order: the memo's
        spans, run = sentences(texts[seq]), sorted(picked)
        first = run[0]
        for here, after in zip(run, [*run[1:], None], strict=True):
            if after != here + 1:  # the run ends: one verbatim span from its first sentence to here
                out.append((seq, texts[seq][spans[first][0] : spans[here][1]]))
                first = after if after is not None else first
    return (*out, *unplaced)


def _touched_text(touched: Sequence[tuple[int, str]], memo: Sequence[MemoItem] = ()) -> str:
    """The sentences under their message headers, one for the sentences of one message (`[...]` between),
    naming the user's later words still in the conversation (`MemoItem.later`): restated alone, a replaced
    instruction read as in force - the 1.5B wrote a real session's old line from it."""
    later, parts, last = {item.seq: item.later for item in memo if item.later}, list[str](), None
    items = {item.seq: item for item in memo}
    for seq, sentence in touched:
        changed = ", ".join(f"#{n}" for n in later.get(seq, ()))
        note = f" (changed later: {changed}, in the conversation above)" if changed else ""
        head = f"Message #{seq}{note}:\n{asked_line(items[seq], 'your') if seq in items else ''}"
        parts.append((">\n> [...]\n" if seq == last else head) + quoted(sentence))
        last = seq
    return "\n".join(parts)


_TOKEN: Final = re.compile(r"\w(?:[\w.:/\-]*\w)?")
_FILLER: Final = frozenset({"a", "an", "the", "any", "it", "that", "this", "please", "yet", "now", "one"})


def _tokens(text: str) -> set[str]:
    return {t.casefold() for t in _TOKEN.findall(text)} - _FILLER


def could_go_against(sentence: str, text: str) -> bool:
    """Whether a message about `sentence` could go against it: the sentence limits what may be done
    (`reads_as_limit`: a no, an only, an always, a bound, ask first), or it excludes by contrast what the
    message names ("must be 16, not 48" and a message naming 48). A sentence that only sets what to do
    ("must be 16") is followed, not gone against, by "Write the pool settings now.": the 1.5B, shown such
    a sentence after that request, answered with the sentence itself 3 times of 3 (2 of 3 wrote the
    settings without it)."""
    return reads_as_limit(sentence) or bool(_tokens(contrasted(sentence)) & _tokens(text))


def reminder(memo: Sequence[MemoItem], message: ChatMessage) -> ChatMessage | None:
    """The note that restates, after a user's message, the memo's standing rules it is about (None for a
    message of another kind, about none of them, or about none it could go against: `could_go_against`).
    The sentences are the memo's, quoted line by line: all those it is about, so a rule is shown with its
    grant or its change."""
    if message.kind != "user":
        return None
    touched = _with_corrections(memo, touched_rules(memo, message.content))
    answers = {item.seq for item in memo if item.asked}  # a decision: what it is about could undo it
    if not any(seq in answers or could_go_against(sentence, message.content) for seq, sentence in touched):
        return None
    text = render("rules_touched", memo=_touched_text(touched, memo))
    return ChatMessage(role="system", content=text, kind=REMINDER_KIND)


def with_reminder(messages: Sequence[ChatMessage], memo: Sequence[MemoItem]) -> list[ChatMessage]:
    """The messages with the `reminder` after the newest user message (when it is about a rule of the memo)
    and no other: a reminder shown before goes, the new message has its own."""
    shown = [m for m in messages if m.kind != REMINDER_KIND]
    newest = next((i for i in range(len(shown) - 1, -1, -1) if shown[i].kind == "user"), None)
    note = reminder(memo, shown[newest]) if memo and newest is not None else None
    if note is not None and newest is not None:
        shown.insert(newest + 1, note)
    return shown
