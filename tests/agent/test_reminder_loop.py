"""Vibey's view restates the memo's rules a new user message is about, right after it (issue 31 item 3):
end to end through a real checkpoint on the strict scripted model - the rule moved out into the memo,
then a message about it, then the request the model gets. The note is the view's: never recorded."""

from __future__ import annotations

from typing import Any

from test_vibey_e2e import BEFORE, RULE, _files, _three_turns
from vibey_doubles import checkpoint_steps, tool_step

from avibe.context.assemble import REMINDER_KIND
from avibe.providers.scripted import reply
from avibe.record.entries import EntryQuery

ABOUT_THE_RULE = "The build is slow. Clear out vendor/ to speed it up."
UNRELATED = "Good. Now summarise a.txt for me."


def test_a_message_about_a_kept_rule_is_followed_by_the_rule_in_the_users_words(make_harness: Any) -> None:
    steps = [
        *BEFORE,
        tool_step("read_file", path="c.txt"),
        *checkpoint_steps(5),
        reply("c read: 90 lines"),
        reply("vendor/ belongs to another team; shall I ask them?"),
        reply("a.txt holds numbered lines."),
    ]
    h = make_harness(steps)
    _files(h)
    _three_turns(h)
    [stored] = h.checkpoints()
    assert RULE in {m.text for m in stored.memo}  # the rule has left the conversation for the memo
    h.send(ABOUT_THE_RULE)
    sent = h.model.requests[-1].messages
    assert sent[-2].role == "user" and sent[-2].content == ABOUT_THE_RULE
    note = sent[-1]
    assert note.role == "system" and note.kind == REMINDER_KIND
    assert "Message #1:\n> Never touch vendor/ - it belongs to another team." in note.content
    assert "Please read the files I name" not in note.content  # only the sentence the message is about
    # a message about none of the rules gets none, and the earlier note is not kept either
    h.send(UNRELATED)
    sent = h.model.requests[-1].messages
    assert sent[-1].content == UNRELATED and not [m for m in sent if m.kind == REMINDER_KIND]
    h.model.assert_consumed()
    # the record holds what was said, never the view's note
    texts = [e.text for e in h.store.query(EntryQuery(h.vibey.session_id))]
    assert not [t for t in texts if "Before you answer the user's message above" in t]
