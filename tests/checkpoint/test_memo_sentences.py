"""Long user messages keep their rules (N4, N5, L3): a message too long to keep whole gets
a checklist line per sentence its cut would lose; a ticked sentence is copied from the record verbatim with
its pointer "(from #N)", so a rule at the end of a long message survives - and the model still only ticks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from itertools import pairwise
from typing import Any

from core_doubles import AT, TICKET_MIND, TICKET_SCENE, CharCounter, drive, make_entry, structured_answers
from hypothesis import given, settings
from hypothesis import strategies as st

from avibe.checkpoint.budgets import budgets_for
from avibe.checkpoint.memo import (
    Candidate,
    build_memo,
    dismissed,
    memo_candidates,
    memo_labels,
    memo_text_matches,
    read_ticks,
    render_checklist,
    sentence_note,
    sentences,
)
from avibe.checkpoint.model import Checkpoint, MemoItem
from avibe.checkpoint.turn import Accepted, TurnInputs, checkpoint_turn
from avibe.checkpoint.validate import validate
from avibe.providers.scripted import ScriptedModel
from avibe.record.entries import Entry
from avibe.record.messages import ChatMessage

COUNTER = CharCounter()
BUDGETS = replace(
    budgets_for(8_192, 6_000), memo_per_message=60, memo_total=240
)  # 60 tokens a message: a long message is cut
RULE = "Never modify anything under vendor/."
LONG = (
    "Work through the ticket queue in tickets/, oldest first. For each ticket, read it, make the change it "
    "asks for, add a line to CHANGELOG.md and move on to the next one. Ask me only when a decision is "
    "needed; otherwise decide yourself and say what you decided. Keep the docs in docs/guide.md in step "
    f"with the code. {RULE}"
)


def _long_entry(seq: int = 12) -> Entry:
    return make_entry(seq, LONG)


def test_N5_a_long_message_gets_lines_for_the_sentences_its_cut_loses() -> None:
    entry = _long_entry()
    assert COUNTER.count(LONG) > BUDGETS.memo_per_message
    candidates = memo_candidates(
        [entry], (), frozenset(), counter=COUNTER, per_message=BUDGETS.memo_per_message
    )
    assert candidates[0] == Candidate(12, LONG)
    parts = candidates[1:]
    assert parts and all(c.seq == 12 and c.part >= 1 for c in parts)
    assert parts[-1].text == RULE and parts[-1].label == f"12.{len(sentences(LONG))}"
    checklist = render_checklist(candidates)
    assert f"- [ ] #12.{len(sentences(LONG))} {RULE}\n" in checklist
    # without a counter (the old call) the checklist is one line per message
    assert memo_candidates([entry], (), frozenset()) == [Candidate(12, LONG)]


def test_N4_N5_a_ticked_last_sentence_is_copied_verbatim_with_its_pointer() -> None:
    entry = _long_entry()
    last = f"12.{len(sentences(LONG))}"
    outcome = build_memo([12, last], {12: entry}, COUNTER, BUDGETS)
    assert outcome.problems == []
    whole, rule = outcome.items
    assert whole.cut and RULE not in whole.text  # the cut alone would lose the rule ...
    assert rule == MemoItem(12, RULE + sentence_note(12), cut=True)  # ... the sentence keeps it, verbatim
    assert memo_text_matches(rule, LONG)
    proposed = Checkpoint(mind=_mind(), memo=outcome.items, scene=_scene())
    assert validate(None, proposed, BUDGETS, COUNTER, record={12: entry}) == []
    retold = MemoItem(12, "Never change vendor/." + sentence_note(12), cut=True)
    bad = validate(None, Checkpoint(_mind(), (retold,), _scene()), BUDGETS, COUNTER, record={12: entry})
    assert [p.code for p in bad] == ["memo.text_changed"]


def test_N4_tools_mode_ticks_a_sentence_line_and_nothing_else_may_change() -> None:
    candidates = memo_candidates(
        [_long_entry()], (), frozenset(), counter=COUNTER, per_message=BUDGETS.memo_per_message
    )
    original = render_checklist(candidates)
    last = candidates[-1].label
    edited = original.replace(f"- [ ] #{last} ", f"- [x] #{last} ")
    assert (
        read_ticks(original, edited).ticked == frozenset({last})
        and read_ticks(original, edited).problems == []
    )
    changed = edited.replace(RULE, "Never touch vendor/.")
    assert [p.code for p in read_ticks(original, changed).problems] == ["memo.line_changed"]


def test_N6_a_message_kept_only_by_a_sentence_is_not_dismissed_and_comes_back_ticked() -> None:
    entry = _long_entry()
    candidates = memo_candidates(
        [entry], (), frozenset(), counter=COUNTER, per_message=BUDGETS.memo_per_message
    )
    last = candidates[-1].label
    assert dismissed(candidates, {last}) == frozenset()
    assert dismissed(candidates, set()) == frozenset({12})
    memo = build_memo([last], {12: entry}, COUNTER, BUDGETS).items
    again = memo_candidates([], memo, frozenset(), entries={12: entry})
    assert again == [Candidate(12, RULE + sentence_note(12), ticked=True, kept=True, part=int(str(last)[3:]))]
    assert memo_labels(memo, {12: entry}) == [last]
    # kept again next time (entry given or not): the same item, byte for byte
    assert build_memo([last], {12: entry}, COUNTER, BUDGETS, memo).items == memo
    [alone] = memo_labels(memo, {})  # without its entry the item is placed by position, still kept as is
    assert build_memo([alone], {}, COUNTER, BUDGETS, memo).items == memo


def test_N5_a_sentence_the_kept_whole_already_holds_is_not_repeated() -> None:
    entry = _long_entry()
    outcome = build_memo([12, "12.1"], {12: entry}, COUNTER, budgets_for(192_000, 170_000))
    assert outcome.items == (MemoItem(12, LONG),)  # 300 tokens: the whole fits, sentence 1 is in it


SENTENCE = st.text(alphabet="abcdefgh vendor/.!?\n", min_size=1, max_size=120)
LABELS = st.one_of(
    st.integers(-2, 14),
    st.text(alphabet="0123456789.", max_size=5),
    st.booleans(),
    st.sampled_from(["12.99", "3.1", "x"]),
)


@given(
    texts=st.lists(st.lists(SENTENCE, min_size=1, max_size=12).map(" ".join), min_size=1, max_size=5),
    kinds=st.lists(st.sampled_from(["user", "user", "watch", "agent"]), min_size=5, max_size=5),
    ticked=st.lists(LABELS, max_size=20),
    per_message=st.integers(60, 200),
    tick_all=st.booleans(),
)
@settings(max_examples=300, deadline=None)
def test_N4_N5_N7_whatever_the_model_ticks_memo_texts_are_verbatim_user_words_with_their_pointer(
    texts: list[str], kinds: list[Any], ticked: list[Any], per_message: int, tick_all: bool
) -> None:
    entries = [make_entry(seq, text, kind=kinds[seq - 1]) for seq, text in enumerate(texts, 1)]
    by_seq = {e.seq: e for e in entries}
    budgets = budgets_for(per_message * 640, per_message * 500)
    candidates = memo_candidates(
        entries, (), frozenset(), counter=COUNTER, per_message=budgets.memo_per_message, entries=by_seq
    )
    assert all(by_seq[c.seq].is_user for c in candidates)  # N7: chosen by stored kind only
    labels = [c.label for c in candidates] if tick_all else ticked
    for item in build_memo(labels, by_seq, COUNTER, budgets).items:
        entry = by_seq[item.seq]
        assert entry.is_user
        assert memo_text_matches(item, entry.text)
        if item.text.endswith(sentence_note(item.seq)):
            assert item.cut
            body = item.text.removesuffix(sentence_note(item.seq)).removesuffix(" ...")
            assert body and body in entry.text  # a verbatim piece of the user's message
        assert COUNTER.count(item.text) <= max(budgets.memo_per_message, COUNTER.count(sentence_note(99)) + 2)


@settings(deadline=None)  # a busy machine is no failure
@given(st.text(max_size=400))
def test_N4_sentences_are_verbatim_slices_in_order(text: str) -> None:
    spans = sentences(text)
    assert all(text[a:b] == text[a:b].strip() and text[a:b] for a, b in spans)
    assert all(b1 <= a2 for (_, b1), (a2, _) in pairwise(spans))


# ---- through the structured turn ---------------------------------------------------------------------


def _mind() -> str:
    return TICKET_MIND


def _scene() -> str:
    return TICKET_SCENE


def _answer_picking(label_of_rule: list[Any]) -> Any:
    def keep(enum: list[Any]) -> list[Any]:
        label_of_rule.extend(enum)
        return [12, [label for label in enum if isinstance(label, str)][-1]]

    return structured_answers(keep)


def test_N5_structured_turn_offers_sentence_labels_and_keeps_the_late_rule() -> None:
    entries: Sequence[Entry] = (_long_entry(), make_entry(13, "continue"))
    inputs = TurnInputs(
        mode="structured",
        live_messages=(
            ChatMessage("system", "You are Vibey."),
            ChatMessage("user", LONG, seq=12, kind="user"),
        ),
        previous=Checkpoint(mind=_mind(), memo=(), scene=_scene()),
        moved_entries=tuple(entries),
        budgets=BUDGETS,
        counter=COUNTER,
        at=AT,
        upto_seq=13,
    )
    seen: list[Any] = []
    with ScriptedModel([_answer_picking(seen)] * 5) as model:
        run = drive(checkpoint_turn(inputs), model)
    outcome = run.outcome
    assert isinstance(outcome, Accepted), getattr(outcome, "problems", None)
    texts = [item.text for item in outcome.checkpoint.memo]
    assert RULE + sentence_note(12) in texts
    assert outcome.dismissed_seqs == frozenset({13})
    assert seen[0] == 12 and seen[-1] == 13  # messages by number, in order, with their sentences between
    assert all(isinstance(label, str) and label.startswith("12.") for label in seen[1:-1])
