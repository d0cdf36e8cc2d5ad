"""The structured calls' thread: a call that goes on from the ones before is shown
their format lines where they were read, and only then; whatever the calls, the caller's messages are all
shown, in order (a property)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from avibe.providers.embedded import answered, continued
from avibe.record.messages import ChatMessage

TEXT = st.text(min_size=0, max_size=12)
MESSAGE = st.builds(ChatMessage, st.sampled_from(["system", "user", "assistant"]), TEXT)
CALLS = st.lists(st.tuples(st.lists(MESSAGE, min_size=1, max_size=3), TEXT, TEXT), min_size=1, max_size=4)


@given(base=st.lists(MESSAGE, min_size=1, max_size=4), calls=CALLS)
def test_a_thread_of_calls_keeps_every_format_line_before_its_reply(
    base: list[ChatMessage], calls: list[tuple[list[ChatMessage], str, str]]
) -> None:
    sent = list(base)
    thread = None
    lines: list[ChatMessage] = list(base)
    for new, tail, reply in calls:
        sent += new
        shown = continued(thread, sent)
        if thread is None:
            assert shown is None
            shown = list(sent)
        assert shown == [*lines, *new]
        lines_of = _format_lines(calls)  # nothing but format lines is added: the rest is what was sent
        assert [m for m in shown if m not in lines_of] == [m for m in sent if m not in lines_of]
        thread = answered(sent, shown, tail, reply)
        sent.append(ChatMessage("assistant", reply))
        lines = [*shown, ChatMessage("system", tail), ChatMessage("assistant", reply)]


def _format_lines(calls: list[tuple[list[ChatMessage], str, str]]) -> list[ChatMessage]:
    return [ChatMessage("system", tail) for _, tail, _ in calls]


@given(base=st.lists(MESSAGE, min_size=1, max_size=4), other=MESSAGE, tail=TEXT, reply=TEXT)
def test_messages_that_do_not_go_on_from_the_thread_are_shown_as_sent(
    base: list[ChatMessage], other: ChatMessage, tail: str, reply: str
) -> None:
    thread = answered(base, base, tail, reply)
    assert continued(thread, base) is None  # the same call again: no reply in it
    assert continued(thread, [*base, ChatMessage("assistant", reply)]) is None  # nothing new after it
    changed = [other, *base[1:], ChatMessage("assistant", reply), other]
    if changed[: len(base) + 1] != [*base, ChatMessage("assistant", reply)]:
        assert continued(thread, changed) is None
    wrong_reply = [*base, ChatMessage("assistant", reply + "!"), other]
    assert continued(thread, wrong_reply) is None
    assert continued(None, [*base, other]) is None
