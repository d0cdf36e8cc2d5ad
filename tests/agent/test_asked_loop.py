"""A short reply kept in the memo comes with the question of Vibey's it answered (N3), end to end through
a real checkpoint on the strict scripted model and a real SQLite record: "leave it" alone means nothing,
and a real session's 1.5B, asked to finish the cleanup after its checkpoint, force-removed the package the
person had said to leave. The question is copied from the record's assistant entry, shown as Vibey's own
words (never as the user's), and restated with the answer after a message about the same thing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from test_vibey_e2e import THIRD, _files
from typer.testing import CliRunner
from vibey_doubles import checkpoint_steps, tool_step

from avibe.cli import app
from avibe.providers.scripted import reply
from avibe.record.messages import REMINDER_KIND

FIRST = "Please read the files I name, one by one, and clean up what they leave behind."
QUESTION = "Would you like me to force-remove cache.bin as well, or leave it since the build needs it?"
ASKING = f"a read. It left cache.bin behind.\n\n{QUESTION} Removing it could break the build."
ANSWER = "leave it"
FINISH = "Finish the cleanup: force-remove the last file left behind. Give the command."


def test_N3_a_kept_short_reply_is_shown_with_the_question_it_answered(
    make_harness: Any, tmp_path: Path
) -> None:
    steps = [
        tool_step("read_file", path="a.txt"),
        reply(ASKING),
        tool_step("read_file", path="b.txt"),
        reply("b read"),
        tool_step("read_file", path="c.txt"),
        *checkpoint_steps(5),
        reply("c read: 90 lines"),
        reply("cache.bin stays: you said to leave it."),
    ]
    home = tmp_path / "home"
    home.mkdir()
    h = make_harness(steps, db=home / "avibe.db")
    _files(h)
    assert not h.send(FIRST).stopped
    assert not h.send(ANSWER).stopped
    h.send(THIRD)
    [stored] = h.checkpoints()
    [kept] = [m for m in stored.memo if m.text == ANSWER]
    assert kept.asked == QUESTION  # the asking sentence of the stored reply, not the whole reply
    view = h.model.requests[-1].messages[1].content
    assert (
        f'Message #{kept.seq}:\n(my question before it, in #{kept.seq - 1}: "{QUESTION}")\n> leave it' in view
    )
    assert f"> {QUESTION}" not in view  # never quoted as the user's words
    h.send(FINISH)
    sent = h.model.requests[-1].messages
    assert sent[-2].content == FINISH and sent[-1].kind == REMINDER_KIND
    assert f'(your question before it, in #{kept.seq - 1}: "{QUESTION}")\n> leave it' in sent[-1].content
    h.model.assert_consumed()
    # `vibe checkpoints --show` prints it too, framed above the reply as the agent's words
    shown = CliRunner().invoke(app, ["checkpoints", "--show", "1"], env={"AVIBE_HOME": str(home)})
    assert f"(the agent's question before it: {QUESTION})\n#{kept.seq}: leave it" in shown.output
