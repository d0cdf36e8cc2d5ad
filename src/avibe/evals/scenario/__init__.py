"""Scenarios of the memory evaluation (SPEC E1): a scripted conversation plus its ground truth.

Values only (values.py), plus `load_scenario` / `scenario_from_dict` (reading.py), which read the file
form with strict pydantic models (evals/strict.py) and name every bad field
(`events[3].tool_uses[0].output: expected a string`), and `save_scenario` / `scenario_to_dict`
(writing.py). The file format is documented in docs/eval-format.md; JSON and YAML files are both accepted.
"""

from __future__ import annotations

from avibe.evals.scenario.reading import load_scenario, scenario_from_dict
from avibe.evals.scenario.values import (
    DEFAULT_START,
    FORMAT_VERSION,
    AssistantTurn,
    BackgroundInput,
    BackgroundKind,
    Event,
    GroundTruth,
    ItemKind,
    ItemStatus,
    PlantedItem,
    Probe,
    ProbeKind,
    Queue,
    Reference,
    RefKind,
    Scenario,
    Spoof,
    ToolUse,
    UserMessage,
)
from avibe.evals.scenario.writing import save_scenario, scenario_to_dict
from avibe.evals.strict import ScenarioError

__all__ = [
    "DEFAULT_START",
    "FORMAT_VERSION",
    "AssistantTurn",
    "BackgroundInput",
    "BackgroundKind",
    "Event",
    "GroundTruth",
    "ItemKind",
    "ItemStatus",
    "PlantedItem",
    "Probe",
    "ProbeKind",
    "Queue",
    "RefKind",
    "Reference",
    "Scenario",
    "ScenarioError",
    "Spoof",
    "ToolUse",
    "UserMessage",
    "load_scenario",
    "save_scenario",
    "scenario_from_dict",
    "scenario_to_dict",
]
