"""Renderings of the same checkpoint in the eval: `avibe-checkpoint:rules-last` and
`avibe-checkpoint:plain` are `avibe-checkpoint` with its recollection shown another way when the probes are
asked and the context is measured - the checkpoints themselves are the same ones.
`avibe-checkpoint:no-reminder` is the default rendering with no reminder of the memo's rules after the
question (what Vibey's view adds, `avibe.context.assemble.with_reminder`): the reminder's effect, measured
on the same checkpoints.

A rendering is applied at probe time, not during the replay: every compaction runs exactly as
`avibe-checkpoint` does (its running context holds the default rendering, so the triggers and what moves
out are the same), and records each rendering of its recollection in its meta. The final context's
recollection is then swapped for the rendering asked. So the runner makes the checkpoints once for
`avibe-checkpoint` and all its renderings of one (scenario, seed, K) and answers the probes from each: the
comparison is paired and costs no checkpoint call more. What it does not measure: a rendering's effect on
the agent's own steps between checkpoints, or on when the next checkpoint comes (its size differs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from avibe.agent.state import LiveState
from avibe.context.assemble import DEFAULT_RENDERING, RENDERINGS, Rendering
from avibe.evals.checkpoint import NAME as CHECKPOINT
from avibe.evals.checkpoint import RECOLLECTION_KIND, AvibeCheckpoint, ReplayCarry, replay_viewer
from avibe.evals.strategy import Compacted, CompactState
from avibe.ports import ModelClient, TokenCounter
from avibe.record.messages import ChatMessage

SEPARATOR: Final = ":"
META_KEY: Final = "recollections"  # Compacted.meta: rendering -> the recollection so rendered
# ... and so rendered once the interrupted request's turn ended (F5: Vibey shows it no more, and the replay
# renders the context's recollection again then - `AvibeCheckpoint.view_now`)
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


@dataclass(frozen=True, slots=True)
class Rendered:
    """`avibe-checkpoint` that records its recollection in each of `renderings` at every compaction
    (meta "recollections"); it compacts exactly as the checkpoint does."""

    base: AvibeCheckpoint
    renderings: tuple[Rendering, ...]
    name: str = CHECKPOINT

    def compact(
        self, state: CompactState, model: ModelClient, counter: TokenCounter, window: int
    ) -> Compacted:
        done = self.base.compact(state, model, counter, window)
        wanted = tuple(dict.fromkeys((DEFAULT_RENDERING, *self.renderings)))
        texts = recollections(done.carry, state, model, counter, window, wanted)
        ended = recollections(done.carry, state, model, counter, window, wanted, turn_ended=True)
        return replace(done, meta={**done.meta, META_KEY: texts, META_ENDED: ended})

    def view_now(
        self, state: CompactState, model: ModelClient, counter: TokenCounter, window: int
    ) -> tuple[ChatMessage, ...]:
        return self.base.view_now(state, model, counter, window)


def recollections(
    carry_text: str,
    state: CompactState,
    model: ModelClient,
    counter: TokenCounter,
    window: int,
    renderings: Sequence[Rendering],
    *,
    turn_ended: bool = False,
) -> dict[str, str]:
    """The recollection of the checkpoint a compaction handed on, in each rendering: the view Vibey's
    viewer derives, over the same live state and skills, as `avibe.evals.checkpoint` builds it ({} while
    there is no checkpoint); `turn_ended`: as shown once the turn it came in has ended."""
    carry = ReplayCarry.parse(carry_text)
    stored = carry.stored()
    if stored is None:
        return {}
    bookkeeping = LiveState.from_dict(carry.live)
    if turn_ended:
        bookkeeping = replace(bookkeeping, turn_user_seqs=())
    texts: dict[str, str] = {}
    for rendering in renderings:
        viewer = replay_viewer(state, carry, model, counter, window, rendering)
        texts[rendering] = viewer.recollection(bookkeeping, stored)
    return texts


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
