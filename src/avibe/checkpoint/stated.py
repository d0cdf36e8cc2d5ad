"""The paths the user's own words forbid changing, read by the harness from the person's messages, so the
file tools and the shell keep such a rule whatever the model makes of it.

"Never modify anything under vendor/ - that code belongs to another team." The memo keeps the sentence
word for word and the reminder restates it, but a model can still call edit_file on vendor/parser.txt
(the 1.5B did, in the demo). So a sentence of the person's that forbids a change to a named path becomes
a deny rule of the session, as a `deny` in config.toml is, until the person lifts it.

Read conservatively, with no model (`forbidden_paths`): a sentence forbids changing a path when
- a no (never, do not, don't, must not, may not, no one may ...) is followed within a few words by a
  change (modify, edit, touch, delete, update ...) that it governs,
- the path is named after that change, before the phrase ends (a semicolon, a bracket, a dash, "then",
  "but", a comma before the next instruction): a folder written with its slash (`vendor/`), a path
  (`src/app/config.py`), a file name with an extension (`package-lock.json`), or "the X folder",
- the sentence is not a question, and from the no to there it sets no condition the harness cannot judge
  ("unless", "except", "if", "until", "when", "once") and does not turn its scope inside out ("outside
  src/", "anything but docs/"). Asking first is a condition it can judge: the refusal says to ask.
Read over the real set's public sessions, it binds nothing there: their users' "do not invent secrets,
..., then update STATUS.md" is no ban of STATUS.md.

A later sentence of the person's that names a forbidden path (or one inside it, or a folder holding it)
and asks for or allows a change there - no "no", not a question - lifts the rule: the person has spoken
again ("You may update vendor/parser.txt now.", "Fix the version line in vendor/parser.txt."). A question
("May you edit vendor/parser.txt?") lifts nothing.

Only the messages whose stored kind is the user's are passed in (N7: by kind, never by text): a watch that
posts "the user asked you to delete vendor/" neither forbids nor allows anything.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final


def _any_of(phrases: str) -> re.Pattern[str]:
    """Any of the |-separated phrases, as whole words, in any case."""
    return re.compile(rf"\b(?:{phrases})\b", re.IGNORECASE)


_NO: Final = _any_of(
    "never|do not|don't|dont|does not|doesn't|must not|mustn't|may not|should not|shouldn't|cannot|can't|"
    "not allowed to|no one may|nobody may|under no circumstances"
)
_CHANGE: Final = _any_of(
    "modify|modifies|modifying|modified|edit|edits|editing|change|changes|changing|touch|touching|write to|"
    "writing to|delete|deletes|deleting|remove|removes|removing|rename|renaming|move|moving|update|updates|"
    "updating|overwrite|overwriting|rewrite|rewriting|alter|altering|replace|replacing|fix|patch|bump|"
    "regenerate"
)
_ALLOWS: Final = _any_of(
    "you may|you can|feel free|go ahead|is fine|are fine|allowed to|ok to|okay to|fine to"
)
# A condition the harness cannot judge, or a scope turned inside out ("outside src/", "anything but
# docs/"): read as a ban of the path named, either would forbid the opposite of what the person meant.
_CONDITION: Final = _any_of(
    "unless|except|if|until|when|once|outside|other than|apart from|besides|instead of|"
    "(?:anything|everything|nothing|all) but"
)
# A path: a run of name characters with at least one slash in it, or ending in one ("vendor/"), or a file
# name with an extension that starts with a letter ("package-lock.json", not "1.4.0"); never inside a URL
# or an address ("support@example.test").
_PATH: Final = re.compile(
    r"(?<![\w@/.:~\-])(?:\./)?(?:[\w.\-*]+/)+[\w.\-*]*|(?<![\w@/.:~\-])[\w\-*]+(?:\.[\w\-]+)*\.[A-Za-z][\w]{0,7}\b"
)
_FOLDER_WORD: Final = re.compile(r"\bthe\s+([\w.\-]+)\s+(?:folder|directory|dir)\b", re.IGNORECASE)
_NOT_A_FOLDER: Final = frozenset({"whole", "same", "other", "project", "working", "current", "root", "home"})
# Between a no and the change it governs: at most a few words ("do not ever edit", "must never, ever
# touch"), no bracket or clause mark ("don't yet implement) how to handle ...").
_GOVERNS: Final = re.compile(r"(?:[\s,]*[\w']+){0,3}[\s,]*")
# Where the phrase that names what may not change ends: a clause mark, a dash, "then", "but", or a comma
# before the next instruction ("Don't edit vendor/, fix the docs/ instead.").
_PHRASE_END: Final = re.compile(
    r"[;:()\[\]]|\s[-\u2013\u2014]\s|,?\s+(?:and\s+)?then\b|\s+but\b|,\s+(?:and\s+)?(?:fix|run|use|add|make|"
    r"commit|push|create|write|update|edit|change|put|do|just|instead|only|please|go|keep|leave)\b",
    re.IGNORECASE,
)
_SENTENCE: Final = re.compile(r"[^.!?\n]+(?:[.!?]+(?=\s|$)|$)|[^\n]+", re.MULTILINE)
_TRAILING: Final = ".,;:)]}'\"`"


@dataclass(frozen=True, slots=True)
class StatedBan:
    """A path the person forbade changing: `pattern` (gitignore-style, relative to the working directory)
    from `sentence`, verbatim from their message number `seq`."""

    seq: int
    sentence: str
    pattern: str
    session: str = ""  # set when it was said in another session: the one that delegated this work


def stated_bans(said: Iterable[tuple[int, str]]) -> tuple[StatedBan, ...]:
    """The bans in force after the person's messages `said` (message number, text), oldest first: each
    forbidding sentence adds its paths; each later sentence that allows a change at one lifts the bans
    whose paths hold it or lie inside it."""
    bans: list[StatedBan] = []
    for seq, text in said:
        for sentence in _sentences(text):
            if sentence.rstrip().endswith("?"):
                continue
            forbidden = forbidden_paths(sentence)
            if forbidden:
                known = {b.pattern for b in bans}
                bans += [StatedBan(seq, sentence, p) for p in forbidden if p not in known]
            elif _allows(sentence):
                allowed = named_paths(sentence)
                bans = [b for b in bans if not any(_overlap(b.pattern, p) for p in allowed)]
    return tuple(bans)


def forbidden_paths(sentence: str) -> tuple[str, ...]:
    """The paths a sentence forbids changing: a no (never, don't ...), then within a few words a change
    (modify, edit ...), then the paths named after it up to the end of that phrase (`_PHRASE_END`), with
    no condition or turned scope from the no to there. So "do not invent secrets, run the build, then
    update STATUS.md" forbids nothing (a real user's words: the no and the change are not about each
    other)."""
    found: list[str] = []
    for no in _NO.finditer(sentence):
        change = _CHANGE.search(sentence, no.end())
        if change is None or not _GOVERNS.fullmatch(sentence[no.end() : change.start()]):
            continue
        end = _PHRASE_END.search(sentence, change.end())
        stop = end.start() if end else len(sentence)
        if not _CONDITION.search(sentence, no.start(), stop):
            found += named_paths(sentence[change.end() : stop])
    return tuple(dict.fromkeys(found))


def _allows(sentence: str) -> bool:
    return not _NO.search(sentence) and bool(_CHANGE.search(sentence) or _ALLOWS.search(sentence))


def named_paths(sentence: str) -> tuple[str, ...]:
    """The paths a sentence names, as patterns relative to the working directory ("vendor/",
    "src/config.py"), in order, each once; none that leaves it (absolute, `~`, `..`)."""
    found = [m.group(0).rstrip(_TRAILING) for m in _PATH.finditer(sentence)]
    folders = (m.group(1) for m in _FOLDER_WORD.finditer(sentence))
    found += [f"{name}/" for name in folders if name.lower() not in _NOT_A_FOLDER]
    return tuple(dict.fromkeys(p for p in found if _inside_workdir(p)))


def _inside_workdir(pattern: str) -> bool:
    parts = [p for p in pattern.removeprefix("./").split("/") if p]
    return bool(parts) and not pattern.startswith(("/", "~")) and ".." not in parts and "://" not in pattern


def _sentences(text: str) -> list[str]:
    return [m.group(0).strip() for m in _SENTENCE.finditer(text) if m.group(0).strip()]


def _parts(pattern: str) -> list[str]:
    return [p for p in pattern.removeprefix("./").split("/") if p]


def _within(inner: str, outer: str) -> bool:
    """Whether path `inner` is `outer` or lies inside it, by name: a pattern with an inner slash is
    anchored at the working directory, one without (`vendor/`) is the folder at any depth."""
    a, b = _parts(inner), _parts(outer)
    if not b or len(b) > len(a):
        return False
    if "/" in outer.removeprefix("./").rstrip("/"):
        return a[: len(b)] == b
    return any(a[i : i + len(b)] == b for i in range(len(a) - len(b) + 1))


def _overlap(ban: str, allowed: str) -> bool:
    """A change allowed at `allowed` lifts the ban on `ban` when one holds the other."""
    return _within(allowed, ban) or _within(ban, allowed)
