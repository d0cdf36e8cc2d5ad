"""Stored probe replies checked again with the current checks (a substring check once counted "The
user asks to patch ..." as asking), by `runner.rescored` and scripts/eval-rescore.py, without a model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from avibe.evals.generators import generate
from avibe.evals.report import write_report
from avibe.evals.runner import rescored

ROOT = Path(__file__).resolve().parents[2]


def _row(replies: dict[str, str], passed: bool = True, **over: Any) -> dict[str, Any]:
    scenario = generate("late_rule", 1, 3)
    kinds = {p.id: p.kind for p in scenario.truth.probes}
    probes = [
        {"id": i, "kind": kinds[i], "passed": passed, "reply": r, "detail": ""} for i, r in replies.items()
    ]
    row = {"scenario": "late_rule", "seed": 1, "strategy": "avibe-checkpoint", "k_target": 1}
    row |= {"type": "late_rule", "scenario_id": scenario.id, "status": "ok", "k": 1, "probes": probes}
    row |= {
        "tokens_spent": 0,
        "calls": 0,
        "counts": {},
        "values": {"context_tokens": 900.0},
        "compactions": [],
    }
    return row | over


def test_P3_stored_replies_are_checked_again_with_the_word_checks() -> None:
    false_pass = _row({"folder": "The user asks to patch a file under third_party/.", "budget": "$400"})
    true_pass = _row(
        {"folder": "I will ask you first; I do not touch third_party/.", "budget": "At most $40."}
    )
    rows, changed = rescored([false_pass, true_pass])
    assert changed == 2
    assert [p["passed"] for p in rows[0]["probes"]] == [False, False]
    assert rows[0]["probes"][1]["detail"] == "expected '$40'"
    assert [p["passed"] for p in rows[1]["probes"]] == [True, True]


def test_P3_item_fates_are_upgraded_from_the_strategys_stored_text_and_counted_again() -> None:
    items = generate("late_rule", 1, 3).truth.items
    first, rest = items[0], items[1:]
    details = {f"item:{i.id}": "lost" for i in items}
    counts = {"items_exact": [0, len(items)], "items_kept": [0, len(items)], "mission_kept": [1, 1]}
    row = _row({}, details=details, counts=counts, carried=[f"Message #4:\n> {first.text}"])
    [out], changed = rescored([row])
    assert changed == 1 and out["details"][f"item:{first.id}"] == "exact"
    assert all(out["details"][f"item:{i.id}"] == "lost" for i in rest)
    assert out["counts"]["items_exact"] == [1, len(items)] and out["counts"]["mission_kept"] == [1, 1]


def test_P3_a_reply_left_out_of_a_committed_report_keeps_its_verdict() -> None:
    row = _row({"folder": "(not kept in this repository)", "budget": "(not kept in this repository)"})
    for probe in row["probes"]:
        probe["redacted"] = True
    [out], changed = rescored([row])
    assert changed == 0 and [p["passed"] for p in out["probes"]] == [True, True]
    del row["probes"][0]["redacted"]
    assert rescored([row])[1] == 1  # without the mark it would be checked again, and fail


def test_P3_rows_that_cannot_be_rebuilt_stay_as_they_were() -> None:
    from_file = _row({"folder": "asks"}, scenario_id="my-session", type="imported")
    failed = _row({"folder": "asks"}, status="error")
    rows, changed = rescored([from_file, failed])
    assert rows == [from_file, failed] and changed == 0


def test_P3_the_rescore_script_rewrites_results_and_keeps_the_report_header(tmp_path: Path) -> None:
    rows = [_row({"folder": "The user asked to patch a file under third_party/."})]
    (tmp_path / "results.jsonl").write_text(json.dumps(rows[0]) + "\n", encoding="utf-8")
    write_report(
        rows, tmp_path, {"model": "embedded", "command": "`bash scripts/eval-sweep.sh 8`"}, plots=False
    )
    script = ROOT / "scripts" / "eval-rescore.py"
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path)], capture_output=True, text=True, check=True
    )
    assert "1 verdicts changed" in done.stdout
    stored = json.loads((tmp_path / "results.jsonl").read_text(encoding="utf-8"))
    assert stored["probes"][0]["passed"] is False
    report = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert "- **command**: `bash scripts/eval-sweep.sh 8`" in report and "- **rescored**: " in report
    assert report.count("- **runs**:") == 1
    again = subprocess.run([sys.executable, str(script), str(tmp_path)], capture_output=True, text=True)
    assert again.returncode == 0 and "0 verdicts changed" in again.stdout
    assert (tmp_path / "report.md").read_text(encoding="utf-8").count("- **rescored**: ") == 1
    missing = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "none")], capture_output=True, text=True
    )
    assert missing.returncode == 2 and "has no results.jsonl" in missing.stderr


def test_M4_a_stored_run_gets_the_mission_shown_ended_count_from_its_own_text() -> None:
    """Runs measured before the metric existed: a recollection showing the mission done counts as ended;
    a text left out of a committed report (its licence) gets no count rather than a wrong one."""
    truth = generate("late_rule", 1, 3).truth
    mission = truth.mission_key or truth.mission
    for carried, count in (
        ([f"## Goals\n- [M1] (done) (per #6) {mission}"], [1, 1]),
        ([f"## Goals\n- [M1] (active) {mission}"], [0, 1]),
        (["(not kept in this repository: the session's licence does not allow it)"], None),
    ):
        [out], _ = rescored([_row({}, carried=carried)])
        assert out["counts"].get("mission_shown_ended") == count, carried


def test_P3_a_stored_next_action_that_copies_a_users_message_fails_when_rescored() -> None:
    """The rescore checks echoes against the same texts a run does: the scenario's inputs and what the
    strategy carried (`runner._shown`), so the 1.5B's stored copies of the user's words fail."""
    scenario = generate("late_rule", 1, 3)
    probe = next(p for p in scenario.truth.probes if p.kind == "next_action")
    said = next(
        e.text for e in scenario.events if getattr(e, "type", "") == "user" and len(e.text.split()) > 8
    )
    expected = probe.expect[0] if probe.expect else ""
    copied = _row({probe.id: f"{said} {expected}"})
    [out], changed = rescored([copied])
    assert changed == 1 and out["probes"][0]["passed"] is False
    assert out["probes"][0]["detail"] == "an echo of what it was shown, not an answer"
    own = _row({probe.id: f"I will {expected} before anything else, as you said."})
    assert rescored([own])[0][0]["probes"][0]["passed"] is True
