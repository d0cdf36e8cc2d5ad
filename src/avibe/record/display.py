"""The one way text that the model, a tool or the world wrote is shown on a terminal (the CLI's lines,
`vibe log`, `vibe checkpoints`, the chat): nothing in it is obeyed or hidden.

A terminal obeys control characters (an escape sequence erases a line, sets the window title, writes the
clipboard with OSC 52), and a reader never sees format characters or default-ignorable code points
(zero-width spaces and joiners, bidi marks, overrides and isolates, soft hyphens, tag characters, the
combining grapheme joiner) - yet they reorder or hide what is there. Each is written as its escape
instead (`\\x1b`, `\\u200b`, `\\U000e0041`), so the person sees that it is there and what it is; a lone
surrogate (an undecodable byte of a file name) as `\\udcff`. Newline and tab are kept where the text is
shown on several lines. Pure functions; no IO.
"""

from __future__ import annotations

import unicodedata
from typing import Final

# Unicode's Default_Ignorable_Code_Point ranges (DerivedCoreProperties.txt) that are not format
# characters already (Cf is caught by category): a renderer draws nothing for them.
_IGNORABLE: Final = (
    (0x034F, 0x034F),  # combining grapheme joiner
    (0x115F, 0x1160),  # Hangul fillers
    (0x17B4, 0x17B5),  # Khmer inherent vowels
    (0x180B, 0x180F),  # Mongolian free variation selectors
    (0x2060, 0x206F),  # word joiner .. nominal digit shapes (U+2065 is unassigned)
    (0x3164, 0x3164),  # Hangul filler
    (0xFE00, 0xFE0F),  # variation selectors
    (0xFFA0, 0xFFA0),  # halfwidth Hangul filler
    (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3),  # shorthand format controls
    (0x1D173, 0x1D17A),  # musical symbol format controls
    (0xE0000, 0xE0FFF),  # tags and variation selectors supplement
)
# Characters an emoji sequence is made with (a joiner, the emoji presentation selector): kept right
# after a symbol, where they join or style it; escaped anywhere else.
_EMOJI_GLUE: Final = frozenset("\u200d\ufe0e\ufe0f")
_ESCAPES: Final = {"\n": "\\n", "\t": "\\t"}  # on one line


def is_hidden(ch: str) -> bool:
    """Whether a terminal obeys `ch` or shows nothing for it: a control (Cc), a format character (Cf:
    bidi marks and overrides, zero-width characters, the soft hyphen, tags), a line or paragraph
    separator (Zl, Zp), a lone surrogate (Cs), or another default-ignorable code point."""
    if ch.isprintable() and ch.isascii():
        return False
    if unicodedata.category(ch) in {"Cc", "Cf", "Zl", "Zp", "Cs"}:
        return True
    code = ord(ch)
    return any(low <= code <= high for low, high in _IGNORABLE)


def escape_char(ch: str) -> str:
    """`ch` as the escape a person reads: `\\x1b`, `\\u200b`, `\\U000e0041`."""
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def shown(text: str, *, lines: bool = True) -> str:
    """`text` as it is safe to print on a terminal: every hidden character (`is_hidden`) written as its
    escape. With `lines`, newline and tab are kept (a `\\r\\n` line end is a newline); without, they are
    escaped too, so the text stays on one line."""
    if lines:
        text = text.replace("\r\n", "\n")
    out: list[str] = []
    previous = ""
    for ch in text:
        if (lines and ch in "\n\t") or (
            ch in _EMOJI_GLUE and previous and unicodedata.category(previous) == "So"
        ):
            out.append(ch)
        elif is_hidden(ch):
            out.append(_ESCAPES.get(ch) or escape_char(ch))
        else:
            out.append(ch)
        previous = ch
    return "".join(out)


def json_shown(dumped: str) -> str:
    """JSON text (`json.dumps(..., ensure_ascii=False)`) safe to print: each hidden character written as
    its JSON escape (`\\u202e`, a surrogate pair past U+FFFF), so the text reads back unchanged while the
    terminal shows the escape. (json.dumps already escapes controls; this covers the rest.)"""
    out = []
    for ch in dumped:
        if ch not in "\n\t" and is_hidden(ch):
            code = ord(ch)
            if code > 0xFFFF:
                code -= 0x10000
                out.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}")
            else:
                out.append(f"\\u{code:04x}")
        else:
            out.append(ch)
    return "".join(out)
