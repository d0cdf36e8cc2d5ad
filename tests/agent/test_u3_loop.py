"""U3 in the loop: Vibey stops only when nothing but the current request is left to move
out, and the stop names what is too large. The issue's case - window 8,000; one turn: the user's message,
a ~4,800-token read, a ~2,500-token read - goes on instead of stopping."""

from __future__ import annotations

from typing import Any

from vibey_doubles import answer, tool_step, write_lines

from avibe.providers.scripted import ModelRequest, reply


def _answers(request: ModelRequest) -> Any:
    return answer(request) if request.json_schema is not None else reply("both read")


def test_U3_a_big_read_after_the_users_message_is_moved_out_not_a_stop(make_harness: Any) -> None:
    steps = [tool_step("read_file", path="a.txt"), tool_step("read_file", path="b.txt"), *[_answers] * 20]
    h = make_harness(steps)
    write_lines(h.workdir, "a.txt", 440)  # ~4,800 tokens through read_file
    write_lines(h.workdir, "b.txt", 230)  # ~2,500
    result = h.send("Read a.txt, then b.txt, and tell me what they hold.")
    assert not result.stopped and result.reply == "both read"
    assert h.checkpoints()  # room was made by moving the big read out, around the pinned message


def test_U3_a_user_message_too_large_for_the_window_stops_and_says_so(make_harness: Any) -> None:
    h = make_harness([*[_answers] * 20])
    huge = "Please review this log:\n" + "log line with some words in it\n" * 1_200  # ~9,000 tokens
    result = h.send(huge)
    assert result.stopped and "too long to continue reliably" in result.reply
    assert "current request" in result.reply and "tool list" not in result.reply.split("Too large:")[1][:40]
    assert any(e.kind == "stop" for e in h.events)
