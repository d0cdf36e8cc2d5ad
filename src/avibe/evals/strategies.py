"""The strategy registry, including the slot for Avibe's own checkpoint ("avibe-checkpoint").

The checkpoint is wired through a `CheckpointDriver`: a function with the signature of
`Strategy.compact` that runs one checkpoint turn (SPEC F2-F5, V1-V9) over the state and returns the new
context (system prompt, the checkpoint as recollection, the recent messages verbatim) with its cost. Its
`Compacted.meta` must say how validation went, for the evaluation's checkpoint metrics:

    {"first_pass_valid": bool, "repaired": bool, "fallback": str | None}

and `carry` holds whatever it needs next time (e.g. the previous mind), as text.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Final

from avibe.evals.baselines import Anchored, FullContext, Handoff, Mask, Rewrite, Truncate
from avibe.evals.strategy import Compacted, CompactState, Strategy, StrategyUnavailable
from avibe.ports import ModelClient, TokenCounter

CheckpointDriver = Callable[[CompactState, ModelClient, TokenCounter, int], Compacted]
CHECKPOINT: Final = "avibe-checkpoint"
# Where a driver is looked up when none was registered: a module exposing `eval_driver`.
DRIVER_MODULES: Final = ("avibe.evals.checkpoint",)
_registered: list[CheckpointDriver] = []


def register_checkpoint_driver(driver: CheckpointDriver) -> None:
    """Wire the checkpoint into the evaluation (the latest registration wins)."""
    _registered.append(driver)


@contextmanager
def checkpoint_driver(driver: CheckpointDriver) -> Iterator[None]:
    """Use `driver` for the checkpoint inside the block only (tests, or an evaluation of another driver)."""
    _registered.append(driver)
    try:
        yield
    finally:
        _registered.remove(driver)


def _find_driver() -> CheckpointDriver:
    if _registered:
        return _registered[-1]
    for name in DRIVER_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError:
            continue
        driver = getattr(module, "eval_driver", None)
        if callable(driver):
            return driver  # type: ignore[no-any-return]
    raise StrategyUnavailable(
        f"{CHECKPOINT} is not wired: no checkpoint driver registered and none of {', '.join(DRIVER_MODULES)} "
        "exposes `eval_driver(state, model, counter, window) -> Compacted`"
    )


@dataclass(frozen=True, slots=True)
class AvibeCheckpoint:
    """Avibe's checkpoint (mind, memo, scene), run through the registered driver."""

    driver: CheckpointDriver
    name: str = CHECKPOINT

    def compact(
        self, state: CompactState, model: ModelClient, counter: TokenCounter, window: int
    ) -> Compacted:
        return self.driver(state, model, counter, window)


BASELINES: Final[dict[str, Callable[[], Strategy]]] = {
    "full": FullContext,
    "truncate": Truncate,
    "mask": Mask,
    "rewrite": Rewrite,
    "handoff": Handoff,
    "anchored": Anchored,
}
STRATEGY_NAMES: Final[tuple[str, ...]] = (CHECKPOINT, *BASELINES)


def make_strategy(name: str) -> Strategy:
    """A fresh strategy by name; StrategyUnavailable when the checkpoint is not wired, ValueError for a
    name that is not a strategy."""
    if name == CHECKPOINT:
        return AvibeCheckpoint(_find_driver())
    if name not in BASELINES:
        raise ValueError(f"unknown strategy {name!r}; choose from {', '.join(STRATEGY_NAMES)}")
    return BASELINES[name]()


def available_strategies() -> tuple[str, ...]:
    """Every strategy that can run in this build (the checkpoint only once wired)."""
    try:
        _find_driver()
    except StrategyUnavailable:
        return tuple(BASELINES)
    return STRATEGY_NAMES
