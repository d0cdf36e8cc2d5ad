"""Stop means stop (docs/chat.md): a streamed call on the embedded model reads its prompt in slices and
passes an empty piece to `on_text` before each, so the caller can stop it there (the chat raises on
Ctrl-C) instead of waiting for llama.cpp to read the whole prompt - 108 s for a long one on 2 cores. The
slices read stay in the KV cache: the next call goes on from them (reading a whole long prompt on
busy shared cores took minutes, so the test never does). The real 0.5B model; no timing is
asserted, only where in the prompt the caller got its chance and what was evaluated by then."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from avibe.ports import CompletionRequest
from avibe.providers.embedded import MAX_SLICE, MIN_SLICE, EmbeddedModel, next_slice
from avibe.record.messages import ChatMessage


class Stop(Exception):
    pass


@given(st.integers(1, 4096), st.floats(0, 60, allow_nan=False))
def test_a_slice_stays_within_its_bounds_and_at_most_doubles(size: int, took: float) -> None:
    following = next_slice(size, took)
    assert MIN_SLICE <= following <= MAX_SLICE
    assert following <= max(MIN_SLICE, 2 * size)


def test_slow_reading_shrinks_the_slice() -> None:
    assert next_slice(256, 2.0) < 256 and next_slice(32, 0.01) == 64


def _long_prompt() -> list[ChatMessage]:
    lines = "\n".join(f"line {i}: service-{i % 7} build {i} FAILED at step {i % 13}" for i in range(300))
    return [
        ChatMessage(role="system", content="You are a careful assistant."),
        ChatMessage(role="user", content=f"Here is a log:\n{lines}\nHow many builds failed?"),
    ]


@pytest.mark.embedded
def test_a_long_prompt_can_be_stopped_while_it_is_read(embedded_model: EmbeddedModel) -> None:
    llama = embedded_model.llama
    llama.reset()  # nothing of this prompt in the cache
    messages = _long_prompt()
    total = embedded_model.counter.count_messages(messages)
    assert total > 3000
    seen: list[int] = []

    def stop_at_the_third(piece: str) -> None:
        seen.append(llama.n_tokens)
        assert piece == ""  # nothing is shown while the prompt is read
        if len(seen) == 3:
            raise Stop

    with pytest.raises(Stop):
        embedded_model.complete(CompletionRequest(messages, on_text=stop_at_the_third, max_tokens=8))
    assert seen[0] == 0 and 0 < seen[1] < seen[2] < total // 2, seen  # stopped long before the end
    assert llama.n_tokens == seen[2]  # nothing read after the stop

    again: list[int] = []

    def stop_at_once(piece: str) -> None:
        again.append(llama.n_tokens)
        raise Stop

    with pytest.raises(Stop):  # the same prompt again: it goes on from the slices read, not from 0
        embedded_model.complete(CompletionRequest(messages, on_text=stop_at_once, max_tokens=8))
    assert again == [seen[2]]
