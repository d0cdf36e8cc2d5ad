"""The path rules' matcher (avibe.tools.pathrule): the same gitignore-style meaning the regex it replaced
had, in linear time. A project's deny rule may be the agent's: `*a*a*a*a*a*a*a*a*b` took 37 s against a
long name with the regex, on every write and shell call of the next run.

The reference below is the regex compiler the matcher replaced, kept here as the oracle: on short
patterns and paths (where its backtracking is cheap) both must agree, except that `.` in the old regex
skipped a line break - a name holding one escaped a deny rule there; the matcher covers it."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from avibe.tools.approval import Rules
from avibe.tools.pathrule import MAX_RULE_CHARS, MAX_RULE_STARS, compile_path_rule


def _segment(pattern: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            end = pattern.find("]", i + 2 if pattern[i + 1 : i + 2] in ("!", "^") else i + 1)
            if end < 0:
                raise ValueError(pattern)
            body = pattern[i + 1 : end]
            if body.startswith(("!", "^")):
                body = "^" + body[1:]
            out.append(f"(?!/)[{body.replace(chr(92), chr(92) * 2)}]")
            i = end
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out)


def _old_regex(pattern: str) -> re.Pattern[str]:
    """The regex compile_path_rule built before the matcher (the oracle)."""
    text = pattern.strip()
    if text.startswith("./"):
        text = text[2:]
    anchored = text.startswith("/") or "/" in text.rstrip("/")
    parts = [part for part in text.strip("/").split("/") if part not in ("", ".")]
    regex: list[str] = []
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if part == "**":
            regex.append(".*" if last else "(?:[^/]+/)*")
        else:
            regex.append(_segment(part) + ("" if last else "/"))
    prefix = "" if anchored else "(?:[^/]+/)*"
    return re.compile(f"{prefix}{''.join(regex)}(?:/.*)?")


NAME_GLOBS = st.sampled_from(["a", "b", "ab", "*", "a*", "*b", "*a*", "?", "a?b", "[ab]", "[!a]", "[a-c]x"])
PATTERN_PARTS = st.one_of(NAME_GLOBS, st.just("**"))
PATTERNS = st.builds(
    lambda lead, parts, trail: lead + "/".join(parts) + trail,
    st.sampled_from(["", "/", "./"]),
    st.lists(PATTERN_PARTS, min_size=1, max_size=4),
    st.sampled_from(["", "/"]),
)
PATHS = st.lists(st.text(alphabet="abcx", max_size=3), min_size=1, max_size=5).map("/".join)


@settings(max_examples=600, deadline=None)
@given(PATTERNS, PATHS)
def test_the_matcher_means_what_the_regex_meant(pattern: str, path: str) -> None:
    """Differential: every pattern the old tests could write, every path (empty names included)."""
    assert compile_path_rule(pattern).fullmatch(path) == bool(_old_regex(pattern).fullmatch(path))


PATHOLOGICAL = "*a*a*a*a*a*a*a*a*b"


@pytest.mark.parametrize("length", [100, 1000, 10_000])
def test_a_pathological_glob_takes_linear_steps(length: int) -> None:
    """Its steps grow with the name's length times the pattern's, never exponentially: the regex needed
    about C(n, 8) tries for a name of n `a`s."""
    rule = compile_path_rule(PATHOLOGICAL)
    name = "a" * length
    assert not rule.fullmatch(name)
    assert rule.steps(name) <= 2 * len(PATHOLOGICAL) * (length + 1)
    assert rule.fullmatch(name + "b") and rule.fullmatch(f"deep/{name}b/below")


def test_a_pathological_rule_in_the_deny_list_answers_at_once() -> None:
    rules = Rules(deny=(PATHOLOGICAL, "vendor/**/x*y*z*w"))
    assert rules.denied_by("a" * 50_000) is None
    assert rules.denied_by("src/" + "a" * 50_000 + "b") == PATHOLOGICAL
    deep = "vendor/" + "/".join(["n"] * 5000) + "/x1y2z3w"
    assert rules.denied_by(deep) == "vendor/**/x*y*z*w"
    assert compile_path_rule("vendor/**/x*y*z*w").steps(deep) < 50 * 5000


def test_a_name_with_a_line_break_under_a_denied_folder_is_denied() -> None:
    """The regex's `.` skipped line breaks, so `vendor/a\\nb` escaped `vendor` and `vendor/**`."""
    for pattern in ("vendor", "vendor/**", "/vendor/"):
        assert compile_path_rule(pattern).fullmatch("vendor/a\nb/c")
    assert Rules(deny=("vendor",)).denied_by("vendor/x\ny") == "vendor"


@pytest.mark.parametrize(
    "bad",
    [
        "a" * (MAX_RULE_CHARS + 1),
        "*x" * (MAX_RULE_STARS + 1),
        "[]",
        "a[!]b",
        "[z-a]",
    ],
)
def test_oversized_or_malformed_rules_are_one_line(bad: str) -> None:
    with pytest.raises(ValueError, match="path rule") as caught:
        compile_path_rule(bad)
    assert "\n" not in str(caught.value) and len(str(caught.value)) < 200


def test_too_many_rules_are_refused() -> None:
    with pytest.raises(ValueError, match="more than"):
        Rules(deny=tuple(f"d{i}" for i in range(1001)))
