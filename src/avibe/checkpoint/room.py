"""The room policy (F1, V5-V8, U3): given the request's size, the limits and what was tried so far, the
one next thing to do. Pure; Vibey's loop and the eval's `avibe-checkpoint` strategy both call it (through
`avibe.agent.room.make_room`), so the eval measures the policy users run.

API:
    RoomLimits(window, threshold, hard_limit, turn_overhead);  limits_for(facts) -> RoomLimits
    turn_overhead(window) -> int            room a checkpoint turn needs beside the conversation
    Tried(checkpoint, nothing_to_move)      what already happened while making room for this request
    decide_room(tokens, trigger, limits, run, tried) -> Proceed | CheckpointNow | PartialCheckpoint
                                                        | MoveOut | Stop

The order: over the trigger (F1) -> a checkpoint, unless V8 ended checkpointing in this run; a turn that
would not fit the window is a partial checkpoint (V6). After that (accepted, failed or not allowed): a
request that fits goes out as it is (V5); one that does not fit moves the oldest part out without the
model (V7); when nothing is left to move out, stop (U3).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from avibe.checkpoint.plan import CheckpointRunState, may_try_checkpoint
from avibe.checkpoint.trigger import TriggerDecision, threshold_for
from avibe.record.messages import ModelFacts

CHECKPOINT_REPLY_TOKENS: Final = 1024  # the most one checkpoint answer may take


def turn_overhead(window: int) -> int:
    """Room a checkpoint turn needs beside the conversation: its request and its answers. At most a
    quarter of the window, which the trigger's reply reserve + margin (F1) always leaves free."""
    return min(CHECKPOINT_REPLY_TOKENS + 512, window // 4)


@dataclass(frozen=True, slots=True)
class RoomLimits:
    window: int
    threshold: int  # F1: past this a checkpoint is due
    hard_limit: int  # past this the request does not fit beside the reply
    turn_overhead: int
    # Tokens of the request that the whole-turn check leaves out: the tool list, which the checkpoint
    # turn's questions re-send only as a cache prefix (the view alone is what a turn must fit, V6).
    tool_tokens: int = 0


def limits_for(facts: ModelFacts, tool_tokens: int = 0) -> RoomLimits:
    """The limits for a model (with the window the session runs on already in `facts`)."""
    hard = facts.window - min(facts.max_output, facts.window // 4)
    return RoomLimits(facts.window, threshold_for(facts), hard, turn_overhead(facts.window), tool_tokens)


@dataclass(frozen=True, slots=True)
class Tried:
    """What happened so far while making room for one request."""

    checkpoint: bool = False  # a checkpoint was tried (or not allowed) for this request
    nothing_to_move: bool = False  # the last model-free move-out found nothing to move


@dataclass(frozen=True, slots=True)
class Proceed:
    reason: str
    kind: Literal["proceed"] = "proceed"


@dataclass(frozen=True, slots=True)
class CheckpointNow:
    reason: str
    kind: Literal["checkpoint"] = "checkpoint"


@dataclass(frozen=True, slots=True)
class PartialCheckpoint:
    reason: str
    kind: Literal["partial"] = "partial"


@dataclass(frozen=True, slots=True)
class MoveOut:
    reason: str
    kind: Literal["move_out"] = "move_out"


@dataclass(frozen=True, slots=True)
class Stop:
    reason: str
    kind: Literal["stop"] = "stop"


RoomAction = Proceed | CheckpointNow | PartialCheckpoint | MoveOut | Stop


def decide_room(
    tokens: int, trigger: TriggerDecision, limits: RoomLimits, run: CheckpointRunState, tried: Tried
) -> RoomAction:
    """The next step to make room for a request of `tokens` tokens (see the module docstring)."""
    if trigger.checkpoint and not tried.checkpoint and may_try_checkpoint(run):
        if tokens - limits.tool_tokens + limits.turn_overhead <= limits.window:
            return CheckpointNow(trigger.reason)
        return PartialCheckpoint(f"{trigger.reason}; the whole conversation does not fit a turn (V6)")
    if tokens <= limits.hard_limit:
        if trigger.checkpoint and not may_try_checkpoint(run) and not tried.checkpoint:
            return Proceed(f"V8: no checkpoint until room is made; {tokens} <= {limits.hard_limit} fits")
        return Proceed(f"{tokens} <= {limits.hard_limit} tokens fits")
    if tried.nothing_to_move:
        return Stop(f"{tokens} > {limits.hard_limit} tokens and nothing left to move out (U3)")
    return MoveOut(f"request of {tokens} tokens does not fit ({limits.hard_limit})")
