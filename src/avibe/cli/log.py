"""`vibe log` and `vibe sessions`: the user's view of the same record the agent queries (SPEC A4, A3).

Read-only: these commands never create a database, a session or an entry. Every failure is one line on
stderr and exit code 2.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, NoReturn

import typer

from avibe.config import load_settings
from avibe.errors import AvibeError, NoRecord
from avibe.record.entries import KINDS, Entry, EntryQuery, Kind, SessionInfo
from avibe.record.sources import clean_field, render_entry_text
from avibe.store import SqlStore, open_store

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # all controls but tab and newline
_TIME_HELP = "ISO 8601 time, e.g. 2026-11-30T08:00 or 2026-11-30T08:00+01:00; no offset means UTC"


class _BadArgument(AvibeError):
    """A filter that cannot be used as given."""


def _fail(message: str) -> NoReturn:
    typer.echo(f"vibe: {message}", err=True)
    raise typer.Exit(2)


def _parse_time(option: str, value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        raise _BadArgument(f"{option} {value!r} is not a time ({_TIME_HELP})") from None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def _parse_kinds(user: bool, kinds: list[str]) -> frozenset[Kind] | None:
    chosen: set[Kind] = {"user"} if user else set()
    for name in kinds:
        matches = [kind for kind in KINDS if kind == name.strip().lower()]
        if not matches:
            raise _BadArgument(f"unknown kind {name!r} for --kind; use one of {', '.join(KINDS)}")
        chosen.add(matches[0])
    return frozenset(chosen) if chosen else None


@dataclass(frozen=True, slots=True)
class _Filters:
    session: str | None
    kinds: frozenset[Kind] | None
    seq_from: int | None
    seq_to: int | None
    since: datetime | None
    until: datetime | None
    text: str | None
    limit: int | None

    def query(self, session_id: str) -> EntryQuery:
        return EntryQuery(
            session_id, self.kinds, self.seq_from, self.seq_to, self.since, self.until, self.text, self.limit
        )


def _check_ranges(filters: _Filters) -> None:
    for option, seq in (("--from-seq", filters.seq_from), ("--to-seq", filters.seq_to)):
        if seq is not None and seq < 1:
            raise _BadArgument(f"{option} must be 1 or more (message numbers start at 1), got {seq}")
    if filters.seq_from is not None and filters.seq_to is not None and filters.seq_from > filters.seq_to:
        raise _BadArgument(f"empty range: --from-seq {filters.seq_from} is after --to-seq {filters.seq_to}")
    if filters.since is not None and filters.until is not None and filters.since > filters.until:
        since, until = filters.since.isoformat(), filters.until.isoformat()
        raise _BadArgument(f"empty range: --since {since} is after --until {until}")
    if filters.limit is not None and filters.limit < 0:
        raise _BadArgument(f"--limit must be 0 or more, got {filters.limit}")
    if filters.text is not None and "\x00" in filters.text:
        raise _BadArgument("--grep text contains a NUL byte")


def _open_record() -> SqlStore:
    """The record for reading: never created here (a missing one is reported, not made)."""
    settings = load_settings()
    return open_store(settings.database_url, create=False)


def _pick_session(store: SqlStore, session: str | None) -> SessionInfo:
    if session is not None:
        return store.get_session(session)
    latest = store.latest_session()
    if latest is None:
        raise NoRecord("there are no sessions in the record yet")
    return latest


def _terminal_safe(text: str) -> str:
    """Show control characters (e.g. escape sequences in a watch's output) instead of obeying them."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def _entry_json(entry: Entry) -> dict[str, Any]:
    return {
        "session": entry.session,
        "seq": entry.seq,
        "kind": entry.kind,
        "source_name": entry.source.name,
        "source_ref": entry.source.ref,
        "text": entry.text,
        "at": entry.at.isoformat(),
        "turn_id": entry.turn_id,
    }


def _entry_human(entry: Entry) -> str:
    name = clean_field(entry.source.name)  # one line, whatever the stored name holds
    who = f" · {entry.kind} {name}".rstrip() if entry.kind in {"user", "assistant"} else ""
    header = f"#{entry.seq} · {entry.at:%Y-%m-%d %H:%M:%S} UTC{who}"
    return _terminal_safe(f"{header}\n{render_entry_text(entry)}")


def _show_entries(entries: list[Entry], as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps([_entry_json(entry) for entry in entries], ensure_ascii=False, indent=2))
    elif entries:
        typer.echo("\n\n".join(_entry_human(entry) for entry in entries))


_KIND_HELP = f"Only entries of this kind; repeat for several. Kinds: {', '.join(KINDS)}."
_JSON_HELP = (
    "One JSON array of {session, seq, kind, source_name, source_ref, text, at, turn_id}, in time order, "
    "text as recorded."
)
SessionOption = Annotated[
    str | None, typer.Option("--session", "-s", help="Session id (default: the most recently active).")
]
UserOption = Annotated[
    bool, typer.Option("--user", "-u", help="Only the user's own messages (same as --kind user).")
]
KindOption = Annotated[list[str] | None, typer.Option("--kind", "-k", help=_KIND_HELP)]
FromSeqOption = Annotated[
    int | None, typer.Option("--from-seq", help="First message number to show (inclusive).")
]
ToSeqOption = Annotated[int | None, typer.Option("--to-seq", help="Last message number to show (inclusive).")]
SinceOption = Annotated[
    str | None, typer.Option("--since", help=f"Entries at or after this time ({_TIME_HELP}).")
]
UntilOption = Annotated[
    str | None, typer.Option("--until", help=f"Entries at or before this time ({_TIME_HELP}).")
]
GrepOption = Annotated[
    str | None, typer.Option("--grep", "-g", help="Only entries whose text contains TEXT, ignoring case.")
]
LimitOption = Annotated[
    int | None, typer.Option("--limit", "-n", help="At most N entries: the first N in time order.")
]
JsonOption = Annotated[bool, typer.Option("--json", help=_JSON_HELP)]


def log(
    session: SessionOption = None,
    user: UserOption = False,
    kind: KindOption = None,
    from_seq: FromSeqOption = None,
    to_seq: ToSeqOption = None,
    since: SinceOption = None,
    until: UntilOption = None,
    grep: GrepOption = None,
    limit: LimitOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show a session's record - every input with its true source, and the replies - in time order.

    Filters combine (all must match). Non-user inputs are shown under the source tag the agent sees.
    Exit code 2 with one line on stderr for an unknown session, a bad range or an unreachable database.
    """
    try:
        filters = _Filters(
            session,
            _parse_kinds(user, kind or []),
            from_seq,
            to_seq,
            _parse_time("--since", since),
            _parse_time("--until", until),
            grep or None,
            limit,
        )
        _check_ranges(filters)
        with _open_record() as store:
            found = _pick_session(store, filters.session)
            entries = store.query(filters.query(found.id))
    except (AvibeError, ValueError) as exc:
        _fail(str(exc))
    _show_entries(entries, as_json)


def _session_json(info: SessionInfo) -> dict[str, Any]:
    return {
        "id": info.id,
        "title": info.title,
        "created_at": info.created_at.isoformat(),
        "last_at": info.last_at.isoformat() if info.last_at else None,
        "entry_count": info.entry_count,
    }


def _session_line(info: SessionInfo) -> str:
    last = f"{info.last_at:%Y-%m-%d %H:%M} UTC" if info.last_at else "-"
    line = (
        f"{info.id}  created {info.created_at:%Y-%m-%d %H:%M} UTC  last {last}  {info.entry_count:>6} entries"
    )
    return _terminal_safe(f"{line}  {info.title}".rstrip())


def sessions(
    as_json: Annotated[
        bool,
        typer.Option("--json", help="One JSON array of {id, title, created_at, last_at, entry_count}."),
    ] = False,
) -> None:
    """List the sessions in the record, oldest first."""
    try:
        with _open_record() as store:
            found = store.list_sessions()
    except NoRecord:
        found = []
    except AvibeError as exc:
        _fail(str(exc))
    if as_json:
        typer.echo(json.dumps([_session_json(info) for info in found], ensure_ascii=False, indent=2))
    elif not found:
        typer.echo("No sessions yet.")
    else:
        typer.echo("\n".join(_session_line(info) for info in found))


def register(app: typer.Typer) -> None:
    app.command("log")(log)
    app.command("sessions")(sessions)
