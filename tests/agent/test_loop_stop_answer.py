"""A loop stop still answers the person (found in the demo, docs/demo.md: its two probes, "May you edit
vendor/parser.txt?" and "Which ticket is next?", each ended in `update_plan` four times and no answer).
The repeated call is not run, its result says why, and the model is asked once more - the same tools
listed (the prompt, and a local model's cache, unchanged) but an output that can only be an answer; its
words are the turn's reply. Only when that fails too does the turn stop with the reason."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from vibey_doubles import Harness, tool_step

from avibe.agent.repeats import ANSWER_ONLY, MAX_SAME_CALLS, answer_of
from avibe.providers.scripted import ModelRequest, reply
from avibe.record.entries import EntryQuery
from avibe.record.messages import CUT_ANSWER_MARK, ModelReply

PLAN = "[ ] ticket 001\n[ ] ticket 002"
ANSWER = "No: vendor/ belongs to another team, so I will not edit vendor/parser.txt."


CALL_AS_TEXT = json.dumps({"tool": "update_plan", "arguments": {"plan": PLAN}})


def _looping(answer: str | None) -> Callable[[ModelRequest], ModelReply]:
    """A model that calls update_plan with the same plan; asked for an answer only, it answers `answer`
    (None: it writes the tool call as its text, as the demo's 1.5B did when offered no tools)."""

    def model(request: ModelRequest) -> ModelReply:
        if request.json_schema is None:
            return tool_step("update_plan", plan=PLAN)
        return reply(CALL_AS_TEXT if answer is None else json.dumps({"answer": answer}))

    return model


def _answered_every_call(request: ModelRequest) -> bool:
    asked = {c.id for m in request.messages for c in m.tool_calls}
    return asked <= {m.tool_call_id for m in request.messages if m.role == "tool"}


def test_after_a_loop_stop_the_model_answers_in_words_and_the_call_is_not_run(
    make_harness: Callable[..., Harness],
) -> None:
    h = make_harness([_looping(ANSWER)] * 10)
    result = h.send("May you edit vendor/parser.txt?")
    assert not result.stopped and result.reply == ANSWER
    last, before = h.model.requests[-1], h.model.requests[-2]
    assert last.json_schema == ANSWER_ONLY and not last.streamed and _answered_every_call(last)
    assert last.tools == before.tools and last.messages[: len(before.messages)] == before.messages
    outputs = [m.content for m in last.messages if m.role == "tool"]
    assert len(outputs) == MAX_SAME_CALLS and outputs[-1].startswith("[not run by Avibe: the same tool call")
    assert all("not run by Avibe" not in o for o in outputs[:-1])  # the first three ran
    replies = h.store.query(EntryQuery(h.vibey.session_id, kinds=frozenset({"assistant"})))
    assert replies[-1].text == ANSWER  # recorded as the turn's reply


def test_a_model_that_still_calls_a_tool_ends_the_turn_with_the_reason(
    make_harness: Callable[..., Harness],
) -> None:
    h = make_harness([_looping(None)] * 10)
    result = h.send("Which ticket is next?")
    assert result.stopped and result.reply.startswith("stopped: the same tool call came 4 times in a row")
    assert sum(1 for r in h.model.requests if r.json_schema == ANSWER_ONLY) == 1  # asked once


def test_an_empty_answer_ends_the_turn_and_the_next_turn_goes_on(
    make_harness: Callable[..., Harness],
) -> None:
    def model(request: ModelRequest) -> ModelReply:
        if request.messages[-1].content == "Go on.":
            return reply("001 is next.")
        return (
            tool_step("update_plan", plan=PLAN) if request.json_schema is None else reply('{"answer": " "}')
        )

    h = make_harness([model] * 10)
    result = h.send("Which ticket is next?")
    assert result.stopped and "send a message to go on" in result.reply
    assert h.send("Go on.").reply == "001 is next."
    assert _answered_every_call(h.model.requests[-1])  # the calls not run still have their results


@pytest.mark.parametrize(
    ("raw", "answer"),
    [
        ('{"answer": "001 is next."}', "001 is next."),
        ("001 is next.", "001 is next."),  # a provider that ignored the schema: taken as written
        (CALL_AS_TEXT, ""),  # a tool call written as text is no answer
        ('["001"]', ""),
        ('{"answer": 1}', ""),
        # cut at the output limit (the demo's 1.5B on "Which ticket is next?"): what it wrote, marked
        ('{"answer": "002 is next, then 0', "002 is next, then 0" + CUT_ANSWER_MARK),
    ],
)
def test_the_answer_of_a_reply(raw: str, answer: str) -> None:
    assert answer_of(raw) == answer
