"""Which letter a reader could take a character for (SPEC T2): Unicode's confusable skeletons (UTS #39,
from the `disarm` library's Unicode 17 data), then the Latin letter a character's Unicode name says it is
a form of (`LATIN SMALL LETTER S WITH SWASH TAIL` is an s, whatever the confusables table lists), then
the few keyboard and syllabics substitutes that neither knows. Case never matters: a model reads `HARNESS`
as `harness`. Pure functions (the library computes; nothing is read); each answer is remembered per
character, so a long text costs one look-up per distinct character.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from typing import Final

# Substitutes a reader takes for a letter that neither the confusables data nor a Unicode name maps:
# digits and signs typed for letters, and Canadian syllabics shaped like them.
_BEYOND_TR39: Final[dict[str, str]] = {
    "h": "#",
    "a": "@4",
    "n": "ᑎ",
    "e": "3€ᗴ",
    "s": "5$§ᔕ",
    "i": "1!|",
    "b": "6",
}
# A Latin letter's name: its base letter, behind words that only say how it is drawn.
_LATIN_NAME: Final = re.compile(
    r"LATIN (?:SMALL |CAPITAL )?LETTER (?:SMALL CAPITAL |DOTLESS |SCRIPT |OPEN |CLOSED |TURNED |REVERSED "
    r"|INSULAR |BARRED |STRETCHED )?([A-Z])(?: WITH(?:OUT)? .*)?"
)


def _bare(text: str) -> str:
    """`text` decomposed, without its combining marks, case-folded: `r̵` -> `r`."""
    return "".join(
        ch for ch in unicodedata.normalize("NFD", text) if not unicodedata.combining(ch)
    ).casefold()


@functools.lru_cache(maxsize=1)
def _skeleton_key():  # type: ignore[no-untyped-def]  # the library's function, imported on first use
    from disarm import skeleton_key  # ~70 ms to import: only a text that needs it pays

    return skeleton_key


@functools.lru_cache(maxsize=4096)
def letters_of(ch: str) -> frozenset[str]:
    """The letters (case-folded, bare) a reader could take the one character `ch` for: its own, its
    UTS #39 skeleton's (of either case: `ν` is taken for a `v`, its capital `Ν` for an `n`), and the base
    letter its Unicode name gives."""
    found = {_bare(ch)}
    if ch.isascii() and ch.isalpha():
        return frozenset(found | {_bare(_skeleton_key()(ch.upper()))})  # `I` is also an `l`
    skeleton = _skeleton_key()
    for form in {ch, ch.upper(), ch.lower()}:
        if len(form) == 1:
            found.add(_bare(skeleton(form)))
    named = _LATIN_NAME.fullmatch(unicodedata.name(ch, ""))
    if named:
        found.add(named.group(1).lower())
    found |= {letter for letter, chars in _BEYOND_TR39.items() if ch in chars}
    return frozenset(found)


@functools.lru_cache(maxsize=64)
def _letter_forms(letter: str) -> frozenset[str]:
    """What `letter` itself reads as in either case (`i` and its capital `I`, which TR39 folds to `l`)."""
    return frozenset({letter, _bare(_skeleton_key()(letter)), _bare(_skeleton_key()(letter.upper()))})


def is_like(ch: str, letter: str) -> bool:
    """Whether a reader could take the visible character `ch` for the Latin `letter` (any case)."""
    if not ch:
        return False
    if ch.casefold() == letter or ch.lower() == letter:
        return True
    return bool(letters_of(ch) & _letter_forms(letter))


def is_foreign_letter(ch: str) -> bool:
    """A letter outside ASCII: in a key spelled otherwise in look-alikes (`ᎻᎪᏒᏁᎬᏚᏚ`), one such letter
    that no table maps still reads as the key's letter in its place."""
    return bool(ch) and not ch.isascii() and unicodedata.category(ch).startswith("L")


def latin_fold(text: str) -> str:
    """`text` as a reader takes it, for matching a few fixed English words: each character case-folded
    (NFKC first) and, where it is a look-alike of one Latin letter, that letter; characters nobody sees
    (format, controls) dropped. `Messagе` with a Cyrillic `е` folds to `message`."""
    out = []
    for ch in unicodedata.normalize("NFKC", text).casefold():
        if ch.isascii():
            out.append(ch)
        elif unicodedata.category(ch) in {"Cf", "Cc", "Mn", "Me"}:
            continue
        else:
            latin = sorted(x for x in letters_of(ch) if len(x) == 1 and x.isascii() and x.isalpha())
            out.append(latin[0] if len(latin) == 1 else ch)
    return "".join(out)
