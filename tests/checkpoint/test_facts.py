"""What the harness knows goes into the scene next to what the model wrote (S3, S5, S6)."""

from __future__ import annotations

from core_doubles import CharCounter
from hypothesis import given, settings
from hypothesis import strategies as st

from avibe.checkpoint.budgets import budgets_for
from avibe.checkpoint.facts import (
    HARNESS_MARK,
    FailedCall,
    HarnessFacts,
    WaitingJob,
    add_facts,
    facts_limits,
    facts_text,
    missing_facts,
    with_facts,
)
from avibe.checkpoint.mind import EMPTY_MIND
from avibe.checkpoint.model import Checkpoint
from avibe.checkpoint.scene import SceneParts, parse_scene, render_scene
from avibe.checkpoint.validate import validate

PARTS = SceneParts(
    current_step="exporting the ledger for March in workstream W1, the monthly export",
    progress="done: reindex; in progress: export; pending: upload",
    waiting_for="the export job the user started",
    next_step='upload the export, as the user asked: "upload it when it is done"',
    pitfalls="none",
    exact_references="the exports folder",
)

WORD = st.text(min_size=1, max_size=60) | st.sampled_from(["</checkpoint>", "a\nPitfalls: x", " ", "`x`"])
JOBS = st.lists(st.builds(WaitingJob, WORD, st.text(min_size=1, max_size=300), WORD, WORD), max_size=8)
FAILURE = st.none() | st.builds(FailedCall, WORD, st.text(max_size=400), st.text(max_size=400))


@given(
    jobs=JOBS,
    read=st.lists(WORD, max_size=40),
    modified=st.lists(WORD, max_size=40),
    failure=FAILURE,
    window=st.sampled_from([4_096, 8_192, 32_768, 200_000]),
)
@settings(max_examples=200, deadline=None)
def test_S3_S6_harness_lines_stay_within_their_budget_and_keep_the_models_words(
    jobs: list[WaitingJob], read: list[str], modified: list[str], failure: FailedCall | None, window: int
) -> None:
    facts = HarnessFacts(tuple(jobs), tuple(read), tuple(modified), failure)
    limits = facts_limits(window)
    texts = facts_text(facts, window)
    for part, text in texts.items():
        assert len(text) <= limits[part]
        assert not text or text.startswith(HARNESS_MARK)
    merged = add_facts(PARTS, facts, window)
    assert merged.waiting_for.startswith(PARTS.waiting_for)  # next to the model's words, never instead
    assert merged.exact_references.startswith(PARTS.exact_references)
    assert merged.current_step == PARTS.current_step and merged.pitfalls == PARTS.pitfalls
    assert missing_facts(merged, facts, window) == []
    scene = with_facts(render_scene(PARTS), facts, window)
    parsed = parse_scene(scene)
    assert isinstance(parsed, SceneParts) and missing_facts(parsed, facts, window) == []


def test_S3_every_job_fits_whole_or_is_counted_in_a_note() -> None:
    jobs = tuple(WaitingJob(f"bg-{n}", f"./run.sh --part {n}", f"/logs/bg-{n}.log") for n in range(12))
    text = facts_text(HarnessFacts(waiting=jobs), 4_096)["waiting_for"]
    shown = [n for n in range(12) if f"bg-{n}:" in text]
    assert shown == list(range(len(shown))) and 2 <= len(shown) < 12  # oldest first, whole
    assert f"+ not shown for room: {12 - len(shown)} background jobs" in text


def test_S6_the_failing_call_comes_first_then_files_modified_then_read() -> None:
    facts = HarnessFacts(
        files_read=("docs/guide.md", "app.py"),
        files_modified=("app.py",),
        failure=FailedCall("shell", "make test", "E0042: fixture missing"),
    )
    text = facts_text(facts, 32_768)["exact_references"]
    assert text == (
        f"{HARNESS_MARK} last failing call: shell `make test` -> E0042: fixture missing; "
        "modified app.py; read docs/guide.md"
    )
    assert facts_text(HarnessFacts(), 32_768) == {"progress": "", "waiting_for": "", "exact_references": ""}


def test_V1_S3_validation_names_a_harness_line_the_scene_lacks() -> None:
    facts = HarnessFacts(waiting=(WaitingJob("bg-3", "sleep 600", ""),))
    budgets = budgets_for(32_768, 28_000)
    bare = Checkpoint(mind=EMPTY_MIND, memo=(), scene=render_scene(PARTS))
    problems = validate(None, bare, budgets, CharCounter(), facts=facts)
    assert [p.code for p in problems] == ["scene.facts_missing"]
    assert "bg-3" in problems[0].message
    filled = Checkpoint(mind=EMPTY_MIND, memo=(), scene=with_facts(bare.scene, facts, 32_768))
    assert validate(None, filled, budgets, CharCounter(), facts=facts) == []
    assert validate(None, bare, budgets, CharCounter()) == []  # no facts given: nothing to check


def test_S3_a_scene_the_model_left_as_none_gets_the_harness_line_alone() -> None:
    facts = HarnessFacts(waiting=(WaitingJob("bg-1", "./reindex.sh", "/logs/bg-1.log"),))
    merged = add_facts(SceneParts(*(["none"] * 6)), facts, 8_192)
    assert merged.waiting_for == f"{HARNESS_MARK} background job bg-1: `./reindex.sh`, log /logs/bg-1.log"


def test_S3_S6_a_waiting_job_shows_its_newest_output_line_verbatim() -> None:
    job = WaitingJob("job-9f3", "./export.py --month 2026-05", "/logs/job-9f3.log", "writing /srv/l-1234.pq")
    text = facts_text(HarnessFacts(waiting=(job,)), 4_096)["waiting_for"]
    assert text.endswith("log /logs/job-9f3.log, latest output `writing /srv/l-1234.pq`")
    quiet = WaitingJob("job-9f3", "./export.py", "/logs/job-9f3.log", "  ")
    assert "latest output" not in facts_text(HarnessFacts(waiting=(quiet,)), 4_096)["waiting_for"]


def test_S2_the_plan_goes_into_progress_where_the_queue_stands_first() -> None:
    from avibe.checkpoint.facts import HarnessFacts, facts_text
    from avibe.record.checkpoint import PlanItem

    done = [PlanItem(f"ticket {i:03d}", "done") for i in range(1, 40)]
    plan = (*done, PlanItem("ticket 040", "in_progress"), PlanItem("ticket 041"))
    text = facts_text(HarnessFacts(plan=plan), 4_096)["progress"]
    assert text.index("[>] ticket 040") < text.index("[ ] ticket 041")  # the position survives any cut
    assert "done steps" in text  # the finished part is what was left out for room, and it says so


def test_S5_a_failed_command_keeps_the_same_programs_command_that_worked_after_it() -> None:
    from avibe.checkpoint.facts import worked_after

    failed = FailedCall("shell", "pkgctl import --fast-resume /d.bin", "E1: checksum mismatch")
    fixed = worked_after(failed, "shell", {"command": "pkgctl import --verify-each /d.bin"}, "ok", False)
    assert fixed.then == "pkgctl import --verify-each /d.bin"
    assert worked_after(fixed, "shell", {"command": "pkgctl status"}, "ok", False) == fixed  # the first
    assert worked_after(failed, "shell", {"command": "ls /"}, "ok", False) == failed  # another program
    again = worked_after(failed, "shell", {"command": "pkgctl import --x"}, "exit code: 3\nE2", False)
    assert again == failed  # that one failed too
    assert worked_after(failed, "read_file", {"path": "/d.bin"}, "data", False) == failed  # not a command
    text = facts_text(HarnessFacts(failure=fixed), 4_096)["exact_references"]
    assert text.endswith("-> E1: checksum mismatch; then worked: `pkgctl import --verify-each /d.bin`")


def test_S6_a_reference_too_long_for_the_room_does_not_keep_out_the_shorter_ones_after_it() -> None:
    facts = HarnessFacts(
        files_read=("tickets/001.md",),
        files_modified=("CHANGELOG.md", "docs/guide.md"),
        failure=FailedCall("send_to_session", "x" * 200, "e" * 240),
    )
    text = facts_text(facts, 6_144)["exact_references"]
    assert "modified CHANGELOG.md; modified docs/guide.md; read tickets/001.md" in text
    assert text.endswith("(+ not shown for room: 1 failing call; see the record)")
