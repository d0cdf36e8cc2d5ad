"""Replies stream: the loop passes the model's text on as `ReplyDelta` events while the
model writes it - for the turn's normal calls only, never for a checkpoint's questions - and `vibe run`'s
printer shows it once, on one `vibey> ` line."""

from __future__ import annotations

from typing import Any

import pytest
from vibey_doubles import BEFORE_STEPS, checkpoint_steps, tool_step, write_lines

from avibe.cli.terminal import EventPrinter
from avibe.host.events import ModelCalled, ModelStarted, Replied, ReplyDelta, Stopped, ToolCalled
from avibe.providers.scripted import reply
from avibe.record.messages import ToolCall

ANSWER = "The notes say we ship on friday, after the last review."


def _between(events: list[Any], start: type, end: type) -> list[list[Any]]:
    """The events inside each start...end pair, in order."""
    groups: list[list[Any]] = []
    inside = False
    for event in events:
        if isinstance(event, start | end):
            inside = isinstance(event, start)
            groups += [[]] if inside else []
        elif inside:
            groups[-1].append(event)
    return groups


def test_a_reply_streams_as_deltas_that_add_up_to_it(make_harness: Any) -> None:
    read = ToolCall("call-1", "read_file", {"path": "notes.txt"})
    h = make_harness([reply("Let me read the notes first.", tool_calls=[read]), reply(ANSWER)])
    (h.workdir / "notes.txt").write_text("ship on friday\n")
    result = h.send("What do the notes say?")
    assert result.reply == ANSWER
    first, second = _between(h.events, ModelStarted, ModelCalled)
    # each model call's deltas arrive while it works, before its ModelCalled, and add up to its text
    assert "".join(e.text for e in first if isinstance(e, ReplyDelta)) == "Let me read the notes first."
    deltas = [e for e in h.events if isinstance(e, ReplyDelta)]
    assert len(deltas) == sum(isinstance(e, ReplyDelta) for e in first + second)  # none outside a call
    streamed = [e.text for e in second if isinstance(e, ReplyDelta)]
    assert len(streamed) > 1 and "".join(streamed) == ANSWER  # in pieces, not all at once
    assert [e.kind for e in h.events].index("reply") > h.events.index(deltas[-1])
    assert [e for e in h.events if isinstance(e, Replied)] == [Replied(ANSWER)]
    assert all(r.streamed for r in h.model.requests)


def test_checkpoint_questions_never_stream(make_harness: Any) -> None:
    steps = [*BEFORE_STEPS, tool_step("read_file", path="c.txt"), *checkpoint_steps(5), reply("c read")]
    h = make_harness(steps)
    for name, lines in (("a.txt", 180), ("b.txt", 180), ("c.txt", 90)):
        write_lines(h.workdir, name, lines)
    for text in ("Read a.txt.", "Now read b.txt.", "Now read c.txt."):
        h.send(text)
    h.model.assert_consumed()
    assert len(h.checkpoints()) == 1
    questions = [r for r in h.model.requests if r.json_schema is not None]
    assert len(questions) == 5 and not any(r.streamed for r in questions)
    assert all(r.streamed for r in h.model.requests if r.json_schema is None)
    streamed = "".join(e.text for e in h.events if isinstance(e, ReplyDelta))
    assert streamed == "a readb readc read"  # the three replies; no checkpoint answer


def test_the_printer_shows_a_streamed_reply_once_on_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    printer = EventPrinter()
    call = ToolCalled("call-1", "read_file", {"path": "notes.txt"})
    events = [ModelStarted(1, 100), ReplyDelta("Let me "), ReplyDelta("look."),
              ModelCalled(1, 100, 0, 0, 0, 0.1, 1), call,
              ModelStarted(2, 120), ReplyDelta("Ship "), ReplyDelta("on friday."),
              ModelCalled(2, 120, 0, 0, 0, 0.1, 0), Replied("Ship on friday."),
              ModelStarted(3, 140), ModelCalled(3, 140, 0, 0, 0, 0.1, 0), Replied("Not streamed."),
              ModelStarted(4, 150), ReplyDelta("Half"), Stopped("the model failed")]  # fmt: skip
    for event in events:
        printer(event)
    assert capsys.readouterr().out.splitlines() == [
        "vibey> Let me look.",
        '[tool] read_file {"path": "notes.txt"}',
        "vibey> Ship on friday.",
        "vibey> Not streamed.",
        "vibey> Half",
        "[stop] the model failed",
    ]


def test_the_elapsed_time_stops_at_the_first_delta() -> None:
    printer = EventPrinter()
    printer(ModelStarted(1, 100))
    ticker = printer._ticker
    assert ticker is not None and not ticker._done.is_set()
    printer(ReplyDelta("Hi"))
    assert printer._ticker is None and ticker._done.is_set()


def test_json_lines_print_every_delta_but_heartbeats(capsys: pytest.CaptureFixture[str]) -> None:
    printer = EventPrinter(json_lines=True)
    for event in (ReplyDelta("Ship "), ReplyDelta(""), ReplyDelta("it."), Replied("Ship it.")):
        printer(event)  # "" is a heartbeat (a tool call being written): nothing to print
    assert capsys.readouterr().out.splitlines() == [
        '{"kind": "reply_delta", "text": "Ship "}',
        '{"kind": "reply_delta", "text": "it."}',
        '{"kind": "reply", "text": "Ship it."}',
    ]
