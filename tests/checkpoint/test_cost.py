"""What makes a structured checkpoint cheap, each saving pinned by a test that fails if
it is removed - and the guarantees still held by the harness (M4: the mission never shrinks; N4: the
memo copied from the record)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from core_doubles import AT, CharCounter, drive, make_entry

from avibe.checkpoint.budgets import budgets_for
from avibe.checkpoint.mind import mission_lines
from avibe.checkpoint.model import Checkpoint, MemoItem
from avibe.checkpoint.structured.work import KEPT_PREVIEW_CHARS
from avibe.checkpoint.turn import Accepted, TurnInputs, checkpoint_turn
from avibe.providers.scripted import ModelRequest, ScriptedModel, reply
from avibe.record.entries import Entry
from avibe.record.messages import ChatMessage, ModelReply

MIND = """\
## I am here
I work for Ana on the payments repo.

## Goals
### Mission
- [M1] (active) Review every open PR oldest first.

### Workstreams
- [W1] (active) PR queue; next: #412

## Key decisions

## Lessons
"""
SCENE = {
    "current_step": "reviewing PR #412 in workstream W1, the PR queue",
    "progress": "done: #410, #411; in progress: #412",
    "waiting_for": "none",
    "next_step": "finish #412 and go on with the queue, as the user asked",
    "pitfalls": "none",
    "exact_references": "PR #412",
}
KEPT = "Handle the PRs oldest first and ask me only when you need a decision."


def _answer(request: ModelRequest, gate: bool | None = None) -> ModelReply:
    props = request.json_schema["properties"] if request.json_schema else {}
    data: dict[str, Any]
    if "keep" in props:
        data = {"keep": list(props["keep"]["items"]["enum"])}
        if gate is not None:
            data["user_changed_mission"] = gate
    elif "new" in props:
        data = {"user_changed_mission": True, "new": ["Merge nothing on Fridays."], "status": []}
        if "from_message" in props:  # M4: the change names the user's message it comes from
            data["from_message"] = max(props["from_message"]["enum"])
    elif "workstreams" in props:
        data = {"workstreams": [], "retire": []}
    elif "lessons" in props:
        data = {"i_am_here": [], "decisions": [], "lessons": [], "merge": [], "retire": []}
    else:
        data = dict(SCENE)
    return reply(json.dumps(data))


def _turn(
    moved: tuple[Entry, ...], previous: Checkpoint | None, gate: bool | None = None
) -> tuple[Accepted, list[set[str]]]:
    outcome, calls = _turn_calls(moved, previous, gate)
    return outcome, [set((c.json_schema or {}).get("properties", {})) for c in calls]


def _turn_calls(
    moved: tuple[Entry, ...], previous: Checkpoint | None, gate: bool | None = None
) -> tuple[Accepted, list[ModelRequest]]:
    live = (
        ChatMessage("system", "You are Vibey."),
        *(ChatMessage("user" if e.is_user else "assistant", e.text, seq=e.seq) for e in moved),
    )
    inputs = TurnInputs(
        mode="structured",
        live_messages=live,
        previous=previous,
        moved_entries=moved,
        budgets=budgets_for(32_000, 28_000),
        counter=CharCounter(),
        at=AT,
        memo_entries=(make_entry(2, KEPT),) if previous else (),
        upto_seq=max(e.seq for e in moved),
    )
    steps = [lambda request: _answer(request, gate)] * 8
    run = drive(checkpoint_turn(inputs), ScriptedModel(steps))  # as many calls as it needs
    assert isinstance(run.outcome, Accepted), run.outcome
    return run.outcome, list(run.calls)


def _work_only() -> tuple[Entry, ...]:
    return (
        make_entry(10, "Reading the diff of #412.", kind="assistant"),
        make_entry(11, "CI finished: green.", kind="callback"),
        make_entry(12, "The tests pass; commenting on #412.", kind="assistant"),
    )


def test_N1_no_memo_question_when_no_user_message_moves_out() -> None:
    """Nothing the user said is leaving: the memo stays as it was (N3: nothing new can have superseded
    an entry), and the question that would list every kept entry again is not asked."""
    previous = Checkpoint(mind=MIND, memo=(MemoItem(2, KEPT),), scene="")
    outcome, asked = _turn(_work_only(), previous)
    assert not any("keep" in props for props in asked)
    assert outcome.checkpoint.memo == (MemoItem(2, KEPT),)  # N4: still the record's words
    assert outcome.dismissed_seqs == frozenset()


def test_M4_no_mission_question_when_a_mission_exists_and_no_user_message_moves_out() -> None:
    previous = Checkpoint(mind=MIND, memo=(MemoItem(2, KEPT),), scene="")
    outcome, asked = _turn(_work_only(), previous)
    assert not any("new" in props for props in asked)
    assert mission_lines(outcome.checkpoint.mind) == mission_lines(MIND)  # the mission never shrinks
    assert len(asked) == 2  # workstreams, scene: nothing since is worded as a rule, decision or lesson


def _with_user_message() -> tuple[Entry, ...]:
    return (*_work_only(), make_entry(13, "Never merge on a Friday."))


def test_M4_the_memo_question_asks_whether_the_user_changed_the_mission() -> None:
    """With a mission in the mind, the memo question - about the very messages that could change it -
    carries the gate; "false" saves the mission question (M4: the mission stays as it is)."""
    previous = Checkpoint(mind=MIND, memo=(MemoItem(2, KEPT),), scene="")
    outcome, asked = _turn(_with_user_message(), previous, gate=False)
    assert asked[0] == {"keep", "user_changed_mission"}
    assert not any("new" in props for props in asked) and len(asked) == 4  # memo, workstreams, notes, scene
    assert mission_lines(outcome.checkpoint.mind) == mission_lines(MIND)
    assert {item.seq for item in outcome.checkpoint.memo} == {2, 13}


def test_U1_a_line_kept_last_time_shows_less_of_itself_in_the_memo_question() -> None:
    """A kept line was read whole at the checkpoint that kept it: the question shows enough of it to
    recognise (KEPT_PREVIEW_CHARS), a new message as much as before - and ticking it again still copies
    the record's whole text (N4), not the shortened preview."""
    previous = Checkpoint(mind=MIND, memo=(MemoItem(2, KEPT),), scene="")
    new = "Never merge on a Friday, and ask Ana before you touch the release branch of the payments repo."
    outcome, calls = _turn_calls((*_work_only(), make_entry(13, new)), previous, gate=False)
    question = calls[0].messages[-1].content
    assert f"#2 (kept): {KEPT[:KEPT_PREVIEW_CHARS]}\n" in question and KEPT not in question
    assert f"#13: {new}" in question
    assert [item.text for item in outcome.checkpoint.memo] == [KEPT, new]


def test_M4_a_true_gate_brings_the_mission_question_and_the_mission_only_grows() -> None:
    previous = Checkpoint(mind=MIND, memo=(MemoItem(2, KEPT),), scene="")
    outcome, asked = _turn(_with_user_message(), previous, gate=True)
    assert any("new" in props for props in asked) and len(asked) == 5
    lines = mission_lines(outcome.checkpoint.mind)
    assert lines["M1"] == mission_lines(MIND)["M1"]
    assert lines["M2"] == "- [M2] (active) (from #13) Merge nothing on Fridays."


def test_M4_no_gate_in_the_answer_still_asks_the_mission_question() -> None:
    """An answer without the gate (a model without a grammar) decides nothing: the mission question
    is asked as before."""
    previous = Checkpoint(mind=MIND, memo=(MemoItem(2, KEPT),), scene="")
    _, asked = _turn(_with_user_message(), previous, gate=None)
    assert any("new" in props for props in asked)


def test_M4_the_first_checkpoint_asks_for_a_mission_even_without_a_user_message() -> None:
    outcome, asked = _turn(_work_only(), None)
    assert any("new" in props for props in asked) and not any("keep" in props for props in asked)
    assert outcome.checkpoint.memo == ()


def test_M4_the_first_checkpoint_memo_question_has_no_gate() -> None:
    _, asked = _turn(_with_user_message(), None, gate=False)
    assert asked[0] == {"keep"} and any("new" in props for props in asked)


def test_S1_S6_scene_parts_are_short_at_small_windows() -> None:
    """Shorter answers by design: at a 4k window the model's six scene parts together allow under 850
    characters (the harness adds the jobs, files and last error itself, checkpoint/facts.py)."""
    from avibe.checkpoint.structured import scene_limits

    assert sum(scene_limits(4096).values()) < 850


def test_M1_notes_lists_hold_at_most_two_items_in_the_schema() -> None:
    """A small model fills every slot the grammar offers, mostly with echoes the harness then drops:
    two per list, not three."""
    from avibe.checkpoint.budgets import budgets_for as budgets
    from avibe.checkpoint.structured import Work, question

    work = Work.start(MIND, [], budgets(32_000, 28_000), CharCounter())
    asked = question("notes", work)
    assert asked is not None
    for name in ("i_am_here", "decisions", "lessons"):
        assert asked.schema["properties"][name]["maxItems"] == 2


def test_M3_no_merge_or_retire_keys_while_there_is_nothing_to_merge_or_retire() -> None:
    """Every structured call reads its question and schema uncached: with no entries to name, the merge
    and retire keys could only be empty lists, so the notes and workstreams questions leave them (and
    their instructions) out; with entries they are there, listing exactly those ids (M3)."""
    from avibe.checkpoint.budgets import budgets_for as budgets
    from avibe.checkpoint.mind import EMPTY_MIND
    from avibe.checkpoint.structured import Work, question

    empty = Work.start(EMPTY_MIND, [], budgets(4096, 2048), CharCounter())
    notes, workstreams = question("notes", empty), question("workstreams", empty)
    assert notes is not None and workstreams is not None
    assert set(notes.schema["properties"]) == {"i_am_here", "decisions", "lessons"}
    assert '"merge"' not in notes.text and '"retire"' not in notes.text
    assert set(workstreams.schema["properties"]) == {"workstreams"}

    listed = MIND.replace("I work for", "- I work for")  # a list line: entry H1
    full = Work.start(listed, [], budgets(32_000, 28_000), CharCounter())
    notes, workstreams = question("notes", full), question("workstreams", full)
    assert notes is not None and workstreams is not None
    assert {"merge", "retire"} <= set(notes.schema["properties"]) and '"merge"' in notes.text
    assert notes.schema["properties"]["retire"]["items"]["enum"] == ["H1"]
    assert workstreams.schema["properties"]["retire"]["items"]["enum"] == ["W1"]


# ---- questions not due: not asked, and the same checkpoint as a "no change" answer ----


def _no_change(request: ModelRequest, kept: list[Any]) -> ModelReply:
    """What a model that changes nothing answers: the kept lines ticked again, the gate false, no new
    entries; the scene as usual."""
    props = request.json_schema["properties"] if request.json_schema else {}
    if "keep" in props:
        return reply(
            json.dumps({"keep": kept, **({"user_changed_mission": False} if len(props) > 1 else {})})
        )
    if "lessons" in props:
        return reply(json.dumps({"i_am_here": [], "decisions": [], "lessons": [], "merge": [], "retire": []}))
    return _answer(request)


def _drive(moved: tuple[Entry, ...], previous: Checkpoint) -> tuple[Accepted, list[ModelRequest]]:
    live = (
        ChatMessage("system", "You are Vibey."),
        *(ChatMessage("user" if e.is_user else "assistant", e.text, seq=e.seq, kind=e.kind) for e in moved),
    )
    inputs = TurnInputs(
        mode="structured",
        live_messages=live,
        previous=previous,
        moved_entries=moved,
        budgets=budgets_for(32_000, 28_000),
        counter=CharCounter(),
        at=AT,
        memo_entries=(make_entry(2, KEPT),),
        upto_seq=max(e.seq for e in moved),
    )
    model = ScriptedModel([lambda request: _no_change(request, [2])] * 8)  # as many calls as it makes
    run = drive(checkpoint_turn(inputs), model)
    assert isinstance(run.outcome, Accepted), run.outcome
    return run.outcome, list(model.requests)


def _same(a: Accepted, b: Accepted) -> None:
    assert a.checkpoint == b.checkpoint
    assert a.dismissed_seqs == b.dismissed_seqs
    assert (a.first_pass_problems, a.repaired) == (b.first_pass_problems, b.repaired)


LESSONED = MIND.replace("## Lessons\n", "## Lessons\n- Run the full test suite before approving.\n")


def test_M2_no_notes_question_when_nothing_since_is_worded_as_a_rule_decision_or_lesson(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The notes question is a call that re-reads the conversation: with nothing since the last checkpoint
    that could add to I am here, Key decisions or Lessons it is not asked - and the checkpoint is the
    one an empty answer to it gives (M2: only what changed is edited)."""
    previous = Checkpoint(mind=LESSONED, memo=(MemoItem(2, KEPT),), scene="")
    moved = (*_work_only(), make_entry(13, "Looks good, carry on."))
    skipped, requests = _drive(moved, previous)
    asked = [set((r.json_schema or {}).get("properties", {})) for r in requests]
    assert not any("lessons" in props for props in asked)
    assert len(requests) == 3  # memo, workstreams, scene

    from avibe.checkpoint import structured

    monkeypatch.setattr(structured, "notes_due", lambda *_: True)
    unskipped, requests = _drive(moved, previous)
    assert any("lessons" in (r.json_schema or {}).get("properties", {}) for r in requests)
    assert len(requests) == 4
    _same(skipped, unskipped)
    assert skipped.checkpoint.mind == LESSONED


def test_N3_no_memo_question_leaves_the_memo_as_a_no_change_answer_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No user message moves out: no memo question (and so no mission question), and the same
    checkpoint as a memo question answered "the kept line again, the user did not change the mission"."""
    previous = Checkpoint(mind=LESSONED, memo=(MemoItem(2, KEPT),), scene="")
    skipped, requests = _drive(_work_only(), previous)
    assert not any("keep" in (r.json_schema or {}).get("properties", {}) for r in requests)

    from avibe.checkpoint.structured import questions

    monkeypatch.setattr(questions, "_new_user_messages", lambda _: True)
    unskipped, requests = _drive(_work_only(), previous)
    first = (requests[0].json_schema or {}).get("properties", {})
    assert set(first) == {"keep", "user_changed_mission"} and first["keep"]["items"]["enum"] == [2]
    assert len(requests) == 3  # memo, workstreams, scene: the gate said no, and no notes are due
    _same(skipped, unskipped)


@pytest.mark.parametrize(
    ("first", "users", "others", "due"),
    [
        (True, [], [], True),  # the first checkpoint: who the work is for
        (False, [], [], False),
        (False, ["Looks good, carry on.", "ok"], ["Reading a.txt.", "CI finished: green."], False),
        (False, ["Only Ana may approve a release."], [], True),  # a limit (N2's wording): I am here
        (False, ["Let's go with SQLite for the cache."], [], True),  # a decision of the user's
        (False, [], ["Switched to the v2 client because v1 drops retries."], True),  # Vibey's decision
        (False, [], ["The build failed: the lock file was stale."], True),  # a lesson to draw
        (False, [], ["[Harness: callback ...]\n│ The deploy went wrong, rolled back."], True),
    ],
)
def test_M1_notes_are_due_on_a_rule_a_decision_or_a_lesson_since_the_last_checkpoint(
    first: bool, users: list[str], others: list[str], due: bool
) -> None:
    from avibe.checkpoint.structured import notes_due

    assert notes_due(first, users, others) is due


def test_M1_tool_output_never_makes_notes_due() -> None:
    """A test log full of "FAILED" decides nothing: only the messages' own words count."""
    from avibe.checkpoint.turn_state import texts_since

    live = (
        ChatMessage("system", "You are Vibey."),
        ChatMessage("assistant", "Running the tests.", seq=3, kind="assistant"),
        ChatMessage("tool", "FAILED tests/test_a.py - decided to fail because of an error", seq=4),
        ChatMessage("user", "[Avibe's recollection] Lessons: never guess", kind="checkpoint"),
    )
    inputs = TurnInputs(
        mode="structured",
        live_messages=live,
        previous=Checkpoint(mind=MIND, memo=(), scene=""),
        moved_entries=(make_entry(5, "Go on."),),
        budgets=budgets_for(32_000, 28_000),
        counter=CharCounter(),
        at=AT,
    )
    users, others = texts_since(inputs)
    assert (users, others) == (["Go on."], ["Running the tests."])
