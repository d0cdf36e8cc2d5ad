"""Eval rows made fit to commit: what a run stored of a real session whose licence keeps it out of this
repository is replaced by a note (keep in the repository only what its licence allows).

A run of such a session stores the session's words in three places: the probe replies (the model answers
from the session), the texts the strategy carried (a recollection, a summary, a handoff) and the notes
of its compactions where they quote what the model wrote. The verdicts, counts, tokens and seconds stay:
they are this project's measurements, and a probe's `detail` holds only the truth's expected words,
which live in `real/truth/`. A redacted probe is marked so that a rescore keeps its verdict instead of
checking the note as if it were the reply (`runner.rescored`). Pure: rows in, rows out.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from typing import Any, Final

_LEFT_OUT_START: Final = "(not kept in this repository"
LEFT_OUT: Final = f"{_LEFT_OUT_START}: the session's licence does not allow it; run the eval to see it)"
_QUOTE: Final = re.compile(r"""['"\u2018\u201c]""")  # a note quotes what the model wrote from here on


def left_out(text: str) -> bool:
    """Whether a stored text is the note that replaced a session's words."""
    return text.startswith(_LEFT_OUT_START)


def redacted_rows(rows: Sequence[dict[str, Any]], kept: Collection[str]) -> list[dict[str, Any]]:
    """The rows with every real session's words left out unless its scenario id is in `kept` (the
    manifest's kept sessions). Rows of generated scenarios and kept sessions come back as they were;
    redacting twice changes nothing."""
    return [row if _keeps(row, kept) else _redacted(row) for row in rows]


def _keeps(row: dict[str, Any], kept: Collection[str]) -> bool:
    return row.get("type") != "real" or str(row.get("scenario_id", "")) in kept


def _redacted(row: dict[str, Any]) -> dict[str, Any]:
    out = dict(row)
    if "carried" in row:
        out["carried"] = [LEFT_OUT] if row["carried"] else []
    if "probes" in row:
        out["probes"] = [{**p, "reply": LEFT_OUT, "redacted": True} for p in row["probes"]]
    if "compactions" in row:
        out["compactions"] = [
            {**c, "notes": [_note(n) for n in c.get("notes", [])]} for c in row["compactions"]
        ]
    return out


def _note(note: str) -> str:
    """A compaction note without the model's words it quoted ("answer echoes ..., ignored: 'text'")."""
    quote = _QUOTE.search(note)
    if quote is None or LEFT_OUT in note:
        return note
    return f"{note[: quote.start()].rstrip()} {LEFT_OUT}"
