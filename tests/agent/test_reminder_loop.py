"""Vibey's view restates the memo's rules a new user message is about, right after it:
end to end through a real checkpoint on the strict scripted model - the rule moved out into the memo,
then a message about it, then the request the model gets. The note is the view's: never recorded."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from test_vibey_e2e import BEFORE, RULE, _files, _three_turns
from vibey_doubles import checkpoint_steps, tool_step

from avibe.agent.driver import reminds
from avibe.agent.state import LiveState
from avibe.agent.view import Viewer
from avibe.checkpoint.budgets import budgets_for
from avibe.ports import StoredCheckpoint
from avibe.providers.counting import TiktokenCounter
from avibe.providers.scripted import reply
from avibe.record.checkpoint import Carry, MemoItem
from avibe.record.entries import EntryQuery
from avibe.record.messages import REMINDER_KIND, ChatMessage

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
    assert not [t for t in texts if "copied from your recollection word for word" in t]


def test_the_reminder_is_chosen_per_model_and_the_05b_goes_without() -> None:
    """Measured per model (docs/eval.md): the 1.5B declined forbidden next actions 13 of 18 times with it
    and 5 without; the 0.5B declined no more and answered fewer exact questions, so it goes without."""
    assert not reminds("embedded") and reminds("embedded-1.5b") and reminds("gpt-4o")
    memo = (MemoItem(1, RULE),)
    at = datetime(2026, 12, 5, tzinfo=UTC)
    stored = StoredCheckpoint("s1", 1, at, "## I am here\n", memo, "", 1, Carry())
    state = LiveState(messages=(ChatMessage("user", ABOUT_THE_RULE, seq=9, kind="user"),))
    budgets = budgets_for(8000, 5000)
    counter = TiktokenCounter("cl100k_base")
    for remind in (True, False):
        view = Viewer(counter, "s1", "SYSTEM", 0, budgets, remind=remind).view(state, stored)
        assert view[2].content == ABOUT_THE_RULE
        assert [m.kind for m in view[3:]] == ([REMINDER_KIND] if remind else [])
