"""The harness's note after a plan whose next step the agent has already worked on.

The demo's 1.5B did ticket 001 (read tickets/001.md, edited the guide, appended the changelog line), then,
told "Next ticket, please", sent a plan with every ticket open - and update_plan's own answer, "Next:
ticket 001 - work on it now", sent it back to 001, every turn, through every checkpoint (demo runs 3-10).
The harness knows what the model forgot: the files the agent read and changed, in order. When the step the
plan puts next names a number that a file read earlier names ("ticket 001", tickets/001.md) and files were
changed after that read, the note says so and leaves the verdict to the agent: a read followed by changes
is evidence, not proof, that the step is done. Pure; the order of reads and changes is `file_events`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final, Literal

from avibe.record.checkpoint import PlanItem, next_step, render_plan

FileEvent = tuple[Literal["read", "modified"], str]

KEPT_EVENTS: Final = 60  # the newest reads and changes kept in order (a queue item's read and its edits)
SHOWN_CHANGES: Final = 4  # changed files named in the note at most (then "and N more")

_NUMBER: Final = re.compile(r"\d+")
_PATH_PART: Final = re.compile(r"[^/\\.\s_-]+")


def remember_event(
    events: tuple[FileEvent, ...], kind: Literal["read", "modified"], path: str
) -> tuple[FileEvent, ...]:
    """`events` with this read or change last (oldest first), bounded to KEPT_EVENTS."""
    return (*events, (kind, path))[-KEPT_EVENTS:]


def _numbers(text: str) -> set[int]:
    return {int(n) for n in _NUMBER.findall(text)}


def _path_numbers(path: str) -> set[int]:
    """The numbers a path's parts are ("tickets/001.md": 1; "v2/notes-12.txt": 2, 12), not those inside a
    word ("utf8.txt" names no number)."""
    return {int(part) for part in _PATH_PART.findall(path) if part.isdigit()}


def _shown(path: str) -> str:
    """A path as the note shows it: a line break or other control character in a file's name (the workdir
    is the model's to write, and a name can hold one) is written as its escape, so no name can end the
    note or start a line that looks like the harness's."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in path)


def plan_note(plan: Sequence[PlanItem], events: Sequence[FileEvent]) -> str:
    """The note to append to update_plan's result ("" for none): the step put next names a number that a
    file the agent read names, and files other than that one were changed after the last such read. It
    spells out the plan with that step marked done, ready to send: the 1.5B, told to mark it, sent the
    same plan back again and again, but it copies what it is shown."""
    step = next_step(plan)
    wanted = _numbers(step.step) if step else set()
    if step is None or not wanted:
        return ""
    reads = [i for i, (kind, path) in enumerate(events) if kind == "read" and wanted & _path_numbers(path)]
    if not reads:
        return ""
    read = events[reads[-1]][1]
    changed = list(
        dict.fromkeys(p for kind, p in events[reads[-1] + 1 :] if kind == "modified" and p != read)
    )
    if not changed:
        return ""
    names = ", ".join(_shown(p) for p in changed[:SHOWN_CHANGES])
    more = f" and {len(changed) - SHOWN_CHANGES} more" if len(changed) > SHOWN_CHANGES else ""
    marked = tuple(PlanItem(p.step, "done") if p is step else p for p in plan)
    after = next_step(marked)
    then = f"then work on {after.step}" if after else "then tell the user every step is done"
    return (
        f"\n[Avibe: you already read {_shown(read)} in this session and changed {names}{more} after it. "
        f'If that finished "{step.step}", call update_plan with this plan, {then}:\n'
        f"{render_plan(marked)}\nIf it did not, finish it first.]"
    )


def resent_note(plan: Sequence[PlanItem], events: Sequence[FileEvent]) -> str:
    """The note for a plan sent again unchanged with no other tool call since the last one: that it did
    no work, what the files say (the newest reads and changes), and what to do instead - not the same
    "work on it now" a small model answered by sending the plan yet again (the demo's 1.5B, eleven times)."""
    reads = list(dict.fromkeys(_shown(p) for kind, p in reversed(events) if kind == "read"))
    changes = list(dict.fromkeys(_shown(p) for kind, p in reversed(events) if kind == "modified"))
    if reads or changes:
        evidence = (
            f"Files read, newest first: {', '.join(reads[:SHOWN_CHANGES]) or 'none'}; changed: "
            f"{', '.join(changes[:SHOWN_CHANGES]) or 'none'}."
        )
    else:
        evidence = "No file has been read or changed in this session yet."
    step = next_step(plan)
    then = (
        f'Work on "{step.step}" now (read its file, make the change), or, if the files above show it '
        "finished, mark it [x] in the plan."
        if step
        else "Every step is done: tell the user."
    )
    return (
        "\n[Avibe: this is the plan you sent last time, unchanged, and no other tool ran in between: "
        f"sending it again does no work. {evidence} {then}]"
    )
