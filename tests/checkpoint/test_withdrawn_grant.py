"""A permission the user withdrew is never shown as in force (N3, P3), whatever words withdrew it.

The repro: "You may delete the snapshots without asking me.", later "Scratch what I said about the
snapshots" (no correction word the harness knows); the model unticks the grant, the harness keeps it back
as a rule, and the recollection listed it under "The user's words still in force" alone. Now a later user
message about the same thing as a kept rule (by shared subject words, not wording) is kept beside it,
newest last, and the rule's header says it changed later - or the rule goes with it.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from core_doubles import AT, TICKET_MIND, TICKET_SCENE, CharCounter, drive, make_entry, structured_answers
from hypothesis import example, given, settings
from hypothesis import strategies as st

from avibe.checkpoint.budgets import Budgets, budgets_for
from avibe.checkpoint.changes import about_same, later_changes
from avibe.checkpoint.effects import TurnInputs
from avibe.checkpoint.memo import corrects, reads_as_rule
from avibe.checkpoint.model import Checkpoint, MemoItem
from avibe.checkpoint.turn import Accepted, checkpoint_turn
from avibe.checkpoint.turn_state import draft, start
from avibe.context.assemble import recollection
from avibe.providers.scripted import ScriptedModel
from avibe.record.entries import Entry
from avibe.record.messages import ChatMessage

COUNTER = CharCounter()
SMALL = budgets_for(8_192, 6_000)
LARGE = budgets_for(192_000, 170_000)
GRANT = "You may delete the snapshots without asking me."
WITHDRAWAL = "Scratch what I said about the snapshots"


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


def _untick_grant(enum: list[Any]) -> list[Any]:
    """The model's ticks: everything but the grant (#1)."""
    return [label for label in enum if str(label) != "1"]


def _turn(inputs: TurnInputs) -> Checkpoint:
    outcome = drive(checkpoint_turn(inputs), ScriptedModel([structured_answers(_untick_grant)] * 6)).outcome
    assert isinstance(outcome, Accepted), getattr(outcome, "problems", None)
    return outcome.checkpoint


def _assert_shown_with_its_change(text: str, rule: int, change: int) -> None:
    shown = text.index(f"Message #{rule} (the user changed this later, in message #{change}")
    assert text.index(f"Message #{change} (this changes message #{rule})") > shown, text


def test_N3_repro_the_grant_unticked_and_withdrawn_in_the_conversation_is_shown_with_the_withdrawal() -> None:
    """The grant moves out; the withdrawal is still in the conversation; the model unticks the grant and
    the harness keeps it as a rule: the recollection shows it marked, the withdrawal after it."""
    assert reads_as_rule(GRANT) and not corrects(GRANT, WITHDRAWAL)  # no correction word the check knows
    moved = [make_entry(1, GRANT), make_entry(2, "Run the unit tests in tests/unit after each ticket.")]
    live = [make_entry(3, WITHDRAWAL)]
    previous = Checkpoint(mind=TICKET_MIND, memo=(), scene=TICKET_SCENE)
    checkpoint = _turn(_inputs(moved, live, previous, LARGE))
    assert [i.seq for i in checkpoint.memo if i.seq in (1, 3)] in ([1, 3], []), checkpoint.memo
    for rendering in ("sections", "plain", "rules-last"):
        _assert_shown_with_its_change(recollection(checkpoint, rendering=rendering), 1, 3)


def test_N3_repro_a_grant_kept_before_and_unticked_now_stays_only_with_its_withdrawal() -> None:
    """The grant was kept at the last checkpoint; the withdrawal came since and is still in the
    conversation; the model unticks the grant now: the pair stays, never the grant alone."""
    grant = make_entry(1, GRANT)
    previous = Checkpoint(mind=TICKET_MIND, memo=(MemoItem(1, GRANT),), scene=TICKET_SCENE)
    moved = [make_entry(4, "Work on ticket 004 next, the billing report.")]
    live = [make_entry(5, WITHDRAWAL), make_entry(6, "Thanks, carry on.")]
    checkpoint = _turn(_inputs(moved, live, previous, LARGE, memo_entries=[grant]))
    seqs = [i.seq for i in checkpoint.memo]
    assert (1 in seqs) <= (5 in seqs), checkpoint.memo
    if 1 in seqs:
        _assert_shown_with_its_change(recollection(checkpoint), 1, 5)


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
    "Run the unit tests in tests/unit after each ticket.",
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
    for s, grant, withdrawal in itertools.product(SUBJECTS, GRANTS, WITHDRAWALS):
        assert reads_as_rule(grant.format(s=s)) and about_same(grant.format(s=s), withdrawal.format(s=s))
        for other in UNRELATED:
            assert not about_same(grant.format(s=s), other)


def _checkpoints(
    said: Sequence[Said], cuts: Sequence[int], how: str, budgets: Budgets, data: st.DataObject
) -> list[tuple[Checkpoint, int]]:
    """Checkpoints in a row through the turn's real draft step, each moving the next chunk out, the rest
    still in the conversation; the model unticks every grant, ticks nothing, or ticks at random.
    Returns each checkpoint with the newest record number it has seen (moved out or in the conversation)."""
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
            ticked = (
                frozenset(data.draw(st.lists(st.sampled_from(labels), unique=True)))
                if labels
                else frozenset()
            )
        proposed, problems = draft(state, ticked, TICKET_SCENE)
        assert not problems, problems  # the harness's own memo is always valid (V3)
        made.append((proposed, len(entries)))
        seqs = {item.seq for item in proposed.memo}
        gone |= {c.seq for c in state.candidates if c.seq not in seqs}  # N6, as accept() records it
        previous = proposed
    return made


_HEADER = re.compile(r"^Message #(\d+)(?: \((.*)\))?:$", re.MULTILINE)


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
    data=None,
)
@settings(max_examples=120, deadline=None)
def test_N3_no_recollection_shows_a_withdrawn_grant_without_its_withdrawal_after_it(
    said: list[Said], cuts: list[int], how: str, data: st.DataObject
) -> None:
    """Whatever the words, the order, the messages between and what the model ticks: wherever a
    recollection shows a grant, it shows every later withdrawal of the same thing in the record so far
    after it, and the grant's header names each one as its later change."""
    for budgets in (SMALL, LARGE):
        for checkpoint, seen in _checkpoints(said, cuts, how, budgets, data):
            for rendering in ("sections", "plain"):
                text = recollection(checkpoint, rendering=rendering)
                headers = {int(m.group(1)): (m.start(), m.group(2) or "") for m in _HEADER.finditer(text)}
                for seq, (at, note) in headers.items():
                    s = said[seq - 1]
                    if not s.grant:
                        continue
                    for later in range(seq + 1, seen + 1):
                        w = said[later - 1]
                        if w.grant or w.subject != s.subject:
                            continue
                        assert later in headers and headers[later][0] > at, (s.text, w.text, text)
                        assert re.search(rf"#{later}\b", note), (s.text, w.text, note)


def test_later_changes_links_a_rule_to_later_items_about_the_same_thing_only() -> None:
    memo = (
        MemoItem(1, GRANT),
        MemoItem(2, "Run the unit tests in tests/unit after each ticket."),
        MemoItem(3, WITHDRAWAL),
        MemoItem(4, "Never push to the main branch."),
    )
    assert later_changes(memo) == {1: (3,)}
