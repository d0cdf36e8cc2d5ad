"""The memo never contradicts the user: the harness keeps the user's newest words whatever
the model ticks and however the user worded them (N1, N2 without a word list), never shows a rule the user
changed later without the change (N3, P3), and its own additions never make a checkpoint invalid (V3).

Each property runs the turn's real draft step (`turn_state.start` + `draft`: the model's ticks, the
harness's rules, its newest words, the memo copied from the record, validation) over checkpoints in a row,
with a model that ticks at random or misbehaves on purpose.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import pytest
from core_doubles import AT, TICKET_MIND, TICKET_SCENE, CharCounter, make_entry, structured_turn_outcome
from hypothesis import example, given, settings
from hypothesis import strategies as st

from avibe.checkpoint.budgets import Budgets, budgets_for
from avibe.checkpoint.effects import TurnInputs
from avibe.checkpoint.memo import (
    changes_beside,
    corrects,
    cut_message,
    memo_tokens,
    reads_as_rule,
    says_nothing_that_stays,
)
from avibe.checkpoint.model import Checkpoint, MemoItem
from avibe.checkpoint.turn import Accepted
from avibe.checkpoint.turn_state import draft, start
from avibe.record.entries import Entry
from avibe.record.messages import ChatMessage

COUNTER = CharCounter()
SMALL = budgets_for(8_192, 6_000)  # 240 tokens in all: a handful of messages
LARGE = budgets_for(192_000, 170_000)
TMP_RULE = "dont use /tmp keep everything within the claude dir"  # a real session's newest rule, lost

SUBJECTS = ("snapshots", "vendor folder", "migrations", "staging box")
# A grant and a prohibition read as rules; the user's change of mind carries no rule word at all.
GRANT = "You may delete the {s} without asking me."
FORBID = "Never touch the {s} again."
REVOKE = "Scratch what I said about the {s}, leave that be for now."
REGRANT = "Fine, go ahead with the {s} after all, as you proposed."
CHATTER = (
    "Thanks, looks good so far.",
    "Good, carry on with the tests then.",
    "ok",
    "Thanks. What's next?",  # N3: only pushes the work along
    "How long do the tests take now?",  # N3: a question for information, answered
)
# A long message (cut in the memo, its late sentences offered alone) that says its rule twice: the
# harness's own sentence lines must not repeat an item (a real session: "Message #95 is in the memo twice").
BRIEF = (
    "Here is the background for this piece of work, so you know where things stand today. The service "
    "talks to the ledger through the old adapter and the new one is half done. The nightly job writes its "
    "report into reports/ and the team reads it every morning before the standup."
)


@dataclass(frozen=True)
class Said:
    text: str
    subject: str | None  # what it is about (None: chatter)
    rule: bool


def _said(kind: int, subject: str) -> Said:
    template = (GRANT, FORBID, REVOKE, REGRANT)[kind]
    return Said(template.format(s=subject), subject, template in (GRANT, FORBID))


messages = st.lists(
    st.one_of(
        st.builds(_said, st.integers(0, 3), st.sampled_from(SUBJECTS)),
        st.sampled_from(CHATTER).map(lambda text: Said(text, None, False)),
        st.sampled_from(SUBJECTS).map(
            lambda s: Said(f"{BRIEF} {FORBID.format(s=s)} {FORBID.format(s=s)}", s, True)
        ),
    ),
    min_size=1,
    max_size=14,
)


def test_texts_are_what_the_properties_assume() -> None:
    for subject in SUBJECTS:
        assert reads_as_rule(GRANT.format(s=subject)) and reads_as_rule(FORBID.format(s=subject))
        assert not reads_as_rule(REVOKE.format(s=subject)) and not reads_as_rule(REGRANT.format(s=subject))
    assert not reads_as_rule(TMP_RULE)


def _inputs(
    moved: Sequence[Entry],
    previous: Checkpoint,
    seen: Sequence[Entry],
    budgets: Budgets,
    gone: frozenset[int],
    live: Sequence[Entry] = (),
) -> TurnInputs:
    return TurnInputs(
        mode="structured",
        live_messages=(ChatMessage("system", "You are Vibey."),),
        previous=previous,
        moved_entries=tuple(moved),
        memo_entries=tuple(e for e in seen if e.seq in {i.seq for i in previous.memo}),
        live_entries=tuple(live),
        budgets=budgets,
        counter=COUNTER,
        at=AT,
        dismissed=gone,
        upto_seq=moved[-1].seq,
    )


def _run(
    said: Sequence[Said],
    cuts: Sequence[int],
    ticks: st.DataObject | str,
    budgets: Budgets,
    live: bool = True,
) -> list[tuple[Checkpoint, list[Entry], list[str]]]:
    """Checkpoints in a row, each moving the next chunk out (oldest first), the messages after it still in
    the conversation (`live`; none when False); the model ticks at random (`ticks` a hypothesis data
    object) or misbehaves: "rules" ticks the rules only and lets every change of mind go, "none" ticks
    nothing."""
    entries = [make_entry(seq, s.text) for seq, s in enumerate(said, 1)]
    bounds = sorted({0, *(c % (len(entries) + 1) for c in cuts), len(entries)})
    previous = Checkpoint(mind=TICKET_MIND, memo=(), scene=TICKET_SCENE)
    gone: frozenset[int] = frozenset()
    made = []
    for lo, hi in itertools.pairwise(bounds):
        if lo == hi:
            continue
        after = entries[hi:] if live else []
        state = start(_inputs(entries[lo:hi], previous, entries[:lo], budgets, gone, after))
        labels = [c.label for c in state.candidates]
        if ticks == "rules":
            ticked = frozenset(c.label for c in state.candidates if reads_as_rule(c.text))
        elif ticks == "none":
            ticked = frozenset()
        else:
            assert isinstance(ticks, st.DataObject)
            ticked = (
                frozenset(ticks.draw(st.lists(st.sampled_from(labels), unique=True)))
                if labels
                else frozenset()
            )
        proposed, problems = draft(state, ticked, TICKET_SCENE)
        made.append((proposed, entries[:hi], [p.code for p in problems]))
        seqs = {item.seq for item in proposed.memo}
        gone |= {c.seq for c in state.candidates if c.seq not in seqs}  # N6, as accept() records it
        previous = proposed
    return made


def _held(memo: Sequence[MemoItem]) -> set[int]:
    return {item.seq for item in memo}


def _twins(memo: Sequence[MemoItem], out: Sequence[Entry]) -> set[int]:
    """The messages moving out whose words a later message the memo holds repeats word for word: the later
    copy stands for them (N1, `turn_state.sent_again`)."""
    texts = {item.seq: item.text.strip() for item in memo}
    return {e.seq for e in out if any(n > e.seq and t == e.text.strip() for n, t in texts.items())}


def _changes(said: Sequence[Said], seq: int, held: set[int]) -> bool:
    """A message about the same thing as an earlier rule the memo holds: it stays while the rule does."""
    subject = said[seq - 1].subject
    return subject is not None and any(
        j < seq and said[j - 1].rule and said[j - 1].subject == subject for j in held
    )


def _change_unheld(said: Sequence[Said], seq: int, out: Sequence[Entry], held: set[int]) -> bool:
    """A rule whose later message about the same thing has moved out and is not held."""
    s = said[seq - 1]
    later = [e.seq for e in out if e.seq > seq and said[e.seq - 1].subject == s.subject]
    return s.rule and bool(set(later) - held)


@given(
    said=messages,
    cuts=st.lists(st.integers(0, 20), max_size=3),
    data=st.data(),
    how=st.sampled_from(["random", "rules", "none"]),
)
# found by the search: the grant and its revocation kept at one checkpoint, the model ticking the grant
# alone at the next (the revocation, a line it could untick, was let go)
@example(
    said=[_said(0, "snapshots"), _said(2, "snapshots"), Said(CHATTER[0], None, False)],
    cuts=[2],
    data=None,
    how="rules",
)
@settings(max_examples=150, deadline=None)
def test_N3_P3_a_rule_the_user_changed_later_is_never_kept_without_the_change(
    said: list[Said], cuts: list[int], data: st.DataObject, how: str
) -> None:
    """Grants, prohibitions, revocations and re-grants of a few things in any order, moved out over up to
    four checkpoints, on a small and a large memo: whenever the memo holds a rule, it also holds every later
    message of the user's about the same thing that has moved out - whatever the model ticks (at random, or
    the rules only and never a change of mind, or nothing)."""
    for budgets in (SMALL, LARGE):
        for checkpoint, out, problems in _run(said, cuts, data if how == "random" else how, budgets):
            held = _held(checkpoint.memo)
            assert not problems, problems  # the harness's own memo is always valid (V3)
            for entry in out:
                s = said[entry.seq - 1]
                if entry.seq not in held or not s.rule:
                    continue
                later = [e.seq for e in out if e.seq > entry.seq and said[e.seq - 1].subject == s.subject]
                assert set(later) <= held | _twins(checkpoint.memo, out), (
                    entry.text,
                    [said[q - 1].text for q in later],
                    checkpoint.memo,
                )


@given(
    said=messages,
    cuts=st.lists(st.integers(0, 20), max_size=3),
    data=st.data(),
    how=st.sampled_from(["random", "rules", "none"]),
)
@settings(max_examples=80, deadline=None)
def test_N1_the_users_newest_words_stay_whatever_the_model_ticks(
    said: list[Said], cuts: list[int], data: st.DataObject, how: str
) -> None:
    """No memo line only pushes the work along or asks to be told (N3). Every user message (of three words
    or more, N3's short replies and questions for information aside) moving out that the memo does
    not hold left only because the memo was full: no line of an older message that states no rule (nor
    changes one the memo holds) stayed in its place, and the newest one left out does not fit beside what
    the memo holds (the newest are kept first, while they fit, as a handoff keeps them)."""
    for budgets in (SMALL, LARGE):
        seen: set[int] = set()
        for checkpoint, out, problems in _run(said, cuts, data if how == "random" else how, budgets):
            assert not problems, problems
            held, memo = _held(checkpoint.memo), checkpoint.memo
            used = memo_tokens(memo, COUNTER)
            assert used <= budgets.memo_total
            assert not any(says_nothing_that_stays(item.text) for item in memo), memo  # N3
            moving = [
                e
                for e in out
                if e.seq not in seen and len(e.text.split()) >= 3 and not says_nothing_that_stays(e.text)
            ]
            seen |= {e.seq for e in out}
            # not held, and not a rule left out because its change did not fit (the other property)
            twins = _twins(memo, out)
            unheld = [
                e for e in moving if e.seq not in held | twins and not _change_unheld(said, e.seq, out, held)
            ]
            for entry in unheld:
                older_plain = [
                    i
                    for i in memo
                    if i.seq < entry.seq and not said[i.seq - 1].rule and not _changes(said, i.seq, held)
                ]
                assert not older_plain, (entry.text, older_plain)
            if unheld:  # kept newest first while they fit: the newest one left out did not fit
                cost = COUNTER.count(cut_message(unheld[-1], COUNTER, budgets.memo_per_message).text)
                assert used + cost > budgets.memo_total, (unheld[-1].text, memo)


def test_N1_a_rule_without_a_rule_word_is_kept_when_the_model_lets_it_go() -> None:
    """The real session: "dont use /tmp keep everything within the claude dir" - lower case, no
    apostrophe, none of the words the harness looks for - left with the model's untick; the handoff kept
    it by recency. It stays now, byte for byte, whether the model ticks nothing or only the chatter."""
    entries = [
        make_entry(3, "Work through the ticket queue in tickets/, oldest first."),
        make_entry(4, "Thanks, looks good so far."),
        make_entry(5, TMP_RULE),
        make_entry(6, "ok"),
    ]
    for keep in (lambda enum: [], lambda enum: [label for label in enum if str(label) == "4"]):
        outcome = structured_turn_outcome(entries, keep, TICKET_MIND, SMALL)
        assert isinstance(outcome, Accepted), getattr(outcome, "problems", None)
        assert MemoItem(5, TMP_RULE) in outcome.checkpoint.memo
        assert 6 not in _held(outcome.checkpoint.memo)  # "ok" means nothing alone (N3)
        assert any("newest words" in note for note in outcome.notes), outcome.notes


def test_N3_a_revocation_without_a_rule_word_stays_beside_the_rule_it_changes() -> None:
    """A model that ticks the grant and lets the revocation go: the harness keeps the revocation with it
    (the newer words shown after the rule), never the grant alone as if still in force."""
    grant, revoke = GRANT.format(s="snapshots"), REVOKE.format(s="snapshots")
    entries = [make_entry(1, grant), make_entry(2, revoke), make_entry(3, "ok")]
    outcome = structured_turn_outcome(
        entries, lambda enum: [label for label in enum if str(label) == "1"], TICKET_MIND, LARGE
    )
    assert isinstance(outcome, Accepted), getattr(outcome, "problems", None)
    assert [i.text for i in outcome.checkpoint.memo if i.seq in (1, 2)] == [grant, revoke]


@given(
    said=messages,
    cuts=st.lists(st.integers(0, 20), max_size=3),
    how=st.sampled_from(["rules", "none"]),
)
@settings(max_examples=120, deadline=None)
def test_N3_a_later_message_still_in_the_conversation_is_copied_beside_a_line_and_takes_no_place(
    said: list[Said], cuts: list[int], how: str
) -> None:
    """What the memo holds with the conversation's messages in view is what it holds without them, plus
    copies of messages still in the conversation, each later than a line it holds about the same thing:
    a copy lets nothing go, and every memo stays within its budget and valid (V3)."""
    for budgets in (SMALL, LARGE):
        seen = _run(said, cuts, how, budgets, live=False)
        shown = _run(said, cuts, how, budgets)
        for (alone, out, _), (beside, _, problems) in zip(seen, shown, strict=True):
            assert not problems, problems
            moved = {e.seq for e in out}
            assert memo_tokens(beside.memo, COUNTER) <= budgets.memo_total
            assert {i for i in beside.memo if i.seq in moved} == set(alone.memo), (alone.memo, beside.memo)
            for item in beside.memo:
                if item.seq not in moved:  # a copy: later than a line about the same thing
                    text = said[item.seq - 1].text  # the whole message (the memo may hold it cut)
                    assert not says_nothing_that_stays(text)
                    assert any(
                        i.seq < item.seq and changes_beside(said[i.seq - 1].text, text) for i in alone.memo
                    )


def test_N3_a_correction_still_in_the_conversation_is_copied_beside_the_request_it_corrects() -> None:
    """The eval's self_correction on the 0.5B: the memo held "Set ... to 48" while the user's correction
    stayed in the conversation (it began the current turn), and the model answered 48; with the correction
    copied beside the request it answered 16. Chatter and an unrelated request stay where they are."""
    asked = "Set the max_connections of the indexer pool to 48."
    corrected = "Correction: I meant the max_connections of the indexer pool must be 16, not 48."
    moved = [make_entry(1, "Our goal: stop the indexer connection errors."), make_entry(2, asked)]
    live = [
        make_entry(3, "Thanks, go on."),
        make_entry(4, corrected),
        make_entry(5, "Now rename the CLI flags."),
    ]
    previous = Checkpoint(mind=TICKET_MIND, memo=(), scene=TICKET_SCENE)
    for ticks in (frozenset(), frozenset({2})):
        state = start(_inputs(moved, previous, [], LARGE, frozenset(), live))
        proposed, problems = draft(state, ticks, TICKET_SCENE)
        assert not problems, problems
        assert [i.text for i in proposed.memo if i.seq >= 2] == [asked, corrected]
        assert state.newest.beside == (4,)
        # the copy is not offered as kept before while its message is still in the conversation (N6)
        again = start(
            _inputs([make_entry(3, "Thanks, go on.")], proposed, moved, LARGE, frozenset(), live[1:])
        )
        assert 4 not in {c.seq for c in again.candidates}


@pytest.mark.parametrize(
    ("line", "later", "changes"),
    [
        # the eval's self_correction and revoked_long_ago, and the ways people take words back
        (
            "Set the max_connections of the indexer pool to 48.",
            "Correction: I meant the max_connections of the indexer pool must be 16, not 48.",
            True,
        ),
        (
            "You may delete old snapshots in acme-snapshots-42 without asking me.",
            "I take that back: do not delete anything in acme-snapshots-42 without asking me first.",
            True,
        ),
        (
            "Use pip for installs in the backend folder.",
            "Use uv for installs in the backend folder instead.",
            True,
        ),
        (
            "Put the release notes in docs/notes.md.",
            "Scratch that, the release notes go in CHANGELOG.md.",
            True,
        ),
        (
            "Deploy the billing service to staging-2.",
            "The billing service goes to staging-3, not staging-2.",
            True,
        ),
        # about the same thing but no correction: more work, a question, a rule about it
        (
            "Set the max_connections of the indexer pool to 48.",
            "Also log the indexer pool size at start.",
            False,
        ),
        ("Set the max_connections of the indexer pool to 48.", "Why is the indexer pool slow?", False),
        ("Fix the parser bug in src/parser.py.", "Do not change the API of src/parser.py, not now.", False),
        # the eval's late_rule: a brief with "instead of" shares words with the mission, and changes nothing
        (
            "Our goal for this whole session: work through the 9 tickets in tickets/, oldest first.",
            "Some notes on how I want the work reported. Name new files after what they hold. If you find a "
            "bug outside the ticket, add a new ticket for it instead of fixing it on the way.",
            False,
        ),
        # a correction of something else
        (
            "Set the max_connections of the indexer pool to 48.",
            "Correction: I meant the README, not the wiki.",
            False,
        ),
    ],
)
def test_corrects_reads_a_taking_back_of_the_same_thing_only(line: str, later: str, changes: bool) -> None:
    """`corrects` (the recollection's note beside a corrected kept message)."""
    assert corrects(line, later) is changes
