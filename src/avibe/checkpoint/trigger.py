"""When to checkpoint (F1): before the next request would pass the threshold.

API:
    WINDOW_SHARE = 0.9
    MIN_SAFETY_MARGIN = 1_024;  SAFETY_MARGIN_SHARE = 50   default margin: max(1_024, window // 50)
    MAX_RESERVE_SHARE = 4      the reply reserve counts for at most window // 4
    threshold_for(facts: ModelFacts, reply_reserve: int | None = None,
                  safety_margin: int | None = None) -> int                         (raises ValueError)
    should_checkpoint(next_request_tokens: int, facts: ModelFacts, reply_reserve: int | None = None,
                      safety_margin: int | None = None) -> TriggerDecision          (raises ValueError)
    decide_at(next_request_tokens: int, threshold: int, reason: str) -> TriggerDecision
    TriggerDecision(checkpoint: bool, threshold: int, reason: str, request_tokens: int)
    window_for_threshold(threshold: int, facts: ModelFacts) -> int | None
        the smallest window (whole KiB of tokens) whose threshold is at least `threshold`; None when no
        window up to MAX_WINDOW_ASKED has it (a price tier caps it)
        reason names the limit that decided: "90% of window", "reply reserve + margin", "price tier at N"

The threshold is the smallest of: 90% of the window; window - reply reserve - safety margin; the first
price-tier boundary when the model has one. The reply reserve defaults to `facts.max_output`, capped at a
quarter of the window (some providers report max_output == window, which would leave no room at all).
The default margin grows with the window because token estimates err in proportion to the text.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Final

from avibe.record.messages import ModelFacts

WINDOW_SHARE: Final = 0.9
MIN_SAFETY_MARGIN: Final = 1_024
SAFETY_MARGIN_SHARE: Final = 50
MAX_RESERVE_SHARE: Final = 4

MAX_WINDOW_ASKED: Final = 4 * 1_048_576
WINDOW_STEP: Final = 1_024

REASON_WINDOW: Final = "90% of window"
REASON_RESERVE: Final = "reply reserve + margin"


@dataclass(frozen=True, slots=True)
class TriggerDecision:
    checkpoint: bool
    threshold: int
    reason: str
    request_tokens: int = 0


def _limits(facts: ModelFacts, reply_reserve: int | None, safety_margin: int | None) -> list[tuple[int, str]]:
    window = facts.window
    if window <= 0:
        raise ValueError(f"model {facts.name!r}: window must be positive, got {window}")
    reserve = facts.max_output if reply_reserve is None else reply_reserve
    margin = max(MIN_SAFETY_MARGIN, window // SAFETY_MARGIN_SHARE) if safety_margin is None else safety_margin
    if reserve < 0 or margin < 0:
        raise ValueError(f"reply reserve ({reserve}) and safety margin ({margin}) must not be negative")
    limits = [
        (int(window * WINDOW_SHARE), REASON_WINDOW),
        (window - min(reserve, window // MAX_RESERVE_SHARE) - margin, REASON_RESERVE),
    ]
    if facts.price_tier_at is not None:
        if facts.price_tier_at <= 0:
            raise ValueError(
                f"model {facts.name!r}: price_tier_at must be positive, got {facts.price_tier_at}"
            )
        limits.append((facts.price_tier_at, f"price tier at {facts.price_tier_at}"))
    return limits


def _decide(facts: ModelFacts, reply_reserve: int | None, safety_margin: int | None) -> tuple[int, str]:
    threshold, reason = min(_limits(facts, reply_reserve, safety_margin), key=lambda limit: limit[0])
    if threshold <= 0:
        raise ValueError(
            f"model {facts.name!r}: window {facts.window} leaves no room after the reply reserve and the "
            f"safety margin ({reason} gives {threshold})"
        )
    return threshold, reason


def threshold_for(
    facts: ModelFacts, reply_reserve: int | None = None, safety_margin: int | None = None
) -> int:
    """The request size (tokens) above which a checkpoint is due (F1)."""
    return _decide(facts, reply_reserve, safety_margin)[0]


def should_checkpoint(
    next_request_tokens: int,
    facts: ModelFacts,
    reply_reserve: int | None = None,
    safety_margin: int | None = None,
) -> TriggerDecision:
    """Whether the next request (this many tokens) would pass the threshold, and which limit decided."""
    threshold, reason = _decide(facts, reply_reserve, safety_margin)
    return decide_at(next_request_tokens, threshold, reason)


def decide_at(next_request_tokens: int, threshold: int, reason: str) -> TriggerDecision:
    """The decision at a threshold already chosen (the eval's replay is given one): past it, not at it."""
    return TriggerDecision(
        checkpoint=next_request_tokens > threshold,
        threshold=threshold,
        reason=reason,
        request_tokens=next_request_tokens,
    )


def window_for_threshold(threshold: int, facts: ModelFacts) -> int | None:
    """The smallest window, in whole steps of 1,024 tokens, whose trigger threshold (the same reply
    reserve and default margin) is at least `threshold`: what to tell a person whose window is too small
    for the task (V8)."""
    window = max(WINDOW_STEP, -(-facts.window // WINDOW_STEP) * WINDOW_STEP)
    while window <= MAX_WINDOW_ASKED:
        with_window = replace(facts, window=window)
        if max(0, min(limit for limit, _ in _limits(with_window, None, None))) >= threshold:
            return window
        window += WINDOW_STEP
    return None
