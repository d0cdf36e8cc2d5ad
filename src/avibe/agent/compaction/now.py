"""Making room now, when the person asks (`/compact [focus]` in the chat, docs/chat.md): the session's own
compactor (`avibe.agent.compaction.registry`; the checkpoint by default) runs through the same `LiveRoom`
as at the trigger (F1), with the trigger forced and the recent-messages budget at zero, so everything but
the newest message (or step) is folded - what the peers' /compact does.

The focus, when given, is the person's own message: it enters the record through ingress as a `user`
entry (T1, posted by the edge that has the person's name) and joins the live context before the
compaction, so the checkpoint reads it as the user's latest words and keeps it verbatim (F5); the memo
only ever copies real user entries (N7), never text the model or a tool could have written. It does not
start a turn: the live state takes it in (the cursor moves past it).

Nothing runs beside a turn: the caller runs this between turns, and it refuses while an input waits for
the agent (taking that input in here would leave it unanswered).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Final, Protocol

from avibe.agent import live
from avibe.checkpoint.trigger import TriggerDecision
from avibe.checkpoint.wording import without_requirement_ids

if TYPE_CHECKING:
    from avibe.agent.compaction.port import Compactor
    from avibe.agent.compaction.room import LiveRoom
    from avibe.agent.driver import CheckpointResult
    from avibe.agent.persist import SessionRecord
    from avibe.agent.state import LiveState
    from avibe.host.agent import Input
    from avibe.ports import StoredCheckpoint
    from avibe.record.entries import Entry

ASKED: Final = "asked for by the person (/compact)"  # the trigger's reason, in the checkpoint's provenance


class Compacting(Protocol):
    """What making room now needs of the agent (Vibey)."""

    @property
    def name(self) -> str: ...

    @property
    def room(self) -> LiveRoom: ...
    @property
    def compactor(self) -> Compactor: ...
    @property
    def record(self) -> SessionRecord: ...
    def load_state(self) -> LiveState: ...
    def save_state(self, state: LiveState) -> None: ...
    def latest_checkpoint(self) -> StoredCheckpoint | None: ...


class Host(Protocol):
    """The session's host: its inbox, and whether an input waits for the agent."""

    def after(self, seq: int) -> list[Input]: ...
    def waiting_input(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class CompactNow:
    """What `/compact` did: `made` whether the context got smaller, the tokens of the view before and
    after, and the one line the person sees."""

    made: bool
    before: int
    after: int
    line: str


def _forced(room: LiveRoom) -> LiveRoom:
    """The room with its trigger firing now and no recent messages kept beyond the newest unit."""
    trigger = room.trigger

    def now(tokens: int) -> TriggerDecision:
        return replace(trigger(tokens), checkpoint=True, reason=ASKED, request_tokens=tokens)

    return replace(room, trigger=now, budgets=replace(room.budgets, recent_messages=0))


def take_in(agent: Compacting, host: Host, entry: Entry, state: LiveState | None = None) -> LiveState:
    """`entry` (and nothing after it) joins the live context and is saved there, between turns, so it
    starts no turn (the cursor moves past it): /compact's focus, /undo's note. Not pinned to a turn: as
    the newest message it stays verbatim anyway."""
    state = agent.load_state() if state is None else state
    taken = [item for item in host.after(state.last_seq) if item.seq <= entry.seq]
    state = live.absorb(state, taken, agent.name, agent.record.note_interrupted)
    state = replace(state, turn_user_seqs=())
    agent.save_state(state)
    return state


def compact_now(agent: Compacting, host: Host, focus: Callable[[], Entry] | None = None) -> CompactNow:
    """Make room now with the session's compactor; `focus` posts the person's focus (see the module)."""
    if host.waiting_input():
        return CompactNow(False, 0, 0, "a message is waiting for an answer; /compact once the turn ends")
    state = replace(agent.load_state(), turn_user_seqs=())  # between turns nothing is the current request
    room = agent.room
    before = room.tokens(state)
    if not state.messages:
        return CompactNow(False, before, before, "nothing to compact: the conversation is empty")
    if focus is not None:
        state = take_in(agent, host, focus(), state)
        before = room.tokens(state)
    number = _number(agent)
    forced = _forced(room)
    made = agent.compactor.make_room(state, forced)
    room.run, room.failed = forced.run, forced.failed  # V8's strikes are the session run's
    agent.save_state(made.state)  # the focus taken in, whatever came of it
    after = room.tokens(made.state)
    saved = _number(agent) > number
    line = _line(agent, made.results, before, after, saved)
    return CompactNow(saved or after < before, before, after, line)


def _number(agent: Compacting) -> int:
    latest = agent.latest_checkpoint()
    return latest.number if latest else 0


def _line(
    agent: Compacting, results: tuple[CheckpointResult, ...], before: int, after: int, saved: bool
) -> str:
    """One short line: what it came to, or why nothing changed (the reason without requirement ids). A
    checkpoint of a short conversation may leave the view larger (its recollection): said as it is."""
    how = agent.compactor.name
    if saved or after < before:
        what = f"checkpoint {_number(agent)}" if saved else how
        return f"compacted ({what}): context {before:,} → {after:,} tokens"
    last = results[-1] if results else None
    if last is not None and last.attempted and last.checkpoint is None:
        return f"compaction failed, nothing changed: {without_requirement_ids(last.reason)}"
    return f"nothing to compact: only the newest message or step is left ({before:,} tokens in the context)"
