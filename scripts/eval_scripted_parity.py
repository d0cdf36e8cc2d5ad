"""The eval's avibe-checkpoint strategy on the generated scenarios with a scripted model (no real model):
K, peak, each compaction's point and token counts as JSON lines, one per (type, K). Run it on two trees
(PYTHONPATH=<tree>/src) and diff the outputs to see what a change to the replay moved.

    PYTHONPATH=$PWD/src python scripts/eval_scripted_parity.py --out /tmp/branch.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "evals"))

from eval_scripts import respond

from avibe.evals.generators import SCENARIO_TYPES, generate
from avibe.evals.replay import replay, size_for_k, trigger_fraction
from avibe.evals.scenario import AssistantTurn, Scenario
from avibe.evals.strategies import make_strategy
from avibe.providers.counting import TiktokenCounter
from avibe.providers.scripted import ScriptedModel
from avibe.record.messages import ModelFacts


def vibey_turns(scenario: Scenario) -> Scenario:
    """The scenario without the answers that another step follows in the same turn."""
    events = scenario.events
    kept = [
        e
        for i, e in enumerate(events)
        if not (
            isinstance(e, AssistantTurn)
            and not e.tool_uses
            and i + 1 < len(events)
            and isinstance(events[i + 1], AssistantTurn)
        )
    ]
    return replace(scenario, events=tuple(kept))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--ks", default="1,2")
    parser.add_argument("--window", type=int, default=4000)
    parser.add_argument("--strategy", default="avibe-checkpoint")
    parser.add_argument("--types", default=",".join(SCENARIO_TYPES))
    parser.add_argument(
        "--vibey-turns",
        action="store_true",
        help="drop each answer (a step without tool calls) that another step follows with no input between: "
        "the transcripts then end their turns where Vibey's turn loop does",
    )
    args = parser.parse_args()
    counter = TiktokenCounter("cl100k_base")
    facts = ModelFacts("scripted", args.window, 1024)
    threshold = trigger_fraction(facts, args.window)
    lines = []
    for kind in args.types.split(","):
        for k in (int(x) for x in args.ks.split(",")):
            size = size_for_k(partial(generate, kind, 1), k, args.window, counter, threshold=threshold)
            scenario = generate(kind, 1, size)
            if args.vibey_turns:
                scenario = vibey_turns(scenario)
            model = ScriptedModel([respond] * 2000, facts)
            strategy = make_strategy(args.strategy, checkpoint_mode="structured")
            result = replay(scenario, strategy, model, counter, args.window, threshold=threshold)
            row = {
                "type": kind, "k_target": k, "events": len(scenario.events), "k": result.k,
                "peak": result.peak_tokens, "spent": result.tokens_spent, "calls": result.calls,
                "final": counter.count_messages(result.context),
                "compactions": [(c.at_seq, c.tokens_before, c.tokens_after, c.tokens_spent, c.calls,
                                 c.changed) for c in result.compactions],
            }  # fmt: skip
            lines.append(json.dumps(row))
            print(lines[-1], flush=True)
    args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
