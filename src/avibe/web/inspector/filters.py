"""The timeline's filters, as `vibe log` has them (SPEC A4): kinds (or only the user's), a message-number
range, a time range, text (any case). The same rules and messages as `avibe.cli.log` (a test compares
them); kept here because the web edge does not import the command line (tests/test_layering.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from avibe.errors import AvibeError
from avibe.record.entries import KINDS, EntryQuery, Kind

MAX_SQL_INT: Final = 2**63 - 1  # SQLite's and PostgreSQL's bigint
_TIME_HELP: Final = "ISO 8601 time, e.g. 2026-11-30T08:00 or 2026-11-30T08:00+01:00; no offset means UTC"


class BadFilter(AvibeError):
    """A filter that cannot be used as given (the page says why, status 400)."""


@dataclass(frozen=True, slots=True)
class Filters:
    kinds: frozenset[Kind] | None = None
    seq_from: int | None = None
    seq_to: int | None = None
    since: datetime | None = None
    until: datetime | None = None
    text: str | None = None

    @property
    def narrowing(self) -> bool:
        """True when some entries after a seq may be left out (paging back is then not by seq)."""
        return any(v is not None for v in (self.kinds, self.seq_to, self.since, self.until, self.text))

    def query(self, session: str, after: int, limit: int) -> EntryQuery:
        start = max(after + 1, self.seq_from or 1)
        return EntryQuery(session, self.kinds, start, self.seq_to, self.since, self.until, self.text, limit)


def _time(option: str, value: str) -> datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.strip())
        return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
    except ValueError:
        raise BadFilter(f"{option} {value!r} is not a time ({_TIME_HELP})") from None
    except OverflowError:
        raise BadFilter(f"{option} {value!r} is out of range (UTC times end at 9999-12-31)") from None


def _kinds(user: bool, names: list[str]) -> frozenset[Kind] | None:
    chosen: set[Kind] = {"user"} if user else set()
    for name in names:
        matches = [kind for kind in KINDS if kind == name.strip().lower()]
        if not matches:
            raise BadFilter(f"unknown kind {name!r} for --kind; use one of {', '.join(KINDS)}")
        chosen.add(matches[0])
    return frozenset(chosen) if chosen else None


def _seq(option: str, value: str) -> int | None:
    if not value:
        return None
    try:
        seq = int(value)
    except ValueError:
        raise BadFilter(f"{option} {value!r} is not a message number") from None
    if seq < 1:
        raise BadFilter(f"{option} must be 1 or more (message numbers start at 1), got {seq}")
    if seq > MAX_SQL_INT:
        raise BadFilter(f"{option} {seq} is out of range; message numbers go up to {MAX_SQL_INT}")
    return seq


def _text(value: str) -> str | None:
    if "\x00" in value:
        raise BadFilter("--grep text contains a NUL byte")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise BadFilter("--grep text is not valid UTF-8") from None
    return value or None


def parse_filters(params: Mapping[str, Any]) -> Filters:
    """From a query string's values: kind (a list), user, from, to, since, until, grep."""
    filters = Filters(
        _kinds(bool(params.get("user")), [k for k in params.get("kind", []) if k]),
        _seq("--from-seq", params.get("from", "")),
        _seq("--to-seq", params.get("to", "")),
        _time("--since", params.get("since", "")),
        _time("--until", params.get("until", "")),
        _text(params.get("grep", "")),
    )
    if filters.seq_from is not None and filters.seq_to is not None and filters.seq_from > filters.seq_to:
        raise BadFilter(f"empty range: --from-seq {filters.seq_from} is after --to-seq {filters.seq_to}")
    if filters.since is not None and filters.until is not None and filters.since > filters.until:
        since, until = filters.since.isoformat(), filters.until.isoformat()
        raise BadFilter(f"empty range: --since {since} is after --until {until}")
    return filters
