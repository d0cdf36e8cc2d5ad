"""What else a checkpoint carries: skills put back, the recent-files list, the record pointer (A1-A3).

API:
    LoadedSkill(name: str, text: str, loaded_order: int)       a skill whose loaded text is leaving
    PutBackSkill(name: str, text: str, cut: bool, tokens: int)
    skills_to_put_back(loaded, counter, budgets) -> list[PutBackSkill]                      (A1)
    file_list(modified: Sequence[str], read: Sequence[str]) -> str     both newest first  (A2)
    record_pointer(session_id: str, where: str) -> str                                      (A3)
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Final

from avibe.checkpoint.budgets import Budgets
from avibe.ports import TokenCounter

MODIFIED_SHOWN: Final = 10
READ_SHOWN: Final = 5
MIN_CUT_SKILL: Final = 100  # below this a cut skill would be only its note: leave it out instead


@dataclass(frozen=True, slots=True)
class LoadedSkill:
    """A loaded skill whose loaded text is about to leave the context.

    `text` is the skill's CURRENT version (the caller reads it again; A1). `loaded_order` is when it was
    last loaded (larger = more recent). Putting a skill back is not reloading it: the caller keeps the
    original order, so a skill never loaded again ages out.
    """

    name: str
    text: str
    loaded_order: int


@dataclass(frozen=True, slots=True)
class PutBackSkill:
    name: str
    text: str
    cut: bool
    tokens: int


def _skill_note(name: str) -> str:
    return f"\n[Avibe: skill '{name}' was cut to fit; run `vibe skill load {name}` to load it whole.]"


def _prefix_within(text: str, suffix: str, counter: TokenCounter, limit: int) -> str:
    """The longest prefix of `text` that, with `suffix`, stays within `limit` tokens ("" if none)."""
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if counter.count(text[:mid] + suffix) <= limit:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo]


def _fit_skill(skill: LoadedSkill, counter: TokenCounter, limit: int) -> PutBackSkill | None:
    tokens = counter.count(skill.text)
    if tokens <= limit:
        return PutBackSkill(skill.name, skill.text, cut=False, tokens=tokens)
    if limit < MIN_CUT_SKILL:
        return None
    note = _skill_note(skill.name)
    text = _prefix_within(skill.text, note, counter, limit) + note
    return PutBackSkill(skill.name, text, cut=True, tokens=counter.count(text))


def skills_to_put_back(
    loaded: Sequence[LoadedSkill], counter: TokenCounter, budgets: Budgets
) -> list[PutBackSkill]:
    """A1: most recently loaded first; each within `budgets.skill_each`; together within
    `budgets.skills_total`; at most `budgets.skills_max_count`. A skill loaded twice counts at its latest
    load. When the remaining room is smaller than a skill, the skill is cut to the room (with a note on
    how to load it whole); below MIN_CUT_SKILL tokens of room, older skills are left out."""
    latest: dict[str, LoadedSkill] = {}
    for skill in sorted(loaded, key=lambda s: s.loaded_order):
        latest[skill.name] = skill
    chosen: list[PutBackSkill] = []
    room = budgets.skills_total
    for skill in sorted(latest.values(), key=lambda s: s.loaded_order, reverse=True):
        if len(chosen) >= budgets.skills_max_count:
            break
        put = _fit_skill(skill, counter, min(budgets.skill_each, room))
        if put is None:
            break
        chosen.append(put)
        room -= put.tokens
    return chosen


def _distinct(paths: Sequence[str], exclude: Collection[str] = ()) -> list[str]:
    """Distinct paths in their given order (first occurrence wins), leaving out `exclude`."""
    seen: list[str] = []
    for path in paths:
        if path not in seen and path not in exclude:
            seen.append(path)
    return seen


def file_list(modified: Sequence[str], read: Sequence[str]) -> str:
    """A2: paths only - the 10 most recently modified and the 5 most recently read, newest first.

    Both lists come NEWEST FIRST, as the live state keeps them (`remember_file` puts each file the tools
    touch at the front). Reading them as oldest-first reversed the list end to end: after m0..m13 it
    showed m0-m9 and said the four newest were pushed out. A file modified and read is listed once, as
    modified. A note says how many older ones were pushed out.
    """
    mod_all = _distinct(modified)
    shown_mod = mod_all[:MODIFIED_SHOWN]
    read_all = _distinct(read, set(mod_all))
    shown_read = read_all[:READ_SHOWN]
    lines = ["Files modified recently (newest first):", *(f"- {p}" for p in shown_mod or ["(none)"])]
    if len(mod_all) > MODIFIED_SHOWN:
        lines.append(f"({len(mod_all) - MODIFIED_SHOWN} older modified files pushed out of this list)")
    lines += ["Files read recently (newest first):", *(f"- {p}" for p in shown_read or ["(none)"])]
    if len(read_all) > READ_SHOWN:
        lines.append(f"({len(read_all) - READ_SHOWN} older read files pushed out of this list)")
    return "\n".join(lines)


def record_pointer(session_id: str, where: str) -> str:
    """A3: where the full record is and how to read the user's messages in time order."""
    return (
        f"The full record of this session ({session_id}) is in Avibe's database at {where}: every input "
        "and every reply of mine, numbered in time order. Memo numbers are these message numbers. To read "
        "the user's messages in time order, use the `record_query` tool (kinds: user; by number range or "
        f"text), or `vibe log --session {session_id} --user`. Tool output is not stored there: to see an "
        "old tool output again, run the tool again."
    )
