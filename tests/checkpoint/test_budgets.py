"""Budgets scaled by the model's window (SPEC M6, N5, A1, F4)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from avibe.checkpoint import budgets as b
from avibe.checkpoint.budgets import LASTING_SHARE, Budgets, budgets_for, lasting
from avibe.checkpoint.model import MIND_SECTIONS
from avibe.checkpoint.trigger import threshold_for
from avibe.record.messages import ModelFacts


def _mind(budgets: Budgets) -> tuple[int, int, int, int]:
    return budgets.i_am_here, budgets.goals, budgets.key_decisions, budgets.lessons


@pytest.mark.parametrize("window", [192_000, 200_000, 1_000_000, 2_000_000])
def test_M6_N5_stated_caps_at_and_above_192k(window: int) -> None:
    budgets = budgets_for(window, 150_000)
    assert _mind(budgets) == (1_000, 2_000, 1_500, 1_500)
    assert (budgets.memo_per_message, budgets.memo_total) == (300, 3_000)
    assert budgets.scale == 1.0


@pytest.mark.parametrize(
    ("window", "mind", "memo"),
    [
        (96_000, (500, 1_000, 750, 750), (150, 1_500)),
        (128_000, (666, 1_333, 1_000, 1_000), (200, 2_000)),
        (64_000, (333, 666, 500, 500), (150, 1_000)),  # memo per message at its floor
        (32_000, (166, 333, 250, 250), (150, 500)),
        (8_000, (100, 100, 100, 100), (150, 450)),  # every floor
    ],
)
def test_M6_N5_caps_scale_in_proportion_below_192k(
    window: int, mind: tuple[int, ...], memo: tuple[int, int]
) -> None:
    budgets = budgets_for(window, window // 2)
    assert _mind(budgets) == mind
    assert (budgets.memo_per_message, budgets.memo_total) == memo


def test_M6_mind_caps_by_section_name() -> None:
    budgets = budgets_for(192_000, 170_000)
    assert list(budgets.mind_caps) == list(MIND_SECTIONS)
    assert budgets.mind_cap("Goals") == 2_000
    with pytest.raises(KeyError):
        budgets.mind_cap("Notes")


@pytest.mark.parametrize(
    ("window", "total", "each"),
    [(2_000_000, 25_000, 5_000), (250_000, 25_000, 5_000), (100_000, 10_000, 5_000), (32_000, 3_200, 3_200)],
)
def test_A1_skills_together_at_most_min_25k_and_a_tenth_of_the_window(
    window: int, total: int, each: int
) -> None:
    budgets = budgets_for(window, window // 2)
    assert (budgets.skills_total, budgets.skill_each, budgets.skills_max_count) == (total, each, 20)


@pytest.mark.parametrize(("threshold", "recent"), [(172_800, 20_000), (80_000, 20_000), (40_000, 10_000)])
def test_F4_recent_messages_at_most_20k_or_a_quarter_of_the_threshold(threshold: int, recent: int) -> None:
    assert budgets_for(192_000, threshold).recent_messages == recent


@pytest.mark.parametrize(("window", "threshold"), [(0, 10), (-5, 10), (8_000, 0)])
def test_M6_rejects_non_positive_sizes(window: int, threshold: int) -> None:
    with pytest.raises(ValueError, match="positive"):
        budgets_for(window, threshold)


@settings(deadline=None)  # a busy machine is no failure
@given(
    window=st.integers(min_value=8_000, max_value=2_000_000),
    reserve_share=st.floats(min_value=0.0, max_value=1.0),
)
def test_M6_N5_A1_F4_every_budget_holds_for_windows_8k_to_2M(window: int, reserve_share: float) -> None:
    facts = ModelFacts(name="m", window=window, max_output=int(window * reserve_share))
    threshold = threshold_for(facts)
    budgets = budgets_for(window, threshold)
    stated = (*b.MIND_CAPS.values(), b.MEMO_PER_MESSAGE, b.MEMO_TOTAL)
    floors = (*[b.MIN_SECTION] * 4, b.MIN_MEMO_MESSAGE, b.MIN_MEMO_TOTAL)
    scaled = (*_mind(budgets), budgets.memo_per_message, budgets.memo_total)
    for cap, floor, value in zip(stated, floors, scaled, strict=True):
        assert floor <= value <= cap
        assert value == cap if window >= 192_000 else value <= max(floor, cap * window // 192_000)
    assert budgets.memo_per_message <= budgets.memo_total
    assert budgets.skills_total <= min(25_000, window // 10)
    assert budgets.skill_each <= min(5_000, budgets.skills_total)
    assert budgets.skills_max_count == 20
    assert budgets.recent_messages <= min(20_000, threshold // 4)
    carried = sum(scaled[:4]) + budgets.memo_total + budgets.skills_total + budgets.recent_messages
    assert carried < threshold  # everything a checkpoint carries fits under the threshold


@settings(deadline=None)  # a busy machine is no failure
@given(st.integers(min_value=8_000, max_value=2_000_000), st.integers(min_value=8_000, max_value=2_000_000))
def test_M6_budgets_never_shrink_as_the_window_grows(w1: int, w2: int) -> None:
    small, large = budgets_for(min(w1, w2), 4_000), budgets_for(max(w1, w2), 4_000)
    assert all(s <= g for s, g in zip(_mind(small), _mind(large), strict=True))
    assert small.memo_total <= large.memo_total and small.skills_total <= large.skills_total


@pytest.mark.parametrize("share", [0.9, 0.7])
def test_N5_a_small_window_keeps_a_users_message_of_a_hundred_tokens_whole(share: float) -> None:
    """At 4,096 tokens budgets of 60 a message cut a real user's first message, a list of four rules in
    110 tokens, after its first rule; the floors keep such a message whole, and three of them."""
    budgets = budgets_for(4_096, int(4_096 * share))
    assert budgets.memo_per_message >= 150
    assert budgets.memo_total >= 3 * budgets.memo_per_message


def _spec_table() -> list[list[str]]:
    """The rows of docs/spec.md's small-window table (M6, N5), as cell texts."""
    spec = Path(__file__).resolve().parents[2] / "docs" / "spec.md"
    text = spec.read_text(encoding="utf-8").split("**Small windows: the floors (M6, N5).**")[1]
    rows = [line for line in text.splitlines() if line.startswith("| ") and line[2].isdigit()]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows]


def test_M6_N5_the_spec_s_small_window_table_is_what_budgets_for_gives() -> None:
    """The spec states the floors with numbers; they must be the code's, budget and proportion alike."""
    rows = _spec_table()
    assert len(rows) == 5
    for row in rows:
        window = int(row[0].split()[0].replace(",", ""))
        budgets = budgets_for(window, window * 3 // 4)
        used = (budgets.i_am_here, budgets.goals, budgets.key_decisions, budgets.memo_per_message,
                budgets.memo_total)  # fmt: skip
        stated = (1_000, 2_000, 1_500, 300, 3_000)
        for cell, value, cap in zip(row[1:], used, stated, strict=True):
            proportional = cap * window // b.REFERENCE_WINDOW
            expected = f"{value:,}" + (f" ({proportional:,})" if value != min(cap, proportional) else "")
            assert cell == expected, (window, row)


@given(window=st.integers(1_000, 400_000), share=st.floats(0.3, 0.9), fixed=st.integers(0, 300_000))
def test_V8_lasting_keeps_the_recent_messages_within_what_leaves_the_request_at_the_share(
    window: int, share: float, fixed: int
) -> None:
    """After a checkpoint the fixed parts and the recent messages kept stay under LASTING_SHARE of the
    threshold where they can; the recent messages never grow, never go negative, and only they change."""
    budgets = budgets_for(window, max(1, int(window * share)))
    made = lasting(budgets, fixed)
    assert 0 <= made.recent_messages <= budgets.recent_messages
    assert fixed + made.recent_messages <= max(fixed, int(budgets.threshold * LASTING_SHARE))
    assert replace(made, recent_messages=budgets.recent_messages) == budgets


def test_V8_lasting_keeps_fewer_recent_messages_on_the_demos_window_and_the_same_on_a_large_one() -> None:
    small = budgets_for(6_144, 3_584)  # the demo: system prompt ~1,700 tokens, recollection ~850
    assert lasting(small, 1_700).recent_messages == int(3_584 * LASTING_SHARE) - 1_700 < small.recent_messages
    assert lasting(small, 2_600).recent_messages == 0
    large = budgets_for(200_000, 180_000)
    assert lasting(large, 12_000) == large
