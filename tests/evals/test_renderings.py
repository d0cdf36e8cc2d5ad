"""The renderings in the eval: `avibe-checkpoint:rules-last` and `avibe-checkpoint:plain`
answer the probes from the same checkpoints as `avibe-checkpoint`, made once, with the recollection shown
their way - on the strict scripted model, end to end through `run_all` and the report."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import pytest
from eval_scripts import Warm, respond
from typer.testing import CliRunner

from avibe.evals.avibe_checkpoint import AvibeCheckpoint
from avibe.evals.checkpoint import RECOLLECTION_KIND
from avibe.evals.generators import generate
from avibe.evals.rendering import RENDERED_NAMES, UNREMINDED, at_rendering, rendering_of
from avibe.evals.replay import replay, trigger_fraction
from avibe.evals.report import render_markdown
from avibe.evals.runner import RunSettings, plan, read_results, run_all, units
from avibe.evals.strategies import CHECKPOINT, STRATEGY_NAMES, available_strategies, make_strategy
from avibe.ports import TokenCounter
from avibe.providers.scripted import ModelRequest, ScriptedModel
from avibe.record.messages import REMINDER_KIND, ModelFacts

WINDOW = 4000
THRESHOLD = trigger_fraction(ModelFacts("scripted", WINDOW, 1024), WINDOW)
RULES_LAST, PLAIN = "avibe-checkpoint:rules-last", "avibe-checkpoint:plain"
FAMILY = [CHECKPOINT, RULES_LAST, PLAIN]
SETTINGS = RunSettings(WINDOW, THRESHOLD, checkpoint_mode="structured")


class Watched:
    """The scripted model, with each probe's request kept (a probe has no JSON schema)."""

    def __init__(self, steps: int) -> None:
        self.model = ScriptedModel([respond] * steps)
        self.probes: list[ModelRequest] = []
        self.checkpoint_calls = 0

    def __call__(self) -> ScriptedModel:
        return self.model

    def seen(self) -> None:
        self.probes = [r for r in self.model.requests if r.json_schema is None]
        self.checkpoint_calls = sum(
            r.json_schema is not None and "verdicts" not in r.json_schema["properties"]
            for r in self.model.requests
        )


def _recollection(messages: Sequence[Any]) -> str:
    return next(m.content for m in messages if m.kind == RECOLLECTION_KIND)


def test_the_rendering_strategies_are_named_and_not_run_unasked() -> None:
    assert RENDERED_NAMES == (RULES_LAST, PLAIN)
    assert set(RENDERED_NAMES) <= set(STRATEGY_NAMES)  # `vibe eval -s avibe-checkpoint:plain` is accepted
    assert not set(RENDERED_NAMES) & set(available_strategies())
    assert [rendering_of(name) for name in (*FAMILY, "handoff", "avibe-checkpoint:fancy")] == [
        "sections", "rules-last", "plain", None, None,
    ]  # fmt: skip
    with pytest.raises(ValueError, match="unknown strategy"):
        make_strategy("avibe-checkpoint:fancy")


def test_one_replay_serves_the_checkpoint_and_its_renderings(tmp_path: Path, counter: TokenCounter) -> None:
    jobs = plan(["late_rule"], [], [*FAMILY, "handoff"], [1], [1], WINDOW, counter, THRESHOLD)
    assert [[j.key.strategy for j in unit] for unit in units(jobs)] == [FAMILY, ["handoff"]]
    family = [j for j in jobs if j.key.strategy in FAMILY]
    watched = Watched(3000)
    rows = run_all(family, watched, counter, SETTINGS, tmp_path / "results.jsonl")
    watched.seen()
    by_name = {row["strategy"]: row for row in rows}
    assert set(by_name) == set(FAMILY) and all(row["status"] == "ok" for row in rows)
    base = by_name[CHECKPOINT]
    assert base["k"] >= 1 and "rendering" not in base
    # the checkpoints were made once: the family's checkpoint calls are one checkpoint run's
    alone = Watched(3000)
    replay(family[0].scenario, make_strategy(CHECKPOINT, checkpoint_mode="structured"), alone.model,
           counter, WINDOW, threshold=THRESHOLD)  # fmt: skip
    alone.seen()
    assert watched.checkpoint_calls == alone.checkpoint_calls == base["calls"]
    probes = len(family[0].scenario.truth.probes)
    assert probes and len(watched.probes) == 3 * probes
    recollections = {_recollection(request.messages) for request in watched.probes}
    assert len(recollections) == 3  # each strategy's probes saw its own rendering
    for name in (RULES_LAST, PLAIN):
        row = by_name[name]
        assert row["rendering"] == rendering_of(name) and row["rendering_applied"] is True
        for key in ("k", "tokens_spent", "calls", "compactions", "checkpoint"):
            assert row[key] == base[key], key  # the same checkpoints, at no extra cost
        assert row["carried"] != base["carried"]
        assert len(row["probes"]) == probes
    plain_text = by_name[PLAIN]["carried"][0]
    assert not [line for line in plain_text.splitlines() if line.startswith("#")]
    rules_text = by_name[RULES_LAST]["carried"][0]
    assert "## The user's words still in force: the standing rules again" in rules_text
    assert rules_text.startswith(base["carried"][0].rstrip("\n"))
    # the guarantees measured on every rendering's context: the planted rules and the mission kept
    for row in rows:
        assert row["counts"]["items_exact"][0] == row["counts"]["items_exact"][1] > 0, row["strategy"]
        assert row["counts"]["mission_exact"] == [1, 1], row["strategy"]
    report = render_markdown(read_results(tmp_path / "results.jsonl"), {"model": "scripted"})
    assert RULES_LAST in report and PLAIN in report


def test_a_rendering_added_later_replays_once_for_every_one_missing(
    tmp_path: Path, counter: TokenCounter
) -> None:
    results = tmp_path / "results.jsonl"
    jobs = plan(["constraint_fidelity"], [], FAMILY, [1], [1], WINDOW, counter, THRESHOLD)
    first = Watched(3000)
    run_all(jobs[:1], first, counter, SETTINGS, results)
    later = Watched(3000)
    rows = run_all(jobs, later, counter, SETTINGS, results)
    first.seen()
    later.seen()
    assert [row["strategy"] for row in rows] == [RULES_LAST, PLAIN]
    assert later.checkpoint_calls == first.checkpoint_calls  # one replay for both renderings
    assert len(read_results(results)) == 3
    assert run_all(jobs, lambda: ScriptedModel([]), counter, SETTINGS, results) == []  # all done


def test_the_default_rendering_recorded_is_the_one_in_the_context(counter: TokenCounter) -> None:
    """The recollection each compaction records for the renderings is rebuilt from what it handed on; the
    default one must be the very text in the replay's context, or no rendering could be swapped in."""
    scenario = generate("talkative_user", 1, 60)
    strategy = make_strategy(PLAIN, checkpoint_mode="structured")
    result = replay(scenario, strategy, ScriptedModel([respond] * 3000), counter, WINDOW, threshold=THRESHOLD)
    assert result.k >= 2
    metas = [c.meta for c in result.compactions]
    assert all(set(m["recollections"]) == {"sections", "plain"} for m in metas)
    assert metas[-1]["recollections"]["sections"] == _recollection(result.context)
    swapped, applied = at_rendering(result.context, metas, "plain")
    assert applied and _recollection(swapped) == metas[-1]["recollections"]["plain"]
    assert [m for m in swapped if m.kind != RECOLLECTION_KIND] == [
        m for m in result.context if m.kind != RECOLLECTION_KIND
    ]


def test_vibe_eval_runs_a_rendering_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, counter: TokenCounter
) -> None:
    import avibe.cli.eval as eval_cli
    from avibe.cli import app

    def open_model(name: str, settings: object) -> ScriptedModel:  # a local model asked one question a call
        return ScriptedModel.of(
            [respond] * 3000, name="local:/models/scripted.gguf", window=8000, max_output=1024
        )

    monkeypatch.setattr(eval_cli, "_open_model", open_model)
    monkeypatch.setattr(eval_cli, "_open_counter", lambda name, settings, model: counter)
    env = {"AVIBE_HOME": str(tmp_path / "home"), "AVIBE_USER": "kofi"}
    out = tmp_path / "out"
    args = ["eval", "-t", "constraint_fidelity", "-s", CHECKPOINT, "-s", PLAIN, "--k", "1",
            "--window", "4000", "--no-plots", "--out", str(out)]  # fmt: skip
    result = CliRunner().invoke(app, args, env=env)
    assert result.exit_code == 0, result.output
    rows = read_results(out / "results.jsonl")
    assert [(row["strategy"], row["status"]) for row in rows] == [(CHECKPOINT, "ok"), (PLAIN, "ok")]
    assert rows[0]["k"] >= 1 and rows[1]["rendering_applied"] is True
    assert rows[1]["calls"] == rows[0]["calls"] and rows[1]["carried"] != rows[0]["carried"]
    assert f"-s {PLAIN}" in (out / "report.md").read_text(encoding="utf-8")
    refused = CliRunner().invoke(app, ["eval", "-s", "avibe-checkpoint:fancy"], env=env)
    assert refused.exit_code == 2 and "avibe-checkpoint:rules-last" in refused.output


def test_F5_once_the_turn_ends_the_context_shows_the_recollection_without_it_in_every_rendering(
    counter: TokenCounter,
) -> None:
    """Vibey renders its recollection at every step; when a new turn starts, the interrupted request
    (F5) is no longer shown. The eval is Vibey living the transcript, so the probes read what an agent
    would, and each rendering is recorded both ways, so it is still swapped in."""
    from avibe.evals.rendering import META_ENDED, META_KEY

    scenario = generate("talkative_user", 1, 60)
    warm = Warm(WINDOW)
    strategy = replace(cast(AvibeCheckpoint, make_strategy(PLAIN, checkpoint_mode="structured")), warm=warm)
    result = replay(scenario, strategy, ScriptedModel([respond] * 3000), counter, WINDOW, threshold=THRESHOLD)
    shown = [text for text in map(Warm.recollection, warm.sent) if text]  # what Vibey's steps showed
    metas = [c.meta for c in result.compactions]
    assert result.k >= 2
    ended = [m[META_ENDED]["sections"] for m in metas]
    running = [m[META_KEY]["sections"] for m in metas]
    assert all("The current request" not in text for text in ended)
    # a later compaction found the earlier one's recollection as shown once its turn had ended
    assert any(text in ended and text not in running for text in shown), shown
    assert all(text in ended or text in running for text in shown)
    swapped, applied = at_rendering(result.context, metas, "plain")
    assert applied and _recollection(swapped) in {m[META_ENDED]["plain"] for m in metas} | {
        m[META_KEY]["plain"] for m in metas
    }


def test_the_checkpoints_probes_get_vibeys_reminder_and_no_reminder_measures_it(
    tmp_path: Path, counter: TokenCounter
) -> None:
    """a probe about a kept rule is followed by the memo's reminder, as Vibey's view
    follows a user's message with it; `avibe-checkpoint:no-reminder` asks the same probes from the same
    checkpoints without it. Neither the measured context nor what the row says was carried holds it."""
    names = [CHECKPOINT, UNREMINDED]
    jobs = plan(["late_rule"], [], names, [1], [1], WINDOW, counter, THRESHOLD)
    assert [[j.key.strategy for j in unit] for unit in units(jobs)] == [names]
    watched = Watched(3000)
    rows = {row["strategy"]: row for row in run_all(jobs, watched, counter, SETTINGS, tmp_path / "r.jsonl")}
    watched.seen()
    truth = jobs[0].scenario.truth
    folder = next(p for p in truth.probes if p.id == "folder")
    rule = next(i.text for i in truth.items if i.id == "never-modify")
    rule_sentence = rule[rule.index("Never modify") :]
    asked = [r.messages for r in watched.probes if any(m.content == folder.question for m in r.messages)]
    assert len(asked) == 2  # once for each strategy, the checkpoint's first
    reminded, bare = asked
    assert reminded[-2].content == folder.question and reminded[-1].kind == REMINDER_KIND
    assert f"> {rule_sentence}" in reminded[-1].content
    assert bare[-1].content == folder.question and not [m for m in bare if m.kind == REMINDER_KIND]
    assert reminded[:-1] == bare  # the same context and question; the note is all that differs
    for key in ("k", "tokens_spent", "calls", "counts", "carried"):
        assert rows[CHECKPOINT][key] == rows[UNREMINDED][key], key
    note = "copied from your recollection word for word"
    assert not [text for text in rows[CHECKPOINT]["carried"] if note in text]
