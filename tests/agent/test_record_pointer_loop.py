"""A3 in the loop: after a checkpoint Vibey's recollection says where its full record is and how to read
the user's messages in time order, and the way it names works - the tool it names is among the request's
tools, and querying by the memo's numbers gives back the user's words that moved out."""

from __future__ import annotations

from typing import Any

from vibey_doubles import BEFORE_STEPS, checkpoint_steps, tool_step, write_lines

from avibe.providers.scripted import reply
from avibe.record.messages import ToolCall

RULE = "Please read the files I name, one by one. Never touch vendor/ - it belongs to another team."


def test_A3_the_record_pointer_reaches_the_recollection_and_leads_to_the_moved_out_words(
    make_harness: Any,
) -> None:
    steps = [*BEFORE_STEPS, tool_step("read_file", path="c.txt"), *checkpoint_steps(5), reply("c read")]
    h = make_harness(steps)
    for name, lines in (("a.txt", 180), ("b.txt", 180), ("c.txt", 90)):
        write_lines(h.workdir, name, lines)
    h.send(RULE)
    h.send("Now read b.txt.")
    h.send("Now read c.txt, then tell me what you saw.")
    h.model.assert_consumed()
    assert len(h.checkpoints()) == 1
    last = h.model.requests[-1]
    recollection = last.messages[1].content
    assert recollection.startswith("What I remember (checkpoint 1)")
    session = h.vibey.session_id
    # where: the session's record; how: the tool, by number range, the user's messages in time order
    assert f"The full record of this session ({session})" in recollection
    assert "record_query" in recollection and f"vibe log --session {session} --user" in recollection
    assert "record_query" in last.tool_names  # the tool it names is one the model can call
    # the user's first message moved out (it is in the memo as #1, not in the recent messages) ...
    recent = "".join(m.content for m in last.messages[2:])
    assert RULE not in recent and "Message #1:" in recollection
    # ... and the query the pointer describes gives it back, the user's, by its memo number
    found = h.vibey.run_tool(ToolCall("q1", "record_query", {"seq_from": 1, "seq_to": 1}))
    assert not found.is_error and RULE in found.output
