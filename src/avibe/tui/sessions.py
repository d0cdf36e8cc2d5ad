"""`/sessions` and `/rename` in the chat: each session named by the title the person gave it, else by its
first message (shortened), with the agent that works in it and when it was last active - the folder path
every session of one folder shares tells them apart from nothing."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Final

from avibe.ports import RecordStore
from avibe.record.entries import EntryQuery, SessionInfo
from avibe.record.state import AgentState, TitleState

TITLE_CHARS: Final = 48  # a title on the list is cut to this many characters
MAX_TITLE: Final = 200  # the longest title /rename keeps


@dataclass(frozen=True, slots=True)
class SessionRow:
    id: str
    title: str
    agent: str
    last: datetime
    entries: int


def shorten(text: str, limit: int = TITLE_CHARS) -> str:
    """One line of at most `limit` characters: line breaks and runs of spaces folded, an ellipsis when
    cut (at a word's end where there is one)."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    cut = flat[: limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip() + "…"


def session_title(store: RecordStore, info: SessionInfo) -> str:
    """The title given with /rename, else the first message the person typed, else the folder."""
    given = TitleState.from_stored(store.load_state(info.id, TitleState.KEY)).title
    if given:
        return given
    first = store.query(EntryQuery(info.id, kinds=frozenset({"user"}), limit=1))
    return first[0].text if first and first[0].text.strip() else info.title or "(no messages yet)"


def session_rows(store: RecordStore) -> list[SessionRow]:
    """Every session, the latest active first."""
    rows = [
        SessionRow(
            info.id,
            session_title(store, info),
            AgentState.from_stored(store.load_state(info.id, AgentState.KEY)).name,
            info.last_at or info.created_at,
            info.entry_count,
        )
        for info in store.list_sessions()
    ]
    return sorted(rows, key=lambda row: row.last, reverse=True)


def ago(then: datetime, now: datetime) -> str:
    """`just now`, `5 min ago`, `3 h ago`, `2 days ago`, else the date."""
    seconds = (now - then).total_seconds()
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{seconds // 60:.0f} min ago"
    if seconds < 86_400:
        return f"{seconds // 3600:.0f} h ago"
    if seconds < 7 * 86_400:
        days = seconds // 86_400
        return f"{days:.0f} day{'s' if days > 1 else ''} ago"
    return f"{then:%Y-%m-%d}"


def sessions_text(rows: list[SessionRow], current: str | None, now: datetime) -> str:
    """The list as the chat shows it; this session marked with `*`."""
    if not rows:
        return "no sessions yet"
    width = max(len(row.id) for row in rows)
    agents = max(len(row.agent) for row in rows)
    lines = []
    for row in rows:
        mark = "*" if row.id == current else " "
        title = shorten(row.title).ljust(TITLE_CHARS)
        when = ago(row.last, now)
        lines.append(f"{mark} {row.id.ljust(width)}  {title}  {row.agent.ljust(agents)}  {when}")
    return "\n".join([*lines, "/resume ID goes on in one (its start will do); /rename TITLE names this one"])


def checked_title(words: tuple[str, ...]) -> str:
    """The title /rename was given, one line; ValueError when there is none or it is too long."""
    title = " ".join(" ".join(words).split())
    if not title:
        raise ValueError("/rename TITLE: give the title, e.g. /rename fix the login bug")
    if len(title) > MAX_TITLE:
        raise ValueError(f"a title is at most {MAX_TITLE} characters; this one has {len(title)}")
    return title


def rename(store: RecordStore, session_id: str, title: str) -> None:
    store.save_state(session_id, TitleState.KEY, TitleState(title).to_dict())
