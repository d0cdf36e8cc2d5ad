"""What happened between a session's entries, kept for the person: each tool call's output and whether it
failed, a turn that stopped (the model failed, the step limit), a checkpoint that failed (docs/inspector.md,
docs/cli.md `vibe log`).

Values only; `host/activity_log.py` keeps them in the session's state, the inspector's timeline and `vibe
log` show them. They are never entries: the record the agent queries holds inputs and replies, and tool
output is not part of it (A3) - to see an output again the agent re-runs the tool. An item sits after
the entry that was the session's newest when it happened (`after`), so the timeline shows it where it
happened:

    "activity"      ActivityHeader   {"starts": [after of each chunk's first item, ...]}
    "activity/<i>"  ActivityChunk    {"items": [...]}, a bounded number of items and characters

Everything in an item that a tool, the model or the world wrote is untrusted text: shown escaped (the
inspector's templates) or terminal-safe (`vibe log`), never obeyed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from avibe.record.state import ActivityItem

OUTPUT_KEPT: Final = 10_000  # characters of one tool output kept for the person; the rest is counted
SHOWN_LINES: Final = 5  # a collapsed output: its first lines, then "N more lines"


def count_lines(text: str) -> int:
    """Lines as a person counts them: a final newline ends the last line, it starts none."""
    return len(text.splitlines())


@dataclass(frozen=True, slots=True)
class Collapsed:
    """An output as it is shown folded: its first lines, how many more lines the whole output has."""

    head: str
    more_lines: int


def collapsed(item: ActivityItem, shown_lines: int = SHOWN_LINES) -> Collapsed:
    lines = item.output.splitlines()
    return Collapsed("\n".join(lines[:shown_lines]), max(0, item.lines - min(shown_lines, len(lines))))


def more_note(more_lines: int, cut_chars: int) -> str:
    """`3 more lines`, `1 more line (12,000 characters not kept)`; "" when nothing more."""
    parts = []
    if more_lines:
        parts.append(f"{more_lines:,} more line{'s' if more_lines != 1 else ''}")
    if cut_chars:
        note = f"{cut_chars:,} characters not kept"
        parts.append(f"({note})" if parts else note)
    return " ".join(parts)


def failed(item: ActivityItem) -> bool:
    """Whether the item is an error the views mark as one: a failed tool call, a stopped turn, a failed
    checkpoint."""
    return item.kind != "tool" or item.error


def headline(item: ActivityItem) -> str:
    """The item's one line, without the output: what ran, or what went wrong (the views mark that as an
    error). The caller escapes it."""
    if item.kind == "stopped":
        return f"the turn stopped: {item.message}"
    if item.kind == "checkpoint_failed":
        return f"a checkpoint failed: {item.message}"
    what = f"{item.name} failed" + (f": {item.message}" if item.message else "") if item.error else item.name
    if item.output:
        size = f"{item.lines:,} line{'s' if item.lines != 1 else ''}"
    else:  # an external agent's stream gives an output's size only
        size = f"{item.chars:,} characters" if item.chars else "no output"
    return " · ".join([what, size, *([f"{item.seconds:.1f} s"] if item.seconds else [])])
