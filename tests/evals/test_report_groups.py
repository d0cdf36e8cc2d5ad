"""The real set's report breakdowns (E1; docs/eval.md): the probes per language and per "no rule words",
and what one compaction costs against the handoff - counted from the rows, never made up."""

from __future__ import annotations

from typing import Any

from avibe.evals.realset import load_manifest, session_labels
from avibe.evals.report import render_markdown
from avibe.evals.report_groups import cost_per_compaction, probes_by_label


def _row(
    scenario: str, strategy: str, passed: list[bool], compactions: list[tuple[int, int, float]]
) -> dict[str, Any]:
    return {
        "scenario": scenario,
        "seed": None,
        "strategy": strategy,
        "k_target": 0,
        "type": "real",
        "status": "ok",
        "k": len(compactions),
        "tokens_spent": sum(c[0] for c in compactions),
        "calls": sum(c[1] for c in compactions),
        "counts": {},
        "values": {"context_tokens": 100.0},
        "compactions": [{"spent": t, "calls": n, "seconds": s} for t, n, s in compactions],
        "probes": [{"id": f"p{i}", "kind": "next_action", "passed": ok} for i, ok in enumerate(passed)],
    }


LABELS = {"real-a": {"language": "zh"}, "real-b": {"language": "en"}, "real-c": {"language": "zh"}}
ROWS = [
    _row("real-a", "avibe-checkpoint", [True, True, False], [(3000, 3, 60.0)]),
    _row("real-c", "avibe-checkpoint", [True], [(5000, 2, 40.0)]),
    _row("real-b", "avibe-checkpoint", [False], [(4000, 3, 50.0)]),
    _row("real-a", "handoff", [False, False, True], [(1000, 1, 20.0), (2000, 1, 30.0)]),
    _row("real-c", "handoff", [False], []),
    _row("real-b", "handoff", [True], [(3000, 1, 25.0)]),
]


def test_probes_are_pooled_per_label_value_and_strategy() -> None:
    table = probes_by_label(ROWS, ["avibe-checkpoint", "handoff"], LABELS)
    lines = {
        line.split(" | ")[0].strip("| "): line
        for line in table
        if line.startswith("| zh") or line.startswith("| en")
    }
    assert lines["zh"] == "| zh | next_action | 2 | 75% [30%, 95%] | 25% [5%, 70%] |"
    assert lines["en"].startswith("| en | next_action | 1 | 0% ") and "| 100% " in lines["en"]


def test_cost_per_compaction_is_the_mean_over_every_compaction_against_the_handoff() -> None:
    table = cost_per_compaction(ROWS, ["avibe-checkpoint", "handoff"])
    checkpoint = next(line for line in table if line.startswith("| avibe-checkpoint"))
    handoff = next(line for line in table if line.startswith("| handoff"))
    # checkpoint: 3 compactions, 4,000 tokens, 2.7 calls, 50 s each; handoff: 3, 2,000 tokens, 1 call, 25 s
    assert checkpoint == "| avibe-checkpoint | 3 | 4,000 | 2.7 | 50.0 | 2.0x / 2.0x |"
    assert handoff == "| handoff | 3 | 2,000 | 1.0 | 25.0 | - |"


def test_every_real_session_has_its_labels_and_the_report_shows_them() -> None:
    labels = session_labels()
    sessions = load_manifest()
    assert set(labels) == {s.scenario_id for s in sessions}
    assert {labels[s.scenario_id]["language"] for s in sessions} == {s.language for s in sessions}
    assert sum(v["a request without rule words"] == "yes" for v in labels.values()) * 2 >= len(sessions)
    report = render_markdown(ROWS, {}, (), LABELS)
    assert "## Probes by what the session is" in report and "### language" in report
    assert "## Cost per compaction" in report
