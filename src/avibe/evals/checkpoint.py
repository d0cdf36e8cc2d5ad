"""Avibe's checkpoint as an evaluation strategy: the code Vibey runs, on the replay's context.

Each compaction runs Vibey's own bookkeeping and room ops (`avibe.agent.live`): the replayed inputs and
tool calls go through the same input and after-tool steps into a `LiveState`, and `LiveRoom` makes room
over it with Vibey's room policy, driver, view and carry, committing to an in-memory checkpoint instead of
the record. So the eval measures what users run: skills put back (A1), the file list (A2), the current
request (F5), the plan, V5, V7, V8 and V9. The live state's bookkeeping, the checkpoint and V8's strikes
are carried to the next compaction as JSON.

mode: "structured" or "three" (small JSON questions under a grammar, one a call or in three calls; Vibey's
choice for local models, by name) or "tools" (edit and tick with tool calls; its choice for hosted models)
- None picks by the model's name, like Vibey.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from itertools import dropwhile
from typing import Any, Final

from pydantic import TypeAdapter
from pydantic.dataclasses import dataclass as pydantic_dataclass

from avibe.agent import live
from avibe.agent.compaction import LiveRoom, make_compactor
from avibe.agent.driver import CheckpointDriver, CheckpointResult, entries_lookup, reminds
from avibe.agent.driver import mode_for as driver_mode_for
from avibe.agent.state import LiveState
from avibe.agent.view import Viewer
from avibe.checkpoint.budgets import Budgets, budgets_for
from avibe.checkpoint.plan import CheckpointRunState
from avibe.checkpoint.room import RoomLimits, limits_for
from avibe.checkpoint.structured import SCENE_COMPLETED, SCENE_DROPPED
from avibe.checkpoint.turn import Mode
from avibe.context.assemble import DEFAULT_RENDERING, Rendering, with_reminder
from avibe.errors import ModelError
from avibe.evals.replay import replay_trigger
from avibe.evals.slots import work_dir
from avibe.evals.strategy import Compacted, CompactionFailed, CompactState
from avibe.evals.toolbox import ReplayToolBox
from avibe.host.agent import render_input
from avibe.ports import CompletionRequest, ModelClient, StoredCheckpoint, TokenCounter
from avibe.record.checkpoint import Carry, MemoItem
from avibe.record.entries import Entry
from avibe.record.messages import REMINDER_KIND, ChatMessage, ModelFacts, ModelReply

RECOLLECTION_KIND: Final = "checkpoint"  # ChatMessage.kind of the recollection in the replay's context
NAME: Final = "avibe-checkpoint"


def mode_for(model_name: str) -> Mode:
    """Vibey's choice (the same function `vibe run` uses): structured questions for local models."""
    from avibe.providers import is_local

    return driver_mode_for(model_name, is_local(model_name))


class _FixedClock:
    def __init__(self, at: datetime) -> None:
        self.at = at

    def now(self) -> datetime:
        return self.at


class _Metered:
    """Counts what the checkpoint's calls cost, the same way the baselines' summaries are counted."""

    def __init__(self, model: ModelClient, counter: TokenCounter) -> None:
        self.model, self.counter = model, counter
        self.tokens = self.calls = 0

    @property
    def facts(self) -> ModelFacts:
        return self.model.facts

    def complete(self, request: CompletionRequest) -> ModelReply:
        self.calls += 1
        messages = request.messages
        try:
            reply = self.model.complete(request)
        except ModelError:
            self.tokens += self.counter.count_messages(messages)  # a failed call still cost its prompt
            raise
        reported = reply.usage.prompt_tokens + reply.usage.completion_tokens
        self.tokens += reported or self.counter.count_messages(messages) + self.counter.count(reply.text)
        return reply


@pydantic_dataclass(frozen=True, slots=True)
class ReplayCarry:
    """What one compaction hands to the next: the last checkpoint as stored (its carry and provenance
    included), V8's strikes, the live state's bookkeeping (its messages are the replay's context), the
    skills' loaded text (the replay's skill library), the replay's job table, and whether the last turn
    ended (a new user message starts one). A pydantic dataclass: read back validated, never by hand."""

    checkpoint: StoredCheckpoint | None = None
    run: CheckpointRunState = field(default_factory=CheckpointRunState)
    number: int = 0
    live: dict[str, Any] = field(default_factory=dict)
    skills: dict[str, str] = field(default_factory=dict)
    jobs: dict[str, tuple[str, str, str]] = field(default_factory=dict)  # id -> (command, log, newest line)
    ended: bool = True

    @classmethod
    def parse(cls, text: str) -> ReplayCarry:
        """The carry a compaction handed on ("" before the first: an empty one)."""
        return _REPLAY_CARRY.validate_json(text) if text else cls()

    def dump(self) -> str:
        return _REPLAY_CARRY.dump_json(self).decode()

    def stored(self) -> StoredCheckpoint | None:
        return self.checkpoint


_REPLAY_CARRY: Final = TypeAdapter(ReplayCarry)


def replayed(carry: ReplayCarry, conversation: Sequence[ChatMessage], record: Sequence[Entry]) -> ReplayCarry:
    """The replay's new events since the last compaction, through Vibey's own steps: each input through
    `took_input` (a user message after the agent's step starts a new turn, as `run_turn` does) and each
    tool call through `track_tool` with what Avibe's tool would have reported. A transcript shows a
    message the person wrote after the agent's step as one they wrote once the turn ended."""
    state = LiveState.from_dict(carry.live)
    skills, ended = dict(carry.skills), carry.ended
    tools = ReplayToolBox(dict(carry.jobs))
    by_seq = {m.seq: i for i, m in enumerate(conversation) if m.seq is not None}
    for entry in (e for e in record if e.seq > state.last_seq):
        item = render_input(entry)
        if item.role == "user":
            if item.is_user and ended:
                state, ended = replace(state, turn_user_seqs=()), False
            state = live.took_input(state, item)
            if item.kind == "callback" and item.ref:
                tools.finished(item.ref)
            continue
        at = by_seq.get(entry.seq)
        reply = conversation[at] if at is not None else None
        calls = reply.tool_calls if reply is not None else ()
        outputs = {m.tool_call_id: m.content for m in conversation[(at or 0) + 1 :] if m.role == "tool"}
        for recorded in calls:
            call, result = tools.result(recorded, outputs.get(recorded.id, ""))
            state = live.track_tool(state, call, result)
            loaded = result.skill_loaded or (None if result.is_error else live.shell_skill_load(call))
            if loaded:
                skills[loaded] = result.output
        ended = True  # the person writes again once the agent has had its say: a new turn
    state = replace(state, last_seq=max([state.last_seq, *(e.seq for e in record)]))
    return replace(carry, live=_bookkeeping(state), skills=skills, jobs=dict(tools.jobs), ended=ended)


def _bookkeeping(state: LiveState) -> dict[str, Any]:
    """The live state without its messages (the replay's context holds those)."""
    data = replace(state, messages=()).to_dict()
    del data["messages"]
    return data


class _Memory:
    """The room's port over one in-memory checkpoint (Vibey's commits to the record)."""

    def __init__(self, stored: StoredCheckpoint | None) -> None:
        self.stored = stored

    def latest(self) -> StoredCheckpoint | None:
        return self.stored

    def begin(self, state: LiveState) -> None:
        pass  # nothing to resume: a replay is not killed mid-checkpoint

    def commit(self, checkpoint: StoredCheckpoint, state: LiveState) -> StoredCheckpoint:
        self.stored = checkpoint
        return checkpoint


@dataclass(frozen=True, slots=True)
class AvibeCheckpoint:
    """Avibe's checkpoint (mind, memo, scene) through Vibey's room loop, policy and driver."""

    mode: Mode | None = None
    name: str = NAME

    def compact(
        self, state: CompactState, model: ModelClient, counter: TokenCounter, window: int
    ) -> Compacted:
        return _compact(state, model, counter, window, self.mode or mode_for(model.facts.name))

    def view_now(
        self, state: CompactState, model: ModelClient, counter: TokenCounter, window: int
    ) -> tuple[ChatMessage, ...]:
        """The context as Vibey shows it at this step, which is what the checkpoint's calls start with: it
        renders its recollection again at every step, and once the interrupted request's turn has ended
        the recollection no longer holds that request (F5). The replay's context keeps the text of the
        compaction that made it, so a prompt cache warmed with it (benchmarks/checkpoint_cost.py) would
        miss where a session's step had already read the new text."""
        conversation = _conversation(state.messages)
        carry = ReplayCarry.parse(state.carry)
        stored = carry.stored()
        at = next((i for i, m in enumerate(state.messages) if m.kind == RECOLLECTION_KIND), None)
        if stored is None or at is None:
            return state.messages
        now = replayed(carry, conversation, state.record)
        viewer = replay_viewer(state, carry, model, counter, window)
        text = viewer.recollection(replace(LiveState.from_dict(now.live), messages=conversation), stored)
        shown = replace(state.messages[at], content=text)
        # the memo's reminder follows the newest user message, as in Vibey's view
        memo = stored.memo if viewer.remind else ()
        return (*state.messages[:at], shown, *with_reminder(state.messages[at + 1 :], memo))


def _conversation(context: Sequence[ChatMessage]) -> tuple[ChatMessage, ...]:
    """The live messages of the replay's context: without the system prompt and recollection in front,
    and without the view's reminder (Vibey's live state never holds it; its view adds it)."""
    messages = dropwhile(lambda m: m.role == "system", context)
    return tuple(m for m in messages if m.kind != REMINDER_KIND)


def memo_of(carry_text: str) -> tuple[MemoItem, ...]:
    """The memo of the last checkpoint a compaction handed on (() before the first)."""
    checkpoint = ReplayCarry.parse(carry_text).checkpoint
    return checkpoint.memo if checkpoint else ()


def _replay_limits(
    state: CompactState, model: ModelClient, window: int
) -> tuple[ModelFacts, RoomLimits, Budgets]:
    """Vibey's facts, room limits and budgets on the replay: its clamped window, the replay's threshold."""
    facts = live.clamp_window(replace(model.facts, window=window), window)  # the eval's window, as given
    limits = replace(limits_for(facts), threshold=int(window * state.threshold))
    return facts, limits, budgets_for(window, limits.threshold)


def replay_viewer(
    state: CompactState,
    carry: ReplayCarry,
    model: ModelClient,
    counter: TokenCounter,
    window: int,
    rendering: Rendering = DEFAULT_RENDERING,
) -> Viewer:
    """Vibey's viewer on the replay, with the budgets of its clamped window and the replay's threshold."""
    _, _, budgets = _replay_limits(state, model, window)
    system = state.messages[0].content
    return Viewer(counter, state.session, system, 0, budgets, skill_text=carry.skills.get,
                  rendering=rendering, remind=reminds(model.facts.name))  # fmt: skip


def _room(
    state: CompactState,
    carry: ReplayCarry,
    model: ModelClient,
    counter: TokenCounter,
    window: int,
    driver: CheckpointDriver,
) -> LiveRoom:
    """Vibey's room ops on the replay: its clamped window, the replay's threshold, no tools."""
    facts, limits, budgets = _replay_limits(state, model, window)
    viewer = replay_viewer(state, carry, model, counter, window)
    trigger = replay_trigger(window, state.threshold)  # the replay's loop asked the same one (F1)
    waiting = ReplayToolBox(dict(carry.jobs)).waiting()
    port = _Memory(carry.stored())
    return LiveRoom(viewer, port, lambda: driver, facts, limits, budgets, trigger, (), lambda: waiting,
                    run=carry.run)  # fmt: skip


def _compact(
    state: CompactState, model: ModelClient, counter: TokenCounter, window: int, mode: Mode
) -> Compacted:
    conversation = _conversation(state.messages)
    carry = replayed(ReplayCarry.parse(state.carry), conversation, state.record)
    metered = _Metered(model, counter)
    with work_dir() as tmp:
        clock = _FixedClock(state.record[-1].at)
        driver = CheckpointDriver(
            entries_lookup(state.record), metered, counter, state.session, tmp, clock, mode
        )
        room = _room(state, carry, model, counter, window, driver)
        live_state = replace(LiveState.from_dict(carry.live), messages=conversation)
        # the registry's checkpoint compactor, the one `vibe run` makes room with
        new, stop, results = make_compactor("checkpoint").make_room(live_state, room)
    if stop is not None and stop.stop:
        why = "; ".join(r.reason for r in results if r.reason) or stop.reason
        raise CompactionFailed(f"the checkpoint could neither run nor move anything out: {why}")
    stored = room.port.latest()
    number = stored.number if stored else 0
    new_carry = replace(carry, checkpoint=stored, run=room.run, number=number, live=_bookkeeping(new))
    accepted = [r for r in results if r.checkpoint is not None]
    messages = _labelled(room.viewer.view(new, stored))
    if not accepted:  # V5: a failed checkpoint changes nothing while the request still fits (V9 may cut)
        messages = state.messages if new.messages == conversation else messages
        notes = tuple(r.reason for r in results if r.reason)
        meta = {
            "first_pass_valid": False,
            "repaired": False,
            "fallback": "failed" if results else "skipped",
            "problems": list(notes),  # why it failed, as the attempts say
        }
        return Compacted(messages, metered.tokens, metered.calls, new_carry.dump(), notes, meta)
    assert stored is not None
    return _accepted(state, messages, stored, accepted[-1], new_carry.dump(), metered)


def memo_audit(memo: Sequence[MemoItem], record: Sequence[Entry]) -> dict[str, int]:
    """The memo's guarantees checked against the record, not taken on trust (N4, N7): how many entries,
    how many hold their record entry's text byte for byte (or a prefix + cut note, N5), and how many
    come from anything but a user message."""
    from avibe.checkpoint.memo import memo_text_matches

    by_seq = {entry.seq: entry for entry in record}
    verbatim = non_user = 0
    for item in memo:
        entry = by_seq.get(item.seq)
        verbatim += entry is not None and memo_text_matches(item, entry.text)
        non_user += entry is None or entry.source.kind != "user"
    return {"memo_entries": len(memo), "memo_verbatim": verbatim, "memo_non_user": non_user}


def _labelled(view: Sequence[ChatMessage]) -> tuple[ChatMessage, ...]:
    """The view with its recollection (the second system message) labelled for the replay and report."""
    return tuple(
        replace(m, kind=RECOLLECTION_KIND) if i == 1 and m.role == "system" else m for i, m in enumerate(view)
    )


def carry_audit(carry: Carry) -> dict[str, int]:
    """What the checkpoint hands on besides mind, memo and scene: skills (A1), files (A2), the plan and
    the current request (F5)."""
    files = sum(1 for line in carry.files.splitlines() if line.startswith("- ") and line != "- (none)")
    return {"carry_skills": len(carry.skills), "carry_files": files, "carry_plan": len(carry.plan),
            "carry_request": len(carry.current_request_seqs)}  # fmt: skip


def _accepted(
    state: CompactState,
    messages: tuple[ChatMessage, ...],
    stored: StoredCheckpoint,
    result: CheckpointResult,
    carry: str,
    metered: _Metered,
) -> Compacted:
    made = stored.provenance
    completed = any(note.startswith(SCENE_COMPLETED) for note in made.notes)
    dropped = any(note.startswith(SCENE_DROPPED) for note in made.notes)
    meta = {
        # V1-V3 on the first answer, taken as the model wrote it: the model-free move-out (V7) had no
        # answer to validate; a scene the harness had to complete, or whose parts it dropped (repeats,
        # filler, echoes of the question, copies of tool output), is not the model's
        # valid answer
        "first_pass_valid": result.fallback != "model-free"
        and not made.problems
        and not completed
        and not dropped,
        "scene_completed": completed,
        "repaired": made.repair_used,
        "fallback": result.fallback,
        # what the first answer got wrong (V1-V3) and what the harness decided besides it (a mission entry
        # dropped by M4, a memo item kept or let go, a scene part completed): the report counts them
        "problems": list(made.problems),
        "harness_notes": list(made.notes),
        **memo_audit(stored.memo, state.record),
        **carry_audit(stored.carry),
    }
    notes = (made.plan,) if made.plan else ()
    return Compacted(messages, metered.tokens, metered.calls, carry, notes, meta)
