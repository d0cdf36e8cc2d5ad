"""Validation returns every problem at once; one repair request lists them all (SPEC V1-V4, M4, M6, N4)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from avibe.checkpoint.budgets import budgets_for
from avibe.checkpoint.memo import cut_note
from avibe.checkpoint.mind import EMPTY_MIND, apply_edit, mission_ids
from avibe.checkpoint.model import Checkpoint, CheckpointDraft, MemoItem, Problem
from avibe.checkpoint.scene import SceneParts, render_scene
from avibe.checkpoint.validate import repair_request, validate
from avibe.ports import TokenCounter
from avibe.record.entries import Entry

MakeEntry = Callable[..., Entry]
BUDGETS = budgets_for(192_000, 172_800)
MIND = """\
## I am here
Working for Ana on billing; ask before deleting anything.

## Goals
### Mission
- [M1] (done) Move billing to Postgres.
- [M2] (active) Review open PRs oldest first.

### Workstreams
- [W1] (active) PR queue; queue position 3 of 7; next: PR #412

## Key decisions
- SQLite for tests - because CI has no database server.

## Lessons
- Run the full suite before merging.
"""
SCENE = render_scene(
    SceneParts(
        current_step="Reviewing PR #412 (workstream: [W1] PR queue)",
        progress="done: #401, #405; in progress: #412; pending: #415-#420",
        waiting_for="CI run 88123 on #412",
        next_step='Merge #412 when green; Ana: "merge anything green"',
        pitfalls="none",
        exact_references="/srv/billing; branch review/412; make test",
    )
)


def _record(entry: MakeEntry) -> dict[int, Entry]:
    return {3: entry(3, "merge anything green"), 4: entry(4, "[Harness: watch ci] merged", kind="watch")}


def _codes(problems: list[Problem]) -> list[str]:
    return [p.code for p in problems]


def test_V2_V3_V1_a_good_checkpoint_has_no_problem(counter: TokenCounter, entry: MakeEntry) -> None:
    draft = CheckpointDraft(MIND, (MemoItem(3, "merge anything green"),), SCENE)
    assert validate(None, draft, BUDGETS, counter, record=_record(entry)) == []
    assert validate(draft, draft, BUDGETS, counter, record=_record(entry)) == []
    assert Checkpoint is CheckpointDraft and draft.memo_dicts() == [
        {"seq": 3, "text": "merge anything green", "cut": False}
    ]


def test_V4_every_problem_is_returned_at_once(counter: TokenCounter, entry: MakeEntry) -> None:
    previous = CheckpointDraft(MIND, (), SCENE)
    broken_mind = MIND.replace("## Lessons\n", "").replace("- [M1] (done) Move billing to Postgres.\n", "")
    proposed = CheckpointDraft(broken_mind, (MemoItem(3, "Merge anything that is green."),), "no scene")
    codes = _codes(validate(previous, proposed, BUDGETS, counter, record=_record(entry)))
    assert codes == ["mind.heading_missing", "mind.mission_deleted", "memo.text_changed", "scene.block_count"]


def test_M4_a_deleted_mission_entry_is_refused_with_the_line_to_put_back(counter: TokenCounter) -> None:
    previous = CheckpointDraft(MIND, (), SCENE)
    proposed = CheckpointDraft(MIND.replace("- [M1] (done) Move billing to Postgres.\n", ""), (), SCENE)
    problems = validate(previous, proposed, BUDGETS, counter)
    assert _codes(problems) == ["mind.mission_deleted"]
    assert problems[0].message.endswith(": - [M1] (done) Move billing to Postgres.")


def test_M4_marking_a_mission_done_or_replaced_is_accepted(counter: TokenCounter) -> None:
    previous = CheckpointDraft(MIND, (), SCENE)
    edit = apply_edit(
        MIND, "- [M2] (active)", "- [M3] (active) Review PRs, newest first.\n- [M2] (replaced by M3)"
    )
    assert edit.applied
    assert validate(previous, CheckpointDraft(edit.document, (), SCENE), BUDGETS, counter) == []


def test_M4_M6_mission_entries_never_fill_the_goals_cap(counter: TokenCounter) -> None:
    """A long request quoted in the mission (never deleted, M4) is not counted against the Goals cap: on a
    real session it alone kept every checkpoint invalid; what the model writes there still is."""
    small = budgets_for(8_192, 5_120)  # Goals: 100 tokens
    request = "Review open PRs oldest first, " + "and keep the billing module as it is " * 12
    mind = MIND.replace("Review open PRs oldest first.", request)
    assert counter.count(request) > small.mind_cap("Goals")
    assert validate(None, CheckpointDraft(mind, (), SCENE), small, counter) == []
    crowded = mind.replace("next: PR #412", "next: PR #412 " + "and then the next one " * 30)
    problems = validate(None, CheckpointDraft(crowded, (), SCENE), small, counter)
    assert _codes(problems) == ["mind.section_over_cap"]
    assert "'## Goals' is" in problems[0].message and "besides its mission entries" in problems[0].message


def test_M6_V2_a_section_over_its_cap_is_reported_in_tokens(counter: TokenCounter) -> None:
    small = budgets_for(19_200, 15_000)  # I am here: 100 tokens
    mind = MIND.replace("ask before deleting anything.", "x" * 500)
    problems = validate(None, CheckpointDraft(mind, (), SCENE), small, counter)
    assert _codes(problems) == ["mind.section_over_cap"]
    assert "'## I am here' is 133 tokens; its cap is 100" in problems[0].message


@pytest.mark.parametrize(
    ("memo", "codes"),
    [
        ((MemoItem(3, "merge anything green!"),), ["memo.text_changed"]),
        ((MemoItem(3, "merge" + cut_note(3), cut=True),), []),
        ((MemoItem(3, "merge" + cut_note(9), cut=True),), ["memo.text_changed"]),
        ((MemoItem(4, "[Harness: watch ci] merged"),), ["memo.not_user"]),
        ((MemoItem(8, "anything"),), ["memo.unknown_message"]),
        ((MemoItem(3, "merge anything green"),) * 2, ["memo.item_repeated"]),
    ],
)
def test_N4_N7_V3_memo_items_must_be_the_users_record_text(
    memo: tuple[MemoItem, ...], codes: list[str], counter: TokenCounter, entry: MakeEntry
) -> None:
    draft = CheckpointDraft(MIND, memo, SCENE)
    assert _codes(validate(None, draft, BUDGETS, counter, record=_record(entry))) == codes


def test_N5_V3_memo_over_budget_and_item_over_cap(counter: TokenCounter, entry: MakeEntry) -> None:
    record = {seq: entry(seq, "y" * 1_300) for seq in range(1, 11)}  # 325 tokens each
    memo = tuple(MemoItem(seq, record[seq].text) for seq in record)
    codes = _codes(validate(None, CheckpointDraft(MIND, memo, SCENE), BUDGETS, counter, record=record))
    assert codes == ["memo.item_over_cap"] * 10 + ["memo.over_budget"]


def test_N4_without_the_record_only_the_cut_form_is_checked(counter: TokenCounter) -> None:
    memo = (MemoItem(5, "abc", cut=True),)
    assert _codes(validate(None, CheckpointDraft(MIND, memo, SCENE), BUDGETS, counter)) == [
        "memo.text_changed"
    ]


@pytest.mark.parametrize(
    ("scene", "code"),
    [
        ("", "scene.block_count"),
        (SCENE + SCENE, "scene.block_count"),
        ("<checkpoint>x</checkpoint>", "scene.too_short"),
    ],
)
def test_V1_zero_or_two_blocks_or_a_short_scene_is_a_problem(
    scene: str, code: str, counter: TokenCounter
) -> None:
    assert code in _codes(validate(None, CheckpointDraft(MIND, (), scene), BUDGETS, counter))


def test_V2_first_checkpoint_may_start_from_the_empty_template(counter: TokenCounter) -> None:
    assert validate(None, CheckpointDraft(EMPTY_MIND, (), SCENE), BUDGETS, counter) == []


def test_V4_repair_request_lists_every_problem_numbered_with_where_it_is() -> None:
    problems = [
        Problem("mind.heading_missing", "Put '## Goals' back."),
        Problem("scene.too_short", "Say more."),
    ]
    text = repair_request(problems)
    assert text.splitlines() == [
        "Avibe checked your checkpoint and found 2 problems. Fix all of them now:",
        "1. In the mind file: Put '## Goals' back.",
        "2. In the scene: Say more.",
        "Change only what these problems name; keep everything else as it is.",
    ]
    with pytest.raises(ValueError, match="at least one problem"):
        repair_request([])


_ITEMS = st.lists(
    st.builds(MemoItem, st.integers(min_value=-5, max_value=20), st.text(max_size=200), st.booleans())
)
_MINDISH = st.one_of(
    st.text(),
    st.lists(
        st.sampled_from([*MIND.splitlines(), "## Goals", "### Mission", "- [M9] (x)", "```", "<!--"])
    ).map("\n".join),
)


@settings(deadline=None)  # a busy machine is no failure
@given(
    previous=st.none() | st.builds(CheckpointDraft, _MINDISH, _ITEMS, st.text()),
    mind=_MINDISH,
    memo=_ITEMS,
    scene=st.text(),
    with_record=st.booleans(),
)
def test_V4_validate_never_raises_on_any_input(
    previous: CheckpointDraft | None,
    mind: str,
    memo: list[MemoItem],
    scene: str,
    with_record: bool,
    counter: TokenCounter,
    entry: MakeEntry,
) -> None:
    record = _record(entry) if with_record else None
    problems = validate(previous, CheckpointDraft(mind, tuple(memo), scene), BUDGETS, counter, record=record)
    assert all(isinstance(p, Problem) and p.message for p in problems)
    if problems:
        assert repair_request(problems).count("\n") == len(problems) + 1


@settings(deadline=None)  # a busy machine is no failure
@given(
    keep=st.lists(
        st.sampled_from([True] * 6 + [False]),
        min_size=len(MIND.splitlines()),
        max_size=len(MIND.splitlines()),
    ),
    extra=st.lists(st.sampled_from(["- [M2] (done) x", "- [M7] (active) y", "## Lessons", "z"]), max_size=3),
)
def test_M4_no_accepted_mind_has_fewer_mission_entries_than_before(
    keep: list[bool], extra: list[str], counter: TokenCounter
) -> None:
    lines = [line for line, kept in zip(MIND.splitlines(), keep, strict=True) if kept] + extra
    proposed = "\n".join(lines)
    previous = CheckpointDraft(MIND, (), SCENE)
    accepted = validate(previous, CheckpointDraft(proposed, (), SCENE), BUDGETS, counter) == []
    if accepted:
        assert len(mission_ids(proposed)) >= len(mission_ids(MIND))
        assert set(mission_ids(MIND)) <= set(mission_ids(proposed))
    if not set(mission_ids(MIND)) <= set(mission_ids(proposed)):
        assert not accepted


def test_M6_guidance_comments_do_not_count_against_the_caps(counter: TokenCounter) -> None:
    tiny = budgets_for(8_000, 4_976)  # every mind section at its 100-token floor
    assert validate(None, CheckpointDraft(EMPTY_MIND, (), SCENE), tiny, counter) == []
