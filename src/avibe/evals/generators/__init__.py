"""Scenario generators: the twelve types of the memory evaluation (docs/eval.md), each from a seed.

Every generator is deterministic for (type, seed, size): names and values come from
`random.Random(f"{type}:{seed}")`. `size` is the number of filler turns; the planted ground truth comes
early so that compactions move it out of the context, and filler (real-looking reads, edits, test runs)
follows so the conversation costs tokens the way work does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from avibe.evals.generators.rules import (
    authorisation_scope,
    constraint_fidelity,
    late_rule,
    revoked_long_ago,
    supersession,
)
from avibe.evals.generators.talk import BRIEF, CHATTER, CHATTER_REPLIES, REPORTING
from avibe.evals.generators.voices import spoofed_user, talkative_user
from avibe.evals.generators.work import mission_fade, pitfalls, queue, self_correction, waiting_on
from avibe.evals.scenario import Scenario

__all__ = [
    "BRIEF",
    "CHATTER",
    "CHATTER_REPLIES",
    "GENERATORS",
    "REPORTING",
    "SCENARIO_TYPES",
    "Generator",
    "generate",
]

Generator = Callable[[int, int], Scenario]
GENERATORS: Final[dict[str, Generator]] = {
    "mission_fade": mission_fade,
    "queue": queue,
    "constraint_fidelity": constraint_fidelity,
    "authorisation_scope": authorisation_scope,
    "spoofed_user": spoofed_user,
    "supersession": supersession,
    "waiting_on": waiting_on,
    "pitfalls": pitfalls,
    "late_rule": late_rule,
    "talkative_user": talkative_user,
    "revoked_long_ago": revoked_long_ago,
    "self_correction": self_correction,
}
SCENARIO_TYPES: Final[tuple[str, ...]] = tuple(GENERATORS)


def generate(kind: str, seed: int, size: int) -> Scenario:
    """The scenario of one type for (seed, size); `size` = number of filler turns (>= 0)."""
    if kind not in GENERATORS:
        raise ValueError(f"unknown scenario type {kind!r}; choose from {', '.join(SCENARIO_TYPES)}")
    if size < 0:
        raise ValueError(f"size must be >= 0, got {size}")
    return GENERATORS[kind](seed, size)
