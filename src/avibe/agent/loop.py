"""Vibey's turn loop (small on purpose, like mini-swe-agent's). Vibey is an `Agent` the session host
drives (`avibe.host`): inputs in, events out.

A turn: take new inputs from the inbox (rendered by the host, T1-T3) -> derive the view (system prompt +
recollection + live context) once per step -> make room (the room policy shared with the eval,
`avibe.agent.room`) -> call the model -> record the reply and its tool calls -> run the tools -> repeat
until the model answers without tools. The live context is saved after every step, and a checkpoint
commits in one transaction with the live state it implies, so a killed process loses nothing already
recorded and resumes exactly where it was.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Final

from avibe.agent.driver import (
    CheckpointDriver,
    CheckpointResult,
    checkpoint_from_stored,
    empty_checkpoint,
    store_lookup,
)
from avibe.agent.interrupted import NOTE_SOURCE, Interrupted, note_text, settle_unanswered
from avibe.agent.repeats import loop_stop_reason, repeat_note
from avibe.agent.room import make_room
from avibe.agent.state import STATE_KEY, LiveState, LoadedSkill, remember_file
from avibe.checkpoint.budgets import Budgets, budgets_for
from avibe.checkpoint.carry import LoadedSkill as CarrySkill
from avibe.checkpoint.carry import PutBackSkill, file_list, record_pointer, skills_to_put_back
from avibe.checkpoint.facts import FailedCall, HarnessFacts, WaitingJob, failure_after
from avibe.checkpoint.mind import strip_guidance
from avibe.checkpoint.plan import (
    CheckpointRunState,
    StopDecision,
    cut_tool_output,
    request_parts,
    too_long_to_continue,
)
from avibe.checkpoint.room import Checkpoint, MoveOut, PartialCheckpoint, RoomLimits, limits_for
from avibe.checkpoint.trigger import TriggerDecision, should_checkpoint
from avibe.checkpoint.turn import Mode
from avibe.context.assemble import assemble, recollection, system_prompt
from avibe.errors import ContextOverflow, ModelError, StoreError
from avibe.host.agent import Inbox, Input, TurnResult, render_input
from avibe.host.events import (
    CheckpointAccepted,
    CheckpointFailed,
    CheckpointFallback,
    CheckpointStarted,
    EventSink,
    ModelCalled,
    ModelStarted,
    Replied,
    ReplyDelta,
    Stopped,
    ToolCalled,
    ToolFinished,
    TurnEnded,
    TurnStarted,
    ignore_events,
)
from avibe.ingress import deliver, record_reply
from avibe.ports import Clock, ModelClient, RecordStore, StoredCheckpoint, TokenCounter, ToolResult
from avibe.prompts.vibey import IDENTITY, RULES
from avibe.record.checkpoint import Carry, Provenance, SkillRef, render_plan
from avibe.record.entries import CallRecord, Entry, EntryQuery, Source
from avibe.record.messages import ChatMessage, ModelFacts, ModelReply, ToolCall, ToolSpec

__all__ = ["RunConfig", "TurnResult", "Vibey", "fresh_checkpoint_for_display"]

log = logging.getLogger("avibe.agent")
CUT_MARGIN: Final = 64  # tokens kept free beside a cut tool output (its note, the next message header)
# Counted every step: when a calibrating counter changes its factor, cached message counts are stale.
_PROBE: Final = "Avibe counts this probe text each step to notice when the token counter recalibrates."


@dataclass(frozen=True, slots=True)
class RunConfig:
    window: int | None = None  # override the model's window (forces checkpoints on a smaller window)
    max_steps: int = 30  # model calls per turn
    reply_max_tokens: int = 512
    checkpoint_mode: Mode = "tools"
    identity: str = IDENTITY
    rules: str = RULES
    agents_md: str = ""
    agents_md_heading: str = ""  # issue 27 item 7: set when the agent left AGENTS.md as it is
    skill_catalogue: str = ""
    user_name: str = "user"
    record_where: str = "Avibe's record database"


class _MessageCounts:
    """Token counts of the live messages. With an additive counter (a request's count is a constant plus
    its messages' counts: the tiktoken estimates), each message is counted once while it stays in the
    context, so a step tokenises only what is new. A chat template's exact count (the embedded model's) is
    not additive - the template frames the whole list - so there the view is counted whole, once a step."""

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self.additive = bool(getattr(counter, "additive", False))
        self._by_id: dict[int, tuple[ChatMessage, int]] = {}
        self._probe = -1
        self._empty = 0

    def refresh(self) -> None:
        if not self.additive:
            return
        probe = self.counter.count(_PROBE)
        if probe != self._probe:
            self._probe, self._by_id = probe, {}
            self._empty = self.counter.count_messages(())

    def total(self, messages: Sequence[ChatMessage]) -> int:
        if not self.additive:
            return self.counter.count_messages(messages) if messages else 0
        total, seen = self._empty, {}
        for message in messages:
            hit = self._by_id.get(id(message))
            if hit is None or hit[0] is not message:
                hit = (message, self.counter.count_messages([message]) - self._empty)
            seen[id(message)] = hit
            total += hit[1]
        self._by_id = seen  # forget messages that left the context
        return total


@dataclass
class _View:
    """The view of one live state, derived and counted once."""

    state: LiveState
    messages: list[ChatMessage]
    tokens: int


@dataclass
class Vibey:
    """One session of Vibey. Adapters are passed in (DESIGN: orchestration imports no adapter)."""

    store: RecordStore
    model: ModelClient
    counter: TokenCounter
    clock: Clock
    session_id: str
    session_dir: Path
    tool_specs: Sequence[ToolSpec]
    run_tool: Callable[[ToolCall], ToolResult]
    config: RunConfig = field(default_factory=RunConfig)
    events: EventSink = ignore_events
    poll_inputs: Callable[[], object] = lambda: None  # used by the default inbox (no host)
    skill_text: Callable[[str], str | None] = lambda name: None  # a skill's CURRENT text (A1)
    # S3: (id, what, log[, newest output line[, kind]]) of each thing the session waits for
    waiting_for: Callable[[], Sequence[tuple[str, ...]]] = lambda: ()
    # Issue 27 item 7: around each tool call, given the step's record entry (the provenance ledger)
    watch_tool: Callable[[ToolCall, int | None], AbstractContextManager[object]] = lambda *_: nullcontext()
    # V8 counts failures "in the same run": one Vibey object is one run, so this is not persisted.
    run_state: CheckpointRunState = field(default_factory=CheckpointRunState)
    _latest: list[StoredCheckpoint | None] = field(default_factory=list, repr=False)  # [] = not loaded
    _recollections: dict[tuple[int, bool], str] = field(default_factory=dict, repr=False)
    _view: _View | None = field(default=None, repr=False)
    _cursor: int | None = field(default=None, repr=False)

    name: Final = "vibey"

    # ---- facts and budgets ----------------------------------------------------------------------------

    @cached_property
    def facts(self) -> ModelFacts:
        facts = self.model.facts
        if self.config.window is not None:
            window = min(self.config.window, facts.window)
            facts = replace(facts, window=window, max_output=min(facts.max_output, window // 4))
        return facts

    @cached_property
    def limits(self) -> RoomLimits:
        return limits_for(self.facts, self._tool_tokens)

    @cached_property
    def budgets(self) -> Budgets:
        return budgets_for(self.facts.window, self.limits.threshold)

    @property
    def hard_limit(self) -> int:
        """The most a request may hold and still leave room for the reply: past this it does not fit."""
        return self.limits.hard_limit

    @cached_property
    def _counts(self) -> _MessageCounts:
        return _MessageCounts(self.counter)

    def _driver(self) -> CheckpointDriver:
        return CheckpointDriver(
            lookup=store_lookup(self.store, self.session_id),
            model=self.model,
            counter=self.counter,
            session_id=self.session_id,
            session_dir=self.session_dir,
            clock=self.clock,
            mode=self.config.checkpoint_mode,
            run_tool=self.run_tool,
        )

    # ---- state ---------------------------------------------------------------------------------------

    def load_state(self) -> LiveState:
        data = self.store.load_state(self.session_id, STATE_KEY)
        state = LiveState.from_dict(data) if data else LiveState()
        if state.checkpointing:  # the process died during a checkpoint: the record is intact; go on
            log.warning("session %s: the last checkpoint was interrupted; resuming", self.session_id)
            state = replace(state, checkpointing=False)
        return state

    def save_state(self, state: LiveState) -> None:
        self.store.save_state(self.session_id, STATE_KEY, state.to_dict())
        self._cursor = state.last_seq

    def latest_checkpoint(self) -> StoredCheckpoint | None:
        """Read once per Vibey object; a checkpoint it commits replaces it (one writer per session)."""
        if not self._latest:
            stored = self.store.list_checkpoints(self.session_id)
            self._latest.append(stored[-1] if stored else None)
        return self._latest[0]

    def _adopt(self, stored: StoredCheckpoint) -> None:
        self._latest[:] = [stored]
        self._recollections.clear()

    def cursor(self) -> int:
        """The newest record seq Vibey has taken in (the host runs a turn when an input is newer). Kept
        from the last state loaded or saved - this process is the session's one writer (its lease) - so the
        host's polling never reloads the whole live context."""
        if self._cursor is None:
            self._cursor = self.load_state().last_seq
        return self._cursor

    # ---- inputs --------------------------------------------------------------------------------------

    def deliver(self, source: Source, text: str) -> Entry:
        """Any input enters through ingress (T1); it reaches the model at the next step."""
        return deliver(self.store, self.session_id, source, text, clock=self.clock)

    def after(self, seq: int) -> list[Input]:
        """The inbox when no host drives Vibey (tests, benchmarks): the record itself."""
        self.poll_inputs()
        return [render_input(e) for e in self.store.query(EntryQuery(self.session_id, seq_from=seq + 1))]

    def send(self, text: str) -> TurnResult:
        """The user's message: record it, then run the turn it starts."""
        self.deliver(Source("user", name=self.config.user_name), text)
        return self.run_turn()

    def _absorb(self, state: LiveState, inbox: Inbox) -> LiveState:
        """Append record entries not yet in the live context (inputs from any source, rendered by the
        host from stored fields). The loop's own replies are already there."""
        settled, died_in_step = settle_unanswered(state.messages)  # the process died between two calls
        new = inbox.after(state.last_seq)
        if not new and died_in_step is None:
            return state
        present = {m.seq for m in state.messages if m.seq is not None}
        messages, turn_users = list(settled), list(state.turn_user_seqs)
        finished = state.finished_jobs
        interrupted = [] if died_in_step is None else [died_in_step]
        for item in new:
            if item.seq in present:
                continue
            if item.role == "assistant" and item.calls and item.agent == self.name:  # died with a process
                interrupted.append(Interrupted(item.seq, item.calls))
            if item.role == "assistant" and not item.text.strip():
                continue
            messages.append(ChatMessage(item.role, item.text, seq=item.seq, kind=item.kind))
            if item.kind == "callback" and item.ref:  # a background job reported back (S6)
                finished = remember_file(finished, item.ref, keep=10)
            if item.is_user:
                turn_users.append(item.seq)
        notes = [self._note_interrupted(step) for step in interrupted]
        taken = present | {item.seq for item in new}  # a note made by an earlier resume came in as input
        for note in (n for n in notes if n.seq not in taken):
            messages.append(ChatMessage("user", render_input(note).text, seq=note.seq, kind=note.kind))
        last = max([state.last_seq, *(i.seq for i in new), *(n.seq for n in notes)])
        return replace(
            state,
            messages=tuple(messages),
            last_seq=last,
            turn_user_seqs=tuple(turn_users),
            finished_jobs=finished,
        )

    def _note_interrupted(self, step: Interrupted) -> Entry:
        """Record, once per step, that its calls did not report back (a second resume gives back the same
        entry); the model reads it as the harness's, never the user's."""
        log.warning("session %s: tool calls of #%d were interrupted; noted", self.session_id, step.seq)
        source = replace(NOTE_SOURCE, ref=str(step.seq))
        return deliver(self.store, self.session_id, source, note_text(step), clock=self.clock, key=step.key)

    # ---- the view ------------------------------------------------------------------------------------

    def _turn_start(self, state: LiveState) -> int | None:
        seqs = set(state.turn_user_seqs)
        return next((i for i, m in enumerate(state.messages) if m.seq in seqs), None)

    def _put_back(self, stored: StoredCheckpoint | None) -> list[PutBackSkill]:
        loaded = []
        for item in stored.carry.skills if stored else ():
            text = self.skill_text(item.name)
            if text is not None:  # a skill deleted since is not put back
                loaded.append(CarrySkill(item.name, text, item.order))
        return skills_to_put_back(loaded, self.counter, self.budgets)

    def _recollection(self, state: LiveState, stored: StoredCheckpoint | None) -> str:
        """The checkpoint as recollection. Everything in it is fixed when the checkpoint is made (the file
        list included), so the request prefix stays the same from call to call and the prompt cache holds.
        Derived once per checkpoint and turn (skills are read at their current version once a turn)."""
        if stored is None:
            return ""
        interrupted = stored.carry.current_request_seqs
        still_running = bool(interrupted) and interrupted[0] in state.turn_user_seqs
        key = (stored.number, still_running)
        if key not in self._recollections:
            checkpoint = checkpoint_from_stored(stored)
            assert checkpoint is not None  # a stored checkpoint always converts
            self._recollections[key] = recollection(
                checkpoint,
                number=stored.number,
                skills=self._put_back(stored),
                files=stored.carry.files,
                pointer=record_pointer(self.session_id, self.config.record_where),
                current_request_seqs=interrupted if still_running else (),
                plan=render_plan(stored.carry.plan),
            )
        return self._recollections[key]

    @cached_property
    def _system(self) -> str:
        c = self.config
        return system_prompt(c.identity, c.rules, c.skill_catalogue, c.agents_md, c.agents_md_heading)

    @cached_property
    def _system_tokens(self) -> int:
        return self.counter.count(self._system)

    def view(self, state: LiveState, stored: StoredCheckpoint | None = None) -> list[ChatMessage]:
        """The request as it goes out: system prompt, the latest (or the given) checkpoint, live context."""
        stored = stored or self.latest_checkpoint()
        return assemble(self._system, self._recollection(state, stored), state.messages)

    def _derive(self, state: LiveState) -> _View:
        """The view of `state` and its size, derived once: the room policy, the trigger and the model
        call of one step all use this one count."""
        if self._view is not None and self._view.state is state:
            return self._view
        messages = self.view(state)
        self._view = _View(state, messages, self._counts.total(messages) + self._tool_tokens)
        return self._view

    @cached_property
    def _tool_tokens(self) -> int:
        """The tool list's cost, counted once: it does not change within a run."""
        return sum(self.counter.count(f"{t.name} {t.description} {t.parameters}") for t in self.tool_specs)

    def _tokens(self, messages: Sequence[ChatMessage]) -> int:
        return self._counts.total(messages) + self._tool_tokens

    # ---- making room (F1, V5-V9, U3) -----------------------------------------------------------------

    def tokens(self, state: LiveState) -> int:
        return self._derive(state).tokens

    def trigger(self, tokens: int) -> TriggerDecision:
        return should_checkpoint(tokens, self.facts)

    def checkpoint(
        self, state: LiveState, tokens: int, action: Checkpoint | PartialCheckpoint
    ) -> tuple[LiveState, CheckpointResult]:
        """One checkpoint attempt (RoomOps); accepted -> committed with the live state it implies."""
        partial = isinstance(action, PartialCheckpoint)
        self.events(CheckpointStarted(action.reason, tokens, partial))
        self.save_state(replace(state, checkpointing=True))
        previous = self.latest_checkpoint()
        base = assemble(self._system, self._recollection(state, previous), ())
        result = self._driver().run(
            view=self._derive(state).messages,
            conversation=state.messages,
            base_view=base,
            previous=previous,
            budgets=self.budgets,
            dismissed=frozenset(state.dismissed),
            turn_start=self._turn_start(state),
            tools=self.tool_specs,
            carry=self._carry(state),
            provenance=Provenance(trigger=action.reason, tokens_before=tokens),
            partial=partial,
            facts=self._harness_facts(state),
        )
        if result.checkpoint is None:
            if result.attempted:
                self.events(CheckpointFailed(result.reason))
            return state, result
        return self._commit(state, result, tokens), result

    def _harness_facts(self, state: LiveState) -> HarnessFacts:
        """What the harness knows, for the scene (S2, S3, S6): the plan, waiting jobs, files (A2), the last
        failure."""
        failure = FailedCall(*state.last_failure) if state.last_failure else None
        waiting = tuple(WaitingJob(*job) for job in self.waiting_for())
        return HarnessFacts(
            waiting,
            state.files_read,
            state.files_modified,
            failure,
            state.plan,
            state.commands,
            state.finished_jobs,
        )

    def move_out(self, state: LiveState, tokens: int, action: MoveOut) -> tuple[LiveState, CheckpointResult]:
        """V7 (RoomOps): the oldest part moves out without the model."""
        result = self._driver().move_out_without_model(
            state.messages,
            self.latest_checkpoint(),
            self.budgets,
            self._turn_start(state),
            self._carry(state),
            Provenance(trigger=action.reason, tokens_before=tokens),
        )
        if result.checkpoint is None:
            return state, result
        return self._commit(state, result, tokens), result

    def _commit(self, state: LiveState, result: CheckpointResult, before: int) -> LiveState:
        """Save the accepted checkpoint and the live state it leads to in one transaction (a crash
        between the two would resume with the recollection AND the moved-out messages, or lose N6)."""
        assert result.checkpoint is not None
        made = _without_skills_in_context(result.checkpoint, state, result.kept)
        dismissed = tuple(sorted({*state.dismissed, *result.dismissed}))
        state = replace(state, messages=result.kept, dismissed=dismissed, checkpointing=False)
        unsaved = replace(made, number=self._checkpoint_number() + 1)
        after = self._tokens(self.view(state, unsaved))
        unsaved = replace(unsaved, provenance=replace(unsaved.provenance, tokens_after=after))
        saved = self.store.save_checkpoint(unsaved, state_key=STATE_KEY, state=state.to_dict())
        self._cursor = state.last_seq
        self._adopt(saved)
        how = saved.provenance
        if how.fallback == "model-free":
            self.events(CheckpointFallback(saved.number, before, after, result.reason))
        else:
            self.events(CheckpointAccepted(saved.number, before, after, how.calls, how.seconds, how.fallback))
        return state

    def _carry(self, state: LiveState) -> Carry:
        """What the checkpoint hands on: skills (A1, most recent order wins), the file list (A2, fixed at
        checkpoint time), the current request (F5: kept verbatim, wins on conflict)."""
        previous = self.latest_checkpoint()
        skills = {s.name: s for s in (previous.carry.skills if previous else ())}
        for skill in state.skills:
            skills[skill.name] = SkillRef(skill.name, skill.order)
        return Carry(
            skills=tuple(sorted(skills.values(), key=lambda s: -s.order)),
            files=file_list(state.files_modified, state.files_read),
            current_request_seqs=state.turn_user_seqs,
            mid_turn=bool(state.turn_user_seqs),
            window=self.facts.window,
            plan=state.plan,
        )

    def _cut_latest_tool_output(self, state: LiveState) -> LiveState:
        """V9: when the latest tool output alone does not fit - not even with everything before it moved
        out - cut it, with a note saying so."""
        if not state.messages or state.messages[-1].role != "tool":
            return state
        alone = replace(state, messages=())
        limit = max(self.hard_limit - self._tokens(self.view(alone)) - CUT_MARGIN, CUT_MARGIN)
        latest = state.messages[-1]
        cut = cut_tool_output(latest, self.counter, limit)
        if cut is latest:
            return state
        log.info("session %s: latest tool output cut to %d tokens (V9)", self.session_id, limit)
        return replace(state, messages=(*state.messages[:-1], cut))

    def make_room(self, state: LiveState) -> tuple[LiveState, StopDecision | None]:
        """F1 trigger -> checkpoint (V8 permitting) -> V5 (goes out as it is when it still fits) ->
        V7 model-free move-outs until it fits -> U3 stop when nothing is left to move out."""
        state = self._cut_latest_tool_output(state)
        room = make_room(state, self, self.limits, self.run_state)
        self.run_state = room.run
        if room.stop is None:
            return room.state, None
        return room.state, self._stop_decision(room.state, room.tokens)

    def _stop_decision(self, state: LiveState, tokens: int) -> StopDecision:
        """U3: what the request is made of, named (the room policy found nothing left to move out)."""
        system, tools = self._system_tokens, self._tool_tokens
        conversation = self.counter.count_messages(state.messages) if state.messages else 0
        recollection = max(tokens - system - conversation - tools, 0)
        parts = request_parts(
            state.messages,
            self.counter,
            self._turn_start(state),
            system_prompt=system,
            tool_list=tools,
            checkpoint=recollection,
        )
        return too_long_to_continue(parts, self.hard_limit, 0)

    # ---- the turn ------------------------------------------------------------------------------------

    def run_turn(self, inbox: Inbox | None = None, emit: EventSink | None = None) -> TurnResult:
        """One turn (the `Agent` protocol): take inputs, work until the model answers without tools."""
        inbox = inbox or self
        if emit is not None:
            self.events = emit
        state = replace(self.load_state(), turn_user_seqs=())
        self._recollections.clear()  # skills are put back at their current version (A1), read once a turn
        checkpoints_before = self._checkpoint_number()
        self.events(TurnStarted(self.session_id, self.name))
        result = TurnResult("", stopped=True)
        try:
            for step in range(1, self.config.max_steps + 1):
                try:
                    state, done = self._step(state, step, inbox)
                except StoreError as exc:  # the record could not be written (disk full, database away)
                    done = self._not_recorded(exc, "this step's work was not saved")
                if done is not None:
                    result = replace(
                        done, steps=step, checkpoints=self._checkpoint_number() - checkpoints_before
                    )
                    return result
            message = (
                f"stopped after {self.config.max_steps} model calls in one turn; send a message to go on"
            )
            self.events(Stopped(message))
            result = TurnResult(message, stopped=True, steps=self.config.max_steps)
            return result
        finally:
            self._save_at_turn_end(state)
            self.events(TurnEnded(result.reply, result.stopped, result.steps, result.checkpoints))

    def _not_recorded(self, exc: StoreError, what: str) -> TurnResult:
        """Stop the turn, saying plainly what the record lacks: the record keeps everything up to its last
        write (nothing half-written), and the session resumes from there once the record can be written."""
        message = f"{what}: {exc}. Free space or fix the database, then send a message to go on"
        log.error("session %s: %s", self.session_id, message)
        self.events(Stopped(message))
        return TurnResult(message, stopped=True)

    def _save_at_turn_end(self, state: LiveState) -> None:
        """The live state at the turn's end; when the record cannot take it (the turn stopped for that
        reason), the session resumes from the last state saved and the record - nothing is lost."""
        try:
            self.save_state(state)
        except StoreError as exc:
            log.error("session %s: the live state was not saved at the turn's end: %s", self.session_id, exc)

    def _checkpoint_number(self) -> int:
        latest = self.latest_checkpoint()
        return latest.number if latest else 0

    def _step(self, state: LiveState, step: int, inbox: Inbox) -> tuple[LiveState, TurnResult | None]:
        self._counts.refresh()
        state = self._absorb(state, inbox)
        state, stop = self.make_room(state)
        if stop is not None and stop.stop:
            log.warning("session %s: %s", self.session_id, stop.reason)
            self.events(Stopped(stop.message))
            return state, TurnResult(stop.message, stopped=True)
        try:
            reply = self._complete(state, step)
        except ContextOverflow as exc:  # our count was short of the provider's: free room without a model
            log.warning("session %s: context overflow from the model: %s", self.session_id, exc)
            tokens = self.tokens(state)
            state, _ = self.move_out(state, tokens, MoveOut(f"provider overflow: {exc}"))
            return state, None
        except ModelError as exc:
            message = f"the model failed: {exc}"
            self.events(Stopped(message))
            return state, TurnResult(message, stopped=True)
        try:
            state = self._record(state, reply)
        except StoreError as exc:  # a full disk: the streamed reply reached the screen, not the record
            return state, self._not_recorded(exc, "the reply above was not saved")
        if not reply.tool_calls:
            self.events(Replied(reply.text))
            return state, TurnResult(reply.text)
        reason = loop_stop_reason(state.messages)
        if reason is not None:  # a small model going in circles is stopped instead of burning the turn
            message = f"stopped: {reason}; send a message to go on"
            log.warning("session %s: %s", self.session_id, message)
            self.events(Stopped(message))
            return state, TurnResult(message, stopped=True)
        return self._run_tools(state, reply.tool_calls), None

    def _complete(self, state: LiveState, step: int) -> ModelReply:
        view = self._derive(state)
        self.events(ModelStarted(step, view.tokens))
        started = time.monotonic()
        reply = self.model.complete(
            view.messages, self.tool_specs, max_tokens=self.config.reply_max_tokens, on_text=self._stream
        )
        u = reply.usage
        took = round(time.monotonic() - started, 3)
        calls = len(reply.tool_calls)
        self.events(
            ModelCalled(step, view.tokens, u.prompt_tokens, u.cached_tokens, u.completion_tokens, took, calls)
        )
        return reply

    def _stream(self, text: str) -> None:
        """The reply's visible text as the model writes it, to the edges (`vibe run`, the chat)."""
        self.events(ReplyDelta(text))

    def _record(self, state: LiveState, reply: ModelReply) -> LiveState:
        """Record the reply's text and its tool calls (C1: the record shows every step); the tools' output
        lives in the live context only (A3)."""
        seq = None
        if reply.text.strip() or reply.tool_calls:
            calls = [
                CallRecord(c.name, json.dumps(c.arguments, ensure_ascii=False)) for c in reply.tool_calls
            ]
            seq = record_reply(self.store, self.session_id, reply.text, clock=self.clock, calls=calls).seq
        message = ChatMessage("assistant", reply.text, tool_calls=reply.tool_calls, seq=seq, kind="assistant")
        return replace(state, messages=(*state.messages, message))

    def _run_tools(self, state: LiveState, calls: Sequence[ToolCall]) -> LiveState:
        step = state.messages[-1].seq if state.messages else None  # the reply that made these calls
        for call in calls:
            self.events(ToolCalled(call.id, call.name, dict(call.arguments)))
            started = time.monotonic()
            with self.watch_tool(call, step):
                result = self.run_tool(call)
            took = round(time.monotonic() - started, 3)
            self.events(ToolFinished(call.id, call.name, result.is_error, len(result.output), took))
            text = result.output + repeat_note(state.messages, call, result.is_error)
            output = ChatMessage("tool", text, tool_call_id=call.id, name=call.name)
            state = self._track(replace(state, messages=(*state.messages, output)), result, call)
            state = replace(state, last_failure=_failure_after(state.last_failure, call, result))
            self.save_state(state)
        return state

    def _track(self, state: LiveState, result: ToolResult, call: ToolCall) -> LiveState:
        """A2: the files the tools read and wrote; A1: which skills were loaded, in order - through the
        skill tool, or through the shell (`vibe skill load NAME`), which loads the same text."""
        loaded = result.skill_loaded or (None if result.is_error else shell_skill_load(call))
        if result.plan is not None:  # the harness keeps the plan; checkpoints carry it verbatim
            state = replace(state, plan=result.plan)
        command = call.arguments.get("command") if call.name == "shell" else None
        if isinstance(command, str) and command.strip():  # S6: the commands run, for the scene
            state = replace(state, commands=remember_file(state.commands, command.strip(), keep=5))
        for path in result.files_read:
            state = replace(state, files_read=remember_file(state.files_read, path))
        for path in result.files_modified:
            state = replace(state, files_modified=remember_file(state.files_modified, path))
        if loaded:
            order = max((s.order for s in state.skills), default=0) + 1
            others = tuple(s for s in state.skills if s.name != loaded)
            state = replace(state, skills=(*others, LoadedSkill(loaded, order, call.id)))
        return state


SHELL_SKILL_LOAD: Final = re.compile(r"(?:^|[;&|\s])vibe\s+skill\s+load\s+['\"]?([\w.-]+)")


def _failure_after(
    last: tuple[str, str, str, str] | None, call: ToolCall, result: ToolResult
) -> tuple[str, str, str, str] | None:
    """S5, S6: LiveState's last failure after this call (`failure_after`, kept as a plain tuple)."""
    failed = failure_after(
        FailedCall(*last) if last else None, call.name, call.arguments, result.output, result.is_error
    )
    return None if failed is None else (failed.name, failed.arguments, failed.error_line, failed.then)


def shell_skill_load(call: ToolCall) -> str | None:
    """A1: the skill a shell command loaded with `vibe skill load NAME`, if it did."""
    command = call.arguments.get("command") if call.name == "shell" else None
    found = SHELL_SKILL_LOAD.search(command) if isinstance(command, str) else None
    return found.group(1) if found else None


def _without_skills_in_context(
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


def fresh_checkpoint_for_display(stored: StoredCheckpoint | None) -> str:
    """The last checkpoint as the user sees it at the end of `vibe demo` (mission, scene, memo)."""
    checkpoint = checkpoint_from_stored(stored) or empty_checkpoint()
    memo = "\n".join(f"  #{item.seq}: {item.text}" for item in checkpoint.memo) or "  (empty)"
    mind = strip_guidance(checkpoint.mind).strip()
    return f"{mind}\n\n{checkpoint.scene.strip()}\n\nMemo (the user's own words):\n{memo}"
