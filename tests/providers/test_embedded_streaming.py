"""The embedded model streams without ever showing a tool call: `shown_text` is what
may be shown of the grammar's JSON (or of plain text) generated so far, and `_TextFeed` passes its growth
on as llama.cpp generates tokens. Pure functions and a fake tokenizer here; the real model at the end."""

from __future__ import annotations

import itertools
import json
from typing import Any, ClassVar

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from avibe.ports import CompletionRequest
from avibe.providers.embedded import EmbeddedModel, _TextFeed, shown_text
from avibe.record.messages import ChatMessage, ToolSpec

STOPS = ("<|im_end|>",)


def _prefixes(raw: str, **kw: Any) -> list[str]:
    return [shown_text(raw[:i], **kw) for i in range(len(raw) + 1)]


def _grows_into(shown: list[str], final: str) -> None:
    """Each shown text extends the one before and is a prefix of the final text."""
    for before, after in itertools.pairwise(shown):
        assert after.startswith(before), (before, after)
    assert all(final.startswith(text) for text in shown)


@pytest.mark.parametrize(
    "raw",
    [
        '{"answer": "Done: the tests pass."}',
        '{ "answer" :\n  "two\\nlines, a \\"quote\\", a back\\\\slash \\\\u0041 and \\u00e9"\n}',
        '{"answer": "a face \\ud83d\\ude00 split in two escapes"}',
        '{"answer": "raw\nnewline and é, 漢字, 😀 as they are"}',
    ],
)
def test_an_answer_shows_its_decoded_text_and_nothing_of_the_json(raw: str) -> None:
    answer = json.loads(raw, strict=False)["answer"]
    shown = _prefixes(raw, answer_json=True)
    _grows_into(shown, answer)
    assert shown[-1] == answer  # the whole answer once the JSON is complete
    first = next(i for i, text in enumerate(shown) if text)
    assert raw[: first - 1].rstrip().endswith('"') and "answer" in raw[:first]  # nothing before the string
    assert "\\" not in "".join(shown) or "\\" in answer  # no escape shown half-decoded


def test_a_half_escape_and_a_surrogate_half_are_held_back() -> None:
    assert shown_text('{"answer": "line\\', answer_json=True) == "line"
    assert shown_text('{"answer": "line\\u00', answer_json=True) == "line"
    assert shown_text('{"answer": "face \\ud83d', answer_json=True) == "face "
    assert shown_text('{"answer": "face \\ud83d\\ude', answer_json=True) == "face "
    assert shown_text('{"answer": "face \\ud83d\\ude00', answer_json=True) == "face 😀"


@pytest.mark.parametrize(
    "raw",
    [
        '{"tool": "read", "arguments": {"path": "a.txt"}}',
        '{"tool": "shell", "arguments": {"answer": "not an answer", "command": "ls"}}',
        ' {\n"tool":"edit_file","arguments":{"old":"{\\"answer\\": \\"x\\"}"}}',
    ],
)
def test_a_tool_call_is_never_shown(raw: str) -> None:
    assert set(_prefixes(raw, answer_json=True)) == {""}


def test_plain_text_holds_back_what_may_start_a_stop_sequence_until_it_does_not() -> None:
    assert shown_text("Hello <|im_e", answer_json=False, stops=STOPS) == "Hello "
    assert shown_text("Hello <|im_e>", answer_json=False, stops=STOPS) == "Hello <|im_e>"
    assert shown_text("a < b", answer_json=False, stops=STOPS) == "a < b"
    assert shown_text("a <", answer_json=False, stops=STOPS) == "a "
    assert shown_text("a <", answer_json=False) == "a <"


@given(
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=40),
    st.booleans(),
    st.sampled_from(["", " ", "\n  "]),
)
def test_any_answer_streams_into_exactly_itself(answer: str, ascii_only: bool, space: str) -> None:
    raw = f'{{{space}"answer"{space}:{space}{json.dumps(answer, ensure_ascii=ascii_only)}{space}}}'
    shown = _prefixes(raw, answer_json=True)
    _grows_into(shown, answer)
    assert shown[-1] == answer


class _Tokens:
    """A llama double: token i detokenizes to PIECES[i] (bytes; a multi-byte character split in two)."""

    PIECES: ClassVar = [b"\xe4\xbd", b"\xa0", b"\xe5\xa5\xbd wor", b"ld <", b"|im", b"! ok"]

    def detokenize(self, tokens: list[int]) -> bytes:
        return b"".join(self.PIECES[t] for t in tokens)


def test_the_feed_passes_on_the_shown_growth_and_the_rest_at_the_end() -> None:
    pieces: list[str] = []
    feed = _TextFeed(_Tokens(), 3, answer_json=False, stops=STOPS, on_text=pieces.append)
    prompt = [7, 8, 9]  # the prompt's tokens come first and are never shown
    for generated in range(len(_Tokens.PIECES) + 1):
        assert feed.watch(np.array(prompt + list(range(generated)), dtype=np.intc), None) is False
    assert [p for p in pieces if p] == ["你", "好 wor", "ld ", "<|im! ok"]  # 你 once both its bytes are there
    assert pieces[0] == "" and pieces.count("") == 2  # a token that shows nothing beats: "" (ports.Model)
    feed.show("你好 world <|im! ok")  # the reply as parsed: nothing new to pass on
    assert "".join(pieces) == "你好 world <|im! ok"


# ---- the real model ------------------------------------------------------------------------------------

READ = ToolSpec(
    "read",
    "Read a text file and return its text.",
    {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)
SYSTEM = ChatMessage("system", "You are Vibey, a concise coding assistant.")


ANSWER_ASK = 'Do not read any file. Reply with {"answer": "..."}: name three sorting algorithms.'


@pytest.mark.embedded
@pytest.mark.parametrize(
    ("ask", "tools", "shape"),
    [
        ("Name three sorting algorithms.", (), "text"),  # plain text, no grammar
        (ANSWER_ASK, (READ,), "answer"),  # the grammar's answer branch: its text streams
        ("Read the file setup.py for me.", (READ,), "call"),  # a tool call: nothing is shown
    ],
)
def test_a_streamed_reply_is_the_unstreamed_one(
    embedded_model: EmbeddedModel, ask: str, tools: tuple[ToolSpec, ...], shape: str
) -> None:
    messages = [SYSTEM, ChatMessage("user", ask)]
    plain = embedded_model.complete(CompletionRequest(messages, tools, max_tokens=48, temperature=0.0))
    pieces: list[str] = []
    streamed = embedded_model.complete(
        CompletionRequest(messages, tools, max_tokens=48, temperature=0.0, on_text=pieces.append)
    )
    assert streamed.text == plain.text and streamed.finish_reason == plain.finish_reason
    assert [(c.name, c.arguments) for c in streamed.tool_calls] == [
        (c.name, c.arguments) for c in plain.tool_calls
    ]
    assert (streamed.usage.prompt_tokens, streamed.usage.completion_tokens) == (
        plain.usage.prompt_tokens,
        plain.usage.completion_tokens,
    )
    assert "".join(pieces) == streamed.text
    if shape == "call":  # nothing shown, but a heartbeat per generated token
        assert streamed.tool_calls and set(pieces) == {""}
        assert len(pieces) == streamed.usage.completion_tokens
    else:  # the 0.5B model answers these at temperature 0; the text came in pieces as it was generated
        assert not streamed.tool_calls and len(pieces) > 1


class _Stop(Exception):
    pass


@pytest.mark.embedded
def test_a_tool_call_can_be_stopped_while_it_is_written_and_the_model_works_on(
    embedded_model: EmbeddedModel,
) -> None:
    """Ctrl-C in the chat raises from `on_text`; a tool call shows nothing, so without its heartbeat the
    step could stop only when the whole call was generated (106 s in benchmarks/chat_latency.py)."""
    messages = [SYSTEM, ChatMessage("user", "Read the file setup.py for me.")]
    plain = embedded_model.complete(CompletionRequest(messages, (READ,), max_tokens=48, temperature=0.0))
    assert plain.tool_calls and plain.usage.completion_tokens > 3
    beats: list[str] = []

    def stop_at_third(piece: str) -> None:
        beats.append(piece)
        if len(beats) == 3:
            raise _Stop

    with pytest.raises(_Stop):
        embedded_model.complete(
            CompletionRequest(messages, (READ,), max_tokens=48, temperature=0.0, on_text=stop_at_third)
        )
    assert beats == ["", "", ""]  # stopped three tokens in, long before the call was complete
    again = embedded_model.complete(CompletionRequest(messages, (READ,), max_tokens=48, temperature=0.0))
    assert [(c.name, c.arguments) for c in again.tool_calls] == [
        (c.name, c.arguments) for c in plain.tool_calls
    ]
