"""the demo ended in a loop of `send_to_session` to a session that does not exist, a new
text each time - no call repeated, so the repeat detector let it run to the step limit. A tool that gave
the same error to its last three calls in a row is not run a fourth time, whatever the arguments."""

from __future__ import annotations

from avibe.agent.repeats import SAME_ERROR_RUNS, loop_stop_reason
from avibe.record.messages import ChatMessage, ToolCall

ERROR = "send_to_session: no session s-20261201-000000 is known; check the id"


def _history(outputs: list[tuple[str, str]], pending: str) -> list[ChatMessage]:
    """The person's message, one call per (tool, output) with a new text each time, then a reply whose
    call of `pending` has not run yet."""
    history = [ChatMessage("user", "Next ticket, please.", seq=1, kind="user")]
    for index, (name, output) in enumerate(outputs):
        call = ToolCall(f"c{index}", name, {"session": "s-20261201-000000", "text": f"update {index}"})
        history += [
            ChatMessage("assistant", "", tool_calls=(call,)),
            ChatMessage("tool", output, tool_call_id=call.id, name=name),
        ]
    last = ToolCall("next", pending, {"session": "s-20261201-000000", "text": "one more"})
    return [*history, ChatMessage("assistant", "", tool_calls=(last,))]


def test_the_same_error_three_times_then_the_same_tool_again_stops_the_turn() -> None:
    history = _history([("send_to_session", ERROR)] * SAME_ERROR_RUNS, "send_to_session")
    reason = loop_stop_reason(history)
    assert reason == "send_to_session gave the same error 3 times in a row and was called again"


def test_a_different_error_another_tool_or_fewer_runs_do_not_stop() -> None:
    varied = [("send_to_session", ERROR), ("send_to_session", ERROR + "!"), ("send_to_session", ERROR)]
    assert loop_stop_reason(_history(varied, "send_to_session")) is None
    assert loop_stop_reason(_history([("send_to_session", ERROR)] * SAME_ERROR_RUNS, "read_file")) is None
    assert (
        loop_stop_reason(_history([("send_to_session", ERROR)] * (SAME_ERROR_RUNS - 1), "send_to_session"))
        is None
    )
    same_success = [("read_file", "# Ticket 001\nfix the typo")] * SAME_ERROR_RUNS  # not error-shaped
    assert loop_stop_reason(_history(same_success, "read_file")) is None
