"""Model facts (SPEC F1): window, output reserve, prices and where the price rises."""

from __future__ import annotations

import pytest

from avibe.errors import ModelUnavailable
from avibe.providers.embedded import N_CTX
from avibe.providers.facts import PRICE_TIER_OVERRIDES, WELL_KNOWN, model_facts, model_map


def test_F1_gemini_pro_tier_comes_from_litellms_map() -> None:
    facts = model_facts("gemini/gemini-2.5-pro")
    assert facts.window == 1_048_576
    assert facts.price_tier_at == 200_000
    assert facts.input_price is not None and facts.input_price > 0


def test_F1_claude_sonnet_tier_comes_from_the_override_table() -> None:
    entry = model_map()["claude-sonnet-4-5"]
    assert not any("above_200k" in key and key.startswith("input_cost") for key in entry)  # why the override
    assert (
        model_facts("anthropic/claude-sonnet-4-5").price_tier_at == PRICE_TIER_OVERRIDES["claude-sonnet-4-5"]
    )


def test_F1_untiered_model_has_no_tier() -> None:
    facts = model_facts("openai/gpt-4o")
    assert (facts.window, facts.price_tier_at) == (128_000, None)
    assert facts.max_output == 16_384


def test_embedded_facts_are_its_context_size() -> None:
    assert model_facts("embedded").window == N_CTX
    assert model_facts("local:/models/any.gguf").window == N_CTX


@pytest.mark.parametrize("name", ["nope/model-x", "openai/claude-sonnet-4-5", "gpt-9-imaginary"])
def test_unknown_model_names_what_to_do(name: str) -> None:
    with pytest.raises(ModelUnavailable, match="vibe models"):
        model_facts(name)


def test_well_known_names_resolve() -> None:
    assert all(model_facts(name).window > 0 for name in WELL_KNOWN)
