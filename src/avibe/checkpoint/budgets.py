"""Token budgets derived from the model's window (M6, N5, A1, F4).

API:
    REFERENCE_WINDOW = 192_000      windows at or above this get the stated caps; smaller ones scale down
    budgets_for(window: int, threshold: int) -> Budgets     (raises ValueError on a non-positive input)
    Budgets fields (all tokens unless noted):
        window, threshold, scale (float, <= 1.0)
        i_am_here, goals, key_decisions, lessons     mind caps per section (M6)
        memo_per_message, memo_total                 memo budgets (N5)
        skill_each, skills_total, skills_max_count   skills put back (A1; count is a number of skills)
        recent_messages                              recent messages kept verbatim (F4)
    Budgets.mind_caps -> dict[str, int]   section name (MIND_SECTIONS) -> cap
    Budgets.mind_cap(section: str) -> int (raises KeyError for an unknown section)
    LASTING_SHARE = 0.65       V8: what a checkpoint keeps, at most this share of the threshold
    recollection_floor(budgets) -> int    the tokens a recollection may take (mind caps and memo together)
    lasting(budgets, fixed: int) -> Budgets    recent messages cut so that `fixed` tokens (system prompt,
                                               tools, recollection) and the recent ones stay under
                                               LASTING_SHARE of the threshold (F4, V8)

Scaling: every mind and memo budget is `stated * window // 192_000` below 192k, never above the stated
cap, and never below a floor (MIN_SECTION, MIN_MEMO_MESSAGE, MIN_MEMO_TOTAL). The floors keep tiny windows
usable: 100 tokens is a few lines per mind section, 150 tokens a paragraph of a user's message. At 8k the
floors add up to ~850 tokens, a tenth of the window.

The memo's floors are a paragraph a message and three such in all. They were 60 and 240, and at 4,096
tokens (every budget at its floor) a real user's first message - four rules as a hand-wrapped list in 110
tokens - was cut after its first rule, where a handoff, which copies the newest user messages into a
quarter of the threshold, kept it whole. The seed scales the budgets in proportion to the window; the
floors only decide below that, under about 96k tokens a message and 29k in all.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Final

from avibe.checkpoint.model import MIND_SECTIONS

REFERENCE_WINDOW: Final = 192_000

# Stated caps for windows >= REFERENCE_WINDOW (M6, N5, A1, F4).
MIND_CAPS: Final[dict[str, int]] = {
    "I am here": 1_000,
    "Goals": 2_000,
    "Key decisions": 1_500,
    "Lessons": 1_500,
}
MEMO_PER_MESSAGE: Final = 300
MEMO_TOTAL: Final = 3_000
SKILL_EACH: Final = 5_000
SKILLS_TOTAL: Final = 25_000
SKILLS_MAX_COUNT: Final = 20
RECENT_MESSAGES: Final = 20_000

# V8: a checkpoint that lasts keeps (besides the step in progress) at most this share of the trigger
# threshold. At 90% (back under the trigger with a tenth to spare) the demo's 6,144-token window
# checkpointed every 2-4 model requests and spent half its time in checkpoints; at 65% the next one is a
# third of the threshold of new work away. Not 60%: the late_rule eval's 4,000-token window, whose
# recollection alone is ~54% of its threshold, then struck out twice and fell back to moving out without
# the model.
LASTING_SHARE: Final = 0.65

# Floors for small windows (see the module docstring).
MIN_SECTION: Final = 100
MIN_MEMO_MESSAGE: Final = 150
MIN_MEMO_TOTAL: Final = 450


@dataclass(frozen=True, slots=True)
class Budgets:
    window: int
    threshold: int
    scale: float
    i_am_here: int
    goals: int
    key_decisions: int
    lessons: int
    memo_per_message: int
    memo_total: int
    skill_each: int
    skills_total: int
    skills_max_count: int
    recent_messages: int

    @property
    def mind_caps(self) -> dict[str, int]:
        caps = (self.i_am_here, self.goals, self.key_decisions, self.lessons)
        return dict(zip(MIND_SECTIONS, caps, strict=True))

    def mind_cap(self, section: str) -> int:
        return self.mind_caps[section]


def _scaled(stated: int, window: int, floor: int) -> int:
    """`stated` scaled by window / 192k, clamped to [floor, stated]."""
    if window >= REFERENCE_WINDOW:
        return stated
    return min(stated, max(floor, stated * window // REFERENCE_WINDOW))


def budgets_for(window: int, threshold: int) -> Budgets:
    """All budgets for a model with this context window and checkpoint threshold (see trigger.py)."""
    if window <= 0:
        raise ValueError(f"window must be a positive number of tokens, got {window}")
    if threshold <= 0:
        raise ValueError(f"threshold must be a positive number of tokens, got {threshold}")
    caps = [_scaled(MIND_CAPS[name], window, MIN_SECTION) for name in MIND_SECTIONS]
    skills_total = min(SKILLS_TOTAL, window // 10)
    return Budgets(
        window=window,
        threshold=threshold,
        scale=min(1.0, window / REFERENCE_WINDOW),
        i_am_here=caps[0],
        goals=caps[1],
        key_decisions=caps[2],
        lessons=caps[3],
        memo_per_message=_scaled(MEMO_PER_MESSAGE, window, MIN_MEMO_MESSAGE),
        memo_total=_scaled(MEMO_TOTAL, window, MIN_MEMO_TOTAL),
        skill_each=min(SKILL_EACH, skills_total),
        skills_total=skills_total,
        skills_max_count=SKILLS_MAX_COUNT,
        recent_messages=min(RECENT_MESSAGES, threshold // 4),
    )


def recollection_floor(budgets: Budgets) -> int:
    """The most a recollection's mind and memo take (their caps together): what a checkpoint's
    recollection is counted as before it is made."""
    return sum(budgets.mind_caps.values()) + budgets.memo_total


def lasting(budgets: Budgets, fixed: int) -> Budgets:
    """The budgets with the recent messages cut so that the request after the checkpoint - `fixed`
    tokens that a checkpoint does not move (system prompt, tool list, recollection) and the recent
    messages - stays under LASTING_SHARE of the threshold (V8). On a large window nothing changes (the
    recent messages' own cap decides); on a small one fewer recent messages stay, none where the fixed
    parts take the share alone (the newest step and the current turn's messages stay anyway, F5)."""
    room = int(budgets.threshold * LASTING_SHARE) - fixed
    return replace(budgets, recent_messages=max(0, min(budgets.recent_messages, room)))
