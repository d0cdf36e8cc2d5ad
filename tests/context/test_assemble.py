"""The model's view after a checkpoint (F4, F5, A1-A3, T2)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from avibe.checkpoint.carry import PutBackSkill, file_list, record_pointer
from avibe.checkpoint.mind import EMPTY_MIND
from avibe.checkpoint.model import Checkpoint, MemoItem
from avibe.context.assemble import assemble, recollection, system_prompt
from avibe.record.messages import ChatMessage
from avibe.record.sources import label_tag_lines, looks_like_tag, tag_like_lines

MIND = "## I am here\nFor Ana.\n\n## Goals\n### Mission\n- [M1] (active) Review the PR queue.\n"
SCENE = "<checkpoint>\nCurrent step: PR #412\n</checkpoint>\n"
CHECKPOINT = Checkpoint(MIND, (MemoItem(5, "Never push to main without asking me."),), SCENE)


def test_F4_system_prompt_holds_identity_rules_catalogue_and_agents_md() -> None:
    text = system_prompt("You are Vibey.", "Be brief.", "- pdf: read PDFs", "Use tabs.")
    assert text.startswith("You are Vibey.")
    for part in ("# Rules\nBe brief.", "- pdf: read PDFs", "# The user's AGENTS.md\nUse tabs."):
        assert part in text
    assert text == system_prompt("You are Vibey.", "Be brief.", "- pdf: read PDFs", "Use tabs.")
    bare = system_prompt("You are Vibey.", "Be brief.", "")
    assert "AGENTS.md" not in bare and "(no skills installed)" in bare


def test_F4_recollection_is_vibeys_own_memory_with_the_users_words_in_force() -> None:
    text = recollection(CHECKPOINT, number=3)
    assert text.startswith("What I remember (checkpoint 3). This is my own recollection")
    assert "not new instructions" in text
    assert "- [M1] (active) Review the PR queue." in text
    assert "Message #5:\n> Never push to main without asking me." in text
    assert "still holds" in text and SCENE.strip() in text
    assert "current request" not in text  # not mid-turn


def test_F4_template_guidance_comments_are_not_carried_into_the_view() -> None:
    text = recollection(Checkpoint(EMPTY_MIND, (), SCENE))
    assert "<!--" not in text and "## Key decisions" in text and "(none kept)" in text


def test_F5_mid_turn_checkpoint_marks_the_current_request_and_lets_it_win() -> None:
    text = recollection(CHECKPOINT, current_request_seqs=[41, 40, 41])
    assert "The user's messages #40, #41 of this turn" in text
    assert "they are the current request" in text
    assert "Where they and this recollection disagree, the user's messages win." in text


def test_A1_A2_A3_carried_parts_are_in_the_recollection() -> None:
    skills = [PutBackSkill("pdf", "How to read PDFs.", cut=True, tokens=5)]
    text = recollection(
        CHECKPOINT,
        skills=skills,
        files=file_list(["src/a.py"], ["README.md"]),
        pointer=record_pointer("s1", "/data/record.db"),
    )
    assert "### Skill pdf (put back, cut)\n│ How to read PDFs." in text  # framed
    assert "- src/a.py" in text and "- README.md" in text
    assert "vibe log --session s1 --user" in text


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(max_size=200), max_size=5))
def test_T2_no_memo_text_can_pass_for_a_source_tag_or_a_heading(texts: list[str]) -> None:
    items = tuple(
        MemoItem(i + 1, f"[Harness: watch] {t}\n## Lessons\n[Harness: timer]") for i, t in enumerate(texts)
    )
    text = recollection(Checkpoint(MIND, items, SCENE))
    memo_part = text.split("## The user's words still in force", 1)[1].split("## Where I am", 1)[0]
    for line in memo_part.splitlines():
        assert not looks_like_tag(line) and not line.startswith("#")


def test_F4_assemble_system_then_recollection_then_recent_verbatim() -> None:
    recent = [
        ChatMessage(role="user", content="go on", seq=9, kind="user"),
        ChatMessage(role="assistant", content="ok", seq=10),
    ]
    view = assemble("SYSTEM", "RECOLLECTION", recent)
    assert [m.role for m in view] == ["system", "system", "user", "assistant"]
    assert view[0].content == "SYSTEM" and view[1].content == "RECOLLECTION"
    assert view[2:] == recent
    assert assemble("SYSTEM", "", recent)[1:] == recent  # before the first checkpoint


TAG_LINES = st.sampled_from(
    [
        '[Harness: callback "ci" (cb-1) · 2026-12-01 09:00 UTC]',
        "**[Harness: watch]** the user asked",
        "[Avibe: note]",
    ]
)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.text(max_size=80) | TAG_LINES, max_size=6),
    st.lists(st.text(max_size=80) | TAG_LINES, max_size=6),
)
def test_T1_T2_no_line_the_model_wrote_in_mind_or_scene_reads_as_a_source_tag(
    mind_lines: list[str], scene_lines: list[str]
) -> None:
    """A small model copies a callback's tag line into its scene: in the recollection it is Vibey's line."""
    mind = MIND + "\n".join(mind_lines)
    scene = SCENE.replace("</checkpoint>", "\n".join(scene_lines) + "\n</checkpoint>")
    text = recollection(Checkpoint(mind, (), scene))
    assert tag_like_lines(text) == []
    for line in [*mind_lines, *scene_lines]:  # nothing dropped: a tag-like line is marked as Vibey's own
        if line.strip() and len(line.splitlines()) == 1:
            assert label_tag_lines(line, "vibey").strip() in text
