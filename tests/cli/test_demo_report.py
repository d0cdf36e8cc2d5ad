"""The demo report's side by side: what the checkpoint carried - the mission, the
memo's rules with their message numbers, the scene - next to what a rewrite summary and a handoff carry
for the same transcript, so a person sees the rule a summary lost."""

from __future__ import annotations

from datetime import UTC, datetime

from avibe.cli.demo import Timeline, comparison_lines, probe_lines, timeline_lines
from avibe.cli.demo_compare import (
    Column,
    checkpoint_column,
    kept_verbatim,
    loop_start,
    run_baselines,
    side_by_side,
)
from avibe.providers.counting import TiktokenCounter
from avibe.providers.scripted import ScriptedModel
from avibe.record.checkpoint import MemoItem, StoredCheckpoint
from avibe.record.messages import ChatMessage, ModelReply

RULE = "Never modify anything under vendor/ - that code belongs to another team."
ASK = "Ask me only when a ticket needs a decision you cannot take from the files."
MIND = """## I am here
Working through the ticket queue.

## Goals
### Mission
- [M1] (active) Work through the tickets oldest first (message #1)
### Workstreams
- [W1] (active) ticket 002

## Key decisions
(none)

## Lessons
(none)
"""


def _stored() -> StoredCheckpoint:
    memo = (MemoItem(1, f"{RULE} Please work through the tickets."), MemoItem(4, "Next ticket, please."))
    scene = "Where the work stands: ticket 002 is next.\n<!-- guidance the template carries -->"
    return StoredCheckpoint("s-1", 1, datetime(2026, 12, 4, tzinfo=UTC), MIND, memo, scene, upto_seq=7)


def test_the_checkpoint_column_carries_mission_memo_with_numbers_and_scene() -> None:
    column = checkpoint_column(_stored())
    assert column.startswith("MISSION\n- [M1] (active) Work through the tickets oldest first (message #1)\n")
    assert f"#1: {RULE} Please work through the tickets.\n#4: Next ticket, please." in column
    assert column.endswith("SCENE\nWhere the work stands: ticket 002 is next.")  # guidance stripped


def test_a_rule_counts_as_kept_only_in_the_users_words() -> None:
    assert kept_verbatim(RULE, f"MEMO\n#1: {RULE.upper()}")
    assert kept_verbatim(RULE, RULE.replace(" - ", "\n-  "))  # spacing and line breaks do not count
    assert not kept_verbatim(RULE, "The user does not want the vendored code touched.")


def test_the_side_by_side_names_the_rule_the_summary_lost() -> None:
    rewrite = Column(
        "rewrite summary", "SUMMARY\nThe user wants the tickets done; vendored code is off-limits."
    )
    handoff = Column("handoff", f"COPIED USER MESSAGE\n{RULE} Please work.\n\nSUMMARY\nTickets 001-002 done.")
    lines = comparison_lines(_stored(), [rewrite, handoff], [RULE, ASK], width=90)
    assert lines[0].startswith("=== Side by side") and "messages 1-7" in lines[0]
    assert lines[1:9] == [
        f'rule "{RULE}"',
        "    Avibe checkpoint 1: kept verbatim (memo #1)",
        "    rewrite summary: LOST",
        "    handoff: kept verbatim",
        f'rule "{ASK}"',
        "    Avibe checkpoint 1: LOST",
        "    rewrite summary: LOST",
        "    handoff: LOST",
    ]
    table = lines[10:]
    assert table[0].split(" | ") == ["AVIBE CHECKPOINT 1".ljust(28), "REWRITE SUMMARY".ljust(28), "HANDOFF"]
    assert all(len(row) <= 90 for row in table)
    left = " ".join(row.split(" | ")[0].strip() for row in table)
    assert "#1: Never modify anything under vendor/" in left  # the memo's number stands by its rule


def test_columns_of_different_lengths_line_up() -> None:
    rows = side_by_side([Column("a", "one\ntwo\nthree"), Column("b", "x")], width=43)
    assert rows == [
        "A                    | B",
        "-                    | -",
        "one                  | x",
        "two                  |",  # the gap stays: the right column reads as empty, not ended
        "three                |",
    ]


def test_no_checkpoint_no_comparison_and_fewer_than_two_checkpoints_is_said() -> None:
    assert comparison_lines(None, [], [RULE], 100) == [
        "=== Side by side: no checkpoint, nothing to compare ==="
    ]
    timeline = Timeline(first_request=0.0)
    timeline.began(120.0)
    timeline.ended(150.0)
    timeline.checkpoints.append((1, 150.0, "valid"))
    timeline.ended(170.0)  # an end with no start in progress counts nothing
    lines = timeline_lines(timeline, 6144, 600.0)
    assert lines == [
        "=== 1 checkpoints on a 6,144-token window ===",
        "checkpoint 1: 2.5 min after the first model request (valid)",
        "(fewer than two checkpoints: the context stayed below the trigger)",
        "the work, up to the probes: 10.0 min",
        "of which making checkpoints: 0.5 min (5%)",
    ]


def test_probe_answers_are_shown_under_the_question() -> None:
    lines = probe_lines(
        [("May you edit vendor/parser.txt?", "No: vendor/ belongs\nto another team."), ("Next?", "")]
    )
    assert lines[1:] == [
        "user> May you edit vendor/parser.txt?",
        "vibey> No: vendor/ belongs\n       to another team.",
        "user> Next?",
        "vibey> (no answer)",
    ]


def test_the_baselines_run_on_the_transcript_and_carry_what_they_return() -> None:
    """Rewrite keeps only its summary; handoff copies the user's messages newest-first beside its own."""
    model = ScriptedModel(
        [ModelReply("Summary: tickets in progress."), ModelReply("Handoff: ticket 002 next.")]
    )
    transcript = [
        ChatMessage("system", "You are a coding agent."),
        ChatMessage("user", f"{RULE} Please work through the tickets."),
        ChatMessage("assistant", "Reading tickets/001.md."),
        ChatMessage("user", "Next ticket, please."),
    ]
    rewrite, handoff = run_baselines(transcript, model, TiktokenCounter(), 6144, 0.58)
    assert rewrite.title == "rewrite summary" and rewrite.text.startswith("SUMMARY\n")
    assert "Summary: tickets in progress." in rewrite.text and "COPIED" not in rewrite.text
    assert handoff.title == "handoff" and handoff.text.startswith(f"COPIED USER MESSAGE\n{RULE}")
    assert "SUMMARY\n" in handoff.text and "Handoff: ticket 002 next." in handoff.text
    assert [r.messages[-1].kind for r in model.requests] == ["compaction_request"] * 2


LOOP = "The user has been given no access to this conversation. "


def test_a_column_that_loops_stops_where_it_starts_repeating_and_says_so() -> None:
    """A small model's summary that says one sentence sixty times is shown once, then one line counting
    what was left out - so the side by side stays readable (the demo report ran to ~100 lines of it)."""
    looping = "The queue has six tickets. " + LOOP * 60
    rows = side_by_side([Column("checkpoint", "MISSION\nTickets."), Column("handoff", looping)], width=100)
    right = "\n".join(row.split(" | ", 1)[1] for row in rows if " | " in row)
    assert right.count("no access to this") == 1
    assert "more lines; the text repeats itself from" in right
    assert len(rows) < 12


def test_a_long_column_is_capped_and_counts_the_rest() -> None:
    unique = "\n".join(f"step {n}: a different sentence about ticket {n}." for n in range(80))
    rows = side_by_side([Column("a", unique), Column("b", "x")], width=120)
    assert len(rows) == 2 + 30 + 1  # title, rule, 30 lines, the count
    assert rows[-1].startswith("[... 50 more lines]")


def test_repetition_that_is_not_a_loop_is_shown_whole() -> None:
    """A rule quoted twice in an otherwise varied text, or short words said again, is no loop."""
    text = f"{RULE}\nThe work goes on.\nTicket 2 is done.\n{RULE}\nTicket 3 waits for the user.\nYes. Yes."
    assert loop_start(text) is None
    assert loop_start("First. " + LOOP * 4) == len("First. " + LOOP)  # the sentence is shown once


def test_the_report_counts_plan_calls_and_plans_sent_again_unchanged() -> None:
    from avibe.cli.demo_judge import plan_call_line

    open_plan = '{"plan":[{"step":"ticket 001","status":"pending"}]}'
    done = '{"plan":[{"step":"ticket 001","status":"completed"}]}'
    assert plan_call_line([open_plan, open_plan, open_plan, done, done]) == (
        "plan: 5 update_plan calls, 3 of them the same plan as the call before"
    )
    assert plan_call_line([]) == "plan: update_plan was never called"
