"""Writing a scenario's file form (docs/eval-format.md): defaults left out, JSON or YAML by the name;
`scenario_from_dict(scenario_to_dict(s)) == s`."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from avibe.evals.scenario.values import (
    FORMAT_VERSION,
    BackgroundInput,
    Event,
    GroundTruth,
    Scenario,
    UserMessage,
)


def _drop_defaults(data: dict[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k not in defaults or defaults[k] != v}


def _event_dict(event: Event) -> dict[str, Any]:
    if isinstance(event, UserMessage):
        tagged = {"tag": event.tag} if event.tag else {}  # untagged files stay as they were
        return {"type": "user", "author": event.author, "text": event.text, **tagged}
    if isinstance(event, BackgroundInput):
        return {
            "type": "background",
            "source": event.source,
            "name": event.name,
            "ref": event.ref,
            "text": event.text,
        }
    uses = [
        _drop_defaults(
            {
                "id": u.id,
                "name": u.name,
                "arguments": u.arguments,
                "output": u.output,
                "is_error": u.is_error,
            },
            {"is_error": False},
        )
        for u in event.tool_uses
    ]
    return _drop_defaults({"type": "assistant", "text": event.text, "tool_uses": uses}, {"tool_uses": []})


def _truth_dict(truth: GroundTruth) -> dict[str, Any]:
    item_defaults = {"loosened": [], "status": "active", "replaced_by": ""}
    probe_defaults = {"answer": "", "rubric": [], "expect": [], "forbid": []}
    items = [
        _drop_defaults(
            {
                "id": i.id,
                "kind": i.kind,
                "text": i.text,
                "anchor": i.anchor,
                "loosened": list(i.loosened),
                "status": i.status,
                "replaced_by": i.replaced_by,
            },
            item_defaults,
        )
        for i in truth.items
    ]
    probes = [
        _drop_defaults(
            {
                "id": p.id,
                "kind": p.kind,
                "question": p.question,
                "answer": p.answer,
                "rubric": list(p.rubric),
                "expect": list(p.expect),
                "forbid": list(p.forbid),
            },
            probe_defaults,
        )
        for p in truth.probes
    ]
    data: dict[str, Any] = {
        "mission": truth.mission,
        "mission_key": truth.mission_key,
        "items": items,
        "queue": {"items": list(truth.queue.items), "done": truth.queue.done} if truth.queue else None,
        "spoofs": [{"source": s.source, "payload": s.payload} for s in truth.spoofs],
        "references": [{"kind": r.kind, "value": r.value} for r in truth.references],
        "probes": probes,
    }
    return _drop_defaults(
        data,
        {
            "mission": "",
            "mission_key": "",
            "items": [],
            "queue": None,
            "spoofs": [],
            "references": [],
            "probes": [],
        },
    )


def scenario_to_dict(scenario: Scenario) -> dict[str, Any]:
    """The file form of a scenario; `scenario_from_dict(scenario_to_dict(s)) == s`."""
    return {
        "format": FORMAT_VERSION,
        "id": scenario.id,
        "type": scenario.type,
        "seed": scenario.seed,
        "user": scenario.user,
        "start": scenario.start.isoformat(),
        "description": scenario.description,
        "events": [_event_dict(e) for e in scenario.events],
        "truth": _truth_dict(scenario.truth),
    }


def save_scenario(scenario: Scenario, path: Path | str) -> Path:
    """Write a scenario as JSON (or YAML when the name ends in .yaml/.yml)."""
    path = Path(path)
    data = scenario_to_dict(scenario)
    if path.suffix in {".yaml", ".yml"}:
        text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=120)
    else:
        text = json.dumps(data, ensure_ascii=False, indent=1) + "\n"
    path.write_text(text, encoding="utf-8")
    return path
