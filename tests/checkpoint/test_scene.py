"""The scene: exactly one checkpoint block with six parts (SPEC S1-S6, V1)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from avibe.checkpoint.model import Problem
from avibe.checkpoint.scene import (
    SCENE_LABELS,
    SCENE_MIN_CHARS,
    SCENE_TEMPLATE,
    SceneParts,
    parse_scene,
    render_scene,
    scene_blocks,
)

PARTS = SceneParts(
    current_step="Reviewing PR #412 (workstream: [W1] PR review queue)",
    progress="done: #401, #405; in progress: #412; blocked: none; pending: #415-#420",
    waiting_for="CI run 88123 on #412; question q-7 to Ana about the schema change",
    next_step='Merge #412 if CI passes; Ana said: "merge anything green, ask me about schema changes"',
    pitfalls="pytest -k billing failed with:\nE   sqlalchemy.exc.OperationalError: no such table: invoices",
    exact_references="repo /srv/billing; branch review/412; `make test`; https://ci.example/88123",
)


def _codes(result: SceneParts | list[Problem]) -> list[str]:
    assert isinstance(result, list), "expected problems"
    return [p.code for p in result]


def test_S1_S6_render_then_parse_keeps_all_six_parts_verbatim() -> None:
    text = render_scene(PARTS)
    assert text.startswith("<checkpoint>\nCurrent step: ") and text.endswith("</checkpoint>\n")
    assert parse_scene(text) == PARTS


def test_S2_S3_S4_S5_S6_progress_ids_quotes_errors_and_references_survive_byte_for_byte() -> None:
    parsed = parse_scene("Some chatter first.\n" + render_scene(PARTS) + "and after.")
    assert isinstance(parsed, SceneParts)
    assert parsed.progress == PARTS.progress  # S2
    assert '"merge anything green, ask me about schema changes"' in parsed.next_step  # S4
    assert parsed.pitfalls.endswith("OperationalError: no such table: invoices")  # S5
    assert "q-7" in parsed.waiting_for and "88123" in parsed.waiting_for  # S3 ids
    assert parsed.exact_references == PARTS.exact_references  # S6


def test_S1_S6_labels_are_recognised_in_the_forms_small_models_write() -> None:
    body = "\n".join(
        [
            f"**Current step:** {PARTS.current_step}",
            f"- Progress: {PARTS.progress}",
            "## Waiting for",
            PARTS.waiting_for,
            f"next step: {PARTS.next_step}",
            f"**Pitfalls**: {PARTS.pitfalls}",
            f"Exact references: {PARTS.exact_references}",
        ]
    )
    parsed = parse_scene(f"<checkpoint>\n{body}\n</checkpoint>")
    assert isinstance(parsed, SceneParts) and parsed == PARTS


def test_S1_S6_an_empty_part_renders_as_none() -> None:
    text = render_scene(SceneParts(PARTS.current_step, PARTS.progress, "", PARTS.next_step, "", "x" * 100))
    parsed = parse_scene(text)
    assert isinstance(parsed, SceneParts) and (parsed.waiting_for, parsed.pitfalls) == ("none", "none")


def test_V1_minimum_length_is_documented_and_an_all_none_block_is_too_short() -> None:
    assert SCENE_MIN_CHARS == 200
    block = render_scene(SceneParts("none", "none", "none", "none", "none", "none"))
    assert len(block) < SCENE_MIN_CHARS
    assert _codes(parse_scene(block)) == ["scene.too_short"]


@pytest.mark.parametrize(
    ("text", "codes"),
    [
        ("no block at all", ["scene.block_count"]),
        ("<checkpoint>\nCurrent step: x", ["scene.block_count"]),
        (render_scene(PARTS) * 2, ["scene.block_count"]),
        ("<checkpoint>\n" + render_scene(PARTS), ["scene.block_count"]),
        (render_scene(PARTS).replace("Pitfalls:", "Pitfall notes:"), ["scene.part_missing"]),
        (render_scene(PARTS).replace("Progress: done", "Progress:\nProgress: done"), ["scene.part_repeated"]),
        (render_scene(PARTS).replace(PARTS.progress, "   "), ["scene.part_empty"]),
        (SCENE_TEMPLATE, ["scene.template_text"] * 6),
    ],
)
def test_V1_S1_S6_scene_problems_are_all_reported(text: str, codes: list[str]) -> None:
    assert _codes(parse_scene(text)) == codes


def test_V1_problem_messages_say_what_to_write() -> None:
    problems = parse_scene("<checkpoint>\nCurrent step: x")
    assert isinstance(problems, list)
    assert "never closed with </checkpoint>" in problems[0].message
    missing = parse_scene(render_scene(PARTS).replace("Pitfalls:", "Pitfall notes:"))
    assert isinstance(missing, list) and "'Pitfalls: none'" in missing[0].message


def test_V1_blocks_are_found_case_insensitively_and_counted() -> None:
    assert len(scene_blocks("<CHECKPOINT>a</Checkpoint> <checkpoint >b</checkpoint>")) == 2
    assert list(SCENE_LABELS) == [
        "Current step",
        "Progress",
        "Waiting for",
        "Next step",
        "Pitfalls",
        "Exact references",
    ]


@settings(deadline=None)  # a busy machine is no failure
@given(st.text())
def test_V1_parse_scene_never_raises(text: str) -> None:
    assert isinstance(parse_scene(text), SceneParts | list)


@settings(deadline=None)  # a busy machine is no failure
@given(
    st.lists(
        st.sampled_from([render_scene(PARTS), "<checkpoint>", "</checkpoint>", "Progress: x\n", "y"]),
        max_size=6,
    )
)
def test_V1_accepted_scene_has_exactly_one_block(pieces: list[str]) -> None:
    text = "".join(pieces)
    accepted = isinstance(parse_scene(text), SceneParts)
    assert accepted == (text.lower().count("<checkpoint>") == 1 and pieces.count(render_scene(PARTS)) == 1)
