"""V8 in the room loop (agent/room.py): a checkpoint that gets the request under the trigger but leaves
almost no room to work counts as "too little"; after two of them in a run only model-free move-outs (V7)
free room. In a small window the demo checkpointed every two steps, each checkpoint freeing 4-7% of the
threshold, and the run spent its time checkpointing."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from avibe.agent.compaction.room import make_room
from avibe.agent.driver import CheckpointResult
from avibe.checkpoint.budgets import LASTING_SHARE
from avibe.checkpoint.plan import MIN_ROOM_SHARE, CheckpointRunState, needed_to_free
from avibe.checkpoint.room import CheckpointNow, MoveOut, PartialCheckpoint, RoomLimits
from avibe.checkpoint.trigger import TriggerDecision

LIMITS = RoomLimits(window=6_144, threshold=3_640, hard_limit=4_608, turn_overhead=200)
ACCEPTED: Any = object()  # a stand-in for the checkpoint the driver would have made


@dataclass
class Ops:
    """The state is the request's size; a checkpoint frees `frees` tokens, a move-out half; `step`
    tokens of it are the step in progress, which no checkpoint moves."""

    frees: int
    calls: list[str] = field(default_factory=list)
    step: int = 200

    def tokens(self, state: int) -> int:
        return state

    def current_step(self, state: int) -> int:
        return self.step

    def trigger(self, tokens: int) -> TriggerDecision:
        return TriggerDecision(tokens > LIMITS.threshold, LIMITS.threshold, "test", tokens)

    def checkpoint(
        self, state: int, tokens: int, action: CheckpointNow | PartialCheckpoint
    ) -> tuple[int, Any]:
        self.calls.append("checkpoint")
        return state - self.frees, CheckpointResult(ACCEPTED, ())

    def move_out(self, state: int, tokens: int, action: MoveOut) -> tuple[int, Any]:
        self.calls.append("move_out")
        return state // 2, CheckpointResult(ACCEPTED, ())


def _make_room_at(ops: Ops, sizes: list[int]) -> list[str]:
    run = CheckpointRunState()
    for size in sizes:
        run = make_room(size, ops, LIMITS, run).run
        ops.calls.append("|")
    return ops.calls


FULL, PAST_THE_WINDOW = LIMITS.threshold + 20, LIMITS.hard_limit + 100


def test_V8_checkpoints_that_leave_no_room_to_work_end_checkpointing_for_the_run() -> None:
    calls = _make_room_at(Ops(frees=230), [FULL, FULL, FULL, PAST_THE_WINDOW])  # 210 tokens of room each
    # two strikes, then the request goes out as it is while it fits, and V7 makes room when it does not
    assert calls == ["checkpoint", "|", "checkpoint", "|", "|", "move_out", "|"]


def test_V8_checkpoints_that_leave_room_go_on() -> None:
    calls = _make_room_at(Ops(frees=1_200), [FULL, FULL, FULL])
    assert calls == ["checkpoint", "|"] * 3


def test_V8_what_a_checkpoint_must_free() -> None:
    # a step in progress as large as the rest: back under the trigger with a tenth of it to spare
    assert needed_to_free(3_660, 3_640, 3_000) == 20 + int(3_640 * MIN_ROOM_SHARE)
    assert needed_to_free(3_000, 3_640, 2_800) == int(3_640 * MIN_ROOM_SHARE)  # early: room only
    # otherwise what the checkpoint keeps of its own at most LASTING_SHARE of the threshold
    assert needed_to_free(3_660, 3_640) == 3_660 - int(3_640 * LASTING_SHARE)
    assert needed_to_free(3_660, 3_640, 500) == 3_660 - 500 - int(3_640 * LASTING_SHARE)


def test_V8_a_checkpoint_that_keeps_too_much_of_its_own_is_too_little() -> None:
    """Under the trigger with a tenth to spare, but what it keeps besides the step in progress over
    LASTING_SHARE of the threshold: the next checkpoint would follow a few steps later (the demo's small
    window, its system prompt and recollection three quarters of the threshold), so it is a strike."""
    ops = Ops(frees=800)  # 3,660 -> 2,860: 2,660 of its own, over 65% of 3,640 (2,366)
    assert FULL - ops.frees < LIMITS.threshold * (1 - MIN_ROOM_SHARE)
    calls = _make_room_at(ops, [FULL, FULL, FULL])
    assert calls == ["checkpoint", "|", "checkpoint", "|", "|"]
    # the same checkpoint where 700 of those tokens are the step in progress: 2,160 of its own, it lasts
    calls = _make_room_at(Ops(frees=800, step=700), [FULL, FULL, FULL])
    assert calls == ["checkpoint", "|"] * 3


@dataclass
class FailingOps(Ops):
    """Checkpoints fail while `failing` is above zero (each failure counts down), then succeed."""

    failing: int = 0

    def checkpoint(
        self, state: int, tokens: int, action: CheckpointNow | PartialCheckpoint
    ) -> tuple[int, Any]:
        if self.failing > 0:
            self.failing -= 1
            self.calls.append("failed")
            return state, CheckpointResult(None, (), reason="invalid twice", attempted=True)
        return super().checkpoint(state, tokens, action)


def test_V8_strikes_reset_after_the_move_out_so_a_long_session_checkpoints_again() -> None:
    """two failed checkpoints, a model-free move-out, then a valid checkpoint - a chat
    or `vibe serve` session that lives for days never loses its checkpoints for good."""
    ops = FailingOps(frees=1_200, failing=2)
    calls = _make_room_at(ops, [FULL, FULL, PAST_THE_WINDOW, FULL, FULL])
    assert calls == [
        "failed", "|",  # strike one; the request still fits (V5)
        "failed", "|",  # strike two: no more checkpoints until room is made
        "move_out", "|",  # past the window: V7 moves the oldest half out without the model
        "checkpoint", "|",  # the next trigger tries again - and the checkpoint is valid
        "checkpoint", "|",
    ]  # fmt: skip


def test_V8_a_success_clears_an_earlier_strike() -> None:
    """one failure, then a valid checkpoint: the failure no longer counts."""
    ops = FailingOps(frees=1_200, failing=1)
    run = make_room(FULL, ops, LIMITS, CheckpointRunState()).run
    assert run.strikes == 1
    ops.calls.clear()
    run = make_room(FULL, ops, LIMITS, run).run
    assert ops.calls == ["checkpoint"] and run.strikes == 0
