"""Loop detection: the notes a repeating, cycling or failing call gets, and when the
turn is stopped. Pure functions over hand-built live contexts, table-driven."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import pytest

from avibe.agent.repeats import MAX_SAME_CALLS, NOTE_START, loop_stop_reason, repeat_note
from avibe.record.messages import ChatMessage, ToolCall

_IDS = itertools.count(1)

# Short names for calls: a letter is a call (name and arguments); the same letter is the same call.
CALLS = {
    "T": ("read_file", {"path": "tickets/007.md"}),
    "L": ("list_files", {}),
    "W": ("write_file", {"path": "docs/guide.md", "content": "# Guide\n"}),
    "S": ("shell", {"command": "pytest -x"}),
    "E": ("edit_file", {"path": "a.py", "old": "x = 1", "new": "x = 2"}),
    "R": ("read_file", {"path": "a.py"}),
}


def call(letter: str) -> ToolCall:
    name, arguments = CALLS.get(letter, ("read_file", {"path": f"tickets/{letter}.md"}))
    return ToolCall(f"c{next(_IDS)}", name, dict(arguments))


def context(letters: Sequence[str], failed: str = "", pending: str = "") -> list[ChatMessage]:
    """The person's message, then one reply and one tool output per call of `letters`; the calls at
    the positions in `failed` (digits) failed and got the note `repeat_note` gave them, as the loop
    appends it. `pending` adds a last reply whose calls have not run yet."""
    history: list[ChatMessage] = [ChatMessage("user", "work through the tickets", seq=1, kind="user")]
    for index, letter in enumerate(letters):
        tool_call = call(letter)
        history.append(ChatMessage("assistant", "", tool_calls=(tool_call,)))
        is_failed = str(index) in failed
        output = ("read_file: 'x' does not exist" if is_failed else "ok") + repeat_note(
            history, tool_call, is_failed
        )
        history.append(ChatMessage("tool", output, tool_call_id=tool_call.id, name=tool_call.name))
    if pending:
        history.append(ChatMessage("assistant", "", tool_calls=tuple(call(p) for p in pending)))
    return history


def note_for(letters: str, failed: bool = False, earlier_failed: str = "") -> str:
    """The note the last of `letters` gets, the earlier ones already run."""
    history = context(letters[:-1], failed=earlier_failed)
    last = call(letters[-1])
    history.append(ChatMessage("assistant", "", tool_calls=(last,)))
    return repeat_note(history, last, failed)


@pytest.mark.parametrize(
    ("letters", "failed", "expected"),
    [
        # nothing to say
        ("T", False, None),
        ("RES", False, None),  # read, edit, test: a legit varied sequence
        ("RESRES", False, "cycle of 3 calls run 2 times"),  # the same three again is a cycle
        ("0123456789", False, None),  # ten different tickets, read in order
        ("SES", False, None),  # test, edit, test: the edit is between
        ("T", True, None),  # a first failure is just an error
        # the previous call again
        ("TT", False, "same call, with the same arguments, as your previous one"),
        ("WW", False, "same call, with the same arguments, as your previous one"),
        # cycles of two and three different calls
        ("TLTL", False, "cycle of 2 calls run 2 times (read_file"),
        ("TLTLTL", False, "cycle of 2 calls run 3 times"),
        ("TLWTLW", False, "cycle of 3 calls run 2 times"),
        ("TLT", False, None),  # the cycle is not closed yet
        # a failing call made again
        ("TT", True, "this call failed, and you already made exactly this call (1 time before)"),
        ("TLT", True, "this call failed, and you already made exactly this call"),
    ],
)
def test_repeat_note(letters: str, failed: bool, expected: str | None) -> None:
    note = note_for(letters, failed)
    if expected is None:
        assert note == ""
    else:
        assert note.startswith(NOTE_START) and note.endswith("]")
        assert expected in note, note


def test_the_note_names_the_cycle_calls_and_what_to_do() -> None:
    note = note_for("TLTL")
    assert 'read_file {"path": "tickets/007.md"} -> list_files' in note
    assert "Do not repeat it" in note


def test_a_parallel_call_after_this_one_in_the_same_reply_does_not_count() -> None:
    """Two identical calls in one reply: the first is not a repeat of the second, which has not run."""
    first, second = call("T"), call("T")
    history = [
        ChatMessage("user", "go", kind="user"),
        ChatMessage("assistant", "", tool_calls=(first, second)),
    ]
    assert repeat_note(history, first, False) == ""
    history.append(ChatMessage("tool", "ok", tool_call_id=first.id))
    assert "your previous one" in repeat_note(history, second, False)


def test_the_persons_new_message_starts_afresh_but_other_inputs_do_not() -> None:
    history = context("T")
    history.append(ChatMessage("user", "read it again, please", seq=9, kind="user"))
    again = call("T")
    history.append(ChatMessage("assistant", "", tool_calls=(again,)))
    assert repeat_note(history, again, False) == ""
    watched = context("T")
    watched.append(ChatMessage("user", "[Harness: watch] file changed", seq=9, kind="watch"))
    again = call("T")
    watched.append(ChatMessage("assistant", "", tool_calls=(again,)))
    assert "your previous one" in repeat_note(watched, again, False)


def test_argument_order_does_not_make_a_different_call() -> None:
    a = ToolCall("x1", "edit_file", {"path": "a", "old": "1", "new": "2"})
    b = ToolCall("x2", "edit_file", {"new": "2", "old": "1", "path": "a"})
    history = [ChatMessage("assistant", "", tool_calls=(a,)), ChatMessage("tool", "ok", tool_call_id="x1")]
    history.append(ChatMessage("assistant", "", tool_calls=(b,)))
    assert "your previous one" in repeat_note(history, b, False)


@pytest.mark.parametrize(
    ("done", "failed", "pending", "expected"),
    [
        ("", "", "", None),
        ("TTT", "", "", None),  # three in a row: not yet
        ("TTT", "", "T", f"the same tool call came {MAX_SAME_CALLS} times in a row (read_file"),
        ("", "", "WWWW", "the same tool call came 4 times in a row (write_file"),  # one reply, four calls
        ("TLTLTLT", "", "", None),  # three and a half runs
        ("TLTLTLT", "", "L", "the same cycle of 2 tool calls came 4 times in a row"),
        ("TLWTLWTLWTL", "", "W", "the same cycle of 3 tool calls came 4 times in a row"),
        ("0123456789", "", "a", None),  # eleven different tickets
        ("RESRESRES", "", "R", None),  # 3.3 runs of a legit-looking cycle: not yet stopped
        # a call that failed, and failed again (it got the note), is stopped at its third attempt
        ("TT", "01", "", None),
        ("TT", "01", "T", "a tool call that failed twice was made again (read_file"),
        ("TLT", "02", "L", None),
        ("TLTL", "02", "T", "a tool call that failed twice was made again"),
        ("TLT", "0", "T", None),  # failed once, then succeeded: no note, no stop
    ],
)
def test_loop_stop_reason(done: str, failed: str, pending: str, expected: str | None) -> None:
    reason = loop_stop_reason(context(done, failed=failed, pending=pending))
    if expected is None:
        assert reason is None
    else:
        assert reason is not None and expected in reason, reason
        assert "\n" not in reason


def test_a_stopped_loop_goes_on_after_the_persons_message() -> None:
    history = context("TTT", pending="T")
    assert loop_stop_reason(history) is not None
    history.append(ChatMessage("user", "go on", seq=5, kind="user"))
    history.append(ChatMessage("assistant", "", tool_calls=(call("T"),)))
    assert loop_stop_reason(history) is None


def test_a_repeated_failure_is_stopped_before_four_repeats() -> None:
    """The demo's loop: the same failing read, again and again. The note comes on the 2nd failure, the
    stop before the 3rd attempt runs."""
    history: list[ChatMessage] = [ChatMessage("user", "do ticket 007", kind="user")]
    for attempt in range(1, 5):
        tool_call = call("T")
        history.append(ChatMessage("assistant", "", tool_calls=(tool_call,)))
        if loop_stop_reason(history):
            break
        note = repeat_note(history, tool_call, failed=True)
        assert (note != "") == (attempt >= 2)
        history.append(ChatMessage("tool", "'x' does not exist" + note, tool_call_id=tool_call.id))
    assert attempt == 3
