"""What the SQL store refuses before it writes (SPEC C1): text no backend stores faithfully, naive times,
entries of unknown kinds, documents that are not plain JSON, empty query ranges."""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Final

from avibe.record.entries import KINDS, EntryQuery, NewEntry

# Session and feed ids: what a URL path, a file name and a log line carry unquoted.
ID_FORM: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,63}")
ID_RULE: Final = "use 1-64 letters, digits, '.', '_', ':', '-'"


def check_text(field: str, value: str) -> None:
    """Refuse what no backend can store faithfully: NUL bytes and lone surrogates."""
    if not isinstance(value, str):
        raise TypeError(f"{field} must be a str, got {type(value).__name__}")
    nul = value.find("\x00")
    if nul >= 0:
        raise ValueError(f"{field} contains a NUL byte (\\x00) at position {nul}; NUL cannot be stored")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"{field} is not valid Unicode (lone surrogate at position {exc.start})") from exc


def check_aware(field: str, at: datetime) -> None:
    if at.tzinfo is None or at.utcoffset() is None:
        raise ValueError(f"{field} {at.isoformat()} has no time zone; pass an aware datetime (UTC)")


def check_new_entry(entry: NewEntry) -> None:
    if entry.kind not in KINDS:
        raise ValueError(f"unknown entry kind {entry.kind!r}; expected one of {', '.join(KINDS)}")
    for field, value in (
        ("text", entry.text),
        ("source name", entry.source.name),
        ("source ref", entry.source.ref),
        ("source event", entry.source.event),
        ("turn id", entry.turn_id),
        ("delivery key", entry.delivery_key),
    ):
        check_text(field, value)
    if len(entry.delivery_key) > 200:
        raise ValueError(f"delivery key is {len(entry.delivery_key)} characters; at most 200 fit")
    for call in entry.calls:
        check_text("tool call name", call.name)
        check_text("tool call arguments", call.arguments)
    if len(entry.turn_id) > 128:
        raise ValueError(f"turn id is {len(entry.turn_id)} characters; at most 128 fit")
    check_aware("entry time", entry.at)


def check_json(field: str, value: object) -> None:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{field} is not plain JSON: {exc}") from exc


def check_query(query: EntryQuery) -> None:
    if query.seq_from is not None and query.seq_to is not None and query.seq_from > query.seq_to:
        raise ValueError(f"seq range is empty: from {query.seq_from} is after to {query.seq_to}")
    for field, at in (("since", query.since), ("until", query.until)):
        if at is not None:
            check_aware(field, at)
    if query.since is not None and query.until is not None and query.since > query.until:
        raise ValueError(f"time range is empty: since {query.since} is after until {query.until}")
    if query.limit is not None and query.limit < 0:
        raise ValueError(f"limit must be 0 or more, got {query.limit}")
    if query.text is not None:
        check_text("search text", query.text)
