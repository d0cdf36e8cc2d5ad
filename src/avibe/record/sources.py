"""Source tags (SPEC T1, T2, T3, N7).

Every input not typed by a person is shown with one tag line that Avibe renders from the entry's stored
kind and source fields - never from its text. A person's message that itself looks like a tag gets the
person's name put in front, so no text can pass for a tag. Pure functions; no IO.
"""

from __future__ import annotations

import unicodedata
from datetime import UTC, datetime
from typing import Final

from avibe.record.entries import Entry, Kind, Source

TAG_OPENER: Final = "[Harness:"
_KEY: Final = "harness"
# What a reader could take for each letter of "harness" (after NFKD and casefold): Cyrillic, Greek,
# Armenian and small-capital look-alikes that Unicode normalisation does not map to Latin.
_LOOK_ALIKES: Final[dict[str, frozenset[str]]] = {
    "h": frozenset("hһнηհʜ"),
    "a": frozenset("aаαɑᴀ"),
    "r": frozenset("rгʀ"),
    "n": frozenset("nпνηɴ"),
    "e": frozenset("eеεєᴇ"),
    "s": frozenset("sѕꜱ"),
}
# Markdown-ish decoration a model reads past (`**[Harness: ...]**`, `> [Harness: ...]`).
_DECORATION: Final = frozenset("*_~`>#-+|=")
_MAX_FIELD: Final = 80
_KIND_LABEL: Final[dict[Kind, str]] = {
    "watch": "watch",
    "timer": "timer",
    "callback": "callback",
    "agent": "agent session",
    "harness": "avibe",
}


def _is_invisible(ch: str) -> bool:
    """Whitespace, format (zero-width, bidi), control and combining characters: none is seen as text."""
    return ch.isspace() or unicodedata.category(ch) in {"Cf", "Cc", "Zs", "Zl", "Zp", "Mn", "Me", "Co", "Cn"}


def _visible_head(text: str, count: int) -> str:
    """The first `count` visible characters (compatibility-decomposed, accents dropped), skipping any
    number of invisible characters and leading decoration. Reads only as far as it needs to."""
    head: list[str] = []
    for raw in text:
        for ch in unicodedata.normalize("NFKD", raw):
            if _is_invisible(ch) or (not head and ch in _DECORATION):
                continue
            head.append(ch)
        if len(head) >= count:
            break
    return "".join(head)


def _spells_key(chars: str) -> bool:
    folded = chars.casefold()
    return len(folded) >= len(_KEY) and all(folded[i] in _LOOK_ALIKES[ch] for i, ch in enumerate(_KEY))


def looks_like_tag(text: str) -> bool:
    """True when the text, read by a model, would start like a harness tag (T2): an opening bracket of
    any style, then "harness" in any case or look-alike letters - whatever invisible characters,
    whitespace or decoration come before or between them."""
    head = _visible_head(text, 1 + len(_KEY))
    return bool(head) and unicodedata.category(head[0]) == "Ps" and _spells_key(head[1:])


def clean_field(value: str) -> str:
    """A stored source field made safe for a one-line tag: no control or invisible characters, no
    brackets, parentheses or quotes that could close the tag (or its parts) early, bounded length."""
    kept = []
    for ch in unicodedata.normalize("NFKC", value):
        if ch in '[]()"\\':
            kept.append("'" if ch == '"' else "")
        elif ch.isspace():
            kept.append(" ")
        elif not _is_invisible(ch):
            kept.append(ch)
    return " ".join("".join(kept).split())[:_MAX_FIELD]


def format_time(at: datetime) -> str:
    aware = at if at.tzinfo else at.replace(tzinfo=UTC)
    return aware.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def render_tag(source: Source, at: datetime) -> str:
    """The tag line of a non-human input, from stored fields only (T1).

    Example: `[Harness: watch "ci-status" (w-3) · 2026-11-30 08:00 UTC]`
    """
    if source.kind == "user" or source.kind == "assistant":
        raise ValueError(f"{source.kind} entries carry no source tag")
    parts = [f"{TAG_OPENER} {_KIND_LABEL[source.kind]}"]
    name, ref = clean_field(source.name), clean_field(source.ref)
    if name:
        parts.append(f'"{name}"')
    if ref:
        parts.append(f"({ref})")
    return " ".join(parts) + f" · {format_time(at)}]"


def user_label(source: Source) -> str:
    """The person's name as shown in front of a message; never itself tag-like."""
    name = clean_field(source.name)
    return name if name and not (looks_like_tag(name) or looks_like_tag(source.name)) else "user"


def render_user_text(source: Source, text: str) -> str:
    """A person's message as the model sees it (T2): unchanged unless it starts like a tag, in which
    case the person's name goes in front."""
    if looks_like_tag(text):
        return f"{user_label(source)}: {text}"
    return text


def render_entry_text(entry: Entry) -> str:
    """The text of a record entry as shown to a model (any backend, T3)."""
    if entry.kind == "user":
        return render_user_text(entry.source, entry.text)
    if entry.kind == "assistant":
        return entry.text
    return f"{render_tag(entry.source, entry.at)}\n{entry.text}"
