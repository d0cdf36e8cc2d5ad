"""`vibe log` and `vibe sessions`: the user's view of the same record the agent queries (SPEC A4, A3).

Read-only: these commands never create a database, a session or an entry, and never change the database
file (it is opened read-only: not even its journal mode changes). Every failure is one line on stderr and
exit code 2. The rule (`avibe.cli`): `vibe log` is about one session, so no record, no session or an
unknown one is exit 2; `vibe sessions` lists what there is, so an empty home is an empty list, exit 0.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, Final

import typer

from avibe.cli.options import MAX_SQL_INT, BadArgument, check_session_id, print_table, terminal_safe
from avibe.config import load_settings
from avibe.errors import NoRecord
from avibe.host.activity_log import load_activity
from avibe.providers.prices import money
from avibe.record.activity import collapsed, failed, headline, more_note
from avibe.record.display import json_shown
from avibe.record.entries import KINDS, Entry, EntryQuery, Kind, SessionInfo
from avibe.record.sources import FRAME, clean_field, frame_lines, render_tag, render_user_text
from avibe.record.state import ActivityItem
from avibe.store import SqlStore, open_store
from avibe.tui.cost import recorded_cost
from avibe.tui.sessions import session_title

_TIME_HELP = "ISO 8601 time, e.g. 2026-11-30T08:00 or 2026-11-30T08:00+01:00; no offset means UTC"


TITLE_SHOWN: Final = 60  # a session's title in `vibe sessions`: its first message, cut to one short line


def _parse_time(option: str, value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value.strip())
        return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
    except ValueError:
        raise BadArgument(f"{option} {value!r} is not a time ({_TIME_HELP})") from None
    except OverflowError:  # e.g. 9999-12-31T23:59:59-05:00 is past the last time Python can hold in UTC
        raise BadArgument(f"{option} {value!r} is out of range (UTC times end at 9999-12-31)") from None


def _parse_kinds(user: bool, kinds: list[str]) -> frozenset[Kind] | None:
    chosen: set[Kind] = {"user"} if user else set()
    for name in kinds:
        matches = [kind for kind in KINDS if kind == name.strip().lower()]
        if not matches:
            raise BadArgument(f"unknown kind {name!r} for --kind; use one of {', '.join(KINDS)}")
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
            raise BadArgument(f"{option} must be 1 or more (message numbers start at 1), got {seq}")
        if seq is not None and seq > MAX_SQL_INT:
            raise BadArgument(f"{option} {seq} is out of range; message numbers go up to {MAX_SQL_INT}")
    if filters.seq_from is not None and filters.seq_to is not None and filters.seq_from > filters.seq_to:
        raise BadArgument(f"empty range: --from-seq {filters.seq_from} is after --to-seq {filters.seq_to}")
    if filters.since is not None and filters.until is not None and filters.since > filters.until:
        since, until = filters.since.isoformat(), filters.until.isoformat()
        raise BadArgument(f"empty range: --since {since} is after --until {until}")
    if filters.limit is not None and filters.limit < 0:
        raise BadArgument(f"--limit must be 0 or more, got {filters.limit}")
    if filters.limit is not None and filters.limit > MAX_SQL_INT:
        raise BadArgument(f"--limit {filters.limit} is out of range; at most {MAX_SQL_INT}")
    if filters.text is not None and "\x00" in filters.text:
        raise BadArgument("--grep text contains a NUL byte")
    if filters.text is not None and not _encodable(filters.text):
        raise BadArgument("--grep text is not valid UTF-8")


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _open_record() -> SqlStore:
    """The record for reading: opened read-only, never created (a missing one raises NoRecord)."""
    settings = load_settings()
    return open_store(settings.database_url, read_only=True)


def _pick_session(store: SqlStore, session: str | None) -> SessionInfo:
    if session is not None:
        return store.get_session(session)
    latest = store.latest_session()
    if latest is None:
        raise NoRecord("there are no sessions in the record yet")
    return latest


def _entry_json(entry: Entry, happened: Sequence[ActivityItem] = ()) -> dict[str, Any]:
    return {
        "session": entry.session,
        "seq": entry.seq,
        "kind": entry.kind,
        "source_name": entry.source.name,
        "source_ref": entry.source.ref,
        "source_event": entry.source.event,  # a callback's service and event, from its verified headers (T1)
        "text": entry.text,
        "at": entry.at.isoformat(),
        "turn_id": entry.turn_id,
        "calls": [{"name": c.name, "arguments": c.arguments} for c in entry.calls],
        "activity": [_activity_json(item) for item in happened],
    }


def _activity_json(item: ActivityItem) -> dict[str, Any]:
    shown = item.to_dict()
    shown.pop("after")  # the entry it sits under
    return shown


def _activity_human(item: ActivityItem, full: bool) -> list[str]:
    """A tool's output or an error under the entry it followed: its line (an error marked as one), then
    the output's first lines and how many more there are - or, with `full`, all the output kept."""
    mark = "x error: " if failed(item) else "<- "
    lines = [f"{FRAME} {mark}{headline(item)}"]
    if full:
        body, more = item.output.splitlines(), more_note(0, item.cut)
    else:
        folded = collapsed(item)
        body, more = folded.head.splitlines(), more_note(folded.more_lines, item.cut)
    lines += [f"{FRAME}    {line}".rstrip() for line in body]
    if more:
        lines.append(f"{FRAME}    ... {more}" + ("" if full else " (--full shows them)"))
    return lines


def _entry_human(entry: Entry, happened: Sequence[ActivityItem] = (), full: bool = False) -> str:
    """The header line, then (for an input the person did not type) its source tag, then the text and
    the calls, then the tool outputs and errors that followed it: every line below the header and the
    tag framed, so no text passes for either."""
    name = clean_field(entry.source.name)  # one line, whatever the stored name holds
    who = f" · {entry.kind} {name}".rstrip() if entry.kind in {"user", "assistant"} else ""
    header = f"#{entry.seq} · {entry.at:%Y-%m-%d %H:%M:%S} UTC{who}"
    if entry.kind == "user":
        lines = frame_lines(render_user_text(entry.source, entry.text))
    elif entry.kind == "assistant":
        lines = frame_lines(entry.text)
    else:
        lines = [render_tag(entry.source, entry.at), *frame_lines(entry.text)]
    lines += frame_lines("\n".join(f"-> {c.name} {c.arguments}" for c in entry.calls))  # what it did (C1)
    for item in happened:
        lines += _activity_human(item, full)
    return terminal_safe("\n".join([header, *lines]))


def _show_entries(
    entries: list[Entry], activity: dict[int, list[ActivityItem]], as_json: bool, full: bool
) -> None:
    if as_json:
        shown = [_entry_json(entry, activity.get(entry.seq, [])) for entry in entries]
        typer.echo(json_shown(json.dumps(shown, ensure_ascii=False, indent=2)))
    elif entries:
        typer.echo("\n\n".join(_entry_human(e, activity.get(e.seq, []), full) for e in entries))


_KIND_HELP = f"Only entries of this kind; repeat for several. Kinds: {', '.join(KINDS)}."
_JSON_HELP = (
    "One JSON array of {session, seq, kind, source_name, source_ref, source_event, text, at, turn_id, "
    "calls, activity}, in time order, text as recorded; activity: the tool outputs and errors that "
    "followed the entry."
)
SessionOption = Annotated[
    str | None,
    typer.Option(
        "--session", "-s", help="Session id (default: the most recently active).", callback=check_session_id
    ),
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
FullOption = Annotated[
    bool, typer.Option("--full", help="Show tool outputs whole (as kept), not only their first lines.")
]


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
    full: FullOption = False,
) -> None:
    """Show a session's record - every input with its true source, and the replies - in time order,
    each with the tool outputs and errors that followed it.

    Filters combine (all must match). Non-user inputs are shown under the source tag the agent sees.
    Exit code 2 with one line on stderr for an unknown session, a bad range, an unreachable database,
    or no session at all yet.
    """
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
    try:
        with _open_record() as store:
            found = _pick_session(store, filters.session)
            entries = store.query(filters.query(found.id))
            activity = load_activity(store, found.id, entries[0].seq, entries[-1].seq) if entries else {}
    except ValueError as exc:  # the store's own checks on a filter
        raise BadArgument(str(exc)) from None
    _show_entries(entries, activity, as_json, full)


def _session_json(info: SessionInfo, title: str, cost: float | None) -> dict[str, Any]:
    return {
        "id": info.id,
        "title": title,
        "folder_title": info.title,  # what the session was created with (a chat's or run's folder)
        "created_at": info.created_at.isoformat(),
        "last_at": info.last_at.isoformat() if info.last_at else None,
        "entry_count": info.entry_count,
        "cost_usd": cost,  # the model's requests at LiteLLM's prices; null: a price not known
    }


def _session_row(info: SessionInfo, title: str, cost: float | None) -> list[str]:
    last = f"{info.last_at:%Y-%m-%d %H:%M}" if info.last_at else "-"
    shown = " ".join(title.split())
    shown = shown if len(shown) <= TITLE_SHOWN else shown[: TITLE_SHOWN - 1] + "…"
    return [info.id, f"{info.created_at:%Y-%m-%d %H:%M}", last, f"{info.entry_count:,}", money(cost), shown]


def sessions(
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="One JSON array of {id, title, folder_title, created_at, last_at, entry_count, cost_usd}.",
        ),
    ] = False,
) -> None:
    """List the sessions in the record, oldest first."""
    try:
        with _open_record() as store:  # titled as the chat titles them: /rename, else the first message
            found = [
                (info, session_title(store, info), recorded_cost(store, info.id).session)
                for info in store.list_sessions()
            ]
    except NoRecord:
        found = []
    if as_json:
        listed = [_session_json(*row) for row in found]
        typer.echo(json_shown(json.dumps(listed, ensure_ascii=False, indent=2)))
    elif not found:
        typer.echo("No sessions yet.")
    else:
        columns = ["session", "created (UTC)", "last (UTC)", "entries>", "cost>", "title"]
        print_table(columns, [_session_row(*row) for row in found])


def register(app: typer.Typer) -> None:
    app.command("log")(log)
    app.command("sessions")(sessions)
