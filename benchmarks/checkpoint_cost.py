"""What a checkpoint costs next to a peer's summary, per compaction, on the embedded model.

The same generated transcripts are replayed (`avibe.evals.replay`) through Avibe's checkpoint - Vibey
living the transcript, its room loop and driver, in the structured mode the embedded model uses - and a
baseline: `--against rewrite` (the default; Claude Code-style: one summary of everything) or `--against
handoff` (Codex-style: a handoff summary plus the user's recent messages copied). The model's prompt cache
holds the conversation before each compaction of either, as in a session. Every model call is timed and
its usage kept, and the calls are grouped by compaction. Printed per compaction (means): tokens spent as
the eval counts them (every prompt token, cached or not, plus the output), the prompt tokens the model had
to evaluate (not served from llama.cpp's cache), output tokens, calls and seconds, and the checkpoint's
ratios to the baseline (against the handoff, with the cost goals of docs/benchmarks.md: seconds <= 1.5x,
tokens spent <= 3x, calls <= 3); per call, which structured question it answered; and the eval's
deterministic metrics on the final context, so a cheaper checkpoint that keeps less shows up in the same
run.

    .venv/bin/python benchmarks/checkpoint_cost.py [--type constraint_fidelity ...] [--seed 1] [--k 2]
        [--window 4096] [--threshold 0.5] [--against handoff] [--model embedded-1.5b]
        [--mode structured --mode three --mode grouped] [--compare-with REV] [--answers]
        [--real mclaude-audit ...]

`--mode` measures the checkpoint in each mode given (one question a call, the default; three: the memo,
the mind's questions together, the scene; or grouped: the mind's and scene's questions in one call).
`--real ID` adds a session of the real set (`vibe eval --set real`), replayed as it was cut.
`--compare-with REV` measures the checkpoint of another git revision too (a temporary worktree, run in a
subprocess, the baseline being the same code) and prints it side by side. Needs `vibe models install`
(`vibe models install embedded-1.5b` for the 1.5B). Prints; asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from avibe.config import load_settings
from avibe.errors import ModelError
from avibe.evals.avibe_checkpoint import AvibeCheckpoint
from avibe.evals.generators import GENERATORS, generate
from avibe.evals.metrics import measure
from avibe.evals.realset import real_set
from avibe.evals.replay import Compaction, replay, size_for_k
from avibe.evals.scenario import Scenario
from avibe.evals.strategy import Compacted, CompactState, Strategy
from avibe.ports import CompletionRequest, ModelClient, TokenCounter
from avibe.providers import open_counter, open_model
from avibe.record.messages import ModelFacts, ModelReply

CHECKPOINT = "checkpoint"
BASELINES = ("rewrite", "handoff")
# the checkpoint against the handoff, per compaction (seconds, tokens spent, calls)
GOALS = {"seconds": 1.5, "spent": 3.0}
GOAL_CALLS = 3.0
METRICS = ("spent", "uncached", "output", "calls", "seconds")


@dataclass
class Call:
    part: str  # the structured question answered ("summary" for the rewrite's one call)
    prompt: int
    cached: int
    output: int
    seconds: float
    text: str = ""


@dataclass
class Logged:
    """The model, with every call's usage and wall time kept."""

    model: ModelClient
    calls: list[Call] = field(default_factory=list)

    @property
    def facts(self) -> ModelFacts:
        return self.model.facts

    def complete(self, request: CompletionRequest) -> ModelReply:
        started = time.monotonic()
        reply = self.model.complete(replace(request, on_text=None))
        json_schema = request.json_schema
        u = reply.usage
        part = "+".join(json_schema.get("properties", {})) if json_schema else "summary"
        self.calls.append(
            Call(part, u.prompt_tokens, u.cached_tokens, u.completion_tokens, time.monotonic() - started,
                 reply.text)
        )  # fmt: skip
        return reply


@dataclass(frozen=True)
class Warmed:
    """The strategy, with the model's prompt cache holding the conversation before each compaction - as
    in a session, where the conversation went to the model on the step before (the warm-up call is not
    counted). Without it, whichever strategy runs second on the same transcript would find the first
    one's prefix in llama.cpp's cache. The checkpoint is Vibey living the transcript: each of its steps'
    requests warms the cache (`AvibeCheckpoint.warm`)."""

    strategy: Strategy

    @property
    def name(self) -> str:
        return self.strategy.name

    def compact(
        self, state: CompactState, model: ModelClient, counter: TokenCounter, window: int
    ) -> Compacted:
        inner = model.model if isinstance(model, Logged) else model
        with contextlib.suppress(ModelError):  # a context the model cannot take: the strategy meets it
            inner.complete(CompletionRequest(state.messages, max_tokens=1))
        return self.strategy.compact(state, model, counter, window)


def warmed(strategy: Strategy, model: ModelClient) -> Strategy:
    """The strategy with the cache warmed before each compaction (the checkpoint: by its own steps)."""
    inner = model.model if isinstance(model, Logged) else model
    if isinstance(strategy, AvibeCheckpoint):
        return replace(strategy, warm=inner)
    return Warmed(strategy)


def scenarios(
    kinds: Sequence[str], real: Sequence[str], seed: int, k: int, window: int, threshold: float,
    counter: TokenCounter,
) -> list[Scenario]:  # fmt: skip
    """The generated scenarios, each sized for K compactions, then the real-set sessions named (as cut)."""
    chosen = [
        generate(
            kind, seed, size_for_k(partial(generate, kind, seed), k, window, counter, threshold=threshold)
        )
        for kind in kinds
    ]
    if real:
        found = {s.id: s for s in real_set().scenarios}
        missing = [name for name in real if name not in found]
        if missing:
            raise SystemExit(
                f"not in the fetched real set: {', '.join(missing)} (scripts/fetch_real_sessions.py)"
            )
        chosen += [found[name] for name in real]
    return chosen


def _run(
    strategy: Strategy, name: str, chosen: Sequence[Scenario], window: int, threshold: float,
    model: ModelClient, counter: TokenCounter,
) -> dict[str, Any]:  # fmt: skip
    """Replay each scenario through the strategy; the calls of each compaction, and the final metrics."""
    logged = Logged(model)
    compactions: list[list[dict[str, Any]]] = []
    metrics: dict[str, list[int]] = {}
    for scenario in chosen:
        mark = [0]

        def done(_: Compaction, mark: list[int] = mark) -> None:
            compactions.append([vars(c) for c in logged.calls[mark[0] :]])
            mark[0] = len(logged.calls)

        result = replay(
            scenario,
            warmed(strategy, logged),
            logged,
            counter,
            window,
            threshold=threshold,
            on_compaction=done,
        )
        for metric, (hits, n) in measure(scenario, result.context, counter).counts.items():
            total = metrics.setdefault(metric, [0, 0])
            total[0], total[1] = total[0] + hits, total[1] + n
    return {"name": name, "compactions": compactions, "metrics": metrics}


def _summary(run: Mapping[str, Any]) -> dict[str, float]:
    rows = run["compactions"]
    if not rows:
        return {"compactions": 0.0, **dict.fromkeys(METRICS, 0.0)}

    def mean(value: Callable[[list[dict[str, Any]]], float]) -> float:
        return statistics.fmean(value(calls) for calls in rows)

    return {
        "compactions": float(len(rows)),
        "spent": mean(lambda cs: sum(c["prompt"] + c["output"] for c in cs)),  # as the eval counts
        "uncached": mean(lambda cs: sum(c["prompt"] - c["cached"] for c in cs)),
        "output": mean(lambda cs: sum(c["output"] for c in cs)),
        "calls": mean(lambda cs: float(len(cs))),
        "seconds": mean(lambda cs: sum(c["seconds"] for c in cs)),
    }


def _per_part(run: Mapping[str, Any]) -> dict[str, tuple[int, float, float, float]]:
    parts: dict[str, list[dict[str, Any]]] = {}
    for calls in run["compactions"]:
        for c in calls:
            parts.setdefault(c["part"], []).append(c)
    return {
        part: (
            len(cs),
            statistics.fmean(c["prompt"] - c["cached"] for c in cs),
            statistics.fmean(c["output"] for c in cs),
            statistics.fmean(c["seconds"] for c in cs),
        )
        for part, cs in parts.items()
    }


def measure_all(args: argparse.Namespace, only_checkpoint: bool) -> list[dict[str, Any]]:
    settings = load_settings()
    model = open_model(args.model, settings)
    counter = open_counter(args.model, settings, model)
    chosen = scenarios(args.type, args.real, args.seed, args.k, args.window, args.threshold, counter)
    common = (chosen, args.window, args.threshold, model, counter)
    runs = [
        _run(AvibeCheckpoint(mode), CHECKPOINT if mode == "structured" else f"{CHECKPOINT} {mode}", *common)
        for mode in args.mode
    ]
    if not only_checkpoint:
        from avibe.evals.baselines import Handoff, Rewrite

        baseline: Strategy = Handoff() if args.against == "handoff" else Rewrite()
        runs.append(_run(baseline, args.against, *common))
    return runs


def _run_at(revision: str, argv: list[str]) -> list[dict[str, Any]]:
    """The checkpoint's measurement on another revision of Avibe (a git worktree), in a subprocess."""
    root = Path(__file__).resolve().parents[1]
    folder = Path(tempfile.mkdtemp(prefix="avibe-bench-rev-")) / "tree"
    subprocess.run(
        ["git", "-C", str(root), "worktree", "add", "-q", "--detach", str(folder), revision], check=True
    )
    try:
        env = {**os.environ, "PYTHONPATH": str(folder / "src")}
        out = subprocess.run(
            [sys.executable, __file__, *argv, "--json"], env=env, check=True, capture_output=True, text=True
        ).stdout
        runs: list[dict[str, Any]] = json.loads(out.splitlines()[-1])
        return runs
    finally:
        subprocess.run(["git", "-C", str(root), "worktree", "remove", "--force", str(folder)], check=False)


def _goals(name: str, s: Mapping[str, float], base: Mapping[str, float]) -> str:
    """The three cost goals against the handoff (docs/benchmarks.md), each met or not."""
    met = [f"{m} {s[m] / base[m]:.2f}x {'<=' if s[m] / base[m] <= g else '>'} {g}x" for m, g in GOALS.items()]
    met.append(f"calls {s['calls']:.1f} {'<=' if s['calls'] <= GOAL_CALLS else '>'} {GOAL_CALLS:.0f}")
    return f"  {name:28} " + "; ".join(met)


def _print(runs: Sequence[dict[str, Any]], args: argparse.Namespace) -> None:
    print(
        f"{args.model} model, window {args.window}, threshold {args.threshold}, types "
        f"{', '.join(args.type) or 'none'}, real sessions {', '.join(args.real) or 'none'}, "
        f"seed {args.seed}, K target {args.k}, against the {args.against}"
    )
    print("per compaction (means; tokens spent = prompt, cached or not, + output, as the eval counts):")
    print(
        f"  {'':28} {'tokens spent':>12} {'uncached prompt':>16} {'output tok':>11} {'calls':>6} "
        f"{'seconds':>8} {'n':>3}"
    )
    sums = {run["name"]: _summary(run) for run in runs}
    for name, s in sums.items():
        print(
            f"  {name:28} {s['spent']:12,.0f} {s['uncached']:16,.0f} {s['output']:11,.0f} {s['calls']:6.1f} "
            f"{s['seconds']:8.1f} {s['compactions']:3.0f}"
        )
    base = sums.get(args.against)
    if base and all(base[m] for m in METRICS):
        print(f"ratios to the {args.against} (tokens spent, uncached prompt, output, calls, seconds):")
        for name, s in sums.items():
            if name != args.against:
                ratios = "  ".join(f"{s[m] / base[m]:6.2f}" for m in METRICS)
                print(f"  {name:28} {ratios}")
        if args.against == "handoff":
            print("the cost goals (seconds <= 1.5x, tokens spent <= 3x the handoff's; calls <= 3):")
            for name, s in sums.items():
                if name != args.against:
                    print(_goals(name, s, base))
    print("per call, by question (count, mean uncached prompt, output tokens, seconds):")
    for run in runs:
        for part, (n, uncached, output, seconds) in _per_part(run).items():
            print(f"  {run['name']:28} {part[:44]:44} {n:3d} {uncached:7,.0f} {output:6,.0f} {seconds:6.1f}")
    if args.answers:
        print("answers:")
        for run in runs:
            for i, calls in enumerate(run["compactions"], 1):
                for c in calls:
                    print(f"  {run['name']} #{i} {c['part'][:30]}: {c.get('text', '')[:600]!r}")
    print("eval metrics on the final context (hits/n, all types pooled):")
    names = sorted({m for run in runs for m in run["metrics"]})
    for run in runs:
        cells = ", ".join(f"{m} {h}/{n}" for m, (h, n) in sorted(run["metrics"].items()) if m in names)
        print(f"  {run['name']:28} {cells}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--type", action="append", choices=sorted(GENERATORS), help="scenario type(s)")
    parser.add_argument(
        "--real", action="append", default=[], metavar="ID",
        help="a real-set session to replay as cut (scripts/fetch_real_sessions.py fetches them)",
    )  # fmt: skip
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--k", type=int, default=2, help="compactions each scenario is sized for")
    parser.add_argument("--window", type=int, default=4096)
    parser.add_argument("--threshold", type=float, default=0.5)
    parser.add_argument("--against", choices=BASELINES, default="rewrite", help="the baseline measured")
    parser.add_argument("--model", default="embedded", help="embedded (the 0.5B) or embedded-1.5b")
    parser.add_argument(
        "--mode",
        action="append",
        choices=("structured", "three", "grouped"),
        help="the checkpoint's mode(s): one question a call (the default), three (the memo, the mind, the "
        "scene) or grouped",
    )
    parser.add_argument("--compare-with", metavar="REV", help="also measure this git revision's checkpoint")
    parser.add_argument("--answers", action="store_true", help="also print every answer the model gave")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.type = args.type or ([] if args.real else ["constraint_fidelity"])
    args.mode = args.mode or ["structured"]
    sizes = [*(f"--type={t}" for t in args.type), *(f"--real={r}" for r in args.real),
             "--seed", str(args.seed), "--k", str(args.k),
             "--window", str(args.window), "--threshold", str(args.threshold),
             "--model", args.model]  # fmt: skip
    if args.json:  # another revision's checkpoint: its own default mode (older ones have no other)
        args.mode = ["structured"]
        print(json.dumps(measure_all(args, only_checkpoint=True)))
        return
    runs = measure_all(args, only_checkpoint=False)
    if args.compare_with:
        for run in _run_at(args.compare_with, sizes):
            runs.insert(1, {**run, "name": f"{run['name']} at {args.compare_with}"})
    _print(runs, args)


if __name__ == "__main__":
    main()
