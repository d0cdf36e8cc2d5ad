"""M4, "the mission changes only when the user explicitly changes it", checked by the harness
(docs/eval/real-set.md): once a mission exists, a new entry names the user's message since the last
checkpoint that changed it - the structured question's grammar offers only those numbers, and the harness
checks the number in either mode - or it is dropped with a note; the entries before are never fewer. On a
real session the 0.5B added two fragments of a tool's output as missions, which M4 then kept for ever."""

from __future__ import annotations

import json
from typing import Any

import pytest
from core_doubles import AT, TICKET_SCENE, CharCounter, drive, make_entry, structured_answers
from hypothesis import given, settings
from hypothesis import strategies as st

from avibe.checkpoint.budgets import budgets_for
from avibe.checkpoint.effects import TurnInputs
from avibe.checkpoint.mind import EMPTY_MIND, mission_lines
from avibe.checkpoint.mission_guard import guard_new_missions, says_it_ends
from avibe.checkpoint.model import Checkpoint
from avibe.checkpoint.turn import Accepted, checkpoint_turn
from avibe.checkpoint.turn_state import draft, start
from avibe.providers.scripted import ModelRequest, ScriptedModel, reply
from avibe.record.entries import Entry
from avibe.record.messages import ChatMessage, ModelReply

COUNTER = CharCounter()
BUDGETS = budgets_for(32_768, 29_000)
MIND = (
    "## I am here\nI work for Ana on the payments repo.\n\n## Goals\n### Mission\n"
    "- [M1] (active) Review every open PR oldest first.\n\n### Workstreams\n\n## Key decisions\n\n"
    "## Lessons\n"
)
FRAGMENT = "in project_kickoff_checklist X: 03_ACG"  # what the 0.5B filed as a mission


def _moved() -> tuple[Entry, ...]:
    return (
        make_entry(10, "Reading the diff of #412.", kind="assistant"),
        make_entry(11, "CI finished: green. in project_kickoff_checklist X: 03_ACG", kind="callback"),
        make_entry(12, "The PRs are done. Also ship the payments v2 API after them.", kind="user"),
    )


def _inputs(mode: str = "structured") -> TurnInputs:
    moved = _moved()
    live = (
        ChatMessage("system", "You are Vibey."),
        *(ChatMessage("user" if e.is_user else "assistant", e.text, seq=e.seq, kind=e.kind) for e in moved),
        ChatMessage("user", "And keep the changelog short.", seq=14, kind="user"),  # stays live
    )
    return TurnInputs(
        mode=mode,  # type: ignore[arg-type]
        live_messages=live,
        previous=Checkpoint(mind=MIND, memo=(), scene=TICKET_SCENE),
        moved_entries=moved,
        budgets=BUDGETS,
        counter=COUNTER,
        at=AT,
        upto_seq=12,
    )


def _structured(mission: dict[str, Any]) -> tuple[Accepted, list[ModelRequest]]:
    valid = structured_answers(lambda enum: [])

    def answer(request: ModelRequest) -> ModelReply:
        props = request.json_schema["properties"] if request.json_schema else {}
        if "keep" in props:
            return reply(json.dumps({"keep": [], "user_changed_mission": True}))
        if "status" in props and "user_changed_mission" in props:
            return reply(json.dumps({"user_changed_mission": True, "status": [], **mission}))
        return valid(request)

    model = ScriptedModel([answer] * 6)  # as many calls as the turn makes (a question not due is skipped)
    outcome = drive(checkpoint_turn(_inputs()), model).outcome
    requests = list(model.requests)
    assert isinstance(outcome, Accepted), getattr(outcome, "problems", None)
    return outcome, requests


def test_M4_the_grammar_offers_only_the_users_messages_since_the_last_checkpoint() -> None:
    _, requests = _structured({"new": [], "from_message": 12})
    schemas = [r.json_schema for r in requests if r.json_schema and "new" in r.json_schema["properties"]]
    assert schemas and schemas[0]["properties"]["from_message"]["enum"] == [
        12,
        14,
    ]  # not 10, 11: not the user's


def test_M4_a_new_entry_citing_the_users_message_is_added_with_its_number() -> None:
    outcome, _ = _structured({"new": ["Ship the payments v2 API after the PRs"], "from_message": 12})
    lines = mission_lines(outcome.checkpoint.mind)
    assert lines == {
        **mission_lines(MIND),
        "M2": "- [M2] (active) (from #12) Ship the payments v2 API after the PRs",
    }


def test_M4_a_new_entry_citing_no_users_message_is_dropped_and_the_mission_never_shrinks() -> None:
    for source in (11, 10, 3, "12", None):  # a callback, Vibey's reply, older than the checkpoint, junk
        outcome, _ = _structured({"new": [FRAGMENT], "from_message": source})
        assert mission_lines(outcome.checkpoint.mind) == mission_lines(MIND), source
        assert any("new mission entries dropped" in n for n in outcome.notes), outcome.notes


def test_M4_tools_mode_a_new_mission_line_without_a_valid_citation_is_dropped() -> None:
    """A large model edits the mind itself: the harness checks the (from #N) of each new mission line."""
    for line, kept in (
        (f"- [M2] (active) {FRAGMENT}", False),
        ("- [M2] (active) Ship the payments v2 API (from #11)", False),  # a callback's number
        ("- [M2] (active) Ship the payments v2 API (from #12)", True),
        ("- [M2] (active) Keep the changelog short (from #14)", True),  # since the checkpoint, still live
    ):
        state = start(_inputs("tools"))
        state.mind = MIND.replace(
            "- [M1] (active) Review every open PR oldest first.\n",
            "- [M1] (replaced by M2) Review every open PR oldest first.\n" + line + "\n",
        )
        proposed, problems = draft(state, frozenset(), TICKET_SCENE)
        lines = mission_lines(proposed.mind)
        assert ("M2" in lines) is kept, (line, lines)
        replaced = "- [M1] (replaced by M2) Review every open PR oldest first."
        assert lines["M1"] == (replaced if kept else mission_lines(MIND)["M1"])  # never replaced by a ghost
        assert not [p for p in problems if p.code.startswith("mind.")], problems
        assert kept or any("dropped (M4)" in n for n in state.notes), state.notes


lines_st = st.lists(
    st.tuples(st.sampled_from(["active", "done", "replaced by M1", "replaced by M3"]), st.integers(0, 20)),
    max_size=4,
)


@given(new=lines_st, allowed=st.frozensets(st.integers(0, 20), max_size=5), replace_m1=st.booleans())
@settings(max_examples=200, deadline=None)
def test_M4_whatever_the_model_writes_new_entries_cite_an_allowed_message_and_none_is_lost(
    new: list[tuple[str, int]], allowed: frozenset[int], replace_m1: bool
) -> None:
    extra = "".join(f"- [M{k}] ({status}) entry {k} (from #{n})\n" for k, (status, n) in enumerate(new, 2))
    m1 = "- [M1] (replaced by M2) Review every open PR oldest first.\n" if replace_m1 and new else None
    mind = MIND.replace(
        "- [M1] (active) Review every open PR oldest first.\n",
        (m1 or "- [M1] (active) Review every open PR oldest first.\n") + extra,
    )
    texts = {n: f"Add entry {' '.join(str(k) for k in range(2, 6))} to the mission." for n in allowed}
    guarded, notes = guard_new_missions(MIND, mind, texts)
    lines = mission_lines(guarded)
    assert "M1" in lines  # never fewer than before
    for mid, line in lines.items():
        if mid != "M1":
            assert int(line.rsplit("#", 1)[1].rstrip(")")) in allowed, line
    if "M2" not in lines:
        assert lines["M1"] == mission_lines(MIND)["M1"]  # not replaced by an entry that is gone
    assert len(notes) >= len(new) - (len(lines) - 1)


# ---- the entry's words are the user's; the whole job is not "done" on the model's word (demo) --

TICKETS_MIND = MIND.replace(
    "- [M1] (active) Review every open PR oldest first.",
    "- [M1] (active) Work through tickets/001.md to tickets/006.md strictly oldest first.",
)


def test_M4_a_copy_of_the_mission_citing_a_message_that_does_not_say_it_is_dropped() -> None:
    """The demo's 1.5B added M1's own words as M2 "(from #7)" and M3 "(from #13)", #7 and #13 being "Next
    ticket, please. Remember, oldest first." and "Continue with the next ticket."."""
    asked = ((7, "Next ticket, please. Remember, oldest first."), (13, "Continue with the next ticket."))
    for n, said in asked:
        copy = f"- [M2] (active) (from #{n}) tickets/001.md first, then tickets/002.md, and so on up to 006"
        mind = TICKETS_MIND.replace("first.\n", f"first.\n{copy}\n", 1)
        guarded, notes = guard_new_missions(TICKETS_MIND, mind, {n: said})
        assert mission_lines(guarded) == mission_lines(TICKETS_MIND), guarded
        assert notes and "its words are not those of the user's message it cites" in notes[0]


def test_M4_a_new_entry_in_the_users_words_or_restating_what_it_replaces_stays() -> None:
    said = {12: "Also ship the payments v2 API once the PRs are done.", 13: "Never merge on a Friday."}
    for line in (
        "- [M2] (active) (from #12) Ship the payments v2 API after the PRs",
        "- [M2] (active) (from #13) Review the PRs and merge nothing on Fridays",  # M1's words + the user's
    ):
        mind = MIND.replace("first.\n", f"first.\n{line}\n", 1)
        guarded, notes = guard_new_missions(MIND, mind, said)
        assert mission_lines(guarded)["M2"] == line and not notes


def test_M4_the_whole_job_marked_done_without_the_users_word_keeps_its_status() -> None:
    """The demo's 1.5B marked M1 done with five of six tickets left, then "per #7" ("Next ticket, please.");
    only a user message since the last checkpoint that ends or withdraws it, cited on the line, changes an
    active entry's status (or a new entry that replaces it)."""
    said = {31: "Continue. Which ticket are you on?", 40: "Thanks, the queue is done - stop here."}
    for status, kept in (
        ("(done)", False),
        ("(withdrawn)", False),
        ("(done) (per #3)", False),  # a message before the last checkpoint
        ("(done) (per #31)", False),  # the demo's 1.5B: "done" per a message that does not end anything
        ("(done) (per #40)", True),
        ("(withdrawn) (per #40)", True),
    ):
        mind = TICKETS_MIND.replace("(active) Work", f"{status} Work")
        guarded, notes = guard_new_missions(TICKETS_MIND, mind, said)
        assert (mission_lines(guarded) == mission_lines(mind)) is kept, (status, guarded)
        undone = mission_lines(guarded) == mission_lines(TICKETS_MIND) and "keeps its status" in notes[0]
        assert kept or undone


def test_M4_structured_done_names_the_users_message_and_stands_only_with_it() -> None:
    for source, kept in ((12, True), (None, False)):
        answer = {"new": [], "status": [{"id": "M1", "status": "done"}]}
        outcome, _ = _structured({**answer, **({"from_message": source} if source else {})})
        line = mission_lines(outcome.checkpoint.mind)["M1"]
        if kept:
            assert line == "- [M1] (done) (per #12) Review every open PR oldest first."
        else:
            assert line == mission_lines(MIND)["M1"]
            assert any("M1 keeps its status" in n for n in outcome.notes), outcome.notes


_WORDS = ["ledger", "invoices", "payments", "export", "tickets", "vendor", "parser", "docs"]
_words = st.lists(st.sampled_from(_WORDS), min_size=1)


@given(
    mission_words=_words, said_words=_words, copy=st.booleans(), status=st.sampled_from(["done", "withdrawn"])
)
@settings(max_examples=200, deadline=None)
def test_M4_property_copies_are_dropped_user_words_stay_and_status_needs_a_citation(
    mission_words: list[str], said_words: list[str], copy: bool, status: str
) -> None:
    """Whatever the words: a new entry made only of the mission's words is dropped; one that is the cited
    message itself stays when that message says something the mission does not; an active entry marked
    done or withdrawn without a new citation comes back as it was; none is ever lost."""
    old = f"- [M1] (active) {' '.join(mission_words)}"
    previous = MIND.replace("- [M1] (active) Review every open PR oldest first.", old)
    said = " ".join(said_words)
    entry = f"- [M2] (active) (from #20) {' '.join(mission_words) if copy else said}"
    mind = previous.replace(old, f"- [M1] ({status}) {' '.join(mission_words)}\n{entry}")
    guarded, _ = guard_new_missions(previous, mind, {20: said})
    lines = mission_lines(guarded)
    assert lines["M1"] == old
    brings_news = bool(set(said_words) - set(mission_words))
    assert ("M2" in lines) is (not copy and brings_news), (entry, lines)


# The 1.5B marked a whole ticket queue done "per" this message (the eval's late_rule, seed 1): a list of
# rules for later whose "instead" had read as an ending.
REPORTING = (
    "Some notes on how I want the work reported. At the end of each ticket, write a two-line status: what "
    "changed and which tests ran. If you find a bug outside the ticket, add a new ticket for it instead of "
    "fixing it on the way. Do not reformat code you are not otherwise changing."
)


@pytest.mark.parametrize(
    ("said", "ends"),
    [
        ("Thanks, the queue is done - stop here.", True),
        ("Forget the migration; do the CLI instead.", True),
        ("That is all for today.", True),
        ("We no longer need the export.", True),
        ("Cancel the release.", True),
        (REPORTING, False),  # a conditional, and "instead of" contrasts
        ("When you are done with a ticket, commit it.", False),
        ("Don't stop until all nine are done.", False),
        ("Do not forget to update the changelog.", False),
        ("Next ticket, please.", False),
    ],
)
def test_M4_a_message_ends_a_purpose_only_where_it_says_so_outright(said: str, ends: bool) -> None:
    assert says_it_ends(said) is ends


def test_M4_an_active_mission_marked_done_per_a_list_of_rules_keeps_its_status() -> None:
    mind = TICKETS_MIND.replace("(active) Work", "(done) (per #6) Work")
    guarded, notes = guard_new_missions(TICKETS_MIND, mind, {6: REPORTING})
    assert mission_lines(guarded) == mission_lines(TICKETS_MIND) and "keeps its status" in notes[0]


@pytest.mark.parametrize(
    ("said", "kept"),
    [
        (REPORTING, False),
        ("The queue is done, thanks - stop here.", True),
    ],
)
def test_M4_the_first_mission_starts_active_unless_a_message_it_cites_ends_it(said: str, kept: bool) -> None:
    """With no mission before, the first is the user's purpose as the model read it - but not one already
    finished: the 1.5B's first mission of late_rule was "(done) (per #6)", #6 being REPORTING."""
    active = mission_lines(TICKETS_MIND)["M1"]
    mind = TICKETS_MIND.replace("(active) Work", "(done) (per #6) Work")
    guarded, notes = guard_new_missions(EMPTY_MIND, mind, {6: said})
    assert mission_lines(guarded)["M1"] == (mission_lines(mind)["M1"] if kept else active)
    assert bool(notes) is not kept


_CONDITIONS = ["If", "When", "Once", "Until", "Unless", "Before", "After", "Whenever"]
_ANY_WORDS = st.lists(st.sampled_from([*_WORDS, "done", "stop", "instead", "finished", "cancel", "forget"]))


@given(condition=st.sampled_from(_CONDITIONS), head=_ANY_WORDS, tail=_ANY_WORDS)
@settings(max_examples=200, deadline=None)
def test_M4_property_a_conditional_sentence_never_ends_the_mission(
    condition: str, head: list[str], tail: list[str]
) -> None:
    said = f"{condition} {' '.join(head)}, {' '.join(tail)}."
    mind = TICKETS_MIND.replace("(active) Work", "(done) (per #9) Work")
    guarded, _ = guard_new_missions(TICKETS_MIND, mind, {9: said})
    assert not says_it_ends(said) and mission_lines(guarded) == mission_lines(TICKETS_MIND)
