"""The CI smoke on the real embedded model: one scenario, the checkpoint and truncation, K = 1.
The checkpoint's guarantees (mission kept, user words byte-identical) must hold whatever the small model
answers - an accepted checkpoint copies them, a failed one changes nothing (V5) or moves out without the
model (V7) keeping every moved user message; the baseline's values are only measured. Slow on 2 cores."""

from __future__ import annotations

from pathlib import Path

import pytest

from avibe.config import load_settings
from avibe.evals.report import render_markdown
from avibe.evals.runner import RunSettings, plan, run_all
from avibe.evals.strategies import CHECKPOINT
from avibe.providers.modelfile import INSTALL_COMMAND, is_installed

pytestmark = [pytest.mark.embedded, pytest.mark.slow]
WINDOW = 4096


def test_E1_one_scenario_on_the_embedded_model(tmp_path: Path) -> None:
    settings = load_settings()
    if not is_installed(settings.model_cache):
        pytest.skip(f"the embedded model is not installed in {settings.model_cache}; run `{INSTALL_COMMAND}`")
    from avibe.evals.replay import trigger_fraction
    from avibe.providers import open_counter, open_model

    model = open_model("embedded", settings)
    counter = open_counter("embedded", settings, model)
    threshold = trigger_fraction(model.facts, WINDOW)
    jobs = plan(["constraint_fidelity"], [], [CHECKPOINT, "truncate"], [1], [1], WINDOW, counter, threshold)
    rows = run_all(
        jobs, lambda: model, counter, RunSettings(WINDOW, threshold, probes=False), tmp_path / "r.jsonl"
    )
    by_strategy = {r["strategy"]: r for r in rows}
    assert {r["status"] for r in rows} == {"ok"}, rows
    mine = by_strategy[CHECKPOINT]
    assert mine["compactions"], "the scenario must reach the trigger at least once"
    assert mine["counts"]["mission_exact"] == [1, 1]
    hits, n = mine["counts"]["items_exact"]
    assert hits == n == 3
    print(render_markdown(rows, {"model": "embedded", "window": str(WINDOW)}))  # the measured values
