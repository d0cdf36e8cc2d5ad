"""Structured checkpoint answers under a small window: grammar limits and the harness's own cap checks."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st


def test_V1_the_scene_grammar_shrinks_with_small_windows_but_keeps_its_floors() -> None:
    from avibe.checkpoint.structured import (
        SCENE_CHARS,
        SCENE_FLOOR_CHARS,
        SCENE_MIN_CHARS_PER_PART,
        scene_limits,
    )

    assert scene_limits(4096) == SCENE_FLOOR_CHARS
    assert scene_limits(200_000) == SCENE_CHARS
    for window in (1024, 8192, 20_000, 32_768):
        limits = scene_limits(window)
        assert all(SCENE_FLOOR_CHARS[p] <= limits[p] <= SCENE_CHARS[p] for p in SCENE_CHARS)
        assert all(limits[p] > least for p, least in SCENE_MIN_CHARS_PER_PART.items())


def test_M6_lines_that_would_push_a_section_over_its_cap_are_left_out_newest_first() -> None:
    """The grammar sizes answers from an estimate; the harness counts real tokens, so one long note can
    never fail a whole checkpoint on a section cap (V2)."""
    import json

    from core_doubles import CharCounter

    from avibe.checkpoint.budgets import budgets_for
    from avibe.checkpoint.mind import EMPTY_MIND, section_texts, strip_guidance
    from avibe.checkpoint.structured import Work, apply_answer

    counter, budgets = CharCounter(), budgets_for(4096, 2048)
    work = Work.start(EMPTY_MIND, (), budgets, counter)
    cap = budgets.mind_cap("Lessons")
    # three distinct lessons of ~150 characters (~38 tokens) each: together over the 100-token cap
    long = [f"lesson {n}: " + " ".join(f"w{n}x{i}" for i in range(28)) for n in range(3)]
    assert cap == 100 and sum(counter.count(f"- {line}") for line in long) > cap
    apply_answer("notes", work, json.dumps({"i_am_here": [], "decisions": [], "lessons": long}))
    body = section_texts(strip_guidance(work.mind))["Lessons"]
    assert counter.count(body) <= cap
    assert "lesson 0" in body and "lesson 2" not in body  # the newest went first
    assert any("within its cap" in n and "lesson 2" in n for n in work.notes)
    assert not work.all_problems()


# lines of 15-30 random words: three of them pass a 100-token cap together
WORDY = st.lists(st.text(alphabet="abcdefghijklmnop", min_size=3, max_size=8), min_size=15, max_size=30).map(
    " ".join
)


@given(lessons=st.lists(WORDY, max_size=5), here=st.lists(WORDY, max_size=5))
@settings(max_examples=150, deadline=None)
def test_M4_M6_whatever_notes_a_model_gives_no_section_passes_its_cap_and_the_mission_stays(
    lessons: list[str], here: list[str]
) -> None:
    import json

    from core_doubles import CharCounter

    from avibe.checkpoint.budgets import budgets_for
    from avibe.checkpoint.mind import mission_lines, section_texts, strip_guidance
    from avibe.checkpoint.structured import Work, apply_answer

    counter, budgets = CharCounter(), budgets_for(4096, 2048)
    start = (
        "## I am here\n\n## Goals\n### Mission\n- [M1] (active) Ship the queue.\n### Workstreams\n\n"
        "## Key decisions\n\n## Lessons\n"
    )
    work = Work.start(start, (), budgets, counter)
    apply_answer("notes", work, json.dumps({"i_am_here": here, "decisions": [], "lessons": lessons}))
    for section in ("I am here", "Lessons"):
        assert counter.count(section_texts(strip_guidance(work.mind))[section]) <= budgets.mind_cap(section)
    assert mission_lines(work.mind) == mission_lines(start)


WORKSTREAM_ITEM = st.fixed_dictionaries(
    {
        "id": st.sampled_from(["W1", "W2", "W3", "new", "M1"]),
        "status": st.sampled_from(["active", "done", "blocked", "pending", "waiting", "dropped"]),
        "text": st.sampled_from(["", "The AI", "Fix the flaky import test", "the queue"]),
    }
)


@given(items=st.lists(WORKSTREAM_ITEM, max_size=6))
@settings(max_examples=200, deadline=None)
def test_M1_M3_whatever_workstream_answer_a_model_gives_the_harness_applies_it_without_a_failed_edit(
    items: list[dict[str, str]],
) -> None:
    """The eval's late_rule run fell back twice on the harness's own edit: the 0.5B named W2 twice in one
    answer, and the second status change looked for the line the first had already changed."""
    import json

    from core_doubles import CharCounter

    from avibe.checkpoint.budgets import budgets_for
    from avibe.checkpoint.mind import mission_lines
    from avibe.checkpoint.structured import Work, apply_answer
    from avibe.checkpoint.structured.work import workstream_lines

    start = (
        "## I am here\n\n## Goals\n### Mission\n- [M1] (active) Ship the queue.\n### Workstreams\n"
        "- [W1] (active) the queue\n- [W2] (active) The AI\n\n## Key decisions\n\n## Lessons\n"
    )
    work = Work.start(start, (), budgets_for(8192, 4096), CharCounter())
    apply_answer("workstreams", work, json.dumps({"workstreams": items}))
    assert not work.all_problems()
    assert mission_lines(work.mind) == mission_lines(start)
    final = workstream_lines(work.mind)
    valid = [i for i in items if i["status"] != "dropped"]  # not a status: ignored with a note
    for wid in ("W1", "W2"):  # the last word on each existing workstream is the one that holds
        named = [i for i in valid if i["id"] == wid]
        if named:
            assert final[wid][0].startswith(f"- [{wid}] ({named[-1]['status']})")


@given(
    changes=st.lists(
        st.fixed_dictionaries(
            {
                "id": st.sampled_from(["M1", "M2", "W1"]),
                "status": st.sampled_from(["active", "done", "withdrawn"]),
            }
        ),
        max_size=5,
    )
)
@settings(max_examples=100, deadline=None)
def test_M4_mission_status_changes_naming_one_id_twice_apply_without_a_failed_edit(
    changes: list[dict[str, str]],
) -> None:
    import json

    from core_doubles import CharCounter

    from avibe.checkpoint.budgets import budgets_for
    from avibe.checkpoint.mind import mission_lines
    from avibe.checkpoint.structured import Work, apply_answer

    start = (
        "## I am here\n\n## Goals\n### Mission\n- [M1] (active) Ship the queue.\n"
        "- [M2] (active) Keep CI green.\n### Workstreams\n\n## Key decisions\n\n## Lessons\n"
    )
    work = Work.start(start, (), budgets_for(8192, 4096), CharCounter())
    answer = {"user_changed_mission": True, "new": [], "status": changes}
    apply_answer("mission", work, json.dumps(answer))
    assert not work.all_problems()
    lines = mission_lines(work.mind)
    assert set(lines) == {"M1", "M2"}  # M4: never deleted
    for mid in ("M1", "M2"):
        named = [c for c in changes if c["id"] == mid]
        if named:
            assert f"({named[-1]['status']})" in lines[mid]


TOOL_WORDS = [f"tok{i}" for i in range(40)]  # a tool result's words, each distinct
MODEL_WORDS = ["fixing", "ticket", "three", "then", "the", "tests", "next", "run", "review", "docs"]
# a scene part: the model's own words, a run of the tool output (possibly after a few own words), or ""
PART = st.one_of(
    st.lists(st.sampled_from(MODEL_WORDS), min_size=0, max_size=12).map(" ".join),
    st.tuples(
        st.lists(st.sampled_from(MODEL_WORDS), max_size=3),
        st.integers(0, 30),
        st.integers(1, 10),
    ).map(lambda t: " ".join([*t[0], *TOOL_WORDS[t[1] : t[1] + t[2]]])),
    # a copy of a scene's format: another part's label, or an origin mark only the harness may write
    st.tuples(
        st.lists(st.sampled_from(MODEL_WORDS), min_size=2, max_size=6).map(" ".join),
        st.sampled_from(["next step:", "Pitfalls:", "(from the record)", "(from Avibe's own state)"]),
    ).map(" ".join),
)


@given(parts=st.fixed_dictionaries({p: PART for p in ("current_step", "progress", "next_step", "pitfalls")}))
@settings(max_examples=200, deadline=None)
def test_S1_S4_no_scene_part_is_a_copy_of_tool_output_or_of_another_part(parts: dict[str, str]) -> None:
    """Whatever a model answers for the scene, the applied scene is one valid block (V1) in which no part
    of the model's is a long copy of the tool output, a repeat of an earlier part, or a copy of a scene's
    labels and origin marks: such a part is left to the harness's completion, marked
    "(from ...)", or "none" - an origin mark is only ever the harness's."""
    import json

    from core_doubles import CharCounter, make_entry

    from avibe.checkpoint.budgets import budgets_for
    from avibe.checkpoint.memo import memo_candidates
    from avibe.checkpoint.mind import EMPTY_MIND
    from avibe.checkpoint.scene import SceneParts, parse_scene
    from avibe.checkpoint.structured import Work, apply_answer, remember_tool_output
    from avibe.record.messages import ChatMessage

    entries = [make_entry(3, "Please work through the tickets oldest first and keep the tests green.")]
    mind = EMPTY_MIND.replace(
        "### Mission\n", "### Mission\n- [M1] (active) Work through the nine tickets.\n"
    )
    assert mind != EMPTY_MIND
    candidates = memo_candidates(entries, (), frozenset())
    work = Work.start(mind, candidates, budgets_for(4096, 2048), CharCounter())
    remember_tool_output(work, [ChatMessage("tool", " ".join(TOOL_WORDS), seq=4)])
    apply_answer("scene", work, json.dumps(parts))
    parsed = parse_scene(work.scene)
    assert isinstance(parsed, SceneParts), parsed
    seen: set[str] = set()
    for name in ("current_step", "progress", "next_step", "pitfalls"):
        text = getattr(parsed, name)
        if text == "none" or text.startswith("(from "):
            continue
        own = text.split("; (from ")[0]  # what the harness appended to a short part comes after "; "
        assert (
            "(from " not in own and "next step:" not in own.casefold() and "pitfalls:" not in own.casefold()
        )
        copied = [w for w in text.split() if w.startswith("tok")]
        assert len(copied) < 6 or len(copied) < 0.8 * len(text.split()), (name, text)
        assert text not in seen, (name, text)
        seen.add(text)


@given(
    retire=st.lists(st.sampled_from(["D1", "D2", "L1", "L2"]), max_size=3),
    merge=st.lists(st.sampled_from(["D1", "D2", "L1", "L2"]), max_size=2),
)
@settings(max_examples=100, deadline=None)
def test_M3_an_entry_that_stands_inside_a_longer_line_is_merged_and_retired_without_a_failed_edit(
    retire: list[str], merge: list[str]
) -> None:
    """The 1.5B's real set fell back on the harness's own edit ("The 'old' text appears 2 times"): an entry
    line found inside a longer one matched twice. The harness names whole lines; its edits now hold."""
    from core_doubles import CharCounter

    from avibe.checkpoint.budgets import budgets_for
    from avibe.checkpoint.structured import Work
    from avibe.checkpoint.structured.edits import entry_labels, merge_entries

    start = (
        "## I am here\n\n## Goals\n### Mission\n- [M1] (active) Ship the queue.\n### Workstreams\n\n"
        "## Key decisions\n- Use pnpm\n- Use pnpm for every install\n\n"
        "## Lessons\n- Use pnpm\n- The build needs Node 20\n"
    )
    work = Work.start(start, (), budgets_for(8192, 4096), CharCounter())
    labels = entry_labels(work.mind)
    merges = [{"ids": merge, "text": "Use pnpm, never npm"}] if merge else []
    merge_entries(work, "notes", {"merge": merges, "retire": retire})
    assert not work.all_problems(), work.all_problems()
    lines = work.mind.split("\n")
    assert "- [M1] (active) Ship the queue." in lines
    if retire == ["D2"] and not merge:  # the long line itself, not the short one standing inside it
        assert "- Use pnpm for every install" not in lines and lines.count("- Use pnpm") == 2
    if merge and not retire and len({labels[m][0] for m in merge}) == 1:
        assert "- Use pnpm, never npm" in lines
