"""Running the evaluation: the matrix of (scenario, seed, strategy, K), resumable through a raw JSONL file.

Each finished run is appended as one JSON line keyed by (scenario, seed, strategy, K); a second run with
the same results file skips every key already there. A run that cannot apply (the full context does not
fit, the checkpoint is not wired) or fails on a model error is recorded with its status and reason.
`rescored` checks stored probe replies again with the current checks (scripts/eval-rescore.py).
"""

from __future__ import annotations

import functools
import json
import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any, Final

from avibe.agent.driver import reminds
from avibe.checkpoint.turn import Mode
from avibe.errors import AvibeError
from avibe.evals.checkpoint import NAME as CHECKPOINT
from avibe.evals.checkpoint import memo_of
from avibe.evals.generators import generate
from avibe.evals.metrics import item_counts, measure, mission_shown_ended, upgraded_fates
from avibe.evals.probes import ask_all, echo_sources, recheck
from avibe.evals.realset import RealSessionError, build_scenario, load_manifest, local_file
from avibe.evals.redact import left_out
from avibe.evals.rendering import UNREMINDED, at_rendering, rendering_of
from avibe.evals.replay import DEFAULT_THRESHOLD, SYSTEM_PROMPT, ReplayResult, replay, size_for_k
from avibe.evals.scenario import BackgroundInput, Scenario, UserMessage
from avibe.evals.strategies import make_strategy
from avibe.evals.strategy import CompactionFailed, NotApplicable, StrategyUnavailable
from avibe.ports import ModelClient, TokenCounter
from avibe.record.messages import REMINDER_KIND

log = logging.getLogger(__name__)
MEMO_AUDIT: Final = ("memo_entries", "memo_verbatim", "memo_non_user")
# what checkpoints carried besides mind, memo and scene: skills (A1), files (A2), the plan, the request (F5)
CARRY_AUDIT: Final = ("carry_skills", "carry_files", "carry_plan", "carry_request")
AS_GIVEN: Final = 0  # the K key of a scenario file replayed as it is (no size to choose)


@dataclass(frozen=True, slots=True)
class RunKey:
    scenario: str  # the generated type, or the scenario file's id
    seed: int | None
    strategy: str
    k: int  # the target number of compactions (AS_GIVEN for files)

    def as_tuple(self) -> tuple[str, int | None, str, int]:
        return (self.scenario, self.seed, self.strategy, self.k)


@dataclass(frozen=True, slots=True)
class Job:
    key: RunKey
    scenario: Scenario


@dataclass(frozen=True, slots=True)
class RunSettings:
    """One evaluation's fixed conditions: every strategy runs on the same model, window and threshold."""

    window: int
    threshold: float = DEFAULT_THRESHOLD
    probes: bool = True
    checkpoint_mode: Mode | None = None  # None: by the model's name, as Vibey picks
    code: str = ""  # the source's commit (+ "-dirty"): a resumed run may span commits; each row says its own


def plan(
    types: Sequence[str],
    files: Sequence[Scenario],
    strategies: Sequence[str],
    seeds: Sequence[int],
    ks: Sequence[int],
    window: int,
    counter: TokenCounter,
    threshold: float = DEFAULT_THRESHOLD,
) -> list[Job]:
    """Every run of the matrix; generated scenarios are sized so each crosses the threshold ~K times."""
    jobs: list[Job] = []
    for kind in types:
        for seed in seeds:
            for k in ks:
                size = size_for_k(partial(generate, kind, seed), k, window, counter, threshold=threshold)
                scenario = generate(kind, seed, size)
                jobs += [Job(RunKey(kind, seed, s, k), scenario) for s in strategies]
    for scenario in files:
        jobs += [Job(RunKey(scenario.id, scenario.seed, s, AS_GIVEN), scenario) for s in strategies]
    return jobs


def _base(job: Job, settings: RunSettings) -> dict[str, Any]:
    key = job.key
    return {
        "scenario": key.scenario,
        "seed": key.seed,
        "strategy": key.strategy,
        "k_target": key.k,
        "type": job.scenario.type,
        "scenario_id": job.scenario.id,
        "window": settings.window,
        "threshold": settings.threshold,
        "events": len(job.scenario.events),
        "code": settings.code,
        **({"checkpoint_mode": settings.checkpoint_mode} if settings.checkpoint_mode else {}),
    }


def _checkpoint_meta(result: ReplayResult) -> dict[str, int]:
    metas = [c.meta for c in result.compactions if c.meta]
    return {
        "checkpoints": len(metas),
        "first_pass_valid": sum(bool(m.get("first_pass_valid")) for m in metas),
        "repaired": sum(bool(m.get("repaired")) for m in metas),
        "fallback": sum(m.get("fallback") is not None for m in metas),
        "scene_completed": sum(bool(m.get("scene_completed")) for m in metas),
        # N4, N7 audited on every checkpoint's memo against the record (avibe.evals.checkpoint.memo_audit)
        **{key: sum(int(m.get(key, 0)) for m in metas) for key in MEMO_AUDIT},
        **{key: sum(int(m.get(key, 0)) for m in metas) for key in CARRY_AUDIT},
    }


def carried(result: ReplayResult) -> list[str]:
    """What the strategy itself wrote into the final context - the checkpoint's recollection, a summary,
    a handoff - not the record's messages, tool output or the system prompt: kept in the result line so a
    lost metric can be read back without replaying the run."""
    return [
        m.content
        for m in result.context
        if m.seq is None and m.role != "tool" and m.content and m.content != SYSTEM_PROMPT
    ]


def run_one(
    job: Job,
    model: ModelClient,
    counter: TokenCounter,
    settings: RunSettings,
    judge: ModelClient | None = None,
) -> dict[str, Any]:
    """Replay, measure and probe one job; the JSON-ready result line."""
    return run_unit([job], model, counter, settings, judge)[0]


def units(jobs: Iterable[Job]) -> list[list[Job]]:
    """The jobs grouped into what one replay serves: `avibe-checkpoint` and its renderings on the same
    (scenario, seed, K) share their checkpoints; every other job is a unit of its own.
    In the order of each unit's first job."""
    found: dict[tuple[Any, ...], list[Job]] = {}
    for job in jobs:
        key = job.key
        family = CHECKPOINT if rendering_of(key.strategy) is not None else key.strategy
        found.setdefault((key.scenario, key.seed, key.k, job.scenario.id, family), []).append(job)
    return list(found.values())


def run_unit(
    jobs: Sequence[Job],
    model: ModelClient,
    counter: TokenCounter,
    settings: RunSettings,
    judge: ModelClient | None = None,
) -> list[dict[str, Any]]:
    """Replay one unit's scenario once (`units`), then measure and probe it for each of its jobs: a
    rendering's row is measured and probed on the same checkpoints, its recollection shown its way."""
    first = jobs[0]
    names = tuple(job.key.strategy for job in jobs)
    try:
        strategy = make_strategy(
            first.key.strategy, checkpoint_mode=settings.checkpoint_mode, renderings=names
        )
        result = replay(
            first.scenario, strategy, model, counter, settings.window, threshold=settings.threshold
        )
    except (NotApplicable, StrategyUnavailable) as err:
        return [{**_base(job, settings), "status": "n/a", "reason": str(err)} for job in jobs]
    except (AvibeError, CompactionFailed) as err:
        log.warning("run %s failed: %s", first.key, err)
        reason = f"{type(err).__name__}: {err}"
        return [{**_base(job, settings), "status": "error", "reason": reason} for job in jobs]
    return [_measured(job, result, model, counter, settings, judge) for job in jobs]


def _measured(
    job: Job,
    result: ReplayResult,
    model: ModelClient,
    counter: TokenCounter,
    settings: RunSettings,
    judge: ModelClient | None,
) -> dict[str, Any]:
    """One job's result line from its unit's replay."""
    row = _base(job, settings)
    # measured without the view's reminder: it restates memo lines the recollection already holds
    context = tuple(m for m in result.context if m.kind != REMINDER_KIND)
    rendering = rendering_of(job.key.strategy)
    if rendering is not None and job.key.strategy != CHECKPOINT:
        metas = [c.meta for c in result.compactions]
        context, swapped = at_rendering(context, metas, rendering)
        row.update(rendering=rendering, rendering_applied=swapped)
    # Vibey's view for this model (`agent.driver.reminds`), unless the strategy is the one without it
    reminded = rendering is not None and job.key.strategy != UNREMINDED and reminds(model.facts.name)
    memo = memo_of(result.carry) if reminded else ()
    measured = measure(job.scenario, context, counter)
    texts = carried(replace(result, context=context))
    shown = _shown(job.scenario, texts)
    probes = (
        ask_all(job.scenario.truth.probes, context, model, counter, settings.window, judge, memo, shown)
        if settings.probes
        else []
    )
    row.update(
        status="ok",
        k=result.k,
        tokens_spent=result.tokens_spent,
        calls=result.calls,
        peak_tokens=result.peak_tokens,
        overflowed=result.overflowed,
        counts={name: list(pair) for name, pair in measured.counts.items()},
        values=measured.values,
        details=measured.details,
        compactions=[
            {
                "at_seq": c.at_seq,
                "before": c.tokens_before,
                "after": c.tokens_after,
                "spent": c.tokens_spent,
                "calls": c.calls,
                "changed": c.changed,
                "seconds": c.seconds,
                "notes": list(c.notes),
            }
            for c in result.compactions
        ],
        checkpoint=_checkpoint_meta(result),
        carried=texts,
        probes=[p.as_dict() for p in probes],
    )
    return row


def key_of(row: dict[str, Any]) -> tuple[str, int | None, str, int]:
    return (row["scenario"], row["seed"], row["strategy"], row["k_target"])


def read_results(path: Path) -> list[dict[str, Any]]:
    """The raw results so far; a torn last line (an interrupted run) is dropped with a warning."""
    if not path.exists():
        return []
    rows: list[dict[str, Any]] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as err:
            log.warning("%s:%d is not a JSON line (%s); that run will be redone", path, number, err)
    return rows


def rescored(rows: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """The rows with every run's probes checked again from the stored replies (`recheck`) and its item
    fates from the strategy's stored text (`upgraded_fates`), and how many verdicts changed: when a check
    is mended, hours of model time need not be spent again. A generated scenario is rebuilt from its id
    ("<type>-s<seed>-n<size>"), a real session's from the real set where it is here; a scenario file's
    rows, whose truth is not in the row, stay as they were."""
    out: list[dict[str, Any]] = []
    changed = 0
    for row in rows:
        scenario = _generated(row) or _real(row)
        if scenario is None or row.get("status") != "ok":
            out.append(row)
            continue
        by_id = {p.id: p for p in scenario.truth.probes}
        stored = row.get("probes", [])
        shown = _shown(scenario, [t for t in row.get("carried", []) if not left_out(t)])
        # a reply left out of a committed report (its session's licence) keeps the verdict it was given
        probes = [
            recheck(by_id[p["id"]], p, shown) if p.get("id") in by_id and not p.get("redacted") else p
            for p in stored
        ]
        changed += sum(a.get("passed") != b.get("passed") for a, b in zip(probes, stored, strict=True))
        details = row.get("details", {})
        fates = upgraded_fates(scenario.truth.items, details, row.get("carried", []))
        changed += sum(fates[key] != details[key] for key in details)
        counts = dict(row.get("counts", {}))
        by_item = {i.id: fates[f"item:{i.id}"] for i in scenario.truth.items if f"item:{i.id}" in fates}
        if len(by_item) == len(scenario.truth.items):
            counts.update(
                {name: list(pair) for name, pair in item_counts(scenario.truth.items, by_item).items()}
            )
        truth, carried = scenario.truth, row.get("carried", [])
        if truth.mission and "mission_shown_ended" not in counts and not any(map(left_out, carried)):
            ended = mission_shown_ended(truth.mission_key or truth.mission, "\n".join(carried))
            counts["mission_shown_ended"] = [int(ended), 1]  # runs measured before the metric was
        out.append({**row, "probes": probes, "details": fates, "counts": counts})
    return out, changed


def _shown(scenario: Scenario, carried_texts: Sequence[str]) -> tuple[str, ...]:
    """The texts a probe's reply must not merely copy (`probes.echo_sources`): the scenario's inputs
    (the user's messages, background inputs) and what the strategy carried, the same for a run and its
    rescore."""
    inputs = [e.text for e in scenario.events if isinstance(e, UserMessage | BackgroundInput)]
    return echo_sources(inputs, carried_texts)


def _real(row: dict[str, Any]) -> Scenario | None:
    """The real session behind a row, where its segment is here (kept, or fetched); else None."""
    scenario_id = str(row.get("scenario_id", ""))
    if row.get("type") != "real" or not scenario_id.startswith("real-"):
        return None
    return _real_scenario(scenario_id)


@functools.lru_cache(maxsize=16)
def _real_scenario(scenario_id: str) -> Scenario | None:
    """Built once per session (every strategy's row shares it): the manifest read, the segment hashed."""
    try:
        session = next((s for s in load_manifest() if s.scenario_id == scenario_id), None)
        file = local_file(session) if session is not None else None
        if session is None or file is None or not file.is_file():
            return None
        return build_scenario(session, file)
    except RealSessionError:
        return None


def _generated(row: dict[str, Any]) -> Scenario | None:
    """The generated scenario behind a row (cached: every strategy's row shares it), or None when the
    row's id is not a generated scenario's."""
    size = str(row.get("scenario_id", "")).rsplit("-n", 1)[-1]
    if not isinstance(row.get("seed"), int) or not size.isdigit():
        return None
    try:
        scenario = _generate(str(row.get("type")), row["seed"], int(size))
    except ValueError:
        return None
    return scenario if scenario.id == row.get("scenario_id") else None


@functools.lru_cache(maxsize=64)
def _generate(kind: str, seed: int, size: int) -> Scenario:
    return generate(kind, seed, size)


def _end_line(path: Path) -> None:
    """A torn last line (an interrupted write) gets its newline, so the next result starts a line."""
    if path.exists() and path.stat().st_size:
        with path.open("rb") as existing:
            existing.seek(-1, 2)
            torn = existing.read(1) != b"\n"
        if torn:
            with path.open("a", encoding="utf-8") as out:
                out.write("\n")


def run_all(
    jobs: Iterable[Job],
    model_for: Callable[[], ModelClient],
    counter: TokenCounter,
    settings: RunSettings,
    results: Path,
    *,
    judge: ModelClient | None = None,
    parallel: int = 1,
    on_done: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Run every job not already in `results`, appending each result as it finishes. `model_for` gives
    each worker its model (one per thread: local models are not thread-safe). The checkpoint and its
    renderings on one scenario run as one unit (`units`): one replay, a row each; a rendering run after
    its checkpoint's row was written replays once more for every rendering still missing."""
    done = {key_of(r) for r in read_results(results) if r.get("status") in {"ok", "n/a"}}
    todo = [j for j in jobs if j.key.as_tuple() not in done]
    lock, local = threading.Lock(), threading.local()
    results.parent.mkdir(parents=True, exist_ok=True)
    _end_line(results)

    def work(unit: list[Job]) -> list[dict[str, Any]]:
        if not hasattr(local, "model"):
            local.model = model_for()
        rows = run_unit(unit, local.model, counter, settings, judge)
        for row in rows:
            with lock, results.open("a", encoding="utf-8") as out:
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
            if on_done is not None:
                on_done(row)
        return rows

    if parallel <= 1:
        return [row for unit in units(todo) for row in work(unit)]
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        return [row for rows in pool.map(work, units(todo)) for row in rows]
