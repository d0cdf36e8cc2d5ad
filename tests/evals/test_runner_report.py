"""The run matrix, resumability, and the report (item 5): every baseline on every scenario type
on the strict scripted model produces results, a Markdown report with CIs, and PNG plots."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from avibe.evals.avibe_checkpoint import AvibeCheckpoint
from avibe.evals.generators import SCENARIO_TYPES, generate
from avibe.evals.replay import SYSTEM_PROMPT, ReplayResult, trigger_fraction
from avibe.evals.report import render_markdown, write_report
from avibe.evals.runner import RunSettings, plan, read_results, run_all
from avibe.evals.strategies import BASELINES, CHECKPOINT
from avibe.evals.strategy import CompactionFailed
from avibe.ports import TokenCounter
from avibe.providers.scripted import ScriptedModel
from avibe.record.messages import ModelFacts

WINDOW = 3000


def _run(
    tmp_path: Path, counter: TokenCounter, scripted: Callable[[int], ScriptedModel]
) -> list[dict[str, object]]:
    jobs = plan(SCENARIO_TYPES, [], list(BASELINES), [1], [1, 2], WINDOW, counter)
    assert len(jobs) == len(SCENARIO_TYPES) * len(BASELINES) * 2
    return run_all(jobs, lambda: scripted(2000), counter, RunSettings(WINDOW), tmp_path / "results.jsonl")


def test_E1_every_baseline_runs_every_type_and_the_report_shows_them(
    tmp_path: Path, counter: TokenCounter, scripted: Callable[[int], ScriptedModel]
) -> None:
    rows = _run(tmp_path, counter, scripted)
    ok = [r for r in rows if r["status"] == "ok"]
    assert {r["strategy"] for r in ok} == set(BASELINES)
    assert {r["type"] for r in ok} == set(SCENARIO_TYPES)
    assert all(r["status"] == "n/a" for r in rows if r not in ok and r["strategy"] == "full")
    assert all(r["probes"] for r in ok)
    files = write_report(read_results(tmp_path / "results.jsonl"), tmp_path, {"model": "scripted"})
    text = files.markdown.read_text(encoding="utf-8")
    for heading in (
        "## Per strategy and K",
        "## Per scenario type",
        "## Cost",
        "## Paired differences",
        "## Probes",
    ):
        assert heading in text
    assert "| strategy | K=1 | K=2 |" in text and "% [" in text
    assert "### spoofed_user" in text and "Runs not measured" in text  # the ceiling does not fit
    assert files.plots and all(p.read_bytes().startswith(b"\x89PNG") for p in files.plots)


def test_E1_a_second_run_resumes_and_calls_no_model(
    tmp_path: Path, counter: TokenCounter, scripted: Callable[[int], ScriptedModel]
) -> None:
    jobs = plan(["queue", "pitfalls"], [], ["truncate", "rewrite"], [1], [1], WINDOW, counter)
    results = tmp_path / "results.jsonl"
    first = run_all(jobs, lambda: scripted(500), counter, RunSettings(WINDOW), results)
    assert len(first) == 4
    strict = ScriptedModel([])  # any call would raise ScriptError
    assert run_all(jobs, lambda: strict, counter, RunSettings(WINDOW), results) == []
    assert len(read_results(results)) == 4


def test_E1_a_torn_line_or_failed_run_is_redone(
    tmp_path: Path, counter: TokenCounter, scripted: Callable[[int], ScriptedModel]
) -> None:
    jobs = plan(["queue"], [], ["truncate"], [1], [1], WINDOW, counter)
    results = tmp_path / "results.jsonl"
    row = {"scenario": "queue", "seed": 1, "strategy": "truncate", "k_target": 1, "status": "error"}
    results.write_text(json.dumps(row) + "\n{torn", encoding="utf-8")
    redone = run_all(jobs, lambda: scripted(50), counter, RunSettings(WINDOW), results)
    assert [r["status"] for r in redone] == ["ok"]
    markdown = render_markdown(read_results(results), {"model": "scripted"})
    assert "Runs not measured" not in markdown  # the later ok row replaced the failed one


def test_E1_parallel_workers_write_every_result_once(
    tmp_path: Path, counter: TokenCounter, scripted: Callable[[int], ScriptedModel]
) -> None:
    jobs = plan(["queue", "supersession"], [], ["mask", "handoff", "anchored"], [1, 2], [1], WINDOW, counter)
    rows = run_all(
        jobs,
        lambda: scripted(500),
        counter,
        RunSettings(WINDOW, probes=False),
        tmp_path / "r.jsonl",
        parallel=3,
    )
    keys = [
        (r["scenario"], r["seed"], r["strategy"], r["k_target"]) for r in read_results(tmp_path / "r.jsonl")
    ]
    assert len(rows) == len(jobs) == len(keys) == len(set(keys))


def test_E1_the_report_sets_the_checkpoint_beside_the_baselines(
    tmp_path: Path, counter: TokenCounter, scripted: Callable[[int], ScriptedModel]
) -> None:
    window = 4000
    threshold = trigger_fraction(ModelFacts("scripted", window, 1024), window)
    strategies = [CHECKPOINT, "rewrite", "handoff"]
    jobs = plan(
        ["constraint_fidelity", "spoofed_user"], [], strategies, [1], [1, 2], window, counter, threshold
    )
    rows = run_all(
        jobs,
        lambda: scripted(3000),
        counter,
        RunSettings(window, threshold, checkpoint_mode="structured"),
        tmp_path / "r.jsonl",
    )
    mine = [r for r in rows if r["strategy"] == CHECKPOINT]
    assert mine and all(r["status"] == "ok" and r["checkpoint"]["checkpoints"] >= 1 for r in mine)
    assert all(r["counts"]["spoofs_attributed"][0] == 0 for r in mine if r["type"] == "spoofed_user")
    assert all(
        r["counts"]["items_exact"][0] == r["counts"]["items_exact"][1]
        for r in mine
        if "items_exact" in r["counts"]
    )
    audits = [r["checkpoint"] for r in mine]
    assert sum(a["memo_entries"] for a in audits) > 0  # N4, N7 audited on real memo entries
    assert all(a["memo_verbatim"] == a["memo_entries"] and a["memo_non_user"] == 0 for a in audits)
    # the eval runs Vibey's bookkeeping, so it reports what the checkpoints carried (A2, F5)
    assert sum(a["carry_files"] for a in audits) > 0 and sum(a["carry_request"] for a in audits) > 0
    naive = [r for r in rows if r["strategy"] == "rewrite" and r["type"] == "spoofed_user"]
    assert all(r["counts"]["spoofs_attributed"][0] > 0 for r in naive)  # the careless summary retells them
    # what each strategy wrote into the final context is kept, so a lost metric can be read back: the
    # checkpoint's recollection (mind, memo, scene), the summary - never the record's own messages
    for row in rows:
        assert row["carried"] and not any(text == SYSTEM_PROMPT for text in row["carried"])
    assert all(any("## Goals" in text for text in r["carried"]) for r in mine)
    sized = {(r["type"], r["seed"], int(r["scenario_id"].rsplit("-n", 1)[1])) for r in rows}
    events = {e.text for kind, seed, size in sized for e in generate(kind, seed, size).events}
    assert not any(text in events for r in rows for text in r["carried"])
    text = render_markdown(rows, {"model": "scripted"})
    assert "## Paired differences against avibe-checkpoint" in text
    assert "## Checkpoint: memo audit and validation" in text
    assert "| skills carried (A1) | files listed (A2) | plan steps carried |" in text
    assert "avibe-checkpoint - rewrite" in text
    assert "## Per scenario type: where avibe-checkpoint beats, ties or loses" in text
    assert "| rewrite | spoofs attributed to the user | beats |" in text  # fewer is better: it beats


def test_E1_a_strategy_that_cannot_compact_is_recorded_as_an_error(
    tmp_path: Path, counter: TokenCounter, monkeypatch: pytest.MonkeyPatch
) -> None:
    def hopeless(self: AvibeCheckpoint, *args: Any, **kwargs: Any) -> ReplayResult:
        raise CompactionFailed("nothing could be moved out")

    jobs = plan(["queue"], [], [CHECKPOINT], [1], [1], WINDOW, counter)
    monkeypatch.setattr(AvibeCheckpoint, "live", hopeless)
    (row,) = run_all(jobs, lambda: ScriptedModel([]), counter, RunSettings(WINDOW), tmp_path / "r.jsonl")
    assert row["status"] == "error" and "nothing could be moved out" in row["reason"]


def test_E1_per_k_tables_pool_only_the_scenarios_run_at_every_k() -> None:
    """K=1 ran on two scenarios, K=2 on one: a K=1 column over both would compare scenario mixes."""

    def row(scenario: str, k: int, hits: int) -> dict[str, Any]:
        return {"scenario": scenario, "seed": 1, "strategy": "truncate", "k_target": k, "type": scenario,
                "status": "ok", "k": k, "tokens_spent": 0, "calls": 0, "compactions": [],
                "values": {"context_tokens": 10.0}, "counts": {"mission_kept": [hits, 1]}}  # fmt: skip

    rows = [row("queue", 1, 1), row("pitfalls", 1, 0), row("queue", 2, 1)]
    text = render_markdown(rows, {"model": "scripted"})
    per_k = text[text.index("## Per strategy and K") : text.index("## Per scenario type")]
    assert "Only the scenarios run at every K are pooled here: queue." in per_k
    assert "| truncate | 100% [21%, 100%] | 100% [21%, 100%] |" in per_k  # pitfalls' miss left out here
    headline = text[text.index("## Headline") : text.index("## Per strategy and K")]
    assert "67% [21%, 94%]" in headline  # ...but counted where all runs are pooled


def test_E1_verdict_reads_the_paired_interval_in_the_metrics_direction() -> None:
    from avibe.evals.claims import verdict
    from avibe.evals.stats import Interval

    assert verdict(Interval(0.5, 0.2, 0.8, 4), True) == "beats"
    assert verdict(Interval(-0.5, -0.8, -0.2, 4), True) == "loses"
    assert verdict(Interval(0.1, -0.2, 0.4, 4), True) == "ties"
    assert verdict(Interval(0.0, 0.0, 0.0, 4), True) == "ties"
    assert verdict(Interval(-0.5, -0.8, -0.2, 4), False) == "beats"  # fewer spoofs attributed: better
    assert verdict(Interval(0.5, 0.2, 0.8, 4), False) == "loses"


def test_E1_each_row_keeps_the_commit_it_ran_at_and_the_report_lists_them(
    tmp_path: Path, counter: TokenCounter, scripted: Callable[[int], ScriptedModel]
) -> None:
    """A resumed run may span commits (the report says what code made it)."""
    jobs = plan(["queue"], [], ["truncate"], [1], [1], WINDOW, counter)
    settings = RunSettings(WINDOW, code="abc1234567")
    (row,) = run_all(jobs, lambda: scripted(2000), counter, settings, tmp_path / "r.jsonl")
    assert row["code"] == "abc1234567"
    old = {**row, "seed": 2, "code": None}  # a row from before rows kept their commit
    text = render_markdown([row, old], {"model": "scripted"})
    assert "- **code**: `abc1234567` (1 run), `not recorded` (1 run)" in text


def test_E1_the_source_commit_is_this_checkouts_head() -> None:
    import subprocess

    from avibe.cli.eval import source_commit

    head = subprocess.run(["git", "rev-parse", "--short=10", "HEAD"], capture_output=True, text=True)
    if head.returncode != 0:
        pytest.skip("not a git checkout")
    assert source_commit().removesuffix("-dirty") == head.stdout.strip()


def test_E1_claims_pool_every_pair_and_read_probes_and_cost_in_their_direction() -> None:
    """the README may claim only what paired intervals support - over every (scenario,
    seed, K) both strategies ran, on the headline metrics, the probes and the cost."""

    def row(strategy: str, seed: int, exact: bool, tokens: int, kept: int) -> dict[str, Any]:
        probes = [{"kind": "exact", "passed": exact}, {"kind": "next_action", "passed": None}]
        return {"scenario": "late_rule", "seed": seed, "strategy": strategy, "k_target": 1,
                "type": "late_rule", "status": "ok", "k": 1, "tokens_spent": tokens, "calls": 1,
                "compactions": [{"seconds": tokens / 1000}], "values": {"context_tokens": 100.0},
                "counts": {"items_exact": [kept, 3]}, "probes": probes}  # fmt: skip

    rows = [row("avibe-checkpoint", s, True, 9000, 3) for s in range(1, 11)]
    rows += [row("handoff", s, s > 8, 3000, 1) for s in range(1, 11)]
    rows += [row("rewrite", s, True, 9000, 3) for s in range(1, 4)]
    text = render_markdown(rows, {"model": "scripted"})
    section = text[text.index("## Claims") : text.index("## Per strategy and K")]
    lines = {tuple(c.strip() for c in line.split("|")[1:4]) for line in section.splitlines()}
    assert ("handoff", "constraints byte-identical", "beats") in lines
    assert ("handoff", "probes: exact answer", "beats") in lines
    assert ("handoff", "tokens spent a run", "loses") in lines  # lower is better
    assert ("handoff", "compaction seconds a run", "loses") in lines
    assert ("rewrite", "probes: exact answer", "too few pairs") in lines  # 3 pairs: no claim
    assert not any(line[1:2] == ("probes: next action",) for line in lines)  # judged nowhere: no claim
    assert "| handoff | probes: exact answer | beats | +80% [+50%, +100%] | 10 |" in section


def test_E1_each_rendering_of_the_checkpoint_gets_its_own_claims_against_the_peers() -> None:
    """Vibey shows local models another rendering than the default, so what a README may
    claim for it comes from its own intervals against the peers (not against the default rendering)."""

    def row(strategy: str, seed: int, exact: bool) -> dict[str, Any]:
        return {"scenario": "late_rule", "seed": seed, "strategy": strategy, "k_target": 1,
                "type": "late_rule", "status": "ok", "k": 1, "tokens_spent": 10, "calls": 1,
                "compactions": [], "values": {"context_tokens": 100.0}, "counts": {},
                "probes": [{"kind": "exact", "passed": exact}]}  # fmt: skip

    rows = [row("avibe-checkpoint", s, s > 5) for s in range(1, 11)]
    rows += [row("avibe-checkpoint:plain", s, True) for s in range(1, 11)]
    rows += [row("handoff", s, s > 8) for s in range(1, 11)]
    text = render_markdown(rows, {"model": "scripted"})
    start = text.index("## Claims: where avibe-checkpoint:plain beats, ties or loses")
    section = text[start : text.index("## Per strategy and K")]
    assert "| handoff | probes: exact answer | beats | +80% [+50%, +100%] | 10 |" in section
    assert "| avibe-checkpoint |" not in section  # against the peers only


def test_E1_no_claim_rests_on_fewer_than_five_pairs() -> None:
    def row(strategy: str, seed: int, exact: bool) -> dict[str, Any]:
        return {"scenario": "late_rule", "seed": seed, "strategy": strategy, "k_target": 1,
                "type": "late_rule", "status": "ok", "k": 1, "tokens_spent": 10, "calls": 1,
                "compactions": [], "values": {"context_tokens": 100.0}, "counts": {},
                "probes": [{"kind": "exact", "passed": exact}]}  # fmt: skip

    rows = [row("avibe-checkpoint", 1, True), row("handoff", 1, False)]
    text = render_markdown(rows, {"model": "scripted"})
    assert "| handoff | probes: exact answer | too few pairs | +100% [+100%, +100%] | 1 |" in text
