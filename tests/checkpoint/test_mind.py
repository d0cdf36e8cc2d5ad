"""The mind: four sections in a fixed order, mission entries, edits that never overwrite it (SPEC M1-M5)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from avibe.checkpoint.mind import (
    EMPTY_MIND,
    HEADINGS,
    MissionEntry,
    ParsedMind,
    WorkstreamEntry,
    apply_edit,
    heading_titles,
    mission_ids,
    mission_lines,
    parse_mind,
    section_texts,
    strip_guidance,
)
from avibe.checkpoint.model import MIND_SECTIONS, Problem

GOOD = """\
## I am here
Working for Ana on the billing service; I may merge PRs that pass CI, I ask before deleting anything.

## Goals
### Mission
- [M1] (done) Move billing to Postgres.
- [M2] (replaced by M3) Review every open PR.
- [M3] (active) Review open PRs oldest first; ask Ana only when a decision is needed.
- [M4] (withdrawn) Rewrite the CLI.

### Workstreams
- [W1] (active) PR review queue; queue position 3 of 7; next: PR #412
  - interrupt Ana only for schema changes
- [W2] (done) Postgres migration.

## Key decisions
- Keep SQLite for tests - because CI has no database server.

## Lessons
- Run the full test suite before merging; partial runs hid a failure twice.
"""


def _swap_last_two(mind: str) -> str:
    head, tail = mind.split("## Key decisions\n")
    decisions, lessons = tail.split("## Lessons\n")
    return f"{head}## Lessons\n{lessons}## Key decisions\n{decisions}"


def _codes(result: ParsedMind | list[Problem]) -> list[str]:
    assert isinstance(result, list), "expected problems"
    return [p.code for p in result]


def test_M1_empty_template_has_the_four_headings_in_order_and_no_entries() -> None:
    parsed = parse_mind(EMPTY_MIND)
    assert isinstance(parsed, ParsedMind)
    assert heading_titles(EMPTY_MIND) == list(MIND_SECTIONS)
    assert list(parsed.sections) == list(MIND_SECTIONS)
    assert parsed.missions == () and parsed.workstreams == ()
    assert "### Mission" in parsed.sections["Goals"] and "### Workstreams" in parsed.sections["Goals"]
    assert mission_ids(EMPTY_MIND) == ()  # the example line inside the guidance comment is not an entry


def test_M1_M4_parses_mission_entries_with_ids_and_statuses() -> None:
    parsed = parse_mind(GOOD)
    assert isinstance(parsed, ParsedMind)
    assert parsed.missions == (
        MissionEntry("M1", "done", "Move billing to Postgres."),
        MissionEntry("M2", "replaced by M3", "Review every open PR.", replaced_by="M3"),
        MissionEntry("M3", "active", "Review open PRs oldest first; ask Ana only when a decision is needed."),
        MissionEntry("M4", "withdrawn", "Rewrite the CLI."),
    )
    assert mission_ids(GOOD) == ("M1", "M2", "M3", "M4")
    assert mission_lines(GOOD)["M3"].startswith("- [M3] (active) Review open PRs")


def test_M1_M5_workstreams_keep_status_queue_position_and_next_item() -> None:
    parsed = parse_mind(GOOD)
    assert isinstance(parsed, ParsedMind)
    assert parsed.workstreams == (
        WorkstreamEntry("W1", "active", "PR review queue; queue position 3 of 7; next: PR #412"),
        WorkstreamEntry("W2", "done", "Postgres migration."),
    )


def test_M5_template_states_the_return_path() -> None:
    assert "go back to its workstream" in EMPTY_MIND
    assert "go back to the\nmission or ask the user" in EMPTY_MIND


@pytest.mark.parametrize(
    ("mind", "codes"),
    [
        (GOOD.replace("## Goals\n", ""), ["mind.heading_missing"]),
        (GOOD.replace("## Goals\n", "## Goal\n"), ["mind.heading_unknown", "mind.heading_missing"]),
        (GOOD.replace("## Lessons\n", "## Lessons\n## Lessons\n"), ["mind.heading_repeated"]),
        (GOOD + "## Notes\nx\n", ["mind.heading_unknown"]),
        (_swap_last_two(GOOD), ["mind.heading_order"]),
        ("stray note\n" + GOOD, ["mind.text_outside_sections"]),
        (GOOD.replace("### Mission\n", ""), ["mind.goals_part_missing"]),
        (GOOD.replace("### Workstreams\n", "### Work\n"), ["mind.goals_part_missing"]),
        (GOOD.replace("- [M1] (done) ", "- [M1] "), ["mind.mission_format"]),
        (GOOD.replace("- [M4] (withdrawn)", "Our mission: "), ["mind.mission_format"]),
        (GOOD.replace("(withdrawn)", "(paused)"), ["mind.mission_status"]),
        (GOOD.replace("(replaced by M3)", "(replaced by M9)"), ["mind.mission_replaced_unknown"]),
        (GOOD.replace("[M4]", "[M3]"), ["mind.mission_repeated"]),
        (GOOD + "- [M5] (active) hidden in lessons\n", ["mind.mission_misplaced"]),
        (GOOD.replace("- [W2] (done)", "- [W2]"), ["mind.workstream_format"]),
    ],
)
def test_M1_M4_structural_problems_are_reported(mind: str, codes: list[str]) -> None:
    assert sorted(_codes(parse_mind(mind))) == sorted(codes)


def test_M1_headings_inside_code_and_level3_do_not_count() -> None:
    mind = GOOD.replace("## Lessons\n", "## Lessons\n```\n## Goals\n```\n### Goals of the week\n")
    assert isinstance(parse_mind(mind), ParsedMind)


def test_M1_problem_messages_say_what_to_do() -> None:
    problems = parse_mind(GOOD.replace("## Key decisions\n", ""))
    assert isinstance(problems, list)
    assert problems[0].message == (
        "The heading '## Key decisions' is missing. Put the line '## Key decisions' back, exactly, "
        "after the '## Goals' section."
    )


def test_M6_section_texts_hold_each_body() -> None:
    bodies = section_texts(GOOD)
    assert bodies["Lessons"].strip().startswith("- Run the full test suite")
    assert "## " not in bodies["Goals"].replace("### ", "")


# ---- M2 / M3: edits -------------------------------------------------------------------------------


def test_M2_edit_changes_only_what_changed() -> None:
    outcome = apply_edit(GOOD, "queue position 3 of 7; next: PR #412", "queue position 4 of 7; next: PR #415")
    assert outcome.applied and outcome.problem is None and outcome.message == "Edit applied."
    assert outcome.document == GOOD.replace("3 of 7; next: PR #412", "4 of 7; next: PR #415")


@pytest.mark.parametrize(
    ("old", "new", "code"),
    [
        ("", "x", "edit.old_empty"),
        ("PR #999", "x", "edit.old_not_found"),
        ("(active)", "(done)", "edit.old_ambiguous"),
        (GOOD, "## I am here\nnothing\n", "edit.whole_document"),
        (GOOD.strip(), EMPTY_MIND, "edit.whole_document"),
        (GOOD[GOOD.index("## I am here") : GOOD.index("- Run")], "", "edit.whole_document"),
        ("## Goals\n", "", "edit.heading_changed"),
        ("## Goals\n", "## Goal\n", "edit.heading_changed"),
        ("## Lessons\n", "## Notes\n## Lessons\n", "edit.heading_changed"),
        ("## Key decisions", "## Lessons", "edit.heading_changed"),
        ("### Mission\n", "### Mission\n## Mission\n", "edit.heading_changed"),
    ],
)
def test_M2_refused_edits_leave_the_document_and_say_why(old: str, new: str, code: str) -> None:
    outcome = apply_edit(GOOD, old, new)
    assert not outcome.applied and outcome.document == GOOD
    assert outcome.problem is not None and outcome.problem.code == code
    assert outcome.message == outcome.problem.message


def test_M2_reordering_sections_is_refused() -> None:
    start = GOOD.index("## Key decisions")
    tail = GOOD[start:]
    decisions, lessons = tail.split("## Lessons\n")
    outcome = apply_edit(GOOD, tail, "## Lessons\n" + lessons + decisions)
    assert not outcome.applied
    assert outcome.problem is not None and "reorder" in outcome.problem.message


def test_M3_a_whole_section_may_be_rewritten() -> None:
    start, end = GOOD.index("## Lessons"), len(GOOD)
    outcome = apply_edit(GOOD, GOOD[start:end], "## Lessons\n- Verify before claiming done.\n")
    assert outcome.applied
    assert section_texts(outcome.document)["Lessons"] == "- Verify before claiming done."


def test_M2_an_edit_may_restore_a_missing_heading() -> None:
    broken = GOOD.replace("## Key decisions\n", "")
    outcome = apply_edit(broken, "## Lessons\n", "## Key decisions\n\n## Lessons\n")
    assert outcome.applied and heading_titles(outcome.document) == list(MIND_SECTIONS)


_BODY = st.text(st.characters(exclude_characters="#"), max_size=40)
_NEW = st.one_of(
    st.text(max_size=40),
    st.sampled_from([*HEADINGS, "## Goal", "## Notes", "```\n", "", "\n"]),
    st.lists(st.sampled_from([*HEADINGS, "text\n", "## Other\n", "\n"]), max_size=5).map("\n".join),
)


@settings(deadline=None)  # a busy machine is no failure
@given(bodies=st.lists(_BODY, min_size=4, max_size=4), data=st.data(), new=_NEW)
def test_M2_apply_edit_never_yields_a_document_missing_a_heading(
    bodies: list[str], data: st.DataObject, new: str
) -> None:
    document = "".join(f"{h}\n{body.replace('`', '')}\n" for h, body in zip(HEADINGS, bodies, strict=True))
    assert heading_titles(document) == list(MIND_SECTIONS)
    start = data.draw(st.integers(min_value=0, max_value=len(document)))
    end = data.draw(st.integers(min_value=start, max_value=len(document)))
    outcome = apply_edit(document, document[start:end], new)
    if outcome.applied:
        assert heading_titles(outcome.document) == list(MIND_SECTIONS)
    else:
        assert outcome.document == document and outcome.problem is not None


@settings(deadline=None)  # a busy machine is no failure
@given(st.text())
def test_M1_parse_mind_never_raises(text: str) -> None:
    result = parse_mind(text)
    assert isinstance(result, ParsedMind | list)
    mission_ids(text)


def test_M2_overlapping_matches_are_ambiguous() -> None:
    document = GOOD.replace("Run the full test suite", "aaa")
    outcome = apply_edit(document, "aa", "b")
    assert (
        not outcome.applied and outcome.problem is not None and outcome.problem.code == "edit.old_ambiguous"
    )


def test_M4_status_forms_are_normalised() -> None:
    parsed = parse_mind(GOOD.replace("(replaced by M3)", "(Replaced  by m3)").replace("(done)", "(DONE)"))
    assert isinstance(parsed, ParsedMind)
    assert [(m.status, m.replaced_by) for m in parsed.missions[:2]] == [
        ("done", None),
        ("replaced by M3", "M3"),
    ]


def test_M4_a_copy_of_a_mission_line_outside_the_mission_list_is_reported() -> None:
    line = "- [M3] (active) Review open PRs oldest first; ask Ana only when a decision is needed.\n"
    assert _codes(parse_mind(GOOD + line)) == ["mind.mission_misplaced"]


def test_M6_strip_guidance_removes_template_comments() -> None:
    stripped = strip_guidance(EMPTY_MIND)
    assert "<!--" not in stripped and heading_titles(stripped) == list(MIND_SECTIONS)
    assert "\n\n\n" not in stripped
