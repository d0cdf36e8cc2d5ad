"""When to checkpoint (SPEC F1)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from avibe.checkpoint.trigger import should_checkpoint, threshold_for
from avibe.record.messages import ModelFacts


@pytest.mark.parametrize(
    ("facts", "threshold", "reason"),
    [
        (ModelFacts("big", 200_000, 8_000), 180_000, "90% of window"),
        (ModelFacts("reserve", 128_000, 32_000), 128_000 - 32_000 - 2_560, "reply reserve + margin"),
        (ModelFacts("tiered", 1_000_000, 32_000, price_tier_at=200_000), 200_000, "price tier at 200000"),
        # max_output == window would leave nothing: the reserve counts for at most a quarter of the window
        (ModelFacts("small", 8_000, 8_000), 8_000 - 2_000 - 1_024, "reply reserve + margin"),
        (ModelFacts("tier-above", 100_000, 1_000, price_tier_at=500_000), 90_000, "90% of window"),
    ],
)
def test_F1_threshold_is_the_smallest_limit_and_names_it(
    facts: ModelFacts, threshold: int, reason: str
) -> None:
    assert threshold_for(facts) == threshold
    decision = should_checkpoint(threshold, facts)
    assert (decision.checkpoint, decision.threshold, decision.reason) == (False, threshold, reason)
    assert should_checkpoint(threshold + 1, facts).checkpoint


def test_F1_explicit_reserve_and_margin_override_the_defaults() -> None:
    facts = ModelFacts("m", 100_000, 4_000)
    decision = should_checkpoint(80_000, facts, reply_reserve=20_000, safety_margin=5_000)
    assert (decision.threshold, decision.reason, decision.checkpoint) == (
        75_000,
        "reply reserve + margin",
        True,
    )
    assert decision.request_tokens == 80_000


@pytest.mark.parametrize(
    ("facts", "match"),
    [
        (ModelFacts("zero", 0, 0), "window must be positive"),
        (ModelFacts("tier", 10_000, 100, price_tier_at=0), "price_tier_at must be positive"),
        (ModelFacts("tiny", 1_000, 100), "leaves no room"),
    ],
)
def test_F1_impossible_model_facts_are_a_clear_error(facts: ModelFacts, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        threshold_for(facts)


def test_F1_negative_reserve_is_refused() -> None:
    with pytest.raises(ValueError, match="must not be negative"):
        threshold_for(ModelFacts("m", 100_000, 1_000), reply_reserve=-1)


@settings(deadline=None)  # a busy machine is no failure
@given(
    window=st.integers(min_value=8_000, max_value=2_000_000),
    max_output=st.integers(min_value=0, max_value=2_000_000),
    tier=st.none() | st.integers(min_value=1, max_value=3_000_000),
    tokens=st.integers(min_value=0, max_value=3_000_000),
)
def test_F1_threshold_never_passes_any_limit(
    window: int, max_output: int, tier: int | None, tokens: int
) -> None:
    facts = ModelFacts("m", window, max_output, price_tier_at=tier)
    decision = should_checkpoint(tokens, facts)
    assert 0 < decision.threshold <= window * 0.9
    assert decision.threshold <= window - min(max_output, window // 4) - max(1_024, window // 50)
    assert tier is None or decision.threshold <= tier
    assert decision.checkpoint == (tokens > decision.threshold)
    assert decision.reason in {"90% of window", "reply reserve + margin", f"price tier at {tier}"}
