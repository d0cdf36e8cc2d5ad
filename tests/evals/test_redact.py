"""Eval rows made fit to commit (keep in the repository only what a session's licence allows):
`evals.redact.redacted_rows` and scripts/eval-redact.py leave out every word a run stored of a real
session that is not kept here, and nothing else."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from avibe.evals.realset import load_manifest
from avibe.evals.redact import LEFT_OUT, left_out, redacted_rows
from avibe.evals.report import header_of, write_report
from avibe.evals.runner import rescored

ROOT = Path(__file__).resolve().parents[2]
KEPT = {s.scenario_id for s in load_manifest() if s.kept}
NOT_KEPT = sorted(s.scenario_id for s in load_manifest() if not s.kept)


def _row(scenario_id: str, reply: str, carried: str, quoted: str, **over: Any) -> dict[str, Any]:
    probes = [
        {"id": "p1", "kind": "exact", "passed": True, "reply": reply, "detail": "", "tokens": 9, "calls": 1},
        {"id": "p2", "kind": "next_action", "passed": False, "reply": reply, "detail": "none of ['pin']"},
    ]
    notes = ["move out 4 oldest messages", f"answer echoes the words of a question, ignored: {quoted!r}"]
    row = {"scenario": scenario_id, "seed": None, "strategy": "avibe-checkpoint", "k_target": 0}
    row |= {"type": "real", "scenario_id": scenario_id, "status": "ok", "k": 2, "probes": probes}
    row |= {"tokens_spent": 1234, "calls": 7, "counts": {"items_exact": [2, 3]}, "carried": [carried]}
    row |= {"values": {"context_tokens": 900.0}}
    row |= {"compactions": [{"at_seq": 9, "seconds": 3.5, "notes": notes}], "details": {"item:a": "exact"}}
    return row | over


_WORDS = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=60)


@given(reply=_WORDS, carried=_WORDS, quoted=_WORDS)
def test_no_word_of_a_session_not_kept_survives_and_the_measurements_do(
    reply: str, carried: str, quoted: str
) -> None:
    marks = [f"SESSION-{n}-{text}" for n, text in enumerate((reply, carried, quoted))]
    row = _row(NOT_KEPT[0], *marks)
    [out] = redacted_rows([row], KEPT)
    stored = json.dumps(out, ensure_ascii=False)
    assert not any(mark in stored for mark in marks)
    assert not any(json.dumps(mark, ensure_ascii=False)[1:-1] in stored for mark in marks)
    assert [p["passed"] for p in out["probes"]] == [True, False]
    assert all(p["redacted"] and p["reply"] == LEFT_OUT for p in out["probes"])
    assert out["carried"] == [LEFT_OUT] and left_out(out["carried"][0])
    same = ("tokens_spent", "calls", "counts", "details", "k", "status")
    assert all(out[key] == row[key] for key in same)
    assert out["probes"][1]["detail"] == "none of ['pin']"  # the truth's words, which the repository holds
    assert out["compactions"][0]["notes"][0] == "move out 4 oldest messages"
    assert out["compactions"][0]["seconds"] == 3.5
    assert redacted_rows([out], KEPT) == [out]  # redacting twice changes nothing


def test_rows_of_kept_sessions_and_generated_scenarios_come_back_as_they_were() -> None:
    kept = _row(sorted(KEPT)[0], "a reply", "a recollection", "a quote")
    generated = _row("late_rule-s1-n3", "a reply", "a recollection", "a quote", type="late_rule")
    assert redacted_rows([kept, generated], KEPT) == [kept, generated]


def test_a_redacted_probe_keeps_its_verdict_when_rescored() -> None:
    """The kept session (its segment is in the repository, so the rescore rebuilds its truth) redacted as
    if it were not kept: the note is not checked as if it were the reply."""
    row = _row(sorted(KEPT)[0], "Bitdefender, and keep Bitdefender", "the text", "q")
    for probe, truth_id in zip(row["probes"], ("autostart", "startup"), strict=True):
        probe["id"] = truth_id
    [out] = redacted_rows([row], kept=set())
    rows, _ = rescored([out])
    assert [p["passed"] for p in rows[0]["probes"]] == [True, False]
    assert [p["passed"] for p in rescored([row])[0][0]["probes"]] == [True, True]  # the reply, checked


def test_the_script_redacts_a_folder_and_stamps_the_report(tmp_path: Path) -> None:
    rows = [
        _row(NOT_KEPT[0], "SECRET reply", "SECRET text", "SECRET quote"),
        _row(sorted(KEPT)[0], "kept reply", "kept text", "kept quote"),
    ]
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    write_report(rows, tmp_path, {"model": "embedded-1.5b", "command": "`vibe eval --set real`"}, plots=False)
    script = ROOT / "scripts" / "eval-redact.py"
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path)], capture_output=True, text=True, check=True
    )
    assert "1 rows redacted" in done.stdout
    stored = (tmp_path / "results.jsonl").read_text(encoding="utf-8")
    assert "SECRET" not in stored and "kept reply" in stored and "kept quote" in stored
    header = header_of((tmp_path / "report.md").read_text(encoding="utf-8"))
    assert header["command"] == "`vibe eval --set real`" and "eval-redact.py" in header["redacted"]
    again = subprocess.run([sys.executable, str(script), str(tmp_path)], capture_output=True, text=True)
    assert again.returncode == 0 and "0 rows redacted" in again.stdout
    assert (tmp_path / "report.md").read_text(encoding="utf-8").count("- **redacted**: ") == 1
    # a folder without results: folders_main, shared with scripts/eval-rescore.py, tested there
