"""The memory evaluation (SPEC E1): scenarios that provoke P1-P3, replayed through Avibe's
checkpoint and the peers' compaction strategies on the same model and window, scored side by side.

scenario.py    the file format and its strict loader      generators.py  the twelve scenario types
replay.py      the peers' replay loop (counts K)          strategy.py    the strategy interface
baselines.py   the peers' strategies                      strategies.py  strategies by name
metrics.py     deterministic metrics                      probes.py      model-answered probes
stats.py       Wilson and paired bootstrap intervals      runner.py      the resumable run matrix
report.py      Markdown report and PNG plots              importers.py   Claude Code / Codex sessions
checkpoint.py  Avibe's checkpoint as a strategy           filler.py      realistic filler work
lived.py       Vibey living a transcript (the checkpoint) toolbox.py     the recorded outputs as tools
strict.py      the strict field reader of scenario files
realset.py     the real-session set: manifest, fetch, scrub, truth (`vibe eval --set real`)
"""

from __future__ import annotations

from avibe.evals.generators import SCENARIO_TYPES, generate
from avibe.evals.metrics import measure
from avibe.evals.replay import ReplayResult, replay, size_for_k
from avibe.evals.scenario import Scenario, ScenarioError, load_scenario, save_scenario
from avibe.evals.strategies import STRATEGY_NAMES, make_strategy
from avibe.evals.strategy import Compacted, CompactState, Strategy

__all__ = [
    "SCENARIO_TYPES",
    "STRATEGY_NAMES",
    "CompactState",
    "Compacted",
    "ReplayResult",
    "Scenario",
    "ScenarioError",
    "Strategy",
    "generate",
    "load_scenario",
    "make_strategy",
    "measure",
    "replay",
    "save_scenario",
    "size_for_k",
]
