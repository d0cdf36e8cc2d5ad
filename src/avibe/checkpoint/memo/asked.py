"""The question a kept short reply answers (N3), from the record: "leave it" means nothing alone.

API:
    SHORT_REPLY_WORDS        a reply of at most this many words (`word_count`) is short
    QUESTION_CHARS           a question longer than this keeps its end (where the question is asked)
    ASKED_FRAME              the words that frame a question where it is shown ("question before it, in #")
    question_in(text, reply="") -> str   the last sentence of `text` that asks (ends in ? or ？), one line;
        for a reply that is an option's number ("2"), the line of `text` that offers it; or ""
    mark_asked(items, entries, previous, counter, room) -> tuple[MemoItem, ...]
        each kept short reply with `asked`: the question of the agent's message just before it, newest
        reply first while the questions fit in `room` tokens; every other item's `asked` cleared

Why: on a real session the agent asked "Would you like me to force-remove kmod-gl-sdk4-kmwan as well, or
leave it since it's a system dependency?" and the person answered "leave it". The memo kept the answer
word for word and nothing else, so after the checkpoint the 1.5B, asked to finish the cleanup, force-removed
the package. The question is the agent's words, not the user's: it is copied from the stored assistant
entry by its record kind (never from what a model wrote at the checkpoint), shown as the agent's own and
never inside the user's quote, and it only takes memo room the user's kept words left over (N5: the user's
words come first). Pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Final

from avibe.checkpoint.memo.later import said
from avibe.checkpoint.memo.words import sentences, word_count
from avibe.checkpoint.model import MemoItem
from avibe.ports import TokenCounter
from avibe.record.entries import Entry

SHORT_REPLY_WORDS: Final = 8  # "leave it", "yes install ccusage", "Rustup", "hazlo tu por favor"
# how the question is framed where it is shown (context.quote.asked_line); a scene that copies the frame
# copies an answered question as the work's state (structured.answers)
ASKED_FRAME: Final = "question before it, in #"
QUESTION_CHARS: Final = 240  # about 60 tokens: a question, not the agent's whole message
_ASKS: Final = ("?", "？")
_CHOICE: Final = re.compile(r"\s*(?:option\s*)?#?(\d{1,2})[.)]?\s*", re.IGNORECASE)  # "2", "2.", "option 2"


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= QUESTION_CHARS else "..." + line[-(QUESTION_CHARS - 3) :].lstrip()


def _offered(text: str, number: str) -> str:
    """The last line of `text` that offers option `number` ("2. **Review the plan** first?"), or ""."""
    offers = re.compile(rf"\s*(?:[-*]\s+)?[*_]*{number}[.)][*_]*\s")
    return next((line for line in reversed(text.splitlines()) if offers.match(line)), "")


def question_in(text: str, reply: str = "") -> str:
    """The last sentence of `text` that asks (ends in ? or ？), its white space collapsed to one line and
    cut from the front past QUESTION_CHARS (the asking end kept); "" when no sentence of it asks. A reply
    that is only a number picks an option: the line offering it is what was answered (agents offer
    numbered choices, "Would you like to: 1. Push ... 2. Clean up ...", and people answer "1")."""
    choice = _CHOICE.fullmatch(reply)
    if choice and (offer := _offered(text, choice.group(1))):
        return _one_line(offer)
    asking = [text[a:b] for a, b in sentences(text) if text[a:b].rstrip(" )*_`\"'").endswith(_ASKS)]
    return _one_line(asking[-1]) if asking else ""


def _before(item: MemoItem, entries: Mapping[int, Entry]) -> str:
    """The question of the agent's message just before the item's (by stored kind, N7), or ""."""
    entry = entries.get(item.seq - 1)
    return question_in(entry.text, said(item)) if entry is not None and entry.kind == "assistant" else ""


def mark_asked(
    items: Sequence[MemoItem],
    entries: Mapping[int, Entry],
    previous: Sequence[MemoItem],
    counter: TokenCounter,
    room: int,
) -> tuple[MemoItem, ...]:
    """The memo's items, each short whole reply (not cut) with the question it answered: from the record's
    entry just before it when given, else as an earlier checkpoint found it (the entry moved out then).
    Newest reply first, while the questions' tokens fit in `room` (what the memo's budget has left)."""
    before = {item.seq: item.asked for item in previous if item.asked}
    asked: dict[int, str] = {}
    for item in sorted(items, key=lambda i: i.seq, reverse=True):
        if item.cut or word_count(said(item)) > SHORT_REPLY_WORDS:
            continue
        question = _before(item, entries) or before.get(item.seq, "")
        cost = counter.count(question) if question else 0
        if question and cost <= room:
            asked[item.seq], room = question, room - cost
    return tuple(replace(item, asked=asked.get(item.seq, "")) for item in items)
