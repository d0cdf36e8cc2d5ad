"""Grammar output -> tool calls / answer; malformed output is BadResponse (no model needed)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from avibe.errors import BadResponse
from avibe.providers.embedded import parse_tool_choice, prompt_schema, schema_instruction, tool_choice_schema
from avibe.record.messages import CUT_ANSWER_MARK, ToolSpec, cut_answer

READ = ToolSpec(
    "read",
    "Read a text file and return its text.",
    {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)


def test_tool_choice_schema_has_one_branch_per_tool_plus_answer() -> None:
    schema = tool_choice_schema([READ, ToolSpec("shell", "Run.")])
    consts = [b["properties"].get("tool", {}).get("const") for b in schema["oneOf"]]
    assert consts == ["read", "shell", None]
    assert schema["oneOf"][-1]["required"] == ["answer"]


def test_valid_outputs_map_to_calls_and_answers() -> None:
    text, calls = parse_tool_choice('{"tool": "read", "arguments": {"path": "a.py"}}', [READ], "stop")
    assert text == "" and [(c.name, c.arguments) for c in calls] == [("read", {"path": "a.py"})]
    assert parse_tool_choice('{"answer": "line one\\nline two"}', [READ], "stop") == (
        "line one\nline two",
        (),
    )


def test_malformed_output_is_bad_response_with_raw_text() -> None:
    with pytest.raises(BadResponse, match="max_tokens") as caught:
        parse_tool_choice('{"tool": "read", "argu', [READ], "length")
    assert caught.value.provider_text == '{"tool": "read", "argu'
    with pytest.raises(BadResponse, match="neither"):
        parse_tool_choice('{"tool": "rm", "arguments": {}}', [READ], "stop")


@given(
    raw=st.text(max_size=80)
    | st.builds(
        json.dumps,
        st.dictionaries(
            st.sampled_from(["tool", "answer", "arguments", "x"]),
            st.none() | st.text(max_size=5) | st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
            max_size=3,
        ),
    )
)
def test_any_model_output_is_a_reply_or_a_bad_response(raw: str) -> None:
    """A model that misbehaves on purpose: whatever it writes, the result is a tool call of an offered
    tool, an answer, or BadResponse carrying the raw text - never another exception."""
    try:
        text, calls = parse_tool_choice(raw, [READ], "stop")
    except BadResponse as exc:
        assert exc.provider_text == raw
        return
    assert all(c.name == "read" and isinstance(c.arguments, dict) for c in calls)
    assert bool(calls) != bool(text) or (not calls and text == "")


def _keywords(value: object) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in _keywords(v)}
    if isinstance(value, list):
        return {k for v in value for k in _keywords(v)}
    return set()


def test_the_prompt_shows_the_schema_without_what_only_the_grammar_needs() -> None:
    """ "required" and "additionalProperties" are the grammar's business (it writes every key and
    no other), and so is a "type" that "properties" or "enum" implies; the prompt, read uncached on every
    structured call, leaves them out at every depth, in JSON's compact form - and keeps every key, enum and
    length the model should see, even a property named "type". The schema itself is not changed."""
    from avibe.checkpoint.structured.schemas import array, object_schema, text

    item = object_schema({"id": {"type": "string", "enum": ["W1", "new"]}, "text": text(54)})
    schema = object_schema(
        {
            "workstreams": array(item, 3),
            "retire": {"type": "array", "maxItems": 0},
            "type": {"type": "string", "enum": ["a", "b"]},
        }
    )
    before = json.dumps(schema)
    instruction = schema_instruction(schema)
    shown = json.loads(instruction.split(": ", 1)[1])
    assert json.dumps(schema) == before
    assert {"required", "additionalProperties"} <= _keywords(schema)
    assert not {"required", "additionalProperties"} & _keywords(shown)
    assert shown == prompt_schema(schema)
    assert set(shown) == {"properties"}
    assert shown["properties"]["workstreams"]["items"]["properties"] == {
        "id": {"enum": ["W1", "new"]},
        "text": {"type": "string", "maxLength": 54},
    }
    assert shown["properties"]["workstreams"]["maxItems"] == 3
    assert shown["properties"]["type"] == {"enum": ["a", "b"]}
    assert ", " not in instruction.split(": ", 1)[1] and '": ' not in instruction
    plain = "Reply with one JSON object that matches this JSON schema: " + before
    assert len(instruction) < 0.6 * len(plain)


def test_an_answer_cut_at_the_output_limit_is_kept_as_written_and_marked() -> None:
    """The demo's 1.5B answered "Which ticket is next?" past the output limit; the person got "the model's
    reply is not valid JSON" instead of its words. Cut mid-escape, the half escape is dropped."""
    raw = '{"answer": "Ticket 002 is next:\\nit asks for the port 80'
    assert parse_tool_choice(raw, [READ], "length") == (
        "Ticket 002 is next:\nit asks for the port 80" + CUT_ANSWER_MARK,
        (),
    )
    assert parse_tool_choice('{"answer": "a \\u00', [READ], "length") == ("a" + CUT_ANSWER_MARK, ())
    with pytest.raises(BadResponse):  # not at the limit: malformed output is still an error
        parse_tool_choice(raw, [READ], "stop")


@given(st.text(max_size=60), st.integers(0, 80))
def test_any_cut_answer_keeps_a_prefix_of_what_was_written(text: str, cut: int) -> None:
    """Whatever the model wrote and wherever it was cut, the kept text is a prefix of its answer."""
    raw = json.dumps({"answer": text})[: len('{"answer": "') + cut]
    kept = cut_answer(raw)
    if kept is not None:
        assert kept.endswith(CUT_ANSWER_MARK)
        assert text.lstrip().startswith(kept[: -len(CUT_ANSWER_MARK)])
