"""The strategies of the memory evaluation by name: Avibe's checkpoint ("avibe-checkpoint", the code Vibey
runs: `avibe.evals.checkpoint`) and the peer-style baselines."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from avibe.checkpoint.turn import Mode
from avibe.evals.baselines import Anchored, FullContext, Handoff, Mask, Rewrite, Truncate
from avibe.evals.checkpoint import NAME as CHECKPOINT
from avibe.evals.checkpoint import AvibeCheckpoint
from avibe.evals.strategy import Strategy

BASELINES: Final[dict[str, Callable[[], Strategy]]] = {
    "full": FullContext,
    "truncate": Truncate,
    "mask": Mask,
    "rewrite": Rewrite,
    "handoff": Handoff,
    "anchored": Anchored,
}
STRATEGY_NAMES: Final[tuple[str, ...]] = (CHECKPOINT, *BASELINES)


def make_strategy(name: str, *, checkpoint_mode: Mode | None = None) -> Strategy:
    """A fresh strategy by name (ValueError for a name that is not one). `checkpoint_mode` forces the
    checkpoint's mode; None picks by the model's name, as Vibey does."""
    if name == CHECKPOINT:
        return AvibeCheckpoint(checkpoint_mode)
    if name not in BASELINES:
        raise ValueError(f"unknown strategy {name!r}; choose from {', '.join(STRATEGY_NAMES)}")
    return BASELINES[name]()


def available_strategies() -> tuple[str, ...]:
    """Every strategy that can run in this build."""
    return STRATEGY_NAMES
