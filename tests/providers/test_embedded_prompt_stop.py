"""Stop means stop (docs/chat.md): a streamed call on the embedded model reads its prompt in slices and
passes an empty piece to `on_text` before each, so the caller can stop it there (the chat raises on
Ctrl-C) instead of waiting for llama.cpp to read the whole prompt - 108 s for a long one on 2 cores. The
slices read stay in the KV cache: the next call goes on from them (reading a whole long prompt on
busy shared cores took minutes, so the test never does). The real 0.5B model; no timing is
asserted, only where in the prompt the caller got its chance and what was evaluated by then."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from avibe.ports import CompletionRequest
from avibe.providers.embedded import MAX_SLICE, MIN_SLICE, EmbeddedModel, next_slice
from avibe.providers.llama_abort import AbortWatch
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


def _long_prompt(count: int = 300) -> list[ChatMessage]:
    lines = "\n".join(f"line {i}: service-{i % 7} build {i} FAILED at step {i % 13}" for i in range(count))
    return [
        ChatMessage(role="system", content="You are a careful assistant."),
        ChatMessage(role="user", content=f"Here is a log:\n{lines}\nHow many builds failed?"),
    ]


class Evaluations:
    """Marks when llama.cpp evaluates (`Llama.eval` wrapped on the instance), so a test can tell the
    chances it gets between slices from those the abort callback gives inside one."""

    def __init__(self, llama: Any) -> None:
        self.llama, self.inside, self.original = llama, False, llama.eval
        llama.eval = self._eval

    def _eval(self, tokens: Any) -> None:
        self.inside = True
        try:
            self.original(tokens)
        finally:
            self.inside = False

    def close(self) -> None:
        del self.llama.eval  # the class's method again


@pytest.fixture
def evaluations(embedded_model: EmbeddedModel) -> Iterator[Evaluations]:
    watch = Evaluations(embedded_model.llama)
    yield watch
    watch.close()


@pytest.mark.embedded
def test_a_long_prompt_can_be_stopped_between_slices(
    embedded_model: EmbeddedModel, evaluations: Evaluations
) -> None:
    llama = embedded_model.llama
    llama.reset()  # nothing of this prompt in the cache
    messages = _long_prompt()
    total = embedded_model.counter.count_messages(messages)
    assert total > 3000
    seen: list[int] = []

    def stop_at_the_third(piece: str) -> None:
        assert piece == ""  # nothing is shown while the prompt is read
        if not evaluations.inside:
            seen.append(llama.n_tokens)
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


@pytest.mark.embedded
def test_a_stop_lands_inside_a_slice_and_the_cache_stays_right(
    embedded_model: EmbeddedModel, evaluations: Evaluations
) -> None:
    """llama.cpp's abort callback asks the caller while a slice is evaluated: the stop lands there, the
    aborted slice is not counted, and the next call reads on from the last whole slice to the same answer
    a model with an empty cache gives."""
    llama = embedded_model.llama
    messages = _long_prompt(60)
    llama.reset()
    fresh = embedded_model.complete(CompletionRequest(messages, max_tokens=12)).text
    llama.reset()
    at: list[int] = []
    slices: list[int] = []

    def stop_inside_the_third_slice(piece: str) -> None:
        if not evaluations.inside:
            slices.append(llama.n_tokens)
        elif len(slices) == 3:
            at.append(llama.n_tokens)
            raise Stop

    with pytest.raises(Stop):
        embedded_model.complete(
            CompletionRequest(messages, on_text=stop_inside_the_third_slice, max_tokens=8)
        )
    assert at and at[0] == slices[2] == llama.n_tokens > 0  # the aborted slice counts for nothing
    again = embedded_model.complete(CompletionRequest(messages, on_text=lambda piece: None, max_tokens=12))
    assert again.text == fresh  # its cells were removed: the cache holds exactly the slices read


def test_a_stop_asked_inside_llama_cpp_is_kept_and_raised_after_it_returns() -> None:
    """The abort callback runs inside C: what the caller's beat raises (or a Ctrl-C's KeyboardInterrupt
    arriving there) cannot cross it, so it answers "abort" and keeps the exception for after."""
    calls: list[int] = []

    def beat() -> None:
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt

    watch = AbortWatch(object(), beat)  # no llama context: the callback is asked by hand, as C would
    watch._last = -1e9
    assert watch._asked(None) is False  # the caller let it go on
    assert watch._asked(None) is False  # asked again within CHECK_S: the caller is not bothered
    watch._last = -1e9
    assert watch._asked(None) is True and watch._asked(None) is True  # stopped, and stays stopped
    with pytest.raises(KeyboardInterrupt):
        watch.raise_stopped()
    watch.raise_stopped()  # raised once only
