"""Vibey's per-session bookkeeping, one pure module that Vibey and the eval both run (DESIGN: "the eval
measures the code users run"): inputs absorbed, a reply and a tool call recorded in the live state, what a
checkpoint carries (A1 skills, A2 files, F5 the current request, the plan) and the harness facts for the
scene (S2, S3, S5, S6). `LiveRoom` makes room over a live state (F1, V5-V9, U3) and commits through a
small port: Vibey's is the record, the eval's an in-memory checkpoint. Nothing here does IO of its own.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Final, Protocol

from avibe.agent.driver import CheckpointDriver, CheckpointResult
from avibe.agent.interrupted import Interrupted, settle_unanswered
from avibe.agent.plan_note import plan_note, remember_event, resent_note
from avibe.agent.repeats import repeat_note
from avibe.agent.room import make_room
from avibe.agent.state import LiveState, LoadedSkill, remember_file
from avibe.agent.view import Viewer
from avibe.checkpoint.budgets import Budgets
from avibe.checkpoint.carry import file_list
from avibe.checkpoint.facts import FailedCall, HarnessFacts, WaitingJob, failure_after, open_question
from avibe.checkpoint.plan import (
    CheckpointRunState,
    StopDecision,
    cut_step_outputs,
    request_parts,
    too_long_to_continue,
)
from avibe.checkpoint.room import Checkpoint, MoveOut, PartialCheckpoint, RoomLimits
from avibe.checkpoint.trigger import TriggerDecision
from avibe.host.agent import Input, render_input
from avibe.host.events import (
    CheckpointAccepted,
    CheckpointFailed,
    CheckpointFallback,
    CheckpointStarted,
    EventSink,
    ignore_events,
)
from avibe.ports import StoredCheckpoint, ToolResult
from avibe.record.checkpoint import Carry, Provenance, SkillRef
from avibe.record.entries import Entry
from avibe.record.messages import ChatMessage, ModelFacts, ToolCall
from avibe.record.sources import frame_tag_lines

__all__ = [
    "LiveRoom",
    "RoomPort",
    "absorb",
    "after_reply",
    "after_tool",
    "carry",
    "clamp_window",
    "harness_facts",
    "shell_skill_load",
    "took_input",
    "track_tool",
]

log = logging.getLogger("avibe.agent")
CUT_MARGIN: Final = 64  # tokens kept free beside a cut tool output (its note, the next message header)
SHELL_SKILL_LOAD: Final = re.compile(r"(?:^|[;&|\s])vibe\s+skill\s+load\s+['\"]?([\w.-]+)")


def clamp_window(facts: ModelFacts, window: int | None) -> ModelFacts:
    """The model's facts on a smaller window (a forced window, the eval's): the reply reserve shrinks too."""
    if window is None:
        return facts
    window = min(window, facts.window)
    return replace(facts, window=window, max_output=min(facts.max_output, window // 4))


# ---- inputs ---------------------------------------------------------------------------------------------


def took_input(state: LiveState, item: Input) -> LiveState:
    """The bookkeeping of one input: the current request (F5) and the background jobs that reported (S6)."""
    if item.kind == "callback" and item.ref:
        state = replace(state, finished_jobs=remember_file(state.finished_jobs, item.ref, keep=10))
    if item.is_user:
        state = replace(state, turn_user_seqs=(*state.turn_user_seqs, item.seq))
    return state


def absorb(
    state: LiveState, new: Sequence[Input], agent: str, note: Callable[[Interrupted], Entry]
) -> LiveState:
    """Append record entries not yet in the live context (the loop's own replies are already there). Tool
    calls a dead process left without results are named through `note` (it records the harness's note
    once per step and gives back its entry) - never dropped in silence."""
    settled, died_in_step = settle_unanswered(state.messages)  # the process died between two calls
    if not new and died_in_step is None:
        return state
    present = {m.seq for m in state.messages if m.seq is not None}
    messages = list(settled)
    interrupted = [] if died_in_step is None else [died_in_step]
    for item in new:
        if item.seq in present:
            continue
        if item.role == "assistant" and item.calls and item.agent == agent:  # died with a process
            interrupted.append(Interrupted(item.seq, item.calls))
        state = took_input(state, item)
        if item.role == "assistant" and not item.text.strip():
            continue
        messages.append(ChatMessage(item.role, item.text, seq=item.seq, kind=item.kind))
    notes = [note(step) for step in interrupted]
    taken = present | {item.seq for item in new}  # a note made by an earlier resume came in as input
    for entry in (n for n in notes if n.seq not in taken):
        messages.append(ChatMessage("user", render_input(entry).text, seq=entry.seq, kind=entry.kind))
    last = max([state.last_seq, *(i.seq for i in new), *(n.seq for n in notes)])
    return replace(state, messages=tuple(messages), last_seq=last)


# ---- a reply, a tool call -------------------------------------------------------------------------------


def after_reply(state: LiveState, text: str, calls: Sequence[ToolCall], seq: int | None) -> LiveState:
    """The model's reply (record entry `seq`) joins the live context with its tool calls."""
    message = ChatMessage("assistant", text, tool_calls=tuple(calls), seq=seq, kind="assistant")
    return replace(state, messages=(*state.messages, message))


def after_tool(state: LiveState, call: ToolCall, result: ToolResult) -> LiveState:
    """The tool's output joins the live context (A3: never the record), then its bookkeeping."""
    text = frame_tag_lines(result.output) + repeat_note(state.messages, call, result.is_error)
    if result.plan is not None and not result.is_error:
        resent = result.plan == state.plan and state.calls_since_plan == 0 and bool(state.plan)
        text += resent_note(result.plan, state.file_events) if resent else ""
        text += plan_note(result.plan, state.file_events)
    output = ChatMessage("tool", text, tool_call_id=call.id, name=call.name)
    return track_tool(replace(state, messages=(*state.messages, output)), call, result)


def calls_not_run(state: LiveState, calls: Sequence[ToolCall], why: str) -> LiveState:
    """A result for each call of the latest step that the harness did not run (a loop stop): every call
    is answered, as providers require, and the model reads why. Nothing ran, so nothing is tracked."""
    outputs = [ChatMessage("tool", why, tool_call_id=c.id, name=c.name) for c in calls]
    return replace(state, messages=(*state.messages, *outputs))


def track_tool(state: LiveState, call: ToolCall, result: ToolResult) -> LiveState:
    """What a tool call tells the harness: the plan, the commands run (S6), the files read and written
    (A2), the skills loaded in order (A1: the skill tool, or `vibe skill load NAME` in the shell, which
    loads the same text), and the last failure (S5)."""
    if result.plan is not None:  # the harness keeps the plan; checkpoints carry it verbatim
        state = replace(state, plan=result.plan, calls_since_plan=0)
    else:
        state = replace(state, calls_since_plan=state.calls_since_plan + 1)
    command = call.arguments.get("command") if call.name == "shell" else None
    if isinstance(command, str) and command.strip():
        state = replace(state, commands=remember_file(state.commands, command.strip(), keep=5))
    for path in result.files_read:
        events = remember_event(state.file_events, "read", path)
        state = replace(state, files_read=remember_file(state.files_read, path), file_events=events)
    for path in result.files_modified:
        events = remember_event(state.file_events, "modified", path)
        state = replace(state, files_modified=remember_file(state.files_modified, path), file_events=events)
    loaded = result.skill_loaded or (None if result.is_error else shell_skill_load(call))
    if loaded:
        order = max((s.order for s in state.skills), default=0) + 1
        others = tuple(s for s in state.skills if s.name != loaded)
        state = replace(state, skills=(*others, LoadedSkill(loaded, order, call.id)))
    return replace(state, last_failure=_failure_after(state.last_failure, call, result))


def _failure_after(
    last: tuple[str, str, str, str] | None, call: ToolCall, result: ToolResult
) -> tuple[str, str, str, str] | None:
    failed = failure_after(
        FailedCall(*last) if last else None, call.name, call.arguments, result.output, result.is_error
    )
    return None if failed is None else (failed.name, failed.arguments, failed.error_line, failed.then)


def shell_skill_load(call: ToolCall) -> str | None:
    """A1: the skill a shell command loaded with `vibe skill load NAME`, if it did."""
    command = call.arguments.get("command") if call.name == "shell" else None
    found = SHELL_SKILL_LOAD.search(command) if isinstance(command, str) else None
    return found.group(1) if found else None


# ---- what a checkpoint carries --------------------------------------------------------------------------


def carry(state: LiveState, previous: StoredCheckpoint | None, window: int) -> Carry:
    """Skills (A1, most recent order wins), the file list (A2, fixed at checkpoint time), the current
    request (F5: kept verbatim, wins on conflict), the plan."""
    skills = {s.name: s for s in (previous.carry.skills if previous else ())}
    for skill in state.skills:
        skills[skill.name] = SkillRef(skill.name, skill.order)
    return Carry(
        skills=tuple(sorted(skills.values(), key=lambda s: -s.order)),
        files=file_list(state.files_modified, state.files_read),
        current_request_seqs=state.turn_user_seqs,
        mid_turn=bool(state.turn_user_seqs),
        window=window,
        plan=state.plan,
    )


def harness_facts(state: LiveState, waiting: Sequence[tuple[str, ...]] = ()) -> HarnessFacts:
    """What the harness knows, for the scene (S2, S3, S6): the plan, waiting jobs, files (A2), the last
    failure, the commands run, the jobs that reported back, the question the user has not answered yet."""
    failure = FailedCall(*state.last_failure) if state.last_failure else None
    jobs = tuple(WaitingJob(*job) for job in waiting)
    return HarnessFacts(
        jobs,
        state.files_read,
        state.files_modified,
        failure,
        state.plan,
        state.commands,
        state.finished_jobs,
        open_question(state.messages),  # S3: a question to the user waits for the answer, with its number
    )


def turn_start(state: LiveState) -> int | None:
    seqs = set(state.turn_user_seqs)
    return next((i for i, m in enumerate(state.messages) if m.seq in seqs), None)


def without_skills_in_context(
    stored: StoredCheckpoint, state: LiveState, kept: Sequence[ChatMessage]
) -> StoredCheckpoint:
    """A1: put back only the skills whose loaded text is leaving the context; one whose load output the
    checkpoint keeps is still there (putting it back too would hold it twice). It is carried again at a
    later checkpoint, once its output has moved out."""
    kept_calls = {m.tool_call_id for m in kept if m.role == "tool"}
    present = {s.name for s in state.skills if s.call_id and s.call_id in kept_calls}
    if not present:
        return stored
    skills = tuple(s for s in stored.carry.skills if s.name not in present)
    return replace(stored, carry=replace(stored.carry, skills=skills))


# ---- making room ----------------------------------------------------------------------------------------


class RoomPort(Protocol):
    """Where checkpoints live: the latest one, and one transaction for a checkpoint and its live state."""

    def latest(self) -> StoredCheckpoint | None: ...
    def begin(self, state: LiveState) -> None: ...  # a checkpoint starts (a crash now is visible)
    def commit(self, checkpoint: StoredCheckpoint, state: LiveState) -> StoredCheckpoint: ...


@dataclass
class LiveRoom:
    """`RoomOps` over a live state: the room policy's steps as Vibey runs them, and the eval too."""

    viewer: Viewer
    port: RoomPort
    driver: Callable[[], CheckpointDriver]
    facts: ModelFacts
    limits: RoomLimits
    budgets: Budgets
    trigger: Callable[[int], TriggerDecision]
    tool_specs: Sequence[object] = ()
    waiting_for: Callable[[], Sequence[tuple[str, ...]]] = lambda: ()
    events: EventSink = ignore_events
    # V8 counts failures "in the same run": one LiveRoom is one run, so this is not persisted.
    run: CheckpointRunState = field(default_factory=CheckpointRunState)
    # the last failed checkpoint attempt since a checkpoint was saved: the move-out that follows says why
    # it fell back (its problems and reason, for `vibe checkpoints` and the inspector; U2 stays silent)
    failed: CheckpointResult | None = None

    def tokens(self, state: LiveState) -> int:
        return self.viewer.derive(state, self.port.latest()).tokens

    def checkpoint(
        self, state: LiveState, tokens: int, action: Checkpoint | PartialCheckpoint
    ) -> tuple[LiveState, CheckpointResult]:
        """One checkpoint attempt; accepted -> committed with the live state it implies."""
        partial = isinstance(action, PartialCheckpoint)
        self.events(CheckpointStarted(action.reason, tokens, partial))
        self.port.begin(replace(state, checkpointing=True))
        previous = self.port.latest()
        result = self.driver().run(
            view=self.viewer.derive(state, previous).messages,
            conversation=state.messages,
            base_view=self.viewer.base(state, previous),
            previous=previous,
            budgets=self.budgets,
            dismissed=frozenset(state.dismissed),
            turn_start=turn_start(state),
            tools=self.tool_specs,
            carry=carry(state, previous, self.facts.window),
            provenance=Provenance(trigger=action.reason, tokens_before=tokens),
            partial=partial,
            facts=harness_facts(state, self.waiting_for()),
        )
        if result.checkpoint is None:
            if result.attempted:
                self.failed = result
                self.events(CheckpointFailed(result.reason))
            return state, result
        return self._commit(state, result, tokens), result

    def _fallback_provenance(self, action: MoveOut, tokens: int) -> Provenance:
        """A move-out's provenance, with the failed checkpoint it falls back from: its real problems
        (never "no problems" for a checkpoint that failed) and its reason."""
        made = Provenance(trigger=action.reason, tokens_before=tokens)
        if self.failed is None:
            return made
        note = f"fell back: the checkpoint tried before failed - {self.failed.reason}"
        return replace(made, problems=self.failed.problems, notes=(note,))

    def move_out(self, state: LiveState, tokens: int, action: MoveOut) -> tuple[LiveState, CheckpointResult]:
        """V7: the oldest part moves out without the model."""
        previous = self.port.latest()
        result = self.driver().move_out_without_model(
            state.messages,
            previous,
            self.budgets,
            turn_start(state),
            carry(state, previous, self.facts.window),
            self._fallback_provenance(action, tokens),
        )
        if result.checkpoint is None:
            return state, result
        return self._commit(state, result, tokens), result

    def _commit(self, state: LiveState, result: CheckpointResult, before: int) -> LiveState:
        """Save the accepted checkpoint and the live state it leads to in one transaction (a crash
        between the two would resume with the recollection AND the moved-out messages, or lose N6)."""
        assert result.checkpoint is not None
        made = without_skills_in_context(result.checkpoint, state, result.kept)
        dismissed = tuple(sorted({*state.dismissed, *result.dismissed}))
        state = replace(state, messages=result.kept, dismissed=dismissed, checkpointing=False)
        previous = self.port.latest()
        unsaved = replace(made, number=(previous.number if previous else 0) + 1)
        after = self.viewer.tokens(self.viewer.view(state, unsaved))
        unsaved = replace(unsaved, provenance=replace(unsaved.provenance, tokens_after=after))
        saved = self.port.commit(unsaved, state)
        self.failed = None  # told once, by the checkpoint saved now
        self.viewer.adopt()
        how = saved.provenance
        if how.fallback == "model-free":
            self.events(CheckpointFallback(saved.number, before, after, result.reason))
        else:
            self.events(CheckpointAccepted(saved.number, before, after, how.calls, how.seconds, how.fallback))
        return state

    def cut_latest_tool_output(self, state: LiveState) -> LiveState:
        """V9: when the newest step's tool outputs do not fit - not even with everything before the step
        moved out - cut them, the largest first, each with a note saying so (one output, or the many
        outputs of a step that made many calls)."""
        messages = state.messages
        first = len(messages)
        while first > 0 and messages[first - 1].role == "tool":
            first -= 1
        if first == len(messages):
            return state
        outputs = messages[first:]
        calls = messages[first - 1 : first] if first > 0 and messages[first - 1].tool_calls else ()
        alone = self.viewer.view(replace(state, messages=tuple(calls)), self.port.latest())
        framing = self.viewer.counter.count_messages(outputs) - sum(
            self.viewer.counter.count(m.content) for m in outputs
        )  # each output's message header, which a cut does not shrink
        room = self.limits.hard_limit - self.viewer.tokens(alone) - framing - CUT_MARGIN
        cut = cut_step_outputs(outputs, self.viewer.counter, max(room, CUT_MARGIN))
        if cut == tuple(outputs):
            return state
        log.info("the newest step's %d tool output(s) cut to fit %d tokens (V9)", len(outputs), room)
        return replace(state, messages=(*messages[:first], *cut))

    def make_room(
        self, state: LiveState
    ) -> tuple[LiveState, StopDecision | None, tuple[CheckpointResult, ...]]:
        """V9 cut -> F1 trigger -> checkpoint (V8 permitting) -> V5 (goes out as it is when it still fits)
        -> V7 model-free move-outs until it fits -> U3 stop when nothing is left to move out."""
        state = self.cut_latest_tool_output(state)
        room = make_room(state, self, self.limits, self.run)
        self.run = room.run
        if room.stop is None:
            return room.state, None, room.results
        return room.state, self._stop_decision(room.state, room.tokens), room.results

    def _stop_decision(self, state: LiveState, tokens: int) -> StopDecision:
        """U3: what the request is made of, named (the room policy found nothing left to move out)."""
        counter = self.viewer.counter
        system, tools = counter.count(self.viewer.system), self.viewer.tools
        conversation = counter.count_messages(state.messages) if state.messages else 0
        recollection = max(tokens - system - conversation - tools, 0)
        parts = request_parts(
            state.messages,
            counter,
            turn_start(state),
            system_prompt=system,
            tool_list=tools,
            checkpoint=recollection,
        )
        return too_long_to_continue(parts, self.limits.hard_limit, 0)
