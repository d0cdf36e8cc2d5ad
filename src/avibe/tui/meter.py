"""The context meter in the chat's status bar: tokens in the model's view, the checkpoint trigger (F1),
the window, and the share of the last prompt served from the provider's prompt cache. It follows the
events: a model call sets it, a checkpoint drops it to what the checkpoint left (U1: that is all the
person sees of a checkpoint - nothing interrupts); a checkpoint that fell back adds "last checkpoint fell
back" until the next one is saved, its reason on hover. It also says what the model's requests cost, this
turn and this session (`avibe.providers.prices`: `$0` on the embedded model, `-` where no price is known)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Final

from avibe.checkpoint.wording import without_requirement_ids
from avibe.host.events import (
    CheckpointAccepted,
    CheckpointFailed,
    CheckpointFallback,
    Compacted,
    Event,
    ModelCalled,
    ModelStarted,
    TurnStarted,
)
from avibe.providers.prices import Prices, money

FELL_BACK: Final = "last checkpoint fell back"


def plain(reason: str) -> str:
    """A reason from the log, for a person: without the requirement ids the log keeps."""
    return without_requirement_ids(reason)


@dataclass(frozen=True, slots=True)
class Meter:
    view_tokens: int = 0
    threshold: int = 0
    window: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    kept_by: str = ""  # an external agent that keeps its own context (L5): nothing of ours to show
    # why the last checkpoint fell back ("" once one is saved): never a prompt (U1, U2), but not invisible -
    # the meter says so, the reason on hover and in `/checkpoints`
    fell_back: str = ""
    compaction: str = "checkpoint"  # how Vibey makes room; the text names any other way
    prices: Prices | None = None  # the model's; None: not known (no cost shown as a number)
    turn_cost: float | None = 0.0  # USD of this turn's requests so far (None: a price was not known)
    session_cost: float | None = 0.0  # USD of the session's recorded requests, this turn's included

    def after(self, event: Event) -> Meter:
        """The meter once `event` happened (unchanged for events that do not move it)."""
        if isinstance(event, ModelStarted):
            return replace(self, view_tokens=event.view_tokens)
        if isinstance(event, ModelCalled):
            return replace(
                self._paid(event),
                view_tokens=event.view_tokens,
                prompt_tokens=event.prompt_tokens,
                cached_tokens=event.cached_tokens,
            )
        if isinstance(event, TurnStarted):
            return replace(self, turn_cost=0.0 if self.prices is not None else None)
        if isinstance(event, CheckpointAccepted):
            return replace(self, view_tokens=event.after, fell_back="")
        if isinstance(event, Compacted):  # another compactor than the checkpoint made room
            return replace(self, view_tokens=event.after)
        if isinstance(event, CheckpointFailed):  # the request goes out as it is (V5), or moves out next
            return replace(self, fell_back=plain(event.reason))
        if isinstance(event, CheckpointFallback):  # the failure before it, then the move-out
            why = "; then ".join(r for r in (self.fell_back, plain(event.reason)) if r)
            return replace(self, view_tokens=event.after, fell_back=why)
        return self

    def _paid(self, event: ModelCalled) -> Meter:
        """The request's cost added to the turn's and the session's."""
        if self.prices is None:
            return replace(self, turn_cost=None, session_cost=None)
        cost = self.prices.cost(event.prompt_tokens, event.cached_tokens, event.output_tokens)
        turn, session = self.turn_cost, self.session_cost
        return replace(self, turn_cost=None if turn is None else turn + cost,
                       session_cost=None if session is None else session + cost)  # fmt: skip

    @property
    def cached_share(self) -> float | None:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else None

    def text(self) -> str:
        """`ctx 12,345/29,491 of 32,768 · cache 80% · $0.0042 turn · $0.31 session`: view / trigger of
        window, cached share, what the requests cost."""
        if self.kept_by:
            return f"ctx kept by {self.kept_by}"
        share = self.cached_share
        cache = "-" if share is None else f"{share:.0%}"
        fell = f" · {FELL_BACK}" if self.fell_back else ""
        how = "" if self.compaction == "checkpoint" else f" · {self.compaction}"
        cost = f" · {money(self.turn_cost)} turn · {money(self.session_cost)} session"
        return (
            f"ctx {self.view_tokens:,}/{self.threshold:,} of {self.window:,} · cache {cache}{cost}{how}{fell}"
        )

    def fill(self) -> float:
        """How full the view is, as a share of the trigger point (1.0 = a checkpoint is due)."""
        return self.view_tokens / self.threshold if self.threshold else 0.0
