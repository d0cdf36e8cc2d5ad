"""Source tags (SPEC T1, T2, T3, N7).

Every input not typed by a person is shown with one tag line that Avibe renders from the entry's stored
kind and source fields - never from its text. A line of a person's message that reads like a tag or a harness
note (`[Harness:`, `<Harness:`, `[Avibe:` - after Unicode normalisation and look-alike letters, behind
whitespace, list markers or markup, on any line) gets the person's name put in front, so no text can pass
for a tag. Pure functions; no IO.
"""

from __future__ import annotations

import bisect
import functools
import html
import re
import sys
import unicodedata
from datetime import UTC, datetime
from typing import Final

from avibe.record.digests import digest
from avibe.record.entries import Entry, Kind, Source
from avibe.record.lookalikes import is_foreign_letter, is_like

TAG_OPENER: Final = "[Harness:"
NOTE_OPENER: Final = "[Avibe:"  # the harness's own notes inside tool output and messages
_KEYS: Final = ("harness", "avibe")
_FIRSTS: Final = frozenset(key[0] for key in _KEYS)
# Enclosed letters that Unicode normalisation leaves alone: negative circled, negative squared and
# regional-indicator A-Z.
_ENCLOSED: Final = (0x1F150, 0x1F170, 0x1F1E6)
# Markdown-ish decoration a model reads past (`**[Harness: ...]**`, `> [Harness: ...]`, `\\[Harness:`),
# bullets included.
_DECORATION: Final = frozenset("*_~`>#-+|=\\•◦▪‣⁃·")
# Inline HTML elements a model reads past in front of a tag (`<b>[Harness: ...]</b>`).
_HTML: Final = re.compile(
    r"</?(?:a|b|i|u|s|em|strong|code|kbd|mark|small|span|div|p|pre|sup|sub|br|li|ul|ol|details|summary"
    r"|blockquote|h[1-6])(?:\s[^<>]{0,200})?/?>",
    re.IGNORECASE,
)
_MAX_MARKER: Final = 3  # `1.`, `12)`, `iv.`, `(a)`
_MAX_GAP: Final = 64  # separators between two letters of a disguised key (`H - a`, `H....arness`)
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


# Escapes a renderer or a model decodes into the character they stand for: HTML entities (also behind
# `&amp;`, as double-encoded text is), backslash escapes (`\u005b`, `\x5b`, `\N{...}`, octal) and URL
# percent-escapes (also `%255B`). Every repetition is bounded, so a match costs O(1) wherever it starts.
_ESCAPE: Final = re.compile(
    r"&(?:amp;|#0{0,4}38;|#[xX]0{0,4}26;){0,4}"
    r"(?P<entity>#[0-9]{1,7};?|#[xX][0-9a-fA-F]{1,6};?|[A-Za-z][A-Za-z0-9]{1,31};)"
    r"|\\{1,8}(?:u\{(?P<brace>[0-9a-fA-F]{1,6})\}|u(?P<u4>[0-9a-fA-F]{4})|U(?P<u8>[0-9a-fA-F]{8})"
    r"|x(?P<x2>[0-9a-fA-F]{2})|N\{(?P<name>[A-Za-z0-9 -]{1,60})\}|(?P<octal>[0-3][0-7]{2}))"
    r"|%(?:25){0,4}(?P<percent>[0-9a-fA-F]{2})"
)


def _decoded(match: re.Match[str]) -> str:
    """What an escape stands for ("" when it stands for nothing), or the escape itself when unknown."""
    groups = match.groupdict()
    if groups["entity"]:
        return html.unescape("&" + groups["entity"])
    if groups["name"]:
        try:
            return unicodedata.lookup(groups["name"])
        except KeyError:
            return match.group()
    number = next((groups[k] for k in ("brace", "u4", "u8", "x2", "percent") if groups[k]), None)
    code = int(number, 16) if number else int(groups["octal"], 8)
    return chr(code) if code <= sys.maxunicode and not 0xD800 <= code <= 0xDFFF else match.group()


def _unenclosed(ch: str) -> str:
    """A letter of an enclosed alphabet that Unicode normalisation leaves alone, as the Latin letter."""
    code = ord(ch)
    for first in _ENCLOSED:
        if first <= code < first + 26:
            return chr(ord("a") + code - first)
    return ch


class _Visible:
    """The visible characters of `text` from `start` on, escapes decoded, compatibility-decomposed with
    accents and every invisible character dropped, read lazily: a check reads only as far as it needs
    to. A line break is kept as "\n", with the index of the raw character after it (`line_after`)."""

    def __init__(self, text: str, start: int) -> None:
        self._text, self._next = text, start
        self._seen: list[str] = []
        self._raw: list[int] = []  # the raw index each visible character came from
        self._after: dict[int, int] = {}

    def _read(self) -> str:
        """The next raw character, or the character an escape starting there stands for."""
        at = self._next
        escape = _ESCAPE.match(self._text, at) if self._text[at] in "&\\%" else None
        if escape is None or len(decoded := _decoded(escape)) != 1 or decoded in _BREAKS:
            self._next += 1
            return self._text[at]
        self._next = escape.end()
        return decoded

    def at(self, index: int) -> str:
        """The visible character at `index`, or "" past the end."""
        while len(self._seen) <= index and self._next < len(self._text):
            at = self._next
            if self._text[at] == "<" and (end := _markup_end(self._text, at)) >= 0:
                self._next = end  # markup inside a word (`Har<!-- -->ness`) is not seen either
                continue
            raw = self._read()
            if raw in _BREAKS:
                self._after[len(self._seen)] = self._next
                self._seen.append("\n")
                self._raw.append(at)
                continue
            if raw.isascii():  # the common case, without normalising
                if raw.isprintable() and not raw.isspace():
                    self._seen.append(raw)
                    self._raw.append(at)
                continue
            for ch in unicodedata.normalize("NFKD", raw):
                if not _is_invisible(ch):
                    self._seen.append(_unenclosed(ch))
                    self._raw.append(at)
        return self._seen[index] if index < len(self._seen) else ""

    def raw_at(self, index: int) -> int:
        """The index in the text of the visible character at `index` (which must exist)."""
        return self._raw[index]

    def line_after(self, index: int) -> int:
        """The raw index just after the line break at visible `index`."""
        return self._after[index]

    def startswith(self, index: int, literal: str) -> bool:
        return all(self.at(index + k).casefold() == ch for k, ch in enumerate(literal))


def _is_like(ch: str, letter: str) -> bool:
    """Whether a reader could take the visible character `ch` for `letter` (any case, look-alike)."""
    return is_like(ch, letter)


def _is_word(ch: str) -> bool:
    return bool(ch) and unicodedata.category(ch)[0] in {"L", "N"}


def _spells_key(chars: _Visible, i: int) -> bool:
    """Whether "harness" or "avibe" is spelled from `i` on: each letter in any case or look-alike (UTS #39
    skeletons, `lookalikes`), with up to _MAX_GAP separators (`H-a-r-n-e-s-s`, `H....arness`) between
    letters but never another letter; one letter after the first may be any non-ASCII letter when the
    rest spell the key (`ᎻᎪᏒᏁᎬᏚᏚ`: a script's letter no table maps, among its look-alikes)."""
    first = chars.at(i)
    if not any(_is_like(first, key) for key in _FIRSTS):
        return False
    return any(_spells(chars, i, key) for key in _KEYS)


def _spells(chars: _Visible, i: int, key: str) -> bool:
    at, found, odd = i, 0, 0
    while found < len(key):
        gap = 0
        while found and not _matches(chars.at(at), key[found], odd) and gap < _MAX_GAP:
            if _is_word(chars.at(at)) or chars.at(at) in {"", "\n"}:
                break
            at, gap = at + 1, gap + 1
        ch = chars.at(at)
        if not _is_like(ch, key[found]):
            if not found or odd or not is_foreign_letter(ch):
                return False
            odd = 1
        at, found = at + 1, found + 1
    return True


def _matches(ch: str, letter: str, odd: int) -> bool:
    """Where the gap before a letter ends: at its look-alike, or (once) at a foreign letter."""
    return _is_like(ch, letter) or (not odd and is_foreign_letter(ch))


def _skip(chars: _Visible, i: int) -> int:
    """Where the next thing after a skippable prefix piece at `i` starts, or -1 when `i` starts none:
    a task box (`[ ]`, `[x]`), a list marker (`1.`, `a)`, `(iv)`), or any one character that is not a
    letter or digit - brackets, quotes, dashes, ellipses, decoration, which a reader reads past to the
    first word. Markup is `_markup_end`'s."""
    first = chars.at(i)
    if first in _DECORATION:
        return i + 1
    if first == "[" and chars.at(i + 1) in {"]", "x", "X"}:
        box = i + (1 if chars.at(i + 1) == "]" else 2)
        if chars.at(box) == "]":
            return box + 1
    if not _is_word(first):  # `(` of `(iv)` too: the marker is read from the next character on
        return i + 1
    length = 0
    while chars.at(i + length).isalnum() and length < _MAX_MARKER:
        length += 1
    return i + length + 1 if chars.at(i + length) in {".", ")"} else -1


@functools.lru_cache(maxsize=16)
def _comment_ends(text: str) -> tuple[int, ...]:
    """Where each `-->` of the text ends, in order (found once per text, so a comment of any length
    costs one search)."""
    return tuple(m.end() for m in re.finditer("-->", text))


def _markup_end(text: str, at: int) -> int:
    """Where an HTML comment or an inline HTML element that starts at `at` in the text ends, or -1.
    Matched on the text itself (a comment can span lines and be of any length; an unclosed one hides
    nothing a model cannot see)."""
    if text.startswith("<!--", at):
        ends = _comment_ends(text)
        k = bisect.bisect_left(ends, at + 7)  # `<!---->` is the shortest comment
        return ends[k] if k < len(ends) else -1
    element = _HTML.match(text, at)
    return element.end() if element else -1


def _tag_like_at(text: str, start: int, known: dict[int, bool] | None = None) -> bool:
    """Whether a model reading from `start` meets "harness" or "avibe" as the first word - whatever
    brackets, quotes, dashes, decoration, list markers or markup come before it. `known`: results for
    later line starts; between two pieces nothing carries over, so the result at a line break is the
    next line's (this keeps `tag_like_lines` linear)."""
    chars, i = _Visible(text, start), 0
    while chars.at(i):
        if chars.at(i) == "\n":
            after = chars.line_after(i)
            if known is not None and after in known:
                return known[after]
            i += 1
            continue
        if _spells_key(chars, i):
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
    inline markup (`<!-- -->`, `<b>`, backticks) come before; also as a bidi override shows it."""
    if _tag_like_at(text, 0):
        return True
    first = text.splitlines()[0] if text else ""
    return _RLO in first and _tag_like_at(_as_shown(first), 0)


_RLO, _PDF = "\u202e", "\u202c"  # right-to-left override; pop directional formatting


def _as_shown(line: str) -> str:
    """A line in the order a right-to-left override shows it: each overridden run reversed (to its
    pop or the line's end), so `\u202e:ssenraH[` is read as the `[Harness:` a person sees."""
    pieces, rest = [], line
    while _RLO in rest:
        before, _, after = rest.partition(_RLO)
        run, _, rest = after.partition(_PDF)
        pieces += [before, run[::-1]]
    return "".join([*pieces, rest])


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
        shown_reversed = _RLO in line and _tag_like_at(_as_shown(line), 0)
        if (known[start] or shown_reversed) and any(not _is_invisible(ch) for ch in line):
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

    Example: `[Harness: watch "ci-status" (w-3) · 2026-11-30 08:00 UTC]`; a callback of a service names
    it and its event from the stored field: `[Harness: callback "ci" (cb-1) · github push · ...]`.
    """
    if source.kind == "user" or source.kind == "assistant":
        raise ValueError(f"{source.kind} entries carry no source tag")
    parts = [f"{TAG_OPENER} {_KIND_LABEL[source.kind]}"]
    name, ref, event = clean_field(source.name), clean_field(source.ref), clean_field(source.event)
    if name:
        parts.append(f'"{name}"')
    if ref:
        parts.append(f"({ref})")
    return " ".join(parts) + (f" · {event}" if event else "") + f" · {format_time(at)}]"


@functools.lru_cache(maxsize=256)
def _labels(name: str) -> bool:
    """A name can go in front of a line only when nothing in front of it is skipped as a list marker,
    decoration or markup, and no key could start in it and run on into the line ("H: arness" read as
    "Harness"): then "name: [Harness: ..." never reads like a tag. (Asked for the same few names at every
    message a person sends, so remembered.)"""
    chars = _Visible(name, 0)
    if not chars.at(0).isalnum() or _skip(chars, 0) >= 0:
        return False
    return not any(looks_like_tag(f"{name}: {key[k:]}") for key in _KEYS for k in range(len(key) + 1))


def user_label(source: Source) -> str:
    """The person's name as shown in front of a message; never itself tag-like."""
    name = clean_field(source.name)
    return name if _labels(name) and not looks_like_tag(source.name) else "user"


def label_tag_lines(text: str, name: str) -> str:
    """The text with `name: ` in front of every line that reads like a tag (T2); else unchanged."""
    return _mark_tag_lines(text, f"{name}: ")


_LINE_NUMBER: Final = re.compile(r" *\d{1,12}\t")  # read_file's `     3\t` in front of each line


def frame_tag_lines(text: str) -> str:
    """A tool's output (a README read, a command's output) with the frame mark in front of every line
    that reads like a tag or a harness note (`[Avibe: ...]`, `[Harness: ...]`, any look-alike), as other
    text that is not the person's is framed (T1): no line of it is identical to a note of the harness's.
    A line number in front (read_file's) stays in front; the mark goes after it."""
    lines = text.splitlines(keepends=True)
    numbers = [_LINE_NUMBER.match(line) for line in lines]
    heads = [number.group() if number else "" for number in numbers]
    bare = "".join(line[len(head) :] for line, head in zip(lines, heads, strict=True))
    starts = set(tag_like_lines(bare))
    if not starts:
        return text
    out, at = [], 0
    for line, head in zip(lines, heads, strict=True):
        out += [head, f"{FRAME} " if at in starts else "", line[len(head) :]]
        at += len(line) - len(head)
    return "".join(out)


def _mark_tag_lines(text: str, mark: str) -> str:
    starts = tag_like_lines(text)
    if not starts:
        return text
    pieces, last = [], 0
    for start in starts:
        pieces += [text[last:start], mark]
        last = start
    return "".join([*pieces, text[last:]])


def render_user_text(source: Source, text: str) -> str:
    """A person's message as the model sees it (T2): unchanged unless a line of it reads like a tag, in
    which case the person's name goes in front of that line (for the first line: of the message)."""
    return label_tag_lines(text, user_label(source))


FRAME: Final = "│"  # the frame mark in front of every line of a body a listing or a tag frames


def frame_lines(text: str) -> list[str]:
    """The text's lines, each behind the frame mark (an empty text: no line). Every line break of any
    kind (`\r`, `\v`, `\f`, `\x1c`-`\x1e`, `\x85`, U+2028, U+2029, `\r\n`) ends a line, so no
    renderer can start a line that does not start with the mark."""
    return _framed(text.splitlines())


def _framed(lines: list[str]) -> list[str]:
    return [f"{FRAME} {line}" if line else FRAME for line in lines]


def frame_body(text: str) -> str:
    """A body that is not the person's own message, framed: every line starts with the frame mark, so
    no line of it starts where a tag line (`[Harness: ...`) or an entry header (`#12 ...`) starts - the
    one rule every view (the model's, record_query, `vibe log`, the chat, the inspector) shows a body by."""
    return "\n".join(frame_lines(text))


def harness_note(text: str) -> str:
    """A note of Avibe's own, as a message that is not the person's: the tag line, then the framed body
    (T1) - for a provider that would otherwise move a system message out of its place."""
    return f"{TAG_OPENER} {_KIND_LABEL['harness']}]\n{frame_body(text)}"


def render_entry_text(entry: Entry) -> str:
    """The text of a record entry as shown to a model (any backend, T3): a person's message as typed
    (a tag-like line behind their name, T2), a reply as written, and any other input as its tag line
    followed by its framed body (T1)."""
    if entry.kind == "user":
        return render_user_text(entry.source, entry.text)
    if entry.kind == "assistant":
        return entry.text
    body = entry.text
    if entry.kind == "callback" and entry.source.event:  # a service's long body: a digest (T1)
        body = digest(entry.source.event, body, entry.seq) or body
    return f"{render_tag(entry.source, entry.at)}\n{frame_body(body)}"


def render_listed(entry: Entry) -> tuple[str, str]:
    """An entry as a listing of several shows it under its header: (what goes on the header's line,
    the framed lines below it). A person's or reply's first line goes on the header's line; a tag, for
    any other input, with its whole body framed below. Nothing below a header starts like one."""
    if entry.kind in {"user", "assistant"}:
        text = render_user_text(entry.source, entry.text) if entry.kind == "user" else entry.text
        first, *rest = text.splitlines() or [""]
        return first, "\n".join(_framed(rest))
    return render_tag(entry.source, entry.at), frame_body(entry.text)
