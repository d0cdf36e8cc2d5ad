"""Vibey's turn loop (small on purpose, like mini-swe-agent's). Vibey is an `Agent` the session host
drives (`avibe.host`): inputs in through the host's inbox, events out.

A step goes by phase: absorb the inbox's new inputs -> make room (the room policy and driver the eval runs
too, `avibe.agent.live.LiveRoom`) -> complete (call the model on the view, `avibe.agent.view`) -> record
the reply and its tool calls -> run the tools -> persist the live state. The turn repeats steps until the
model answers without tools. The bookkeeping of each phase is pure (`avibe.agent.live`); this module does
the IO. A checkpoint commits in one transaction with the live state it implies, so a killed process loses
nothing already recorded and resumes exactly where it was.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Final

from avibe.agent import live
from avibe.agent.compaction import Compactor, LiveRoom, make_compactor
from avibe.agent.compaction.messages import EXTRA_KEY
from avibe.agent.compaction.now import Host, compact_now, take_in
from avibe.agent.config import RunConfig
from avibe.agent.driver import CheckpointDriver, reminds, store_lookup
from avibe.agent.live import shell_skill_load
from avibe.agent.persist import SessionRecord
from avibe.agent.repeats import ANSWER_ONLY, answer_of, loop_stop_reason, not_run_text
from avibe.agent.state import LiveState
from avibe.agent.view import Viewer, fresh_checkpoint_for_display, tool_tokens
from avibe.checkpoint.budgets import Budgets, budgets_for
from avibe.checkpoint.plan import StopDecision
from avibe.checkpoint.room import MoveOut, RoomLimits, limits_for
from avibe.checkpoint.trigger import TriggerDecision, decide_at, should_checkpoint
from avibe.context.assemble import system_prompt
from avibe.errors import ContextOverflow, ModelError, StoreError
from avibe.host import events as ev
from avibe.host.agent import Inbox, Meter, ToolHook, TurnResult, hooked
from avibe.ports import (
    Clock,
    CompletionRequest,
    ModelClient,
    RecordStore,
    StoredCheckpoint,
    TokenCounter,
    ToolResult,
)
from avibe.record.agents import VIBEY
from avibe.record.entries import Entry
from avibe.record.messages import ChatMessage, ModelFacts, ModelReply, ToolCall, ToolSpec

__all__ = ["RunConfig", "TurnResult", "Vibey", "fresh_checkpoint_for_display", "shell_skill_load"]

log = logging.getLogger("avibe.agent")
GIVEN: Final = "the threshold the run was given"  # the trigger's reason with `RunConfig.threshold`
Step = tuple[LiveState, TurnResult | None]  # the state after a step, and the turn's result once it ends


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
    events: ev.EventSink = ev.ignore_events
    skill_text: Callable[[str], str | None] = lambda name: None  # a skill's CURRENT text (A1)
    # S3: (id, what, log[, newest output line[, kind]]) of each thing the session waits for
    waiting_for: Callable[[], Sequence[tuple[str, ...]]] = lambda: ()
    # around each tool call, given the step's record entry (the provenance ledger)
    watch_tool: Callable[[ToolCall, int | None], AbstractContextManager[object]] = lambda *_: nullcontext()
    # F4: AGENTS.md, its heading and the skill catalogue as they are now (cached by the edge); None: the
    # config's, fixed for the session
    instructions: Callable[[], tuple[str, str, str]] | None = None
    # around each tool's execution (`ContextControls.add_tool_hook`): the chat's display and Ctrl-C
    tool_hooks: list[ToolHook] = field(default_factory=list)
    # /undo: reverts the last turn's file changes from the tools' snapshots; (any reverted?, the line shown)
    undo: Callable[[], tuple[bool, str]] = lambda: (False, "nothing to undo: no file changes are kept")
    # what the checkpoint and a message strategy's summary call (None: `model`); the eval's replay plays
    # the agent's steps from a transcript and makes room with the real model
    checkpoint_model: ModelClient | None = None

    name: Final[str] = VIBEY

    # ---- facts, limits and the parts that derive from them --------------------------------------------

    @cached_property
    def facts(self) -> ModelFacts:
        return live.clamp_window(self.model.facts, self.config.window)

    @cached_property
    def limits(self) -> RoomLimits:
        limits = limits_for(self.facts, tool_tokens(self.counter, self.tool_specs))
        at = self.config.threshold
        return limits if at is None else replace(limits, threshold=at)

    @cached_property
    def budgets(self) -> Budgets:
        return budgets_for(self.facts.window, self.limits.threshold)

    @property
    def hard_limit(self) -> int:
        """The most a request may hold and still leave room for the reply: past this it does not fit."""
        return self.limits.hard_limit

    def system_prompt(self) -> str:
        """F4 (1): the system prompt as of now - AGENTS.md and the skills read again when they changed."""
        c = self.config
        agents_md, heading, catalogue = (
            self.instructions()
            if self.instructions
            else (c.agents_md, c.agents_md_heading, c.skill_catalogue)
        )
        return system_prompt(c.identity, c.rules, catalogue, agents_md, heading)

    @cached_property
    def viewer(self) -> Viewer:
        c = self.config
        system = self.system_prompt()
        tools = tool_tokens(self.counter, self.tool_specs)
        skill = lambda name: self.skill_text(name)  # noqa: E731 - read when used: fields may be set later
        return Viewer(self.counter, self.session_id, system, tools, self.budgets, c.record_where, skill,
                      rendering=c.recollection, remind=reminds(self.facts.name))  # fmt: skip

    @cached_property
    def room(self) -> LiveRoom:
        """The room ops, committing to the record (`RoomPort`); one object is one run (V8's strikes)."""

        def trigger(tokens: int) -> TriggerDecision:  # F1, or the threshold the run was given
            at = self.config.threshold
            return should_checkpoint(tokens, self.facts) if at is None else decide_at(tokens, at, GIVEN)

        sizes = (self.facts, self.limits, self.budgets)
        return LiveRoom(self.viewer, self.record, self._driver, *sizes, trigger, self.tool_specs,
                        lambda: self.waiting_for(), lambda event: self.events(event),
                        self.checkpoint_model or self.model)  # fmt: skip

    @cached_property
    def compactor(self) -> Compactor:
        """How this run makes room (`RunConfig.compaction`, a name in `avibe.agent.compaction`)."""
        return make_compactor(self.config.compaction)

    def _driver(self) -> CheckpointDriver:
        model = self.checkpoint_model or self.model
        return CheckpointDriver(store_lookup(self.store, self.session_id), model, self.counter,
                                self.session_id, self.session_dir, self.clock, self.config.checkpoint_mode,
                                self.execute)  # fmt: skip

    # ---- state and checkpoints: the record (`avibe.agent.persist`) ------------------------------------

    @cached_property
    def record(self) -> SessionRecord:
        return SessionRecord(self.store, self.session_id, self.clock)

    def load_state(self) -> LiveState:
        return self.record.load_state()

    def save_state(self, state: LiveState) -> None:
        self.record.save_state(state)

    def latest_checkpoint(self) -> StoredCheckpoint | None:
        return self.record.latest()

    def cursor(self) -> int:
        return self.record.cursor()

    def _checkpoint_number(self) -> int:
        latest = self.latest_checkpoint()
        return latest.number if latest else 0

    # ---- the view --------------------------------------------------------------------------------------

    def view(self, state: LiveState, stored: StoredCheckpoint | None = None) -> list[ChatMessage]:
        """The request as it goes out: system prompt, the latest (or the given) checkpoint, live context."""
        return self.viewer.view(state, stored or self.latest_checkpoint())

    def tokens(self, state: LiveState) -> int:
        return self.room.tokens(state)

    def make_room(self, state: LiveState) -> tuple[LiveState, StopDecision | None]:
        state, stop, _ = self.compactor.make_room(state, self.room)
        return state, stop

    def compact_now(self, host: Host, focus: Callable[[], Entry] | None = None) -> str:
        """Make room now, between turns (the chat's /compact); `focus` posts the person's focus."""
        return compact_now(self, host, focus).line

    def undo_last_turn(self, host: Host, note: Callable[[str], Entry]) -> str:
        """The last turn's file changes reverted (the chat's /undo); `note` posts what was reverted, which
        the agent takes in now, so it starts no turn and is read with the next message."""
        found, line = self.undo()
        if found:
            take_in(self, host, note(line))
        return line

    def use_compaction(self, name: str) -> str:
        """Make room with another compactor from the next request on (the chat's /compaction; "" keeps
        the one in force); the name in force, or ValueError for a name the registry does not have."""
        if name:
            compactor = make_compactor(name)
            self.config = replace(self.config, compaction=name)
            self.__dict__["compactor"] = compactor  # the cached property, replaced
        return self.config.compaction

    # ---- what the edges ask (`avibe.host.agent.ContextControls`) ---------------------------------------

    def meter(self) -> Meter:
        limits = self.limits
        return Meter(limits.window, limits.threshold, self.tokens(self.load_state()), self.config.compaction)

    def add_tool_hook(self, hook: ToolHook) -> None:
        self.tool_hooks.append(hook)

    def execute(self, call: ToolCall) -> ToolResult:
        """One tool call, through the hooks around its execution."""
        return hooked(self.run_tool, self.tool_hooks)(call)

    def _recorded_compaction(self, state: LiveState) -> LiveState:
        """The session's state names the compactor its turns run with (with what it hands on, if any)."""
        held = state.extra.get(EXTRA_KEY)
        if isinstance(held, dict) and held.get("name") == self.compactor.name:
            return state
        return replace(state, extra={**state.extra, EXTRA_KEY: {"name": self.compactor.name}})

    # ---- the turn --------------------------------------------------------------------------------------

    def run_turn(self, inbox: Inbox, emit: ev.EventSink | None = None) -> TurnResult:
        """One turn (the `Agent` protocol): take inputs, work until the model answers without tools."""
        if emit is not None:
            self.events = emit
        state = self._recorded_compaction(replace(self.load_state(), turn_user_seqs=()))
        self.viewer.new_turn(self.system_prompt())  # F4: rebuilt every turn; A1: skills read once a turn
        before = self._checkpoint_number()
        self.events(ev.TurnStarted(self.session_id, self.name))
        result = TurnResult("", stopped=True)
        try:
            for step in range(1, self.config.max_steps + 1):
                try:
                    state, done = self._step(state, step, inbox)
                except StoreError as exc:  # the record could not be written (disk full, database away)
                    done = self._stop(f"this step's work was not saved: {exc}. {_FIX}", level=logging.ERROR)
                if done is not None:
                    result = replace(done, steps=step, checkpoints=self._checkpoint_number() - before)
                    return result
            message = (
                f"stopped after {self.config.max_steps} model calls in one turn; send a message to go on"
            )
            result = replace(self._stop(message, level=None), steps=self.config.max_steps)
            return result
        finally:
            self.record.save_at_turn_end(state)
            self.events(ev.TurnEnded(result.reply, result.stopped, result.steps, result.checkpoints))

    def _step(self, state: LiveState, step: int, inbox: Inbox) -> Step:
        self.viewer.counts.refresh()
        state = live.absorb(state, inbox.after(state.last_seq), self.name, self.record.note_interrupted)
        state, stop = self.make_room(state)
        if stop is not None and stop.stop:
            return state, self._stop(stop.message, why=stop.reason)
        try:
            reply = self._complete(state, step)
        except ContextOverflow as exc:  # our count was short of the provider's: free room without a model
            log.warning("session %s: context overflow from the model: %s", self.session_id, exc)
            state, _ = self.room.move_out(state, self.tokens(state), MoveOut(f"provider overflow: {exc}"))
            return state, None
        except ModelError as exc:
            return state, self._stop(f"the model failed: {exc}", level=None)
        try:
            seq = self.record.reply(reply)  # C1: the record shows every step; tool output stays live (A3)
            state = live.after_reply(state, reply.text, reply.tool_calls, seq)
        except StoreError as exc:  # a full disk: the streamed reply reached the screen, not the record
            return state, self._stop(f"the reply above was not saved: {exc}. {_FIX}", level=logging.ERROR)
        if not reply.tool_calls:
            self.events(ev.Replied(reply.text))
            return state, TurnResult(reply.text)
        reason = loop_stop_reason(state.messages)
        if reason is not None:  # a small model going in circles is stopped instead of burning the turn
            return self._answer_in_words(state, step, reply.tool_calls, reason)
        return self._run_tools(state, reply.tool_calls), None

    def _answer_in_words(self, state: LiveState, step: int, calls: Sequence[ToolCall], reason: str) -> Step:
        """After a loop stop the person still gets an answer: the calls are not run (their results say
        why) and the model is asked once more, offered no tools; only if that fails too is the turn
        stopped with the reason."""
        log.warning("session %s: loop stopped: %s", self.session_id, reason)
        state = live.calls_not_run(state, calls, not_run_text(reason))
        try:  # the same prompt (warm cache), an output that can only be an answer
            reply = self._complete(state, step, answer_only=True)
        except ModelError as exc:
            log.warning("session %s: the answer after a loop stop failed: %s", self.session_id, exc)
            reply = None
        text = "" if reply is None or reply.tool_calls else answer_of(reply.text)
        if reply is None or not text:
            return state, self._stop(f"stopped: {reason}; send a message to go on", level=None)
        reply = replace(reply, text=text)
        seq = self.record.reply(reply)
        state = live.after_reply(state, reply.text, (), seq)
        self.events(ev.Replied(reply.text))
        return state, TurnResult(reply.text)

    def _stop(self, message: str, *, why: str = "", level: int | None = logging.WARNING) -> TurnResult:
        """End the turn saying why. After a StoreError the record keeps everything up to its last write
        (nothing half-written), and the session resumes from there once the record can be written."""
        if level is not None:
            log.log(level, "session %s: %s", self.session_id, why or message)
        self.events(ev.Stopped(message))
        return TurnResult(message, stopped=True)

    def _complete(self, state: LiveState, step: int, *, answer_only: bool = False) -> ModelReply:
        view = self.viewer.derive(state, self.latest_checkpoint())
        self.events(ev.ModelStarted(step, view.tokens))
        started = time.monotonic()
        schema, stream = (ANSWER_ONLY, None) if answer_only else (None, self._stream)
        reply = self.model.complete(CompletionRequest(view.messages, self.tool_specs, json_schema=schema,
                                    max_tokens=self.config.reply_max_tokens, on_text=stream))  # fmt: skip
        u, took, calls = reply.usage, round(time.monotonic() - started, 3), len(reply.tool_calls)
        tokens = (u.prompt_tokens, u.cached_tokens, u.completion_tokens)
        self.events(ev.ModelCalled(step, view.tokens, *tokens, took, calls))
        return reply

    def _stream(self, text: str) -> None:
        """The reply's visible text as the model writes it, to the edges (`vibe run`, the chat)."""
        self.events(ev.ReplyDelta(text))

    def _run_tools(self, state: LiveState, calls: Sequence[ToolCall]) -> LiveState:
        step = state.messages[-1].seq if state.messages else None  # the reply that made these calls
        for call in calls:
            self.events(ev.ToolCalled(call.id, call.name, dict(call.arguments)))
            started = time.monotonic()
            with self.watch_tool(call, step):
                result = self.execute(call)
            took = round(time.monotonic() - started, 3)
            self.events(ev.ToolFinished(call.id, call.name, result.is_error, len(result.output), took,
                                        output=result.output))  # fmt: skip
            state = live.after_tool(state, call, result)
            self.save_state(state)  # persist: a killed process resumes after this call
        return state


_FIX: Final = "Free space or fix the database, then send a message to go on"
