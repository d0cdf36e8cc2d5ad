"""The context meter in the chat's status bar: tokens in the model's view, the checkpoint trigger (F1),
the window, and the share of the last prompt served from the provider's prompt cache. It follows the
events: a model call sets it, a checkpoint drops it to what the checkpoint left (U1: that is all the
person sees of a checkpoint - nothing interrupts); a checkpoint that fell back adds "last checkpoint fell
back" until the next one is saved, its reason on hover."""

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
)

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

    def after(self, event: Event) -> Meter:
        """The meter once `event` happened (unchanged for events that do not move it)."""
        if isinstance(event, ModelStarted):
            return replace(self, view_tokens=event.view_tokens)
        if isinstance(event, ModelCalled):
            return replace(
                self,
                view_tokens=event.view_tokens,
                prompt_tokens=event.prompt_tokens,
                cached_tokens=event.cached_tokens,
            )
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

    @property
    def cached_share(self) -> float | None:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else None

    def text(self) -> str:
        """`ctx 12,345/29,491 of 32,768 · cache 80%`: view / trigger of window, cached share."""
        if self.kept_by:
            return f"ctx kept by {self.kept_by}"
        share = self.cached_share
        cache = "-" if share is None else f"{share:.0%}"
        fell = f" · {FELL_BACK}" if self.fell_back else ""
        how = "" if self.compaction == "checkpoint" else f" · {self.compaction}"
        return f"ctx {self.view_tokens:,}/{self.threshold:,} of {self.window:,} · cache {cache}{how}{fell}"

    def fill(self) -> float:
        """How full the view is, as a share of the trigger point (1.0 = a checkpoint is due)."""
        return self.view_tokens / self.threshold if self.threshold else 0.0
