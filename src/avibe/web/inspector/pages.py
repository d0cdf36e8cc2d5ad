"""What each inspector page shows, read from the record (RecordStore) - no HTML here, no writes ever.

session_rows     the sessions list: title, agent, model, size, cost, checkpoints, last activity
timeline_page    one page of a session's record, filtered as `vibe log` filters, with the checkpoints
                 placed where they happened (item 2), and after each entry the tool outputs and errors
                 that followed it (`record/activity.py`)
context_data     the plot's data: one point per model request, the trigger line, the window (item 3)
checkpoint_view  mind, memo, scene; the mind's diff against the previous one; provenance (item 4)
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from avibe.checkpoint.mind import mission_lines
from avibe.checkpoint.wording import without_requirement_ids
from avibe.errors import StateError
from avibe.host.activity_log import load_activity
from avibe.host.context_log import load_series
from avibe.ports import RecordStore, StoredCheckpoint
from avibe.record.activity import collapsed, failed, headline, more_note
from avibe.record.display import shown as visible
from avibe.record.entries import KINDS, NON_HUMAN_INPUT_KINDS, Entry, SessionInfo
from avibe.record.sources import frame_body, render_tag
from avibe.record.state import ActivityItem, AgentState, ContextHeader
from avibe.tui.cost import recorded_cost
from avibe.tui.sessions import session_title
from avibe.web.inspector.filters import Filters

log = logging.getLogger("avibe.inspector")
PAGE: Final = 200


@dataclass(frozen=True, slots=True)
class SessionRow:
    info: SessionInfo
    agent: str
    model: str
    checkpoints: int
    title: str  # as the chat and `vibe sessions` title it: /rename, else the first message, else the folder
    cost: float | None  # what its model requests cost, as `vibe sessions` says; None: not known


def _agent_and_model(store: RecordStore, session_id: str) -> tuple[str, str]:
    """Who works in the session and on which model (the context plot's header); a damaged state
    document is logged and its row shows Vibey with no model, so one session cannot hide the list."""
    try:
        agent = AgentState.from_stored(store.load_state(session_id, AgentState.KEY)).name
        model = ContextHeader.from_stored(store.load_state(session_id, ContextHeader.KEY)).model
    except StateError as exc:
        log.warning("session %s: %s", session_id, exc)
        return "vibey", ""
    return agent, model


def _title(store: RecordStore, info: SessionInfo) -> str:
    try:
        return session_title(store, info)
    except StateError as exc:  # a damaged title document: logged, the row keeps its folder
        log.warning("session %s: %s", info.id, exc)
        return info.title


def _cost(store: RecordStore, session_id: str) -> float | None:
    """What the session's recorded model requests cost at LiteLLM's prices (the embedded model: nothing),
    as `vibe sessions` and the chat's meter count it; a damaged context log is logged and shows none."""
    try:
        return recorded_cost(store, session_id).session
    except StateError as exc:
        log.warning("session %s: %s", session_id, exc)
        return None


def session_rows(store: RecordStore, search: str = "") -> list[SessionRow]:
    """Every session, most recently active first; `search` matches id, title, folder, agent or model (any
    case)."""
    rows = []
    for info in store.list_sessions():
        agent, model = _agent_and_model(store, info.id)
        checkpoints, title = len(store.list_checkpoints(info.id)), _title(store, info)
        row = SessionRow(info, agent, model, checkpoints, title, _cost(store, info.id))
        words = " ".join((info.id, row.title, info.title, row.agent, row.model)).casefold()
        if search.casefold() in words:
            rows.append(row)
    rows.sort(key=lambda r: r.info.last_at or r.info.created_at, reverse=True)
    return rows


# ---- the timeline ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Shown:
    """An entry as the timeline shows it: the source tag for every non-human input (T1), its body framed
    below it so no line of the body passes for a tag or an entry's header."""

    entry: Entry
    tag: str  # "" for the user's and the agent's own entries
    body: str  # the text as shown: framed under a tag, else as recorded

    @property
    def kind(self) -> str:
        return self.entry.kind


def shown(entry: Entry) -> Shown:
    if entry.kind not in NON_HUMAN_INPUT_KINDS:
        return Shown(entry, "", entry.text)
    return Shown(entry, render_tag(entry.source, entry.at), frame_body(entry.text))


@dataclass(frozen=True, slots=True)
class Happened:
    """A tool's output or an error as the timeline shows it, under the entry it followed: its line, the
    output's first lines, what the folded part holds ("12 more lines"), and the output kept. All of it is
    what a tool or the model wrote: every hidden character written as its escape (`\\x1b`), as on a
    terminal (`record/display.py`); the template escapes the markup."""

    item: ActivityItem
    line: str
    head: str
    more: str
    output: str

    @property
    def failed(self) -> bool:
        return failed(self.item)


def happened(item: ActivityItem) -> Happened:
    folded = collapsed(item)
    return Happened(
        item, visible(headline(item), lines=False), visible(folded.head),
        more_note(folded.more_lines, item.cut), visible(item.output),
    )  # fmt: skip


Row = Shown | StoredCheckpoint | Happened


@dataclass(frozen=True, slots=True)
class Timeline:
    session: SessionInfo
    title: str
    rows: tuple[Row, ...]  # entries, each with what followed it, and the checkpoints placed between them
    filters: dict[str, Any]  # as given (to keep them in the links)
    filtered: bool
    after: int  # the page shows entries after this seq
    next_after: int | None  # None: this is the last page
    prev_after: int | None  # None: the first page, or unknown (a filtered record)
    last_after: int | None
    last_seq: int  # the newest seq on the page (live updates start after it)


def timeline_page(
    store: RecordStore, session_id: str, filters: Filters, after: int, raw: dict[str, Any]
) -> Timeline:
    info = store.get_session(session_id)
    found = store.query(filters.query(info.id, after, PAGE + 1))
    entries, more = found[:PAGE], len(found) > PAGE
    filtered = filters.narrowing
    first = entries[0].seq if entries else after + 1
    prev_after = None if filtered or first <= 1 else max(0, first - 1 - PAGE)
    last_after = None if filtered else max(0, info.entry_count - PAGE)
    checkpoints = store.list_checkpoints(info.id)
    next_at = found[PAGE].at if more else None
    activity = load_activity(store, info.id, entries[0].seq, entries[-1].seq) if entries else {}
    rows = _interleave(entries, checkpoints, activity, first_page=after == 0 and first <= 1, next_at=next_at)
    return Timeline(
        session=info,
        title=_title(store, info),
        rows=tuple(rows),
        filters=raw,
        filtered=filtered,
        after=after,
        next_after=entries[-1].seq if more else None,
        prev_after=prev_after,
        last_after=last_after if last_after is not None and last_after > after else None,
        last_seq=entries[-1].seq if entries else after,
    )


def _interleave(
    entries: Sequence[Entry],
    checkpoints: Sequence[StoredCheckpoint],
    activity: Mapping[int, Sequence[ActivityItem]],
    *,
    first_page: bool,
    next_at: datetime | None,
) -> list[Row]:
    """The entries in order, each followed by its tool outputs and errors, each checkpoint placed where
    it happened: after the last entry recorded before it (by time). One made before the page's first
    entry belongs to an earlier page, one made at or after the next page's first entry (`next_at`) to a
    later one."""
    if not entries:
        return list(checkpoints) if first_page else []
    pending = [c for c in checkpoints if first_page or c.at >= entries[0].at]
    rows: list[Row] = []
    for entry in entries:
        while pending and pending[0].at < entry.at:
            rows.append(pending.pop(0))
        rows.append(shown(entry))
        rows += [happened(item) for item in activity.get(entry.seq, ())]
    rows += [c for c in pending if next_at is None or c.at < next_at]
    return rows


# ---- the context over time --------------------------------------------------------------------------


def context_data(store: RecordStore, session_id: str) -> dict[str, Any]:
    """The plot's data as one JSON document: points, marks (checkpoints, move-outs), lines."""
    info = store.get_session(session_id)
    series = load_series(store, info.id)
    limits = series.limits
    return {
        "session": info.id,
        "model": limits.model,
        "window": limits.window,
        "threshold": limits.threshold,
        "hard_limit": limits.hard_limit,
        "points": list(series.points),
        "marks": list(series.marks),
    }


# ---- a checkpoint -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DiffLine:
    kind: str  # "add", "del", "hunk", "head", "same"
    text: str


@dataclass(frozen=True, slots=True)
class CheckpointView:
    session: SessionInfo
    checkpoint: StoredCheckpoint
    previous: StoredCheckpoint | None
    following: StoredCheckpoint | None
    diff: tuple[DiffLine, ...]
    missions: tuple[tuple[str, str, bool], ...]  # (id, line, still there) of this and every earlier mind
    mission_counts: tuple[tuple[int, int], ...]  # (checkpoint number, mission entries) up to this one


def _diff(a: str, b: str, a_name: str, b_name: str) -> tuple[DiffLine, ...]:
    lines = difflib.unified_diff(a.splitlines(), b.splitlines(), a_name, b_name, lineterm="")
    out = []
    for line in lines:
        if line.startswith(("+++", "---")):
            kind = "head"
        else:
            kind = {"+": "add", "-": "del", "@": "hunk"}.get(line[:1], "same")
        out.append(DiffLine(kind, line))
    return tuple(out)


def checkpoint_view(store: RecordStore, session_id: str, number: int) -> CheckpointView | None:
    info = store.get_session(session_id)
    stored = store.list_checkpoints(info.id)
    index = next((i for i, c in enumerate(stored) if c.number == number), None)
    if index is None:
        return None
    chosen = stored[index]
    previous = stored[index - 1] if index > 0 else None
    following = stored[index + 1] if index + 1 < len(stored) else None
    before = previous.mind if previous else ""
    name = f"checkpoint {previous.number}" if previous else "(no earlier checkpoint)"
    seen: dict[str, str] = {}
    for earlier in stored[: index + 1]:
        for mission_id, line in mission_lines(earlier.mind).items():
            seen.setdefault(mission_id, line)
    now = mission_lines(chosen.mind)
    missions = tuple((m, now.get(m, line), m in now) for m, line in seen.items())
    counts = tuple((c.number, len(mission_lines(c.mind))) for c in stored[: index + 1])
    return CheckpointView(
        info, chosen, previous, following, _diff(before, chosen.mind, name, f"checkpoint {number}"),
        missions, counts,
    )  # fmt: skip


def kinds() -> tuple[str, ...]:
    return KINDS


def when(value: datetime | None) -> str:
    return f"{value:%Y-%m-%d %H:%M:%S} UTC" if value else "-"


def words(text: str) -> str:
    """A checkpoint's problem, plan or note as the page shows it: without the requirement ids the log
    keeps for developers ("(V7)", "(V1-V3)", "V8: "); a mission's own id (M2) is data and stays."""
    return without_requirement_ids(text)
