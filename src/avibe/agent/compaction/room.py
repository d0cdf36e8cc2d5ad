"""Making room, in one place: the room policy's loop (F1, V5-V8, U3) and `LiveRoom`, its steps over a live
state. Every compactor (`avibe.agent.compaction`) makes room through here: the checkpoint runs the whole
policy; a message strategy (handoff, rewrite ...) compacts the messages itself and then lets the same loop,
with checkpoints off, move out without the model (V7) or stop (U3) when the request still does not fit.

`make_room` asks the pure policy (`avibe.checkpoint.room.decide_room`) for the next step and performs it
through `RoomOps` - `LiveRoom` over a live state, which Vibey commits to the record and the eval to an
in-memory checkpoint - and keeps V8's count of strikes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Final, Generic, NamedTuple, Protocol, TypeVar

from avibe.agent.driver import CheckpointDriver, CheckpointResult
from avibe.agent.live import carry, harness_facts, turn_start, without_skills_in_context
from avibe.agent.state import LiveState
from avibe.agent.view import Viewer
from avibe.checkpoint.budgets import LASTING_SHARE, Budgets, lasting, recollection_floor
from avibe.checkpoint.plan import (
    CheckpointRunState,
    StopDecision,
    cut_step_outputs,
    may_try_checkpoint,
    movable_tokens,
    needed_to_free,
    record_attempt,
    request_parts,
    too_long_to_continue,
)
from avibe.checkpoint.room import (
    CheckpointNow,
    MoveOut,
    PartialCheckpoint,
    Proceed,
    RoomAction,
    RoomLimits,
    Stop,
    Tried,
    decide_room,
)
from avibe.checkpoint.trigger import TriggerDecision, threshold_for, window_for_threshold
from avibe.host.events import (
    CheckpointAccepted,
    CheckpointFailed,
    CheckpointFallback,
    CheckpointStarted,
    EventSink,
    Notice,
    ignore_events,
)
from avibe.ports import ModelClient, StoredCheckpoint
from avibe.record.checkpoint import Provenance
from avibe.record.messages import ModelFacts

log = logging.getLogger("avibe.checkpoint")
CUT_MARGIN: Final = 64  # tokens kept free beside a cut tool output (its note, the next message header)
MAX_ROUNDS: Final = 64  # each round moves something out; a loop past this is a bug, stopped rather than spun

S = TypeVar("S")


class Made(NamedTuple):
    """What making room for one request came to: the state to send from, the U3 stop (None: send), and
    each checkpoint attempt's result in order (a message strategy's own compaction is not one)."""

    state: LiveState
    stop: StopDecision | None
    results: tuple[CheckpointResult, ...] = ()


class RoomOps(Protocol[S]):
    """What making room needs from its caller. `checkpoint` and `move_out` adopt an accepted result into
    the returned state (and persist it, where the caller persists); on failure they return the state
    unchanged with the result whose `checkpoint` is None."""

    def tokens(self, state: S) -> int: ...
    def current_step(self, state: S) -> int: ...  # tokens no checkpoint moves: the step, the turn's asks
    def trigger(self, tokens: int) -> TriggerDecision: ...
    def checkpoint(
        self, state: S, tokens: int, action: CheckpointNow | PartialCheckpoint
    ) -> tuple[S, CheckpointResult]: ...
    def move_out(self, state: S, tokens: int, action: MoveOut) -> tuple[S, CheckpointResult]: ...


@dataclass(frozen=True, slots=True)
class Room(Generic[S]):
    """The outcome: the state to send from, V8's strikes after this request, every attempt's result in
    order, the actions taken, and the U3 stop when nothing could make the request fit."""

    state: S
    run: CheckpointRunState
    results: tuple[CheckpointResult, ...]
    actions: tuple[RoomAction, ...]
    stop: Stop | None = None
    tokens: int = 0


def make_room(
    state: S,
    ops: RoomOps[S],
    limits: RoomLimits,
    run: CheckpointRunState,
    on_action: Callable[[RoomAction], None] = lambda _: None,
    *,
    checkpoints: bool = True,
) -> Room[S]:
    """The policy's steps until the request goes out or stops. `checkpoints=False`: a compactor that made
    its own room already - only V5 (send), V7 (move out without the model) and U3 (stop) are left."""
    tried = Tried()
    tokens = ops.tokens(state)
    trigger = ops.trigger(tokens)
    if not checkpoints:
        trigger = replace(trigger, checkpoint=False)
    results: list[CheckpointResult] = []
    actions: list[RoomAction] = []
    moved_out = False
    if trigger.checkpoint and not may_try_checkpoint(run):
        log.warning(
            "no checkpoint now (V8): %d strikes; only a model-free move-out frees room, then checkpoints "
            "are tried again",
            run.strikes,
        )
    for _ in range(MAX_ROUNDS):
        action = decide_room(tokens, trigger, limits, run, tried)
        actions.append(action)
        on_action(action)
        if isinstance(action, Proceed | Stop):
            stop = action if isinstance(action, Stop) else None
            # V8 gives up for one attempt, not for a session that lives for days: once a model-free
            # move-out has made room, the next trigger tries a checkpoint again.
            after = CheckpointRunState() if moved_out else run
            return Room(state, after, tuple(results), tuple(actions), stop, tokens)
        if isinstance(action, CheckpointNow | PartialCheckpoint):
            state, result = ops.checkpoint(state, tokens, action)
            tried = replace(tried, checkpoint=True)
            if result.checkpoint is None:
                if result.attempted:
                    run = record_attempt(run, 0, 1, failed=True)
            else:
                needed = needed_to_free(tokens, limits.threshold, ops.current_step(state))
                freed = tokens - ops.tokens(state)
                run = record_attempt(run, freed, needed)
                if freed >= max(needed, 1):  # a success: earlier strikes no longer say the model cannot
                    run = CheckpointRunState()
        else:
            state, result = ops.move_out(state, tokens, action)
            tried = replace(tried, nothing_to_move=result.checkpoint is None)
            moved_out = moved_out or result.checkpoint is not None
        results.append(result)
        tokens = ops.tokens(state)
    log.error("making room did not settle after %d rounds; stopping the turn", MAX_ROUNDS)
    stop = Stop(f"making room did not settle after {MAX_ROUNDS} rounds")
    return Room(state, run, tuple(results), tuple(actions), stop, tokens)


# ---- the room ops over a live state -------------------------------------------------------------


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
    model: ModelClient | None = (
        None  # what a message strategy summarises with (the checkpoint's is the driver's)
    )
    # V8 counts failures "in the same run": one LiveRoom is one run, so this is not persisted.
    run: CheckpointRunState = field(default_factory=CheckpointRunState)
    # the last failed checkpoint attempt since a checkpoint was saved: the move-out that follows says why
    # it fell back (its problems and reason, for `vibe checkpoints` and the inspector; U2 stays silent)
    failed: CheckpointResult | None = None
    told_too_small: bool = False  # V8: the person hears once per run that the window is too small

    def tokens(self, state: LiveState) -> int:
        return self.viewer.derive(state, self.port.latest()).tokens

    def current_step(self, state: LiveState) -> int:
        """The conversation's tokens that no checkpoint moves (the newest step, the current turn's
        user messages, F5): V8 does not count them against a checkpoint."""
        messages = state.messages
        if not messages:
            return 0
        everything = self.viewer.counter.count_messages(messages)
        return everything - movable_tokens(messages, self.viewer.counter, turn_start(state))

    def _system_and_tools(self) -> int:
        return self.viewer.counter.count(self.viewer.system) + self.viewer.tools

    def _lasting_budgets(self, state: LiveState, previous: StoredCheckpoint | None) -> Budgets:
        """V8: the budgets with as few recent messages as keep the request after the checkpoint under
        LASTING_SHARE of the threshold - its fixed parts counted as the system prompt and the tools with
        the larger of the recollection now and the most a recollection takes, and one memo message more
        (the recollection grows by what moves out now)."""
        now = self.viewer.tokens(self.viewer.base(state, previous))
        fixed = max(now, self._system_and_tools() + recollection_floor(self.budgets))
        fixed += self.budgets.memo_per_message
        return lasting(self.budgets, fixed)

    def checkpoint(
        self, state: LiveState, tokens: int, action: CheckpointNow | PartialCheckpoint
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
            budgets=self._lasting_budgets(state, previous),
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
        self._tell_if_too_small(state, saved)
        return state

    def _tell_if_too_small(self, state: LiveState, saved: StoredCheckpoint) -> None:
        """V8: where what no checkpoint moves - the system prompt, the tools and the recollection -
        takes more than LASTING_SHARE of the threshold, no checkpoint can last (each frees too little and
        the next follows a few steps later): the person is told once, in one line, with a window that
        would hold it."""
        fixed = self.viewer.tokens(self.viewer.base(state, saved))
        threshold = self.limits.threshold
        if self.told_too_small or fixed <= threshold * LASTING_SHARE:
            return
        self.told_too_small = True
        log.warning("the fixed parts take %d tokens of a %d-token threshold (V8)", fixed, threshold)
        self.events(Notice(too_small_line(self.facts, fixed, threshold)))

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

    def make_room(self, state: LiveState, *, checkpoints: bool = True) -> Made:
        """V9 cut -> F1 trigger -> checkpoint (V8 permitting; never with `checkpoints=False`) -> V5 (goes
        out as it is when it still fits) -> V7 model-free move-outs until it fits -> U3 stop when nothing
        is left to move out."""
        state = self.cut_latest_tool_output(state)
        room = make_room(state, self, self.limits, self.run, checkpoints=checkpoints)
        self.run = room.run
        if room.stop is None:
            return Made(room.state, None, room.results)
        return Made(room.state, self._stop_decision(room.state, room.tokens), room.results)

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


def too_small_line(facts: ModelFacts, fixed: int, threshold: int) -> str:
    """The one line a person reads when the window is too small for the task (V8)."""
    # the threshold at which `fixed` sits at LASTING_SHARE of it, in the default trigger's terms (the
    # session's own may sit lower: a configured reply reserve, the eval's share)
    default = threshold_for(facts)
    wanted = window_for_threshold(int(fixed / LASTING_SHARE * default / threshold) + 1, facts)
    line = (
        f"The model's context window ({facts.window:,} tokens) is too small for this task: the "
        f"instructions, tools and recollection alone take {fixed:,} of the {threshold:,} tokens at which "
        "Avibe makes room, so it has to make room every few steps"
    )
    if wanted is None:
        return f"{line}; a model with a larger window would work better."
    return f"{line}; a window of about {wanted:,} tokens would work."
