"""The harness keeps the user's rules whatever the model ticks (N2 as a guarantee; the eval's late_rule,
docs/eval.md).

On the embedded 0.5B the eval's late_rule lost all three rules: offered every sentence of three long
messages, the model ticked other sentences than the rules at their ends. Now every sentence of a message
moving out that reads as a standing rule, and that no ticked line holds, is copied from the record too -
verbatim, within the memo budget, newest first - and a model that ticks nothing, or the wrong lines, or
junk, cannot lose it. Candidates are still chosen by stored kind (N7): a watch's "never ..." stays out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import pytest
from core_doubles import (
    TICKET_MIND,
    CharCounter,
    make_entry,
    structured_turn_outcome,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from avibe.checkpoint.budgets import budgets_for
from avibe.checkpoint.memo import (
    build_memo,
    clean_labels,
    contrasted,
    memo_candidates,
    memo_text_matches,
    memo_tokens,
    reads_as_limit,
    reads_as_rule,
    rules_kept,
    says_nothing_that_stays,
    sentence_note,
    sentences,
)
from avibe.checkpoint.model import MemoItem
from avibe.checkpoint.turn import Accepted
from avibe.evals.generators import BRIEF, CHATTER, REPORTING
from avibe.record.entries import Entry

COUNTER = CharCounter()
SMALL = replace(
    budgets_for(8_192, 6_000), memo_per_message=60, memo_total=240
)  # 60 tokens a message, 240 in all: long messages are cut
LARGE = budgets_for(192_000, 170_000)  # 300 a message, 3,000 in all

RULES = (
    "Never modify anything under vendor/.",
    "Do not spend more than $90 on cloud compute for this work.",
    "Only Ana may approve a change to the release scripts.",
    "Ask me before adding any new dependency.",
    "I take that back: do not delete anything in snap-12 without asking me first; legal may need it.",
    "Correction: I meant the max_connections of the pool must be 48, not 16.",
    "You may delete old snapshots in snap-12 without asking me.",
)
PLAIN = tuple(s for s in (*BRIEF, *REPORTING) if not reads_as_rule(s))
LONG = " ".join(["Our goal: work through the 7 tickets in tickets/, oldest first.", *BRIEF[:5], RULES[0]])


@pytest.mark.parametrize("text", RULES)
def test_N2_rules_limits_and_permissions_read_as_rules(text: str) -> None:
    assert reads_as_rule(text)


def test_of_the_rules_only_those_that_limit_what_may_be_done_read_as_limits() -> None:
    # a no, an only, a bound, asking first: what a request can go against (the view's reminder)
    assert all(reads_as_limit(text) for text in RULES[:5])
    # a value to follow and a grant limit nothing, though they are kept as rules
    assert not reads_as_limit(RULES[5]) and not reads_as_limit(RULES[6])
    assert reads_as_limit("Always open a pull request against trunk.")
    assert not reads_as_limit("The pool must be 16 and you should make sure the tests pass.")


@pytest.mark.parametrize(
    ("text", "excluded"),
    [
        (RULES[5], "16"),
        ("Pinned base image versions, not :latest.", ":latest"),
        ("Use release 1.4.2, not 1.3.0; the old one leaks.", "1.3.0"),
        ("Never modify anything under vendor/.", ""),
        ("Tabs, not spaces, in the Makefile.", "spaces"),
    ],
)
def test_a_contrast_names_what_it_excludes(text: str, excluded: str) -> None:
    assert contrasted(text) == excluded


@pytest.mark.parametrize(
    "text",
    [t.format(path="src/app.py", func="load") for t in CHATTER]
    + ["Run the tests after every change and fix what you broke before you move on."],
)
def test_N3_chatter_and_plain_instructions_do_not(text: str) -> None:
    assert not reads_as_rule(text)


def _fresh(entries: Sequence[Entry], budgets: Any = SMALL, previous: Sequence[MemoItem] = ()) -> list[Any]:
    return memo_candidates(
        entries,
        previous,
        frozenset(),
        counter=COUNTER,
        per_message=budgets.memo_per_message,
        entries={e.seq: e for e in entries},
    )


def test_N2_the_rule_at_the_end_of_a_long_message_is_kept_when_the_model_ticked_another_sentence() -> None:
    entry = make_entry(12, LONG)
    candidates = _fresh([entry])
    other = next(c.label for c in candidates if c.part and c.text != RULES[0])  # the late_rule failure
    last = f"12.{len(sentences(LONG))}"
    assert rules_kept(candidates, {other}, {12: entry}, COUNTER, SMALL).added == (last,)
    memo = build_memo({other, last}, {12: entry}, COUNTER, SMALL).items
    assert MemoItem(12, RULES[0] + sentence_note(12), cut=True) in memo
    # ticked by the model: nothing to add
    assert rules_kept(candidates, {last}, {12: entry}, COUNTER, SMALL).added == ()


def test_N2_a_short_rule_left_unticked_is_kept_whole_and_chatter_is_not() -> None:
    entries = [make_entry(5, RULES[3]), make_entry(6, "ok, continue"), make_entry(7, RULES[1])]
    by_seq = {e.seq: e for e in entries}
    assert rules_kept(_fresh(entries), set(), by_seq, COUNTER, SMALL).added == (7, 5)  # newest first


def test_N7_a_rule_from_a_watch_or_another_agent_is_never_kept() -> None:
    entries = [make_entry(5, RULES[0], kind="watch"), make_entry(6, RULES[2], kind="agent")]
    by_seq = {e.seq: e for e in entries}
    assert rules_kept(_fresh(entries), set(), by_seq, COUNTER, SMALL).added == ()


def test_N2_a_rule_kept_before_that_the_model_lets_go_is_kept_again() -> None:
    """The 0.5B kept late_rule's rules at the first checkpoint (by the harness) and dropped two of them at
    the second, where they were ticked lines it could untick."""
    entry, chatter = make_entry(5, RULES[6]), make_entry(6, "Thanks.")
    previous = build_memo({5}, {5: entry}, COUNTER, SMALL).items
    entries = {5: entry, 6: chatter}
    candidates = _fresh([chatter], previous=previous)
    assert [(c.seq, c.kept) for c in candidates] == [(5, True), (6, False)]
    assert rules_kept(candidates, set(), entries, COUNTER, SMALL, previous).added == (5,)
    assert (
        rules_kept(candidates, {5}, entries, COUNTER, SMALL, previous).added == ()
    )  # still ticked: nothing to add
    fact = make_entry(4, "The staging box is called tern.")  # N3: what is no rule the model may let go
    known = build_memo({4}, {4: fact}, COUNTER, SMALL).items
    assert (
        rules_kept(
            _fresh([chatter], previous=known), set(), {4: fact, 6: chatter}, COUNTER, SMALL, known
        ).added
        == ()
    )
    kept_alone = build_memo({"5.1"}, {5: entry}, COUNTER, budgets_for(2_048, 1_000)).items  # a sentence item
    assert rules_kept(_fresh([], previous=kept_alone), set(), {}, COUNTER, SMALL, kept_alone).added == (
        "5.1",
    )


def test_N5_newer_rules_push_older_ones_out_when_the_memo_is_full() -> None:
    old = [make_entry(seq, f"{RULES[0]} Rule {seq} of the old ones, kept before.") for seq in range(1, 12)]
    previous = build_memo({e.seq for e in old}, {e.seq: e for e in old}, COUNTER, LARGE).items
    new = [make_entry(seq, f"{RULES[1]} Rule {seq}, new.") for seq in range(20, 26)]
    entries = {e.seq: e for e in (*old, *new)}
    candidates = _fresh(new, previous=previous)
    added = rules_kept(candidates, set(), entries, COUNTER, SMALL, previous).added
    assert set(range(20, 26)) <= set(added)  # every new one first
    assert added[:6] == (25, 24, 23, 22, 21, 20) and set(added) != set(entries)  # old ones as room allows
    assert memo_tokens(build_memo(set(added), entries, COUNTER, SMALL, previous).items, COUNTER) <= 240


def test_N5_the_harness_never_pushes_the_memo_over_its_budget_newest_rules_first() -> None:
    entries = [make_entry(seq, f"{RULES[seq % len(RULES)]} (rule {seq})") for seq in range(1, 30)]
    by_seq = {e.seq: e for e in entries}
    added = rules_kept(_fresh(entries), set(), by_seq, COUNTER, SMALL).added
    assert added and len(added) < len(entries)  # 240 tokens hold some of them, not all
    assert list(added) == sorted(added, key=int, reverse=True) and added[0] == 29
    assert memo_tokens(build_memo(set(added), by_seq, COUNTER, SMALL).items, COUNTER) <= SMALL.memo_total


MESSAGE = st.lists(st.sampled_from((*RULES, *PLAIN, "ok, continue", "Thanks.")), min_size=1, max_size=9)
KINDS = st.sampled_from(["user", "user", "user", "watch", "agent"])
JUNK = st.one_of(st.integers(-3, 40), st.text(alphabet="0123456789.x", max_size=5), st.booleans())


@given(
    messages=st.lists(st.tuples(MESSAGE.map(" ".join), KINDS), min_size=1, max_size=6),
    picks=st.lists(st.integers(0, 200), max_size=12),
    junk=st.lists(JUNK, max_size=4),
    small=st.booleans(),
)
@settings(max_examples=300, deadline=None)
def test_N2_N5_whatever_the_model_ticks_rules_are_kept_within_budget(
    messages: list[tuple[str, Any]], picks: list[int], junk: list[Any], small: bool
) -> None:
    budgets = SMALL if small else LARGE
    entries = [make_entry(seq, text, kind=kind) for seq, (text, kind) in enumerate(messages, 1)]
    by_seq = {e.seq: e for e in entries}
    candidates = _fresh(entries, budgets)
    ticked = {candidates[i % len(candidates)].label for i in picks} if candidates else set()
    ticked |= set(junk)
    before = build_memo(ticked, by_seq, COUNTER, budgets)
    kept = rules_kept(candidates, ticked, by_seq, COUNTER, budgets)
    added = kept.added
    after = build_memo((clean_labels(ticked) - set(kept.let_go)) | set(added), by_seq, COUNTER, budgets)
    assert all(
        by_seq[item.seq].is_user and memo_text_matches(item, by_seq[item.seq].text) for item in after.items
    )
    assert all(by_seq[int(str(label).split(".")[0])].is_user for label in added)  # N7
    assert memo_tokens(after.items, COUNTER) <= budgets.memo_total  # however much the model ticked
    assert not [p for p in after.problems if p.code == "memo.over_budget"]
    if memo_tokens(before.items, COUNTER) <= budgets.memo_total:  # within budget: only plain lines go
        gone = [build_memo({label}, by_seq, COUNTER, budgets).items for label in kept.let_go]
        assert all(items and not reads_as_rule(items[0].text) for items in gone)
    if not small:  # room for everything: every rule of the user's is carried, byte for byte
        for entry in entries:
            rules = [entry.text[a:b] for a, b in sentences(entry.text) if reads_as_rule(entry.text[a:b])]
            held = [item.text for item in after.items if item.seq == entry.seq]
            for rule in rules if entry.is_user else ():
                assert any(rule in text for text in held), (rule, held)


# ---- through the structured turn, with a model that ticks badly on purpose -----------------------------


def _turn(entries: Sequence[Entry], keep: Callable[[list[Any]], list[Any]]) -> Any:
    return structured_turn_outcome(entries, keep, TICKET_MIND, SMALL)


@pytest.mark.parametrize(
    "keep",
    [
        lambda enum: [],  # ticks nothing
        lambda enum: [label for label in enum if isinstance(label, str)][:1],  # the wrong sentence
        lambda enum: [enum[-1]],  # only the chatter at the end
    ],
    ids=["nothing", "wrong-sentence", "chatter"],
)
def test_N2_the_structured_turn_keeps_the_late_rule_whatever_the_model_ticks(
    keep: Callable[[list[Any]], list[Any]],
) -> None:
    entries = (make_entry(12, LONG), make_entry(13, "ok, continue"))
    outcome = _turn(entries, keep)
    assert isinstance(outcome, Accepted), getattr(outcome, "problems", None)
    assert MemoItem(12, RULES[0] + sentence_note(12), cut=True) in outcome.checkpoint.memo
    assert 12 not in outcome.dismissed_seqs  # N6: a message with a line kept is offered again, ticked
    assert any("worded as a rule" in note for note in outcome.notes)  # the harness says what it added


def _checkpoint(
    moved: Sequence[Entry], previous: Sequence[MemoItem], picks: list[int]
) -> tuple[MemoItem, ...]:
    """One checkpoint's memo as the harness builds it from a model's (random) ticks."""
    entries = {e.seq: e for e in moved}
    candidates = memo_candidates(
        moved, previous, frozenset(), counter=COUNTER, per_message=LARGE.memo_per_message, entries=entries
    )
    ticked = {candidates[i % len(candidates)].label for i in picks} if candidates else set()
    kept = rules_kept(candidates, ticked, entries, COUNTER, LARGE, previous)
    labels = (clean_labels(ticked) - set(kept.let_go)) | set(kept.added)
    return build_memo(labels, entries, COUNTER, LARGE, previous).items


@given(
    first=st.lists(st.tuples(MESSAGE.map(" ".join), KINDS), min_size=1, max_size=4),
    second=st.lists(st.tuples(MESSAGE.map(" ".join), KINDS), min_size=1, max_size=4),
    picks=st.tuples(st.lists(st.integers(0, 99), max_size=6), st.lists(st.integers(0, 99), max_size=6)),
)
@settings(max_examples=200, deadline=None)
def test_N2_through_two_checkpoints_every_rule_of_the_users_stays_whatever_the_model_ticks(
    first: list[tuple[str, Any]], second: list[tuple[str, Any]], picks: tuple[list[int], list[int]]
) -> None:
    messages = [*first, *second]
    entries = [make_entry(seq, text, kind=kind) for seq, (text, kind) in enumerate(messages, 1)]
    memo = _checkpoint(entries[: len(first)], (), picks[0])
    memo = _checkpoint(entries[len(first) :], memo, picks[1])
    for entry in entries:
        rules = [entry.text[a:b] for a, b in sentences(entry.text) if reads_as_rule(entry.text[a:b])]
        held = [item.text for item in memo if item.seq == entry.seq]
        assert all(any(rule in text for text in held) for rule in rules) if entry.is_user else not held


def test_N2_rules_come_before_ticked_chatter_when_the_memo_is_full() -> None:
    """A 0.5B model ticks every number it can count: the chatter it ticked is let go, oldest first, to make
    room for the rule it left out; what it ticked that states a rule is never let go for another."""
    line = "Thanks, that reads better; on to the next file number {}."
    count = SMALL.memo_total // COUNTER.count(line.format(10))  # as many as the memo holds
    chatter = [make_entry(seq, line.format(seq + 10)) for seq in range(1, count + 1)]
    rule = make_entry(count + 1, RULES[1])
    entries = {e.seq: e for e in (*chatter, rule)}
    ticked = {e.seq for e in chatter}
    assert memo_tokens(build_memo(ticked, entries, COUNTER, SMALL).items, COUNTER) <= SMALL.memo_total
    kept = rules_kept(_fresh([*chatter, rule]), ticked, entries, COUNTER, SMALL)
    assert kept.added == (rule.seq,) and kept.let_go == tuple(range(1, len(kept.let_go) + 1)) != ()
    memo = build_memo((ticked - set(kept.let_go)) | {rule.seq}, entries, COUNTER, SMALL).items
    assert MemoItem(rule.seq, RULES[1]) in memo and memo_tokens(memo, COUNTER) <= SMALL.memo_total
    rules = [make_entry(seq, f"{RULES[0]} ({seq + 10})") for seq in range(1, count + 1)]
    full = {e.seq: e for e in (*rules, rule)}
    kept = rules_kept(_fresh([*rules, rule]), {e.seq for e in rules}, full, COUNTER, SMALL)
    assert kept.let_go == ()  # every ticked line states a rule: none is let go for another


def test_V3_a_model_ticking_every_line_gets_a_valid_checkpoint_with_the_rules_not_a_fallback() -> None:
    """The sweep's talkative_user: the 0.5B ticked 374 tokens of a 240-token memo, the repair round ticked
    391, and both checkpoints fell back. The harness now fits the ticks: chatter goes first, oldest first."""
    chatter = [make_entry(seq, f"Can you look at src/app/module_{seq}.py next?") for seq in range(3, 40)]
    entries = (make_entry(1, RULES[0]), make_entry(2, RULES[3]), *chatter)
    outcome = _turn(entries, lambda enum: list(enum))  # every line ticked
    assert isinstance(outcome, Accepted) and not outcome.repaired, getattr(outcome, "problems", None)
    memo = outcome.checkpoint.memo
    assert MemoItem(1, RULES[0]) in memo and MemoItem(2, RULES[3]) in memo
    assert memo_tokens(memo, COUNTER) <= SMALL.memo_total and memo[-1].seq == 39  # the newest chatter stays
    assert any("to fit the budget" in note for note in outcome.notes), outcome.notes


# ---- the harness's own additions never make a checkpoint invalid ---------------------

REPEATED = " ".join([*BRIEF[:6], RULES[0], RULES[0]])  # a person who says a rule twice


def test_a_rule_said_twice_in_one_message_is_kept_once_and_the_checkpoint_is_valid() -> None:
    """The harness adds each rule sentence the ticks leave out; a sentence said twice gave two equal items
    and the harness's own memo failed validation (a real session: "Message #95 is in the memo twice")."""
    outcome = _turn((make_entry(12, REPEATED), make_entry(13, "ok, continue")), lambda enum: [])
    assert isinstance(outcome, Accepted), getattr(outcome, "problems", None)
    assert not any(p.code == "memo.item_repeated" for p in outcome.first_pass_problems)
    held = [item.text for item in outcome.checkpoint.memo if item.seq == 12]
    assert len(held) == len(set(held)) and any(RULES[0] in text for text in held)


@given(
    said=st.lists(st.sampled_from([*RULES[:3], *PLAIN[:3], "Again."]), min_size=1, max_size=8),
    picks=st.lists(st.integers(0, 99), max_size=8),
)
@settings(max_examples=200, deadline=None)
def test_whatever_is_ticked_and_added_the_memo_holds_no_item_twice(said: list[str], picks: list[int]) -> None:
    """de-duplicated before validation - no pair of memo items with the same number and
    text, whatever the model ticks and the harness adds, on small and large budgets."""
    entries = [make_entry(1, " ".join(said)), make_entry(2, " ".join(reversed(said)))]
    for budgets in (SMALL, LARGE):
        by_seq = {e.seq: e for e in entries}
        candidates = memo_candidates(
            entries, (), frozenset(), counter=COUNTER, per_message=budgets.memo_per_message, entries=by_seq
        )
        ticked = {candidates[i % len(candidates)].label for i in picks}
        kept = rules_kept(candidates, ticked, by_seq, COUNTER, budgets)
        labels = (clean_labels(ticked) - set(kept.let_go)) | set(kept.added)
        items = build_memo(labels, by_seq, COUNTER, budgets).items
        pairs = [(item.seq, item.text) for item in items]
        assert len(pairs) == len(set(pairs)), pairs


@pytest.mark.parametrize(
    "text",
    [
        "Thanks. What's next?",
        "ok, continue",
        "Sounds right to me.",
        "Fine by me, continue.",
        "How long do the tests take now?",
        "Hm, why is src/quillmere/payload_api.py so long?",
        "Is resolve_ledger still used anywhere?",
    ],
)
def test_N3_pleasantries_go_aheads_and_questions_for_information_say_nothing_that_stays(text: str) -> None:
    """The eval's talkative users: 20 such lines filled the 0.5B's memo around the two rules."""
    assert says_nothing_that_stays(text)


@pytest.mark.parametrize(
    "text",
    [
        "Can you look at src/quillmere/roster_ops.py next?",  # asks for work
        "Why not use pnpm instead?",  # suggests a way
        "Should we drop Python 3.9?",
        "Let's leave src/quillmere/shard_ops.py as it is for now.",
        "Show me the diff when you're done.",
        "Yes, delete it.",
        "Thanks. Never push on a Friday?",  # worded as a rule
        "What's next? Use pnpm from now on.",
        "",
    ],
)
def test_N3_a_request_a_suggestion_or_a_rule_is_never_let_go_as_a_push_along(text: str) -> None:
    assert not says_nothing_that_stays(text)


_PIECES = ("Thanks.", "ok,", "continue", "What's next?", "never", "only", "may", "How long", "is it",
           "?", ".", "don't", "go on", "the tests", "Can you", "please")  # fmt: skip


@given(st.one_of(st.text(max_size=120), st.lists(st.sampled_from(_PIECES), max_size=8).map(" ".join)))
def test_N2_N3_a_message_worded_as_a_rule_never_counts_as_a_push_along(text: str) -> None:
    assert not (reads_as_rule(text) and says_nothing_that_stays(text))


def test_N3_a_tick_on_a_push_along_is_let_go_and_the_rules_stay() -> None:
    """The model ticked everything; the harness lets go N3's lines whatever the budget, keeps the rest."""
    entries = [
        make_entry(3, "Never change the public API in src/wire/; other teams import it."),
        make_entry(4, "Thanks. What's next?"),
        make_entry(5, "How long do the tests take now?"),
        make_entry(6, "Let's leave src/shard_ops.py as it is for now."),
    ]
    outcome = structured_turn_outcome(
        entries, lambda enum: list(enum), TICKET_MIND, budgets_for(192_000, 170_000)
    )
    assert isinstance(outcome, Accepted), getattr(outcome, "problems", None)
    assert [item.seq for item in outcome.checkpoint.memo] == [3, 6]
    assert outcome.dismissed_seqs == frozenset({4, 5})
