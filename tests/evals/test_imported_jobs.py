"""An imported real transcript lives through the replay as Avibe's tools would have reported it: a Claude
Code session that starts a command with Bash's run_in_background and reads a file shows, at its
checkpoint, the job in "Waiting for" (S3) and the file in the carry's list (A2)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from eval_scripts import checkpoint_answer

from avibe.evals.checkpoint import NAME, ReplayCarry
from avibe.evals.importers import parse_session_file
from avibe.evals.replay import replay, trigger_fraction
from avibe.evals.strategies import make_strategy
from avibe.ports import TokenCounter
from avibe.providers.scripted import ScriptedModel
from avibe.record.messages import ModelFacts

WINDOW = 4_000
SESSION = "4f1c2a9e-7b3d-4e2a-9c55-0d8e6f1a2b3c"
EXPORT = "./scripts/export_ledger.py --month 2026-11"
STARTED = (  # Claude Code's own answer to a background Bash call (as in src/avibe/evals/real/sessions)
    "Command running in background with ID: b32a9e1. Output is being written to: "
    "/tmp/claude/-home-kofi-larkspur/tasks/b32a9e1.output"
)
REPORT = "\n".join(
    f"report line {i:03d}: ledger rows reconciled, totals within tolerance" for i in range(160)
)


def _line(kind: str, content: object, n: int) -> dict[str, Any]:
    at = f"2026-11-20T09:{n:02d}:00.000Z"
    message = {"role": kind, "content": content}
    return {"sessionId": SESSION, "type": kind, "isSidechain": False, "uuid": f"u-{n}", "timestamp": at,
            "message": message}  # fmt: skip


def _call(n: int, call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return _line("assistant", [{"type": "tool_use", "id": call_id, "name": name, "input": arguments}], n)


def _claude_session(path: Path) -> Path:
    lines = [
        _line("user", "Start the ledger export in the background, then read the reconciliation report.", 1),
        _call(2, "toolu_1", "Bash", {"command": EXPORT, "run_in_background": True}),
        _line("user", [{"type": "tool_result", "tool_use_id": "toolu_1", "content": STARTED}], 3),
        _call(4, "toolu_2", "Read", {"file_path": "/home/kofi/larkspur/report.txt"}),
        _line("user", [{"type": "tool_result", "tool_use_id": "toolu_2", "content": REPORT}], 5),
        _line("assistant", [{"type": "text", "text": "The report is read; the export still runs."}], 6),
        _line("user", "What does the report say about the totals?", 7),
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_S3_A2_an_imported_claude_code_session_waits_for_its_background_job(
    tmp_path: Path, counter: TokenCounter
) -> None:
    imported = parse_session_file(_claude_session(tmp_path / "session.jsonl"), "kofi")
    assert imported.format == "claude"
    facts = ModelFacts("scripted", WINDOW, 1_024)
    result = replay(imported.scenario, make_strategy(NAME, checkpoint_mode="structured"),
                    ScriptedModel([checkpoint_answer] * 40, facts), counter, WINDOW,
                    threshold=trigger_fraction(facts, WINDOW))  # fmt: skip
    assert result.k >= 1
    checkpoint = ReplayCarry.parse(result.carry).checkpoint
    assert checkpoint is not None
    waiting = checkpoint.scene.split("Waiting for:", 1)[1].split("Next step:", 1)[0]
    assert "b32a9e1" in waiting and EXPORT in waiting  # S3: the job, by Claude Code's id, and its command
    assert "tasks/b32a9e1.output" in waiting  # where it writes, as Claude Code said
    assert "/home/kofi/larkspur/report.txt" in checkpoint.carry.files  # A2: Read is Avibe's read_file
