"""The CI smoke on the real embedded model: one scenario, the checkpoint and truncation, one compaction.
The checkpoint's guarantees (mission kept, user words byte-identical) must hold whatever the small model
answers - an accepted checkpoint copies them, a failed one changes nothing (V5) or moves out without the
model (V7) keeping every moved user message; the baseline's values are only measured.

Bounded by work, not by a wall clock a busy machine breaks: the smallest
constraint_fidelity conversation that crosses the trigger once, compacted at half of a 4,096-token window
(so the checkpoint turn's prompts are ~2,000 tokens), one compaction, and a cap on the model calls it may
make. The timeout only catches a hang: 2 cores idle take about a minute here."""

from __future__ import annotations

from pathlib import Path

import pytest

from avibe.config import load_settings
from avibe.evals.report import render_markdown
from avibe.evals.runner import RunSettings, plan, run_all
from avibe.evals.strategies import CHECKPOINT
from avibe.providers.modelfile import INSTALL_COMMAND, is_installed

pytestmark = [pytest.mark.embedded, pytest.mark.slow, pytest.mark.timeout(1800)]
WINDOW = 4096
THRESHOLD = 0.5  # the README's eval setting: compaction above half the window
MAX_CALLS = 2 * 2 * 6  # at most two checkpoint turns (V8), each its questions and one repair round (V4)


def test_E1_one_scenario_on_the_embedded_model(tmp_path: Path) -> None:
    settings = load_settings()
    if not is_installed(settings.model_cache):
        pytest.skip(f"the embedded model is not installed in {settings.model_cache}; run `{INSTALL_COMMAND}`")
    from avibe.providers import open_counter, open_model

    model = open_model("embedded", settings)
    counter = open_counter("embedded", settings, model)
    jobs = plan(["constraint_fidelity"], [], [CHECKPOINT, "truncate"], [1], [1], WINDOW, counter, THRESHOLD)
    rows = run_all(
        jobs, lambda: model, counter, RunSettings(WINDOW, THRESHOLD, probes=False), tmp_path / "r.jsonl"
    )
    by_strategy = {r["strategy"]: r for r in rows}
    assert {r["status"] for r in rows} == {"ok"}, rows
    mine = by_strategy[CHECKPOINT]
    assert len(mine["compactions"]) == 1, "the scenario is sized to reach the trigger exactly once"
    assert mine["calls"] <= MAX_CALLS
    assert mine["counts"]["mission_exact"] == [1, 1]
    hits, n = mine["counts"]["items_exact"]
    assert hits == n == 3
    print(render_markdown(rows, {"model": "embedded", "window": str(WINDOW)}))  # the measured values
