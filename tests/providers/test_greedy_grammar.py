"""Greedy decoding that asks the grammar about the best token first chooses the tokens llama.cpp's own
grammar sampler chooses, on the real embedded model; an error inside it (called from C) is raised, never
dropped with the step left unconstrained."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from llama_cpp import LogitsProcessorList

from avibe.errors import BadResponse
from avibe.ports import CompletionRequest
from avibe.providers import greedy_grammar
from avibe.providers.embedded import STRUCTURED_FREQUENCY_PENALTY, EmbeddedModel
from avibe.providers.greedy_grammar import GreedyGrammar
from avibe.record.messages import ChatMessage, ToolSpec

pytestmark = pytest.mark.embedded

SHELL = ToolSpec(
    "shell",
    "Run a shell command.",
    {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
)
KEEP = {  # a memo question's shape: numbers from an enum, a bounded list
    "type": "object",
    "properties": {"keep": {"type": "array", "items": {"enum": [3, 7, 12, 15]}, "maxItems": 4}},
    "required": ["keep"],
}
SCENE = {  # a scene question's shape: bounded free text
    "type": "object",
    "properties": {
        "doing": {"type": "string", "maxLength": 200},
        "next": {"type": "string", "maxLength": 200},
    },
    "required": ["doing", "next"],
}
ASKS: list[tuple[str, Sequence[ToolSpec], Mapping[str, Any] | None]] = [
    ("Messages: #3 never push to main. #7 ok thanks. #12 use tabs. #15 nice. Which state a rule?", (), KEEP),
    ("We are migrating a Django app off SQLite. Say what you are doing and what comes next.", (), SCENE),
    ("List the files in the current folder.", (SHELL,), None),
]


def _reference(model: EmbeddedModel, tokens: list[int], grammar: Any, penalty: float) -> str:
    """What llama.cpp's own sampler chain writes, the grammar in it (the whole vocabulary checked)."""
    model.llama.reset()
    out = model.llama.create_completion(
        tokens, max_tokens=80, temperature=0.0, frequency_penalty=penalty, grammar=grammar
    )
    return str(out["choices"][0]["text"])


def _greedy(
    model: EmbeddedModel, tokens: list[int], grammar: Any, penalty: float, max_tokens: int
) -> tuple[Any, GreedyGrammar]:
    """The completion with `GreedyGrammar` as its logits processor, the prompt read from scratch (a
    replayed cache's logits differ slightly from a fresh read's, so both paths start alike)."""
    model.llama.reset()
    greedy = GreedyGrammar(model.llama, grammar, len(tokens), penalty)
    try:
        out = model.llama.create_completion(
            tokens, max_tokens=max_tokens, temperature=0.0, logits_processor=LogitsProcessorList([greedy])
        )
    finally:
        greedy.close()
    return out, greedy


@pytest.mark.parametrize(("ask", "tools", "schema"), ASKS)
def test_the_same_tokens_as_llama_cpps_grammar_sampler(
    embedded_model: EmbeddedModel, ask: str, tools: Sequence[ToolSpec], schema: Mapping[str, Any] | None
) -> None:
    messages = [ChatMessage("user", ask)]
    tokens = embedded_model._renderer.request_tokens(messages, tools, schema)
    grammar = embedded_model._grammar_for(tools, schema)
    penalty = STRUCTURED_FREQUENCY_PENALTY if schema is not None else 0.0
    out, greedy = _greedy(embedded_model, tokens, grammar, penalty, 80)
    greedy.raise_if_failed()
    text = str(out["choices"][0]["text"])
    assert text == _reference(embedded_model, tokens, grammar, penalty)
    assert greedy.steps >= out["usage"]["completion_tokens"] > 0
    assert greedy.full_checks < greedy.steps  # the best token was mostly allowed: the whole point
    if schema is not None:
        assert set(json.loads(text)) == set(schema["properties"])
    # and the model's own path (complete) takes this route and gives the same answer
    embedded_model.llama.reset()
    reply = embedded_model.complete(CompletionRequest(messages, tools, json_schema=schema, max_tokens=80))
    assert reply.usage.completion_tokens == out["usage"]["completion_tokens"]


def test_a_refused_best_token_falls_back_to_the_whole_vocabulary(embedded_model: EmbeddedModel) -> None:
    """Free, the 0.5B opens a JSON object with a newline; the grammar wants `{"` - so the check of the
    whole vocabulary runs, and still the same text as llama.cpp's sampler results."""
    tokens = embedded_model.llama.tokenize(
        b"<|im_start|>user\nReply in pretty-printed JSON with keys doing and next.<|im_end|>\n"
        b"<|im_start|>assistant\n",
        special=True,
    )
    grammar = embedded_model._grammar_for((), SCENE)
    out, greedy = _greedy(embedded_model, tokens, grammar, STRUCTURED_FREQUENCY_PENALTY, 60)
    assert greedy.full_checks >= 1
    expected = _reference(embedded_model, tokens, grammar, STRUCTURED_FREQUENCY_PENALTY)
    assert out["choices"][0]["text"] == expected


def test_an_error_inside_the_check_is_raised_not_dropped(
    embedded_model: EmbeddedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: GreedyGrammar, input_ids: Any, scores: Any) -> int:
        raise RuntimeError("boom")

    monkeypatch.setattr(greedy_grammar.GreedyGrammar, "_choose", broken)
    with pytest.raises(BadResponse, match="grammar check failed during generation: boom"):
        embedded_model.complete(
            CompletionRequest([ChatMessage("user", "Which messages state a rule?")], json_schema=KEEP)
        )
