"""Making room, the one loop Vibey and the eval's `avibe-checkpoint` strategy share (F1, V5-V8, U3).

`make_room` asks the pure policy (`avibe.checkpoint.room.decide_room`) for the next step and performs it
through `RoomOps` - `avibe.agent.live.LiveRoom` over a live state, which Vibey commits to the record and the
eval to an in-memory checkpoint - and keeps V8's count of strikes. Whatever the caller, the same policy,
the same room ops and the same checkpoint driver decide.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Final, Generic, Protocol, TypeVar

from avibe.agent.driver import CheckpointResult
from avibe.checkpoint.plan import CheckpointRunState, may_try_checkpoint, needed_to_free, record_attempt
from avibe.checkpoint.room import (
    Checkpoint,
    MoveOut,
    PartialCheckpoint,
    Proceed,
    RoomAction,
    RoomLimits,
    Stop,
    Tried,
    decide_room,
)
from avibe.checkpoint.trigger import TriggerDecision

log = logging.getLogger("avibe.checkpoint")
MAX_ROUNDS: Final = 64  # each round moves something out; a loop past this is a bug, stopped rather than spun

S = TypeVar("S")


class RoomOps(Protocol[S]):
    """What making room needs from its caller. `checkpoint` and `move_out` adopt an accepted result into
    the returned state (and persist it, where the caller persists); on failure they return the state
    unchanged with the result whose `checkpoint` is None."""

    def tokens(self, state: S) -> int: ...
    def trigger(self, tokens: int) -> TriggerDecision: ...
    def checkpoint(
        self, state: S, tokens: int, action: Checkpoint | PartialCheckpoint
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
) -> Room[S]:
    tried = Tried()
    tokens = ops.tokens(state)
    trigger = ops.trigger(tokens)
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
        if isinstance(action, Checkpoint | PartialCheckpoint):
            state, result = ops.checkpoint(state, tokens, action)
            tried = replace(tried, checkpoint=True)
            if result.checkpoint is None:
                if result.attempted:
                    run = record_attempt(run, 0, 1, failed=True)
            else:
                freed, needed = tokens - ops.tokens(state), needed_to_free(tokens, limits.threshold)
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
