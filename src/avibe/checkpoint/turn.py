"""The checkpoint turn as a generator of effects (F2, F3, V1-V5, T4, N4, N7).

The turn does no IO. It yields effects; a driver performs them and sends the results back (httpx's auth
flow). Drive it like this:

    gen = checkpoint_turn(inputs)
    effect = next(gen)
    try:
        while True:
            effect = gen.send(perform(effect))   # None for WriteWorkFiles; ModelReply | ModelFailure for
    except StopIteration as stop:                # CallModel; str | ReadFailed for ReadFile
        outcome = stop.value                     # Accepted | Failed

API (the effects, inputs and outcomes are defined in `checkpoint/effects.py`, re-exported here):
    Effects:  WriteWorkFiles(mind, checklist)   CallModel(messages, tools, json_schema, max_tokens)
              ReadFile(path)
    Results:  ModelReply (avibe.record.messages) | ModelFailure(text)   str | ReadFailed(message)   None
    Mode = Literal["tools", "structured", "three", "grouped"]
    TurnInputs(...)                     see the class
    checkpoint_turn(inputs) -> Generator[Effect, EffectResult, TurnOutcome]
    Accepted(checkpoint, dismissed_seqs, calls, first_pass_problems, repaired, tool_rounds, notes)
    Failed(problems, calls, tool_rounds, first_pass_problems, notes)
    CHECKPOINT_TOOLS, MAX_TOOL_ROUNDS = 5     (tools mode, `checkpoint/tools_mode.py`)

The two modes: `tools_mode.py` (the model edits the two work files with tools, then writes the scene) and
`structured_mode.py` (small JSON questions under a grammar, for small local models; the questions and
how their answers apply are in `checkpoint/structured/`). Both share `turn_state.py`.

Every model call is the current conversation plus the turn's own messages appended after it: each call's
messages extend the previous call's, so the live prompt's cached prefix is reused. The memo's text is
always copied from the record entries by `build_memo`, never taken from the model (N4, N7). A failed turn
carries no partial state: nothing changes (V5).
"""

from __future__ import annotations

from collections.abc import Generator

from avibe.checkpoint.effects import (
    Accepted,
    CallModel,
    Effect,
    EffectResult,
    Failed,
    Mode,
    ModelFailure,
    ReadFailed,
    ReadFile,
    TurnInputs,
    TurnOutcome,
    WriteWorkFiles,
)
from avibe.checkpoint.structured_mode import structured_turn
from avibe.checkpoint.tools_mode import CHECKPOINT_TOOLS, MAX_TOOL_ROUNDS, tools_turn
from avibe.checkpoint.turn_state import start

__all__ = [
    "CHECKPOINT_TOOLS",
    "MAX_TOOL_ROUNDS",
    "Accepted",
    "CallModel",
    "Effect",
    "EffectResult",
    "Failed",
    "Mode",
    "ModelFailure",
    "ReadFailed",
    "ReadFile",
    "TurnInputs",
    "TurnOutcome",
    "WriteWorkFiles",
    "checkpoint_turn",
]


def checkpoint_turn(inputs: TurnInputs) -> Generator[Effect, EffectResult, TurnOutcome]:
    """One checkpoint turn (F3): effects out, results in; returns Accepted or Failed (V4, V5)."""
    st = start(inputs)
    if inputs.mode == "tools":
        return (yield from tools_turn(st))
    return (yield from structured_turn(st))
