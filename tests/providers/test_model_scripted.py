"""The strict scripted model: replies from a script, fails loudly on unexpected or unconsumed calls."""

from __future__ import annotations

import pytest

from avibe.errors import RateLimited, ScriptError
from avibe.ports import CompletionRequest, ModelClient
from avibe.providers.scripted import Expect, ModelRequest, ScriptedModel, reply
from avibe.record.messages import ChatMessage, ModelReply, ToolCall, ToolSpec

HI = [ChatMessage("user", "hi")]
READ = ToolSpec("read", "Read a file.")


def test_replies_in_order_and_records_requests() -> None:
    model = ScriptedModel([reply("one"), reply("two")])
    assert isinstance(model, ModelClient)
    assert [
        model.complete(CompletionRequest(HI)).text,
        model.complete(CompletionRequest(HI, [READ])).text,
    ] == ["one", "two"]
    assert model.requests[1].tool_names == ("read",)
    model.assert_consumed()


def test_call_beyond_the_script_is_a_script_error() -> None:
    model = ScriptedModel([reply("only")])
    model.complete(CompletionRequest(HI))
    with pytest.raises(ScriptError, match="beyond the 1-step script"):
        model.complete(CompletionRequest(HI))


def test_unconsumed_steps_fail_at_the_end_of_the_block() -> None:
    with (
        pytest.raises(ScriptError, match="1 of 2 steps were never called"),
        ScriptedModel([reply("a"), reply("b")]) as m,
    ):
        m.complete(CompletionRequest(HI))


def test_callables_and_exceptions_are_steps() -> None:
    def echo(request: ModelRequest) -> ModelReply:
        return reply(request.messages[-1].content.upper())

    model = ScriptedModel([echo, RateLimited("slow down", provider_text="429")])
    assert model.complete(CompletionRequest(HI)).text == "HI"
    with pytest.raises(RateLimited):
        model.complete(CompletionRequest(HI))
    model.assert_consumed()


def test_expectations_on_the_request_are_checked() -> None:
    call = ToolCall("c1", "read", {"path": "a"})
    model = ScriptedModel([Expect(reply(tool_calls=[call]), tools_include=("read", "edit"))])
    with pytest.raises(ScriptError, match="tool 'edit' not offered"):
        model.complete(CompletionRequest(HI, [READ]))
    ok = ScriptedModel([Expect(reply("x"), last_message_contains="hi", json_schema=True)])
    assert ok.complete(CompletionRequest(HI, json_schema={"type": "object"})).text == "x"


def test_facts_are_configurable() -> None:
    model = ScriptedModel.of([], window=8_000, max_output=500, price_tier_at=4_000)
    assert (model.facts.window, model.facts.max_output, model.facts.price_tier_at) == (8_000, 500, 4_000)
