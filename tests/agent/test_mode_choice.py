"""How the checkpoint turn asks, by model (one decision for `vibe run` and the eval): both embedded tiers in
three calls, the other local models one question a call, hosted models with edit and tick tools."""

from __future__ import annotations

import pytest

from avibe.agent.driver import mode_for
from avibe.evals.checkpoint import mode_for as eval_mode_for


@pytest.mark.parametrize(
    ("name", "mode"),
    [
        ("embedded", "three"),
        ("embedded-1.5b", "three"),
        ("local:/models/other.gguf", "structured"),
        ("anthropic/claude-sonnet-4-5", "tools"),
        ("openai/gpt-4o-mini", "tools"),
    ],
)
def test_each_model_gets_its_checkpoint_mode_in_vibey_and_in_the_eval(name: str, mode: str) -> None:
    assert eval_mode_for(name) == mode
    assert mode_for(name, local=mode != "tools") == mode


def test_a_hosted_model_named_like_a_local_one_is_never_asked_structured_questions() -> None:
    assert mode_for("embedded", local=False) == "tools"
