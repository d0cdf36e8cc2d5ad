"""Renderings of the same checkpoint in the eval: `avibe-checkpoint:rules-last` and
`avibe-checkpoint:plain` are `avibe-checkpoint` with its recollection shown another way when the probes are
asked and the context is measured - the checkpoints themselves are the same ones.
`avibe-checkpoint:no-reminder` is the default rendering with no reminder of the memo's rules after the
question (what Vibey's view adds, `avibe.context.reminder.with_reminder`): the reminder's effect, measured
on the same checkpoints.

A rendering is applied at probe time, not during the replay: Vibey lives the transcript exactly as for
`avibe-checkpoint` (its view holds the default rendering, so the triggers and what moves out are the same),
and each checkpoint's recollection in each rendering is recorded in the compaction's meta
(`avibe.evals.lived`). The final context's
recollection is then swapped for the rendering asked. So the runner makes the checkpoints once for
`avibe-checkpoint` and all its renderings of one (scenario, seed, K) and answers the probes from each: the
comparison is paired and costs no checkpoint call more. What it does not measure: a rendering's effect on
the agent's own steps between checkpoints, or on when the next checkpoint comes (its size differs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Final

from avibe.context.assemble import DEFAULT_RENDERING, RENDERINGS, Rendering
from avibe.evals.checkpoint import NAME as CHECKPOINT
from avibe.evals.checkpoint import RECOLLECTION_KIND
from avibe.record.messages import ChatMessage

SEPARATOR: Final = ":"
META_KEY: Final = "recollections"  # Compacted.meta: rendering -> the recollection so rendered
# ... and so rendered once the interrupted request's turn ended (F5: Vibey's view shows it no more then)
META_ENDED: Final = "recollections_after_the_turn"
RENDERED_NAMES: Final[tuple[str, ...]] = tuple(
    f"{CHECKPOINT}{SEPARATOR}{r}" for r in RENDERINGS if r != DEFAULT_RENDERING
)


# The default rendering with no reminder after the question: what the reminder adds, on the same checkpoints
UNREMINDED: Final = f"{CHECKPOINT}{SEPARATOR}no-reminder"


def rendering_of(name: str) -> Rendering | None:
    """The rendering a strategy name asks for: the default for `avibe-checkpoint` and UNREMINDED, the
    named one for `avibe-checkpoint:<rendering>`, None for any other strategy (or an unknown rendering)."""
    if name in (CHECKPOINT, UNREMINDED):
        return DEFAULT_RENDERING
    base, sep, wanted = name.partition(SEPARATOR)
    if base != CHECKPOINT or not sep:
        return None
    return next((r for r in RENDERINGS if r == wanted), None)


def at_rendering(
    context: Sequence[ChatMessage], metas: Sequence[Mapping[str, Any]], rendering: Rendering
) -> tuple[tuple[ChatMessage, ...], bool]:
    """The context with its recollection in `rendering`, and whether it was swapped: the compaction
    whose default rendering is the context's recollection gives the text (the newest such, over `metas`,
    the compactions' meta in order). A context without a recollection stays as it is (False)."""
    at = next((i for i, m in enumerate(context) if m.kind == RECOLLECTION_KIND), None)
    if at is None:
        return tuple(context), False
    shown = context[at].content
    for meta in reversed(metas):
        for key in (META_KEY, META_ENDED):
            texts = meta.get(key) or {}
            if texts.get(DEFAULT_RENDERING) == shown and rendering in texts:
                swapped = replace(context[at], content=texts[rendering])
                return (*context[:at], swapped, *context[at + 1 :]), True
    return tuple(context), False
