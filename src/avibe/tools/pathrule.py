"""Gitignore-style path rules (`deny`, `allow_writes`, the person's stated bans), matched in linear time.

A rule is written by whoever writes the config - for a project, possibly the agent - and it is checked on
every write and shell call, so a backtracking regex (`*a*a*a*a*a*a*a*a*b` took 37 s against one long
name) would let a rule stall the next start. Matching here never backtracks more than one star:

- within one folder name, `*` `?` `[...]` are matched by the greedy two-pointer algorithm with one
  backtrack point (the last `*` seen), at most len(name) x len(glob) steps;
- across folder names, `**` and the unanchored prefix are a set of states advanced name by name (an NFA
  over the pattern's parts), at most len(path) x parts name matches.

The meaning (module docstring of avibe.tools.approval): `*` and `?` stay within one name, `**` crosses
folders, a pattern without a `/` matches a name at any depth, a leading `/` anchors it, and a pattern
that matches a folder covers everything below it. Patterns longer than MAX_RULE_CHARS or with more than
MAX_RULE_STARS stars are refused with one line (nobody writes one; an agent planting one gains nothing);
a stated ban past them binds nothing, like any other sentence that is no valid rule (avibe.tools.approval).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

MAX_RULE_CHARS: Final = 1024  # a path is at most 4096, but no rule anyone writes is near this
MAX_RULE_STARS: Final = 32
_STAR: Final = "*"


@dataclass(frozen=True, slots=True)
class _Class:
    """`[...]`: one character in (or, negated, not in) the listed characters and ranges."""

    negated: bool
    ranges: tuple[tuple[str, str], ...]

    def holds(self, char: str) -> bool:
        return any(low <= char <= high for low, high in self.ranges) != self.negated


# One glob token within a name: `*` (the _STAR string), `?` (None), a class, or a literal (1-char str).
_Token = str | _Class | None
_Glob = tuple[_Token, ...]
# Across names: a glob (one name), _ANY_NAMES (`**` or the unanchored prefix: 0+ names), _ONE_NAME (a
# last `**`: at least one more name, whatever it holds).
_ANY_NAMES: Final = "**"
_ONE_NAME: Final = "*/"
_Part = _Glob | str


def _char_class(pattern: str, body: str) -> _Class:
    negated = body[:1] in ("!", "^")
    chars = body[1:] if negated else body
    if not chars:
        raise ValueError(f"path rule {pattern!r}: '[]' holds no character")
    ranges: list[tuple[str, str]] = []
    i = 0
    while i < len(chars):
        if i + 2 < len(chars) and chars[i + 1] == "-":
            low, high = chars[i], chars[i + 2]
            if low > high:
                raise ValueError(f"path rule {pattern!r}: the range {low}-{high} is reversed")
            ranges.append((low, high))
            i += 3
        else:
            ranges.append((chars[i], chars[i]))
            i += 1
    return _Class(negated, tuple(ranges))


def _glob(pattern: str, part: str) -> _Glob:
    """One name's glob as tokens; ValueError for a `[` without `]`."""
    tokens: list[_Token] = []
    i = 0
    while i < len(part):
        char = part[i]
        if char == "*":
            if not tokens or tokens[-1] != _STAR:  # `**` inside a name is one `*`
                tokens.append(_STAR)
        elif char == "?":
            tokens.append(None)
        elif char == "[":
            end = part.find("]", i + 2 if part[i + 1 : i + 2] in ("!", "^") else i + 1)
            if end < 0:
                raise ValueError(f"path rule {pattern!r}: '[' without a closing ']'")
            tokens.append(_char_class(pattern, part[i + 1 : end]))
            i = end
        else:
            tokens.append(char)
        i += 1
    return tuple(tokens)


def _one(token: _Token, char: str) -> bool:
    if token is None:
        return True
    if isinstance(token, _Class):
        return token.holds(char)
    return token == char


class _Steps:
    """How many comparisons a match took (tests bound it; nothing else reads it)."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0


def _name_matches(glob: _Glob, name: str, steps: _Steps) -> bool:
    """Greedy two-pointer match of one name; on a mismatch the last `*` takes one more character."""
    g = n = 0
    star_g, star_n = -1, 0
    while n < len(name):
        steps.count += 1
        if g < len(glob) and glob[g] == _STAR:
            star_g, star_n = g, n
            g += 1
        elif g < len(glob) and _one(glob[g], name[n]):
            g += 1
            n += 1
        elif star_g >= 0:
            star_n += 1
            g, n = star_g + 1, star_n
        else:
            return False
    while g < len(glob) and glob[g] == _STAR:
        g += 1
    return g == len(glob)


@dataclass(frozen=True, slots=True)
class PathRule:
    """A checked path rule; `fullmatch(path)` says whether it covers the workdir-relative `path`."""

    pattern: str
    parts: tuple[_Part, ...]

    def fullmatch(self, path: str) -> bool:
        return self._run(path, _Steps())

    def steps(self, path: str) -> int:
        """The comparisons `fullmatch(path)` makes (tests bound them to show the matching is linear)."""
        counter = _Steps()
        self._run(path, counter)
        return counter.count

    def _closure(self, states: set[int]) -> set[int]:
        """`states` plus the states after each `**` it is in (a `**` may take no name)."""
        done = set(states)
        for state in sorted(states):
            while state < len(self.parts) and self.parts[state] == _ANY_NAMES:
                state += 1
                done.add(state)
        return done

    def _run(self, path: str, steps: _Steps) -> bool:
        last = len(self.parts)
        states = self._closure({0})
        for name in path.split("/"):
            if last in states:
                return True  # the rule matched a folder above: it covers everything below it
            after: set[int] = set()
            for state in states:
                steps.count += 1
                part = self.parts[state] if state < last else None
                if part == _ANY_NAMES:
                    if name:  # a name crossed by `**` is never empty (`a//b` is not `a/x/b`)
                        after.add(state)
                elif part == _ONE_NAME or (isinstance(part, tuple) and _name_matches(part, name, steps)):
                    after.add(state + 1)
            states = self._closure(after)
            if not states:
                return False
        return last in states


def compile_path_rule(pattern: str) -> PathRule:
    """A gitignore-style path pattern (module docstring) as a PathRule over workdir-relative paths with
    `/` separators. ValueError (one line) for an empty, malformed or oversized pattern."""
    text = pattern.strip()
    if not text or text in {"/", "./"}:
        raise ValueError(f"path rule {pattern!r} is empty; give a path pattern such as vendor/**")
    if "\x00" in text:
        raise ValueError(f"path rule {pattern!r} contains a NUL character")
    if len(text) > MAX_RULE_CHARS or text.count("*") > MAX_RULE_STARS:
        shown = text if len(text) <= 40 else text[:37] + "..."
        raise ValueError(
            f"path rule {shown!r} is too long or has too many stars (at most {MAX_RULE_CHARS} characters "
            f"and {MAX_RULE_STARS} stars); write a shorter pattern"
        )
    if text.startswith("./"):
        text = text[2:]
    anchored = text.startswith("/") or "/" in text.rstrip("/")
    names = [part for part in text.strip("/").split("/") if part not in ("", ".")]
    if any(part == ".." for part in names):
        raise ValueError(f"path rule {pattern!r}: '..' has no meaning here; rules are inside the workdir")
    parts: list[_Part] = [] if anchored else [_ANY_NAMES]
    for index, name in enumerate(names):
        if name == "**":
            parts.append(_ONE_NAME if index == len(names) - 1 else _ANY_NAMES)
        else:
            parts.append(_glob(pattern, name))
    return PathRule(pattern, tuple(parts))
