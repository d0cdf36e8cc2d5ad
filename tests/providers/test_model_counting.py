"""Token counting for hosted models (DESIGN: budgets in model tokens, calibrated by reported usage)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st
from provider_support import FIXTURES

from avibe.providers.counting import CalibratedCounter, TiktokenCounter, encoding_for, hosted_counter
from avibe.record.messages import ChatMessage


def _corpus() -> list[tuple[list[ChatMessage], int]]:
    data = json.loads((FIXTURES / "usage_corpus.json").read_text(encoding="utf-8"))
    return [
        ([ChatMessage(m["role"], m["content"]) for m in i["messages"]], i["prompt_tokens"])
        for i in data["items"]
    ]


class Scaled:
    """An estimator that is off by a known factor (a stand-in for a tokenizer that fits a provider badly)."""

    def __init__(self, inner: TiktokenCounter, factor: float) -> None:
        self.inner, self.factor = inner, factor

    def count(self, text: str) -> int:
        return round(self.inner.count(text) * self.factor)

    def count_messages(self, messages: Sequence[ChatMessage]) -> int:
        return round(self.inner.count_messages(messages) * self.factor)


def test_bundled_encodings_load_without_network() -> None:
    counter = TiktokenCounter("o200k_base")
    assert counter.count("hello world") == 2
    assert "litellm" in os.environ["TIKTOKEN_CACHE_DIR"]
    assert encoding_for("openai/gpt-4o") == "o200k_base"
    assert encoding_for("anthropic/claude-sonnet-4-5") == "cl100k_base"


@pytest.mark.parametrize("bias", [1.0, 0.6, 1.7])
def test_calibrated_estimates_within_10_percent_of_recorded_usage(bias: float) -> None:
    """Calibrate on the first three chats, then every later estimate is within 10% of the usage recorded
    for it (see the corpus's `source`: llama.cpp's prompt counts, a tokenizer unlike the estimator)."""
    corpus = _corpus()
    counter = CalibratedCounter(Scaled(TiktokenCounter("cl100k_base"), bias))
    for messages, reported in corpus[:3]:
        counter.observe(messages, reported)
    for messages, reported in corpus[3:]:
        estimate = counter.count_messages(messages)
        assert abs(estimate - reported) <= 0.1 * reported, (estimate, reported)
        counter.observe(messages, reported)


@given(
    truth=st.floats(min_value=0.55, max_value=1.8),
    noise=st.lists(st.floats(min_value=-0.04, max_value=0.04), min_size=3, max_size=12),
)
def test_calibration_converges_and_stays_bounded(truth: float, noise: list[float]) -> None:
    """Whatever the true ratio (within the bounds) and a few % noise per reply, after three replies the
    factor is within 10% of the truth; it never leaves [low, high]."""
    counter = CalibratedCounter(Scaled(TiktokenCounter("cl100k_base"), 1.0))
    messages = [ChatMessage("user", "calibrate me " * 20)]
    estimate = TiktokenCounter("cl100k_base").count_messages(messages)
    for i, jitter in enumerate(noise):
        counter.observe(messages, round(estimate * truth * (1 + jitter)))
        assert 0.5 <= counter.factor <= 2.0
        if i >= 2:
            assert abs(counter.factor - truth) <= 0.1 * truth


def test_absurd_reports_are_bounded() -> None:
    counter = hosted_counter("openai/gpt-4o")
    messages = [ChatMessage("user", "hello " * 50)]
    counter.observe(messages, 10**9)
    assert counter.factor == 2.0
    counter.observe(messages, 0)  # ignored (logged), not a division by zero
    assert counter.observations == 1
