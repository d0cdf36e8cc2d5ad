"""The strategies of the memory evaluation by name: Avibe's checkpoint ("avibe-checkpoint", the code Vibey
runs: `avibe.evals.checkpoint`), the same checkpoints with their recollection rendered another way for the
probes ("avibe-checkpoint:rules-last", "avibe-checkpoint:plain": `avibe.evals.rendering`), and the
peer-style baselines (and "avibe-checkpoint:no-reminder": the same checkpoints, no reminder after the
question). `available_strategies()` (what `vibe eval` runs unasked) leaves the renderings out."""

from __future__ import annotations

from typing import Final, cast

from avibe.agent.compaction.registry import COMPACTORS, DEFAULT_COMPACTION
from avibe.checkpoint.turn import Mode
from avibe.evals.avibe_checkpoint import AvibeCheckpoint
from avibe.evals.checkpoint import NAME as CHECKPOINT
from avibe.evals.rendering import RENDERED_NAMES, UNREMINDED, rendering_of
from avibe.evals.strategy import Strategy

# every compactor of the product but its checkpoint (which the eval runs as `AvibeCheckpoint`, over the
# replay's live state): one registry, so a new strategy is measured as soon as users can pick it
BASELINES: Final[tuple[str, ...]] = tuple(name for name in COMPACTORS if name != DEFAULT_COMPACTION)
STRATEGY_NAMES: Final[tuple[str, ...]] = (CHECKPOINT, *RENDERED_NAMES, UNREMINDED, *BASELINES)


def make_strategy(
    name: str, *, checkpoint_mode: Mode | None = None, renderings: tuple[str, ...] = ()
) -> Strategy:
    """A fresh strategy by name (ValueError for a name that is not one). `checkpoint_mode` forces the
    checkpoint's mode; None picks by the model's name, as Vibey does. A checkpoint strategy records its
    recollection in its own rendering and in `renderings` (other strategy names of the checkpoint family)
    at each compaction, for `avibe.evals.rendering.at_rendering`; the default one records none."""
    name = CHECKPOINT if name == DEFAULT_COMPACTION else name  # `vibe eval -s checkpoint`, as `vibe run` says
    rendering = rendering_of(name)
    if rendering is not None:
        others = (rendering_of(other) for other in renderings)
        wanted = tuple(dict.fromkeys(r for r in (rendering, *others) if r is not None))
        if name == CHECKPOINT and wanted == (rendering,):
            return AvibeCheckpoint(checkpoint_mode)
        return AvibeCheckpoint(checkpoint_mode, name, wanted)
    if name not in COMPACTORS:  # read now: a compactor registered after import is measured too
        raise ValueError(f"unknown strategy {name!r}; choose from {', '.join(STRATEGY_NAMES)}")
    return cast(Strategy, COMPACTORS[name]())  # the class `vibe run --compaction NAME` runs


def available_strategies() -> tuple[str, ...]:
    """The strategies `vibe eval` runs when none is named: the checkpoint and every baseline (a rendering
    is asked for by name: it adds probe calls, no checkpoint call)."""
    return (CHECKPOINT, *BASELINES)
