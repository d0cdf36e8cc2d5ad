"""Source tags (SPEC T1, T2, T3, N7).

Every input not typed by a person is shown with one tag line that Avibe renders from the entry's stored
kind and source fields - never from its text. A line of a person's message that reads like a tag or a harness
note (`[Harness:`, `<Harness:`, `[Avibe:` - after Unicode normalisation and look-alike letters, behind
whitespace, list markers or markup, on any line) gets the person's name put in front, so no text can pass
for a tag. Pure functions; no IO.
"""

from __future__ import annotations

import re
import unicodedata
from datetime import UTC, datetime
from typing import Final

from avibe.record.entries import Entry, Kind, Source

TAG_OPENER: Final = "[Harness:"
NOTE_OPENER: Final = "[Avibe:"  # the harness's own notes inside tool output and messages
_KEYS: Final = ("harness", "avibe")
# What a reader could take for each letter of "harness" and "avibe" (after NFKD and casefold): Cyrillic,
# Greek, Armenian and small-capital look-alikes that Unicode normalisation does not map to Latin.
_LOOK_ALIKES: Final[dict[str, frozenset[str]]] = {
    "h": frozenset("hһнηհʜ"),
    "a": frozenset("aаαɑᴀ"),
    "r": frozenset("rгʀ"),
    "n": frozenset("nпνηɴ"),
    "e": frozenset("eеεєᴇ"),
    "s": frozenset("sѕꜱ"),
    "v": frozenset("vνѵᴠ"),
    "i": frozenset("iіıɪιӏl1"),
    "b": frozenset("bвьβʙᏼƅ"),
}
# Markdown-ish decoration a model reads past (`**[Harness: ...]**`, `> [Harness: ...]`, `\\[Harness:`),
# bullets included.
_DECORATION: Final = frozenset("*_~`>#-+|=\\•◦▪‣⁃·")
# Opening brackets that are not of category Ps after NFKD: angle brackets and their look-alikes.
_ANGLES: Final = frozenset("<‹«˂ᐸ")
# HTML entities of an opening bracket that Markdown renders as the bracket itself.
_ENTITIES: Final = ("&lt;", "&#60;", "&#x3c;", "&#91;", "&lsqb;", "&lbrack;")
# Inline HTML elements a model reads past in front of a tag (`<b>[Harness: ...]</b>`).
_HTML: Final = re.compile(
    r"</?(?:a|b|i|u|s|em|strong|code|kbd|mark|small|span|div|p|pre|sup|sub|br|li|ul|ol|details|summary"
    r"|blockquote|h[1-6])(?:\s[^<>]{0,200})?/?>",
    re.IGNORECASE,
)
_MAX_MARKER: Final = 3  # `1.`, `12)`, `iv.`, `(a)`
_MAX_COMMENT: Final = 2_000  # how far a `<!--` is followed to its `-->`
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


_BREAKS: Final = frozenset("\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029")  # where str.splitlines breaks


class _Visible:
    """The visible characters of `text` from `start` on, compatibility-decomposed with accents and every
    invisible character dropped, read lazily: a check reads only as far as it needs to. A line break is
    kept as "\n", with the index of the raw character after it (`line_after`)."""

    def __init__(self, text: str, start: int) -> None:
        self._text, self._next = text, start
        self._seen: list[str] = []
        self._raw: list[int] = []  # the raw index each visible character came from
        self._after: dict[int, int] = {}

    def at(self, index: int) -> str:
        """The visible character at `index`, or "" past the end."""
        while len(self._seen) <= index and self._next < len(self._text):
            raw = self._text[self._next]
            self._next += 1
            if raw in _BREAKS:
                self._after[len(self._seen)] = self._next
                self._seen.append("\n")
                self._raw.append(self._next - 1)
                continue
            for ch in unicodedata.normalize("NFKD", raw):
                if not _is_invisible(ch):
                    self._seen.append(ch)
                    self._raw.append(self._next - 1)
        return self._seen[index] if index < len(self._seen) else ""

    def raw_at(self, index: int) -> int:
        """The index in the text of the visible character at `index` (which must exist)."""
        return self._raw[index]

    def line_after(self, index: int) -> int:
        """The raw index just after the line break at visible `index`."""
        return self._after[index]

    def startswith(self, index: int, literal: str) -> bool:
        return all(self.at(index + k).casefold() == ch for k, ch in enumerate(literal))


def _opener(chars: _Visible, i: int) -> int:
    """Where the key would start after an opening bracket at `i`, or -1 when there is none."""
    first = chars.at(i)
    if first and (unicodedata.category(first) == "Ps" or first in _ANGLES):
        return i + 1
    for entity in _ENTITIES:
        if chars.startswith(i, entity):
            return i + len(entity)
    return -1


def _spells_key(chars: _Visible, i: int) -> bool:
    while chars.at(i) and (chars.at(i) in _DECORATION or chars.at(i) == "\n"):  # `[**Harness:**`
        i += 1
    for key in _KEYS:
        folded = "".join(chars.at(i + k) for k in range(len(key) + 2)).casefold()
        if len(folded) >= len(key) and all(folded[k] in _LOOK_ALIKES[ch] for k, ch in enumerate(key)):
            return True
    return False


def _skip(chars: _Visible, i: int) -> int:
    """Where the next thing after a skippable prefix piece at `i` starts, or -1 when `i` starts none:
    decoration, a list marker (`1.`, `a)`, `(iv)`) or a task box (`[ ]`, `[x]`). Markup is `_markup_end`'s."""
    first = chars.at(i)
    if first in _DECORATION:
        return i + 1
    if first == "[" and chars.at(i + 1) in {"]", "x", "X"}:
        box = i + (1 if chars.at(i + 1) == "]" else 2)
        return box + 1 if chars.at(box) == "]" else -1
    j = i + (first == "(")
    length = 0
    while chars.at(j + length).isalnum() and length < _MAX_MARKER:
        length += 1
    if length and chars.at(j + length) in {".", ")"}:
        return j + length + 1
    return -1


def _markup_end(text: str, at: int) -> int:
    """Where an HTML comment or an inline HTML element that starts at `at` in the text ends, or -1.
    Matched on the text itself (a comment can span lines and is followed for at most _MAX_COMMENT
    characters; an unclosed one hides nothing a model cannot see)."""
    if text.startswith("<!--", at):
        end = text.find("-->", at + 4, at + 4 + _MAX_COMMENT)
        return end + 3 if end >= 0 else -1
    element = _HTML.match(text, at)
    return element.end() if element else -1


def _tag_like_at(text: str, start: int, known: dict[int, bool] | None = None) -> bool:
    """Whether a model reading from `start` meets a tag opener before anything else it reads as text.
    `known`: results for later line starts; between two pieces nothing carries over, so the result at a
    line break is the next line's (this keeps `tag_like_lines` linear)."""
    chars, i = _Visible(text, start), 0
    while chars.at(i):
        if chars.at(i) == "\n":
            after = chars.line_after(i)
            if known is not None and after in known:
                return known[after]
            i += 1
            continue
        key = _opener(chars, i)
        if key >= 0 and _spells_key(chars, key):
            return True
        end = _markup_end(text, chars.raw_at(i)) if chars.at(i) == "<" else -1
        if end >= 0:  # nothing carries over a piece, so reading goes on from the text after it
            chars, i = _Visible(text, end), 0
            continue
        i = _skip(chars, i)
        if i < 0:
            return False
    return False


def looks_like_tag(text: str) -> bool:
    """True when the text, read by a model, would start like a harness tag or note (T2): an opening
    bracket of any style (`[`, `<`, full-width, look-alikes, `&lt;`), then "harness" or "avibe" in any
    case or look-alike letters - whatever invisible characters, whitespace, decoration, list markers or
    inline markup (`<!-- -->`, `<b>`, backticks) come before."""
    return _tag_like_at(text, 0)


def tag_like_lines(text: str) -> list[int]:
    """Where each line of the text that reads like a tag starts (T2): a non-blank line from whose start
    a model would read a tag opener (blank lines and markup in front of it may run over line ends)."""
    lines = text.splitlines(keepends=True)
    if not lines:
        return []
    starts = [0]
    for line in lines[:-1]:
        starts.append(starts[-1] + len(line))
    known: dict[int, bool] = {}
    found = []
    for start, line in reversed(list(zip(starts, lines, strict=True))):
        known[start] = _tag_like_at(text, start, known)
        if known[start] and any(not _is_invisible(ch) for ch in line):
            found.append(start)
    return found[::-1]


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


def _labels(name: str) -> bool:
    """A name can go in front of a line only when nothing in front of it is skipped as a list marker,
    decoration or markup: then "name: [Harness: ..." never reads like a tag."""
    chars = _Visible(name, 0)
    return chars.at(0).isalnum() and _skip(chars, 0) < 0 and not looks_like_tag(name)


def user_label(source: Source) -> str:
    """The person's name as shown in front of a message; never itself tag-like."""
    name = clean_field(source.name)
    return name if _labels(name) and not looks_like_tag(source.name) else "user"


def label_tag_lines(text: str, name: str) -> str:
    """The text with `name: ` in front of every line that reads like a tag (T2); else unchanged."""
    starts = tag_like_lines(text)
    if not starts:
        return text
    pieces, last = [], 0
    for start in starts:
        pieces += [text[last:start], f"{name}: "]
        last = start
    return "".join([*pieces, text[last:]])


def render_user_text(source: Source, text: str) -> str:
    """A person's message as the model sees it (T2): unchanged unless a line of it reads like a tag, in
    which case the person's name goes in front of that line (for the first line: of the message)."""
    return label_tag_lines(text, user_label(source))


def render_entry_text(entry: Entry) -> str:
    """The text of a record entry as shown to a model (any backend, T3)."""
    if entry.kind == "user":
        return render_user_text(entry.source, entry.text)
    if entry.kind == "assistant":
        return entry.text
    return f"{render_tag(entry.source, entry.at)}\n{entry.text}"
