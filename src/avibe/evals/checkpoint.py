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

import json
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from itertools import dropwhile
from pathlib import Path
from typing import Any, Final

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
from avibe.checkpoint.trigger import TriggerDecision
from avibe.checkpoint.turn import Mode
from avibe.context.assemble import DEFAULT_RENDERING, Rendering, with_reminder
from avibe.errors import ModelError, ToolError
from avibe.evals.strategy import Compacted, CompactionFailed, CompactState
from avibe.host.agent import render_input
from avibe.ports import CompletionRequest, ModelClient, StoredCheckpoint, TokenCounter, ToolResult
from avibe.record.checkpoint import Carry, MemoItem
from avibe.record.entries import Entry
from avibe.record.messages import REMINDER_KIND, ChatMessage, ModelFacts, ModelReply, ToolCall
from avibe.tools.plan import parse_plan
from avibe.tools.shell import started_job

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


@dataclass(frozen=True, slots=True)
class ReplayCarry:
    """What one compaction hands to the next: the last checkpoint, V8's strikes, the live state's
    bookkeeping (its messages are the replay's context), the skills' loaded text (the replay's skill
    library), the replay's job table, and whether the last turn ended (a new user message starts one)."""

    checkpoint: dict[str, Any] | None = None
    run: CheckpointRunState = field(default_factory=CheckpointRunState)
    number: int = 0
    live: dict[str, Any] = field(default_factory=dict)
    skills: dict[str, str] = field(default_factory=dict)
    jobs: dict[str, list[str]] = field(default_factory=dict)  # id -> [command, log, newest output line]
    ended: bool = True

    @classmethod
    def parse(cls, text: str) -> ReplayCarry:
        if not text:
            return cls()
        d = json.loads(text)
        run = CheckpointRunState(d["failures"], d["too_little"])
        return cls(d["checkpoint"], run, d["number"], d["live"], d["skills"], d["jobs"], d["ended"])

    def dump(self) -> str:
        return json.dumps({"checkpoint": self.checkpoint, "failures": self.run.failures,
                           "too_little": self.run.too_little, "number": self.number, "live": self.live,
                           "skills": self.skills, "jobs": self.jobs, "ended": self.ended})  # fmt: skip

    def stored(self, session: str) -> StoredCheckpoint | None:
        c = self.checkpoint
        if c is None:
            return None
        at = datetime.fromisoformat(c["at"])
        memo = _memo_items(c)
        carry = Carry.from_dict(c["carry"])
        return StoredCheckpoint(session, self.number, at, c["mind"], memo, c["scene"], c["upto_seq"], carry)


def _as_carried(stored: StoredCheckpoint) -> dict[str, Any]:
    at, carry = stored.at.isoformat(), stored.carry.to_dict()
    return {"mind": stored.mind, "memo": stored.memo_dicts(), "scene": stored.scene,
            "upto_seq": stored.upto_seq, "at": at, "carry": carry}  # fmt: skip


_slots_lock = threading.Lock()
_slots_busy: set[int] = set()


@contextmanager
def _work_dir() -> Iterator[Path]:
    """The session folder for the two work files (F2). Its path appears in the checkpoint request, so it is
    a fixed slot per concurrent worker, not a random name: the same run asks the same prompt."""
    with _slots_lock:
        slot = min(set(range(len(_slots_busy) + 1)) - _slots_busy)
        _slots_busy.add(slot)
    folder = Path(tempfile.gettempdir()) / f"avibe-eval-{os.getuid()}" / f"slot-{slot}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        with _slots_lock:
            _slots_busy.discard(slot)


# ---- the replay's tools and job table: what Avibe's tools would have reported ---------------------------

# The eval's own generated scenarios (avibe.evals.generators) start jobs in a wording of their own, with the
# log and first output a real tool's answer lacks; Avibe's shell is read by its own parser (`started_job`).
# Kept only until the generator writes the shell's wording (its figures would move with the log line).
_GENERATED_JOB = re.compile(r"\Astarted background job (\S+)")
_JOB_LOG = re.compile(r"^log: (\S+)", re.MULTILINE)
_READS: Final = frozenset({"read_file", "read"})  # transcripts' names for Avibe's read_file, write_file ...
_WRITES: Final = frozenset({"write_file", "edit_file", "write", "edit"})


def replayed_result(call: ToolCall, output: str) -> ToolResult:
    """The `ToolResult` Avibe's tool of that name reports for a replayed call and its recorded output
    (the replay writes a failed call's output as "ERROR: ...")."""
    is_error = output.startswith("ERROR: ")
    text, path = output.removeprefix("ERROR: "), call.arguments.get("path")
    name = call.name.lower()
    if is_error:
        return ToolResult(text, is_error=True)
    if isinstance(path, str) and name in _READS | _WRITES:
        return ToolResult(
            text,
            files_read=(path,) if name in _READS else (),
            files_modified=(path,) if name in _WRITES else (),
        )
    skill = call.arguments.get("name")
    if name == "skill_load" and isinstance(skill, str):
        return ToolResult(text, skill_loaded=skill.strip())
    plan = call.arguments.get("plan")
    if name == "update_plan" and isinstance(plan, str):
        try:
            return ToolResult(text, plan=parse_plan(plan))
        except ToolError:
            return ToolResult(text, is_error=True)
    return ToolResult(text)


def _jobs_after(jobs: dict[str, list[str]], call: ToolCall, output: str) -> dict[str, list[str]]:
    """The replay's job table (Vibey's is the host's): a call whose output says it started a job - in
    Avibe's shell's own words (`avibe.tools.shell.started_job`), or the eval generator's."""
    command = str(call.arguments.get("command", ""))
    started = started_job(output)
    if started is not None:  # Avibe's shell says no log and no output yet: the host knows them, not it
        return {**jobs, started[0]: [started[1] or command, "", ""]}
    generated = _GENERATED_JOB.search(output)
    if not generated:
        return jobs
    log = _JOB_LOG.search(output)
    said = [line.strip() for line in output.splitlines() if line.strip()]
    own = [line for line in said if not (_GENERATED_JOB.search(line) or _JOB_LOG.match(line))]
    return {**jobs, generated.group(1): [command, log.group(1) if log else "", own[-1] if own else ""]}


def replayed(carry: ReplayCarry, conversation: Sequence[ChatMessage], record: Sequence[Entry]) -> ReplayCarry:
    """The replay's new events since the last compaction, through Vibey's own steps: each input through
    `took_input` (a user message after the agent's step starts a new turn, as `run_turn` does) and each
    tool call through `track_tool` with what Avibe's tool would have reported. A transcript shows a
    message the person wrote after the agent's step as one they wrote once the turn ended."""
    state = LiveState.from_dict(carry.live)
    skills, jobs, ended = dict(carry.skills), dict(carry.jobs), carry.ended
    by_seq = {m.seq: i for i, m in enumerate(conversation) if m.seq is not None}
    for entry in (e for e in record if e.seq > state.last_seq):
        item = render_input(entry)
        if item.role == "user":
            if item.is_user and ended:
                state, ended = replace(state, turn_user_seqs=()), False
            state = live.took_input(state, item)
            if item.kind == "callback" and item.ref:
                jobs.pop(item.ref, None)
            continue
        at = by_seq.get(entry.seq)
        reply = conversation[at] if at is not None else None
        calls = reply.tool_calls if reply is not None else ()
        outputs = {m.tool_call_id: m.content for m in conversation[(at or 0) + 1 :] if m.role == "tool"}
        for call in calls:
            output = outputs.get(call.id, "")
            result = replayed_result(call, output)
            state = live.track_tool(state, call, result)
            loaded = result.skill_loaded or (None if result.is_error else live.shell_skill_load(call))
            if loaded:
                skills[loaded] = result.output
            jobs = _jobs_after(jobs, call, output)
        ended = True  # the person writes again once the agent has had its say: a new turn
    state = replace(state, last_seq=max([state.last_seq, *(e.seq for e in record)]))
    return replace(carry, live=_bookkeeping(state), skills=skills, jobs=jobs, ended=ended)


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
        stored = carry.stored(state.session)
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
    return _memo_items(checkpoint) if checkpoint else ()


def _memo_items(checkpoint: Mapping[str, Any]) -> tuple[MemoItem, ...]:
    return tuple(MemoItem.from_dict(item) for item in checkpoint["memo"])


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

    def trigger(tokens: int) -> TriggerDecision:  # the replay calls `compact` only when its trigger fired
        return TriggerDecision(True, limits.threshold, "the replay's trigger", tokens)

    waiting = tuple(tuple([job, *info]) for job, info in carry.jobs.items())
    port = _Memory(carry.stored(state.session))
    return LiveRoom(viewer, port, lambda: driver, facts, limits, budgets, trigger, (), lambda: waiting,
                    run=carry.run)  # fmt: skip


def _compact(
    state: CompactState, model: ModelClient, counter: TokenCounter, window: int, mode: Mode
) -> Compacted:
    conversation = _conversation(state.messages)
    carry = replayed(ReplayCarry.parse(state.carry), conversation, state.record)
    metered = _Metered(model, counter)
    with _work_dir() as tmp:
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
    carried = _as_carried(stored) if stored else None
    new_carry = replace(carry, checkpoint=carried, run=room.run, number=number, live=_bookkeeping(new))
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
