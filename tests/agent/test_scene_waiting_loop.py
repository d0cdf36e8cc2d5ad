"""S3 in the loop: a question Vibey asked the user, not answered yet, is a "Waiting for" item of the scene
with the message number it was asked in - when a background input (not the user) starts the turn that
checkpoints, the question still waits."""

from __future__ import annotations

from typing import Any

from vibey_doubles import checkpoint_steps, go_on, post, tool_step, write_lines

from avibe.checkpoint.scene import parse_scene
from avibe.providers.scripted import reply
from avibe.record.entries import EntryQuery, Source

QUESTION = "Shall I read c.txt as well, or stop here?"


def test_S3_an_unanswered_question_to_the_user_waits_in_the_scene_with_its_number(make_harness: Any) -> None:
    steps = [
        tool_step("read_file", path="a.txt"),
        reply("a read"),
        tool_step("read_file", path="b.txt"),
        reply(f"b read: 180 lines. {QUESTION}"),
        tool_step("read_file", path="c.txt"),  # the callback's turn: the request passes the trigger
        *checkpoint_steps(5),
        reply("c read"),
    ]
    h = make_harness(steps)
    for name, lines in (("a.txt", 180), ("b.txt", 180), ("c.txt", 90)):
        write_lines(h.workdir, name, lines)
    h.send("Please read a.txt for me.")
    h.send("Now read b.txt.")
    post(h.vibey, Source("callback", name="ci", ref="build-7"), "build 7 finished: green")
    go_on(h.vibey)
    h.model.assert_consumed()
    [stored] = h.checkpoints()
    asked = next(e.seq for e in h.store.query(EntryQuery(session=h.vibey.session_id)) if QUESTION in e.text)
    parts = parse_scene(stored.scene)
    assert not isinstance(parts, list), parts
    assert f"message #{asked}" in parts.waiting_for and QUESTION in parts.waiting_for
