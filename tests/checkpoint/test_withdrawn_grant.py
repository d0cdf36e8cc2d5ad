"""A permission the user withdrew is never shown as in force (N3, P3), whatever words withdrew it.

The repro: "You may delete the snapshots without asking me.", later "Scratch what I said about the
snapshots" (no correction word the harness knows); the model unticks the grant, the harness keeps it back
as a rule, and the recollection listed it under "The user's words still in force" alone. Now a later user
message about the same thing as a kept rule (a thing both name, `about_same`, not their wording) is shown
with it, newest last: still in the conversation, the rule's header points at it ("changed later: #N,
in the conversation below") and no copy takes memo room; once it moves out it is kept beside
the rule, or the rule goes with it - never the rule alone.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from core_doubles import AT, TICKET_MIND, TICKET_SCENE, CharCounter, drive, make_entry, structured_answers
from hypothesis import example, given, settings
from hypothesis import strategies as st

from avibe.checkpoint.budgets import Budgets, budgets_for
from avibe.checkpoint.effects import TurnInputs
from avibe.checkpoint.memo import about_same, corrects, later_links, mark_later, reads_as_rule
from avibe.checkpoint.model import Checkpoint, MemoItem
from avibe.checkpoint.turn import Accepted, checkpoint_turn
from avibe.checkpoint.turn_state import draft, start
from avibe.context.assemble import RENDERINGS, recollection
from avibe.providers.scripted import ScriptedModel
from avibe.record.entries import Entry
from avibe.record.messages import ChatMessage

COUNTER = CharCounter()
SMALL = budgets_for(8_192, 6_000)
LARGE = budgets_for(192_000, 170_000)
GRANT = "You may delete the snapshots without asking me."
WITHDRAWAL = "Scratch what I said about the snapshots"
TESTS_RULE = "Run the unit tests in tests/unit after each ticket."


def _inputs(
    moved: Sequence[Entry],
    live: Sequence[Entry],
    previous: Checkpoint,
    budgets: Budgets,
    memo_entries: Sequence[Entry] = (),
    gone: frozenset[int] = frozenset(),
) -> TurnInputs:
    return TurnInputs(
        mode="structured",
        live_messages=(
            ChatMessage("system", "You are Vibey."),
            *(ChatMessage("user", e.text, kind="user", seq=e.seq) for e in live),
        ),
        previous=previous,
        moved_entries=tuple(moved),
        memo_entries=tuple(memo_entries),
        live_entries=tuple(live),
        budgets=budgets,
        counter=COUNTER,
        at=AT,
        dismissed=gone,
        upto_seq=moved[-1].seq,
    )


def _turn(inputs: TurnInputs, untick: frozenset[str] = frozenset({"1"})) -> Checkpoint:
    """The real checkpoint turn; the model ticks every line but `untick`."""

    def ticks(enum: list[Any]) -> list[Any]:
        return [label for label in enum if str(label) not in untick]

    outcome = drive(checkpoint_turn(inputs), ScriptedModel([structured_answers(ticks)] * 6)).outcome
    assert isinstance(outcome, Accepted), getattr(outcome, "problems", None)
    return outcome.checkpoint


def test_N3_repro_a_grant_unticked_while_its_withdrawal_is_in_the_conversation_is_marked_changed_later() -> (
    None
):
    """The issue's repro, through the real turn: the grant moves out, the withdrawal is still in the
    conversation, the model unticks the grant and the harness keeps it back as a rule. Every rendering
    shows it marked as changed later in the message still below - and the memo holds no copy of it."""
    assert reads_as_rule(GRANT) and not corrects(GRANT, WITHDRAWAL)  # no correction word the check knows
    moved = [make_entry(1, GRANT), make_entry(2, TESTS_RULE)]
    live = [make_entry(3, WITHDRAWAL), make_entry(4, "Thanks, carry on.")]
    previous = Checkpoint(mind=TICKET_MIND, memo=(), scene=TICKET_SCENE)
    for budgets in (SMALL, LARGE):
        checkpoint = _turn(_inputs(moved, live, previous, budgets))
        kept = {item.seq: item for item in checkpoint.memo}
        assert 3 not in kept, checkpoint.memo  # still in view: pointed at, not copied (its room stays free)
        if 1 not in kept:
            continue
        for rendering in RENDERINGS:
            text = recollection(checkpoint, rendering=rendering)
            assert "Message #1 (changed later: #3, in the conversation below):" in text
            assert "Message #2:" in text  # a line the withdrawal is not about stays unmarked
        assert kept[1].later == (3,) and kept[2].later == (), checkpoint.memo


def test_N3_repro_a_grant_and_its_withdrawal_moved_out_together_are_shown_paired_in_order() -> None:
    """The grant and the withdrawal move out together; the model unticks the grant: the harness keeps
    the pair, the grant's header names the withdrawal and the withdrawal's names the grant, in order."""
    moved = [make_entry(1, GRANT), make_entry(2, TESTS_RULE), make_entry(3, WITHDRAWAL)]
    live = [make_entry(4, "Work on ticket 004 next, the billing report.")]
    previous = Checkpoint(mind=TICKET_MIND, memo=(), scene=TICKET_SCENE)
    checkpoint = _turn(_inputs(moved, live, previous, LARGE))
    assert [i.seq for i in checkpoint.memo if i.seq in (1, 3)] == [1, 3], checkpoint.memo
    for rendering in RENDERINGS:
        text = recollection(checkpoint, rendering=rendering)
        assert text.index("Message #3:") > text.index("Message #1 (changed later: #3):"), text


def test_N3_a_grant_kept_before_and_unticked_now_stays_with_its_withdrawal_kept_before() -> None:
    """Both were kept at the last checkpoint; the model now unticks both: the harness keeps the grant back
    as a rule, and with it the withdrawal (the pair, never the grant alone, and not neither where both
    fit). Without the step that keeps a rule's later change beside it, the grant went with its change."""
    grant, withdrawal = make_entry(1, GRANT), make_entry(3, WITHDRAWAL)
    memo = (MemoItem(1, GRANT), MemoItem(3, WITHDRAWAL))
    previous = Checkpoint(mind=TICKET_MIND, memo=memo, scene=TICKET_SCENE)
    moved = [make_entry(5, "Work on ticket 004 next, the billing report.")]
    live = [make_entry(6, "Thanks, carry on.")]
    inputs = _inputs(moved, live, previous, LARGE, memo_entries=[grant, withdrawal])
    checkpoint = _turn(inputs, untick=frozenset({"1", "3"}))
    assert [i.seq for i in checkpoint.memo if i.seq in (1, 3)] == [1, 3], checkpoint.memo


def test_N3_a_withdrawal_pointed_at_is_kept_beside_its_grant_when_it_moves_out() -> None:
    """Checkpoint 1 marks the grant, the withdrawal still below; at checkpoint 2 the withdrawal moves
    out and the model unticks both: the pair is kept, the withdrawal now a memo line after the grant."""
    entries = [make_entry(1, GRANT), make_entry(2, TESTS_RULE), make_entry(3, WITHDRAWAL)]
    entries += [make_entry(4, "Work on ticket 004 next, the billing report.")]
    previous = Checkpoint(mind=TICKET_MIND, memo=(), scene=TICKET_SCENE)
    first = _turn(_inputs(entries[:2], entries[2:], previous, LARGE))
    assert [(i.seq, i.later) for i in first.memo if i.seq == 1] == [(1, (3,))], first.memo
    second = _turn(
        _inputs(entries[2:3], entries[3:], first, LARGE, entries[:2]), untick=frozenset({"1", "3"})
    )
    assert [(i.seq, i.later) for i in second.memo if i.seq in (1, 3)] == [(1, ()), (3, ())], second.memo
    assert "Message #1 (changed later: #3):" in recollection(second)


def test_mark_later_points_only_rules_at_later_user_messages_about_them_not_in_the_memo() -> None:
    items = (
        MemoItem(1, GRANT),
        MemoItem(2, "Never push to the main branch."),
        MemoItem(5, "The billing report lists snapshots."),
    )
    live = [
        make_entry(3, WITHDRAWAL),
        make_entry(
            4, "About the snapshots: the cron writes them nightly.", kind="assistant"
        ),  # not the user's
        make_entry(6, "Push the hotfix to the main branch today, just this once."),
    ]
    marked = mark_later(items, live)
    assert [i.later for i in marked] == [(3,), (6,), ()]  # #5 is no rule; #4 is not the user's (N7)
    assert later_links(marked) == {(1, 3), (2, 6), (1, 5)}  # #5 is kept: paired in the memo itself
    assert mark_later((MemoItem(1, GRANT, later=(9,)),), []) == (MemoItem(1, GRANT),)
    assert mark_later((MemoItem(1, GRANT, later=(9,)),), [])[0].later == ()  # a stale mark is not kept


def test_a_memo_items_later_marks_survive_the_store_round_trip_and_bad_ones_are_refused() -> None:
    item = MemoItem(4, GRANT, later=(7, 9))
    assert MemoItem.from_dict(item.to_dict()).later == (7, 9)
    assert "later" not in MemoItem(4, GRANT).to_dict()  # documents stored before marks read the same
    for bad in ([3], [True], "7", [7.0]):
        with pytest.raises(ValueError, match="later"):
            MemoItem.from_dict({"seq": 4, "text": GRANT, "later": bad})


# ---- the property: grants and withdrawals in varied words, unrelated messages between -----------------

SUBJECTS = ("snapshots", "vendor/ folder", "staging database", "migration scripts", "nightly backups")
GRANTS = (
    "You may delete the {s} without asking me.",
    "You are allowed to rewrite the {s} whenever it helps.",
    "Feel free to prune the {s}, you don't have to ask me first.",
    "Go ahead and wipe the {s} any time, no need to check with me, you may.",
)
WITHDRAWALS = (
    "Scratch what I said about the {s}",
    "Hold off on the {s} for now.",
    "On second thought, leave the {s} alone.",
    "Hmm, the {s}: let's keep them as they are after all.",
    "About the {s} - I changed my mind, hands off.",
)
UNRELATED = (
    TESTS_RULE,
    "Thanks, looks good so far.",
    "Update the changelog entry for ticket 003 with the new report name.",
    "ok",
    "The billing report should list totals per customer.",
)


@dataclass(frozen=True)
class Said:
    text: str
    subject: str | None
    grant: bool


said_one = st.one_of(
    st.builds(lambda t, s: Said(t.format(s=s), s, True), st.sampled_from(GRANTS), st.sampled_from(SUBJECTS)),
    st.builds(
        lambda t, s: Said(t.format(s=s), s, False), st.sampled_from(WITHDRAWALS), st.sampled_from(SUBJECTS)
    ),
    st.sampled_from(UNRELATED).map(lambda t: Said(t, None, False)),
)


def test_the_generated_words_are_what_the_property_assumes() -> None:
    """Every grant reads as a rule and is about each withdrawal of its subject, in no shared wording;
    no unrelated message and no other subject is about it."""
    for s, grant, withdrawal in itertools.product(SUBJECTS, GRANTS, WITHDRAWALS):
        assert reads_as_rule(grant.format(s=s)) and about_same(grant.format(s=s), withdrawal.format(s=s))
        for other in UNRELATED:
            assert not about_same(grant.format(s=s), other)
        for t in SUBJECTS:
            assert about_same(grant.format(s=s), withdrawal.format(s=t)) == (s == t)


def _checkpoints(
    said: Sequence[Said], cuts: Sequence[int], how: str, budgets: Budgets, data: st.DataObject
) -> list[tuple[Checkpoint, int]]:
    """Checkpoints in a row through the turn's real start and draft steps, each moving the next chunk out,
    the rest still in the conversation; the model unticks every grant, ticks nothing, or ticks at random.
    Returns each checkpoint with the newest record number it moved out."""
    entries = [make_entry(seq, s.text) for seq, s in enumerate(said, 1)]
    bounds = sorted({0, *(c % (len(entries) + 1) for c in cuts), len(entries)})
    previous = Checkpoint(mind=TICKET_MIND, memo=(), scene=TICKET_SCENE)
    gone: frozenset[int] = frozenset()
    made = []
    for lo, hi in itertools.pairwise(bounds):
        if lo == hi:
            continue
        kept = [e for e in entries[:lo] if e.seq in {i.seq for i in previous.memo}]
        state = start(_inputs(entries[lo:hi], entries[hi:], previous, budgets, kept, gone))
        labels = [c.label for c in state.candidates]
        if how == "untick-grants":
            ticked = frozenset(c.label for c in state.candidates if not said[c.seq - 1].grant)
        elif how == "none":
            ticked = frozenset()
        else:
            drawn = data.draw(st.lists(st.sampled_from(labels), unique=True)) if labels else []
            ticked = frozenset(drawn)
        proposed, problems = draft(state, ticked, TICKET_SCENE)
        assert not problems, problems  # the harness's own memo is always valid (V3)
        made.append((proposed, hi))
        seqs = {item.seq for item in proposed.memo}
        gone |= {c.seq for c in state.candidates if c.seq not in seqs}  # N6, as accept() records it
        previous = proposed
    return made


_HEADER = re.compile(r"^Message #(\d+)(?: \((.*)\))?:$", re.MULTILINE)


def _assert_no_grant_alone(text: str, said: Sequence[Said], upto: int) -> None:
    """Each grant shown names each later withdrawal of its subject in its header, shown after it: kept in
    the memo (once moved out it must be), or pointed at in the conversation below (still there)."""
    headers = {int(m.group(1)): (m.start(), m.group(2) or "") for m in _HEADER.finditer(text)}
    for seq, (at, note) in headers.items():
        if not said[seq - 1].grant:
            continue
        for later in range(seq + 1, len(said) + 1):
            w = said[later - 1]
            if w.grant or w.subject != said[seq - 1].subject:
                continue
            # the same words sent again later stand for them (N1, turn_state.sent_again)
            twin = next((n for n in headers if n > later and said[n - 1].text == w.text), None)
            later = later if later in headers or twin is None else twin
            if later in headers:  # kept: after the grant, the grant's header naming it
                assert headers[later][0] > at and re.search(rf"#{later}\b", note), (said[seq - 1], w, text)
            else:  # not moved out yet, and pointed at
                assert later > upto, (said[seq - 1], w, text)
                assert re.search(rf"#{later}\b[^;]*in the conversation below", note), (said[seq - 1], w, note)


@given(
    said=st.lists(said_one, min_size=2, max_size=10),
    cuts=st.lists(st.integers(0, 20), max_size=3),
    how=st.sampled_from(["untick-grants", "none", "random"]),
    data=st.data(),
)
# the repro: the grant moves out, the withdrawal is still in the conversation, the model unticks the grant
@example(
    said=[
        Said(GRANT, "snapshots", True),
        Said(UNRELATED[0], None, False),
        Said(WITHDRAWAL, "snapshots", False),
    ],
    cuts=[2],
    how="untick-grants",
    data=None,  # type: ignore[arg-type]  # not drawn from with "untick-grants"
)
@settings(max_examples=120, deadline=None)
def test_N3_no_recollection_shows_a_withdrawn_grant_without_its_withdrawal_after_it(
    said: list[Said], cuts: list[int], how: str, data: st.DataObject
) -> None:
    """Whatever the words, the order, the messages between and what the model ticks, in every rendering:
    wherever a recollection shows a grant, every later withdrawal of the same thing is shown after it -
    kept in the memo, or pointed at in the conversation below - and the grant's header names it."""
    for budgets in (SMALL, LARGE):
        for checkpoint, upto in _checkpoints(said, cuts, how, budgets, data):
            for rendering in RENDERINGS:
                _assert_no_grant_alone(recollection(checkpoint, rendering=rendering), said, upto)
