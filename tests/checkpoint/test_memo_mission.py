"""The mission's source stays in the user's own words (M4, N1; the eval's 1.5B tier, docs/eval.md).

The mission entry in the mind is the model's words (M4). On the embedded 1.5B the eval's late_rule and
talkative_user lost "mission byte-identical": the model wrote the mission well, in its own words, and ticked
other messages, so the user's own statement of it left the context (the 0.5B's missions were echoes, and
the harness quoted the record instead). Now the harness keeps, besides the ticks, the user's sentence that
an active mission entry says - matched by content words, copied from the record like any tick - and a
model that ticks nothing, or lets it go at the next checkpoint, cannot lose it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import pytest
from core_doubles import (
    CharCounter,
    make_entry,
    structured_turn_outcome,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from avibe.checkpoint.budgets import budgets_for
from avibe.checkpoint.memo import (
    build_memo,
    clean_labels,
    memo_candidates,
    mission_sources,
    rules_kept,
)
from avibe.checkpoint.mind import active_missions
from avibe.checkpoint.model import MemoItem
from avibe.checkpoint.turn import Accepted
from avibe.evals.generators import BRIEF, CHATTER
from avibe.record.entries import Entry

COUNTER = CharCounter()
SMALL = replace(
    budgets_for(8_192, 6_000), memo_per_message=60, memo_total=240
)  # 60 tokens a message, 240 in all
GOAL = "Our goal for this whole session: work through the 9 tickets in tickets/ for Oakhaven, oldest first."
PARAPHRASE = "Work through the nine Oakhaven tickets in tickets/, oldest first"
MIND = (
    "## I am here\n\n## Goals\n### Mission\n"
    f"- [M1] (active) {PARAPHRASE}\n- [M0] (done) Set up the Oakhaven repository\n"
    "### Workstreams\n\n## Key decisions\n\n## Lessons\n"
)
CHAT = [t.format(path="src/app.py", func="load") for t in CHATTER]


def _candidates(entries: Sequence[Entry], previous: Sequence[MemoItem] = ()) -> list[Any]:
    by_seq = {e.seq: e for e in entries}
    return memo_candidates(
        entries, previous, frozenset(), counter=COUNTER, per_message=SMALL.memo_per_message, entries=by_seq
    )


def _sources(missions: list[str], entries: Sequence[Entry]) -> list[Any]:
    by_seq = {e.seq: e for e in entries}
    return mission_sources(missions, _candidates(entries), by_seq, COUNTER, SMALL.memo_per_message)


def test_active_missions_are_the_texts_of_the_active_entries() -> None:
    assert active_missions(MIND) == [PARAPHRASE]


def test_M4_the_users_sentence_a_mission_says_is_its_source() -> None:
    entries = [make_entry(3, CHAT[0]), make_entry(4, GOAL), make_entry(5, CHAT[1])]
    assert _sources([PARAPHRASE], entries) == [4]


def test_M4_a_mission_in_a_long_message_points_at_its_sentence_when_the_cut_loses_it() -> None:
    long = " ".join([*BRIEF[:6], GOAL])  # the goal at the end, past what the whole item keeps
    [source] = _sources([PARAPHRASE], [make_entry(7, long)])
    assert source == "7." + str(len(BRIEF[:6]) + 1)


def test_M4_a_mission_written_from_several_sentences_finds_the_one_that_set_the_goal() -> None:
    """The 1.5B's mission in the eval's late_rule (the run that still lost "mission byte-identical"): it
    says the goal and the per-ticket process together, so it shares only a third of its words with the
    goal sentence, and more with the process sentence after it. The earliest sentence that says enough
    of it - the goal, stated first - is the source."""
    message = " ".join(
        [
            GOAL,
            "When a ticket is unclear, make the smallest change that satisfies it and say what you assumed.",
            "For each ticket, read it first, make the change it asks for, and add one line to CHANGELOG.md.",
            "Never modify anything under third_party/.",
        ]
    )
    mission = (
        "The user is working through the 9 tickets in the Oakhaven repository, reading each ticket "
        "first, making the changes required, and adding a line to the CHANGELOG.md after each ticket. "
        "The user is also"
    )
    entries = [make_entry(1, message)]
    [source] = _sources([mission], entries)
    by_seq = {e.seq: e for e in entries}
    memo = build_memo({source}, by_seq, COUNTER, SMALL).items
    assert any(GOAL in item.text for item in memo)


def test_M4_a_second_mission_finds_its_own_source_not_the_firsts() -> None:
    change = "New goal: before the tickets, migrate the Oakhaven CI to the new runners this week."
    entries = [make_entry(4, GOAL), make_entry(9, change)]
    second = "Migrate the Oakhaven CI to the new runners"
    assert _sources([PARAPHRASE, second], entries) == [4, 9]


@pytest.mark.parametrize(
    "mission",
    [
        f'the user\'s message #4: "{GOAL}"',  # quoted from the record already (ensure_mission)
        "Speed up the nightly build",  # says something else
        "tickets",  # too few words to say anything
    ],
)
def test_M4_no_source_for_a_quoted_an_unrelated_or_an_empty_mission(mission: str) -> None:
    assert _sources([mission], [make_entry(3, CHAT[0]), make_entry(4, GOAL)]) == []


def test_N7_a_watch_saying_the_goal_is_never_the_source() -> None:
    watch = make_entry(4, GOAL, kind="watch")
    assert _sources([PARAPHRASE], [make_entry(3, CHAT[0]), watch]) == []


def _turn(entries: Sequence[Entry], keep: Callable[[list[Any]], list[Any]]) -> Any:
    return structured_turn_outcome(entries, keep, MIND, SMALL)


@pytest.mark.parametrize(
    "keep",
    [lambda enum: [], lambda enum: [enum[-1]], lambda enum: list(enum)],
    ids=["nothing", "chatter", "everything"],
)
def test_M4_the_structured_turn_keeps_the_missions_source_whatever_the_model_ticks(
    keep: Callable[[list[Any]], list[Any]],
) -> None:
    entries = [
        make_entry(3, CHAT[0]),
        make_entry(4, GOAL),
        *(make_entry(s, CHAT[s % 5]) for s in range(5, 30)),
    ]
    outcome = _turn(entries, keep)
    assert isinstance(outcome, Accepted), getattr(outcome, "problems", None)
    assert MemoItem(4, GOAL) in outcome.checkpoint.memo
    assert 4 not in outcome.dismissed_seqs
    if keep([4]) != [4]:  # the model left it out: the harness says it kept it
        assert any("the mission's source" in note for note in outcome.notes), outcome.notes


def _checkpoint(
    moved: Sequence[Entry], record: Sequence[Entry], previous: Sequence[MemoItem], picks: list[int]
) -> tuple[MemoItem, ...]:
    """One checkpoint's memo as the harness builds it from a model's (random) ticks; the previous memo's
    entries are looked up in the record, as the turn's inputs carry them (memo_entries)."""
    held = {item.seq for item in previous}
    entries = {e.seq: e for e in record if e.seq in held} | {e.seq: e for e in moved}
    candidates = memo_candidates(
        moved, previous, frozenset(), counter=COUNTER, per_message=SMALL.memo_per_message, entries=entries
    )
    ticked = {candidates[i % len(candidates)].label for i in picks} if candidates else set()
    first = mission_sources(active_missions(MIND), candidates, entries, COUNTER, SMALL.memo_per_message)
    kept = rules_kept(candidates, ticked, entries, COUNTER, SMALL, previous, first=first)
    labels = (clean_labels(ticked) - set(kept.let_go)) | set(kept.added)
    return build_memo(labels, entries, COUNTER, SMALL, previous).items


@given(
    before=st.lists(st.sampled_from(CHAT), max_size=6),
    after=st.lists(st.sampled_from(CHAT), min_size=1, max_size=30),
    picks=st.tuples(st.lists(st.integers(0, 99), max_size=40), st.lists(st.integers(0, 99), max_size=40)),
)
@settings(max_examples=200, deadline=None)
def test_M4_through_two_checkpoints_the_missions_source_stays_whatever_the_model_ticks(
    before: list[str], after: list[str], picks: tuple[list[int], list[int]]
) -> None:
    texts = [*before, GOAL, *after]
    entries = [make_entry(seq, text) for seq, text in enumerate(texts, 1)]
    goal = len(before) + 1
    cut = goal + len(after) // 2
    memo = _checkpoint(entries[:cut], entries, (), picks[0])
    assert MemoItem(goal, GOAL) in memo
    memo = _checkpoint(
        entries[cut:], entries, memo, picks[1]
    )  # the goal is now a kept line the model may untick
    assert MemoItem(goal, GOAL) in memo
