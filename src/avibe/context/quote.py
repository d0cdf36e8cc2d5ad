"""How the recollection and the reminder quote what they show (T1, T2): the user's kept words line by line,
the model's own words with any line that reads like a tag or a kept message marked as the model's.

API:
    quoted(text) -> str          every line of a kept message as a quote (`> `), a tag-like one as "user:"
    own(text) -> str             the model's (or its workdir's) words, tag-like and memo-like lines marked
    asked_line(item, whose="my") -> str
        "(my question before it, in #41: "...?")" for a kept short reply (`MemoItem.asked`), or ""
    CUT_NOTE                     how a cut memo item's pointer line starts (memo.cut_note)
"""

from __future__ import annotations

import re
from typing import Final

from avibe.checkpoint.memo.asked import ASKED_FRAME
from avibe.checkpoint.model import MemoItem
from avibe.record.lookalikes import latin_fold
from avibe.record.sources import label_tag_lines, looks_like_tag

CUT_NOTE: Final = "[... cut"  # a cut memo item's pointer line (memo.cut_note): no words of the user
# The memo's heading and an entry's header (`Message #12:`) and what reads like one (`Msg #12:`,
# `User message 12:`, `Entry #12:`), behind any decoration, look-alike letters folded (`latin_fold`).
_MEMO_LIKE: Final = re.compile(
    r"[\W_]*(?:(?:the\W*)?(?:user\W*s?\W*)?(?:kept\W*)?(?:message|msg|entry)\W*(?:no\W*)?\d"
    r"|the\W*user\W*s\W*(?:own\W*)?words)"
)


def quoted_line(line: str) -> str:
    """One memo line as a quote; a line a model could read as a source tag gets "user:" in front (T2)."""
    if not line:
        return ">"
    return f"> user: {line}" if looks_like_tag(line) else f"> {line}"


def quoted(text: str) -> str:
    """Every line quoted - lines broken wherever any reader breaks them (U+2028 too), so no line of a
    kept message starts outside its quote."""
    return "\n".join(quoted_line(line) for line in text.splitlines() or [""])


def reads_like_memo(line: str) -> bool:
    """Whether a line reads like the recollection's own memo parts: its heading or an entry's header."""
    return bool(_MEMO_LIKE.match(latin_fold(line)))


def own(text: str) -> str:
    """The mind, scene, plan and file list are the model's (or its workdir's) words: a line of them that
    reads like a source tag (a small model copies a callback's tag line into its scene) or like a kept
    message of the user (`Message #12:`) gets "vibey:" in front, so the recollection never shows a tag
    or a user's message that Avibe did not write (T1, T2)."""
    lines = label_tag_lines(text, "vibey").splitlines(keepends=True)
    return "".join(f"vibey: {line}" if reads_like_memo(line) else line for line in lines)


def asked_line(item: MemoItem, whose: str = "my") -> str:
    """The question of mine a kept short reply answers (`MemoItem.asked`), on a line of its own before
    the reply's quote: "leave it" alone means nothing (N3), beside "Would you like me to force-remove
    kmod-gl-sdk4-kmwan as well, or leave it?" it is a decision. My words, not the user's - so never quoted
    as the user's, and on one line marked as mine if it reads like a tag or a kept message (T1, T2).
    `whose`: "my" in the recollection (Vibey's own), "your" in the reminder (a note to Vibey)."""
    if not item.asked:
        return ""
    return own(f'({whose} {ASKED_FRAME}{item.seq - 1}: "{" ".join(item.asked.split())}")') + "\n"
